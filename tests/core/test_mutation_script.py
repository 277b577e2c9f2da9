"""scripts/mutation.py --report-only reads back only the test folders that were run under --out."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "mutation.py"


@pytest.fixture
def script(monkeypatch):
    pytest.importorskip("mutmut")
    spec = importlib.util.spec_from_file_location("mutation_script", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    seen = []
    monkeypatch.setattr(mod, "results", lambda where: seen.append(where.name) or {})
    return mod, seen


def test_report_only_skips_the_folders_no_run_wrote(script, tmp_path, monkeypatch, capsys):
    mod, seen = script
    (tmp_path / "tests-families-knowledge").mkdir()
    monkeypatch.setattr(sys, "argv", ["mutation.py", "--report-only", "--out", str(tmp_path)])
    assert mod.main() == 0
    assert seen == ["tests-families-knowledge"]  # every other folder of the default modules is absent
    assert (tmp_path / "scores.md").read_text().startswith("| module | mutants |")


def test_report_only_of_a_named_module_without_a_run_says_so(script, tmp_path, monkeypatch, capsys):
    mod, seen = script
    monkeypatch.setattr(sys, "argv", ["mutation.py", "--report-only", "--out", str(tmp_path), "bench/stats/basic.py"])
    assert mod.main() == 2 and seen == []
    assert f"tests/stats: no run under {tmp_path / 'tests-stats'}" in capsys.readouterr().err

"""Results for machines: flat results files, --json, -q, exit 4 for internal errors, the catalogue."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest

from bench.spine import results

SPEC = "norm-folding-is-exact.toml"


@pytest.fixture
def one_spec(specs_dir, tmp_path) -> Path:
    d = tmp_path / "specs" / "circuits"
    d.mkdir(parents=True)
    shutil.copy(specs_dir / "circuits" / SPEC, d / SPEC)
    return d / SPEC


def test_verify_json_and_results_files(cli, one_spec, tiny_model_dir, chdir_tmp):
    r = cli("verify", one_spec, "--models", tiny_model_dir, "--no-report", "--json")
    assert r.exit_code == 0, r.output
    rows = json.loads(r.stdout)  # stdout is the JSON alone: no table mixed in
    assert len(rows) == 1
    row = rows[0]
    assert row["claim"] == "circuits.norm-folding-is-exact" and row["model"] == tiny_model_dir.name
    assert row["outcome"] in ("SUPPORTED", "REFUTED", "INCONCLUSIVE") and row["cache_hit"] is False
    assert set(results.COLUMNS) == set(row)
    assert row["spec_path"] == "circuits/norm-folding-is-exact.toml"
    (run_dir,) = (chdir_tmp / "runs").iterdir()
    assert json.loads((run_dir / "results.json").read_text()) == rows
    with open(run_dir / "results.csv", newline="") as f:
        table = list(csv.DictReader(f))
    assert tuple(table[0]) == results.COLUMNS and table[0]["claim"] == row["claim"]
    assert float(table[0]["estimate"]) == pytest.approx(row["estimate"])
    record = json.loads((run_dir / "record.json").read_text())
    assert str(chdir_tmp) not in json.dumps(record["cells"][0]["spec"])  # no machine path in the spec part

    r = cli("verify", one_spec, "--models", tiny_model_dir, "--no-report", "-q")  # cached, quiet: one line
    assert r.exit_code == 0 and r.stdout.strip().count("\n") == 0 and "1 cells" in r.stdout


def test_published_figure_in_row():
    cell = {"model": "gpt2", "spec": {"id": "a.b", "references": [
        {"model": "gpt2", "metric": "m", "value": 0.9, "where": "Fig. 1"}]}, "verdict": {"metric": "m"}}
    row = results.row({"run_id": "r"}, cell)
    assert row["published"] == 0.9 and row["published_model"] == "gpt2" and row["published_where"] == "Fig. 1"
    cell["model"] = "other"  # another model: the same metric's figure, naming the paper's model
    assert results.row({}, cell)["published_model"] == "gpt2"
    cell["verdict"] = {"metric": "x"}
    assert results.row({}, cell)["published"] is None


def test_internal_error_exits_4_with_one_line(cli, one_spec, monkeypatch):
    from bench.spine import run

    def broken(*a, **k):
        raise RuntimeError("something inside broke")

    monkeypatch.setattr(run, "execute", broken)
    r = cli("verify", one_spec, "--models", "smollm2-135m", "--no-report")
    assert r.exit_code == 4
    assert r.output.strip().count("\n") == 0 and r.output.startswith("internal error: RuntimeError")
    r = cli("-v", "verify", one_spec, "--models", "smollm2-135m", "--no-report")
    assert r.exit_code == 4 and "Traceback" in r.output  # -v shows where


def test_help_documents_exit_codes(cli):
    text = " ".join(cli("verify", "--help").output.split())
    assert "4 an internal error" in text and "3 the measurement crashed for every cell" in text


def test_list_json_and_markdown_catalogue(cli, specs_dir):
    r = cli("list", specs_dir, "--json")
    claims = json.loads(r.stdout)
    assert {c["id"] for c in claims} >= {"circuits.norm-folding-is-exact"}
    assert all("{'" not in c["rule_words"] for c in claims)  # prose, not dict reprs
    r = cli("list", specs_dir, "--markdown")
    assert r.stdout.startswith("#") and "circuits.norm-folding-is-exact" in r.stdout  # `make claims-doc` writes it


def test_every_rule_has_a_sentence(specs_dir):
    from bench.ground import registry, spec
    unsaid = sorted(name for name, info in registry.rules().items() if info.sentence is None)
    assert not unsaid, f"rules without a sentence on rule_def: {unsaid}"
    for s in spec.load_specs([specs_dir]):
        from bench.ground.prose import describe

        words = describe(s.rule, s.rule_params())
        assert "{'" not in words and "['" not in words and "(" not in words[:1], (s.id, words)


def test_a_rule_declares_its_own_sentence():
    """A rule registered with ``sentence=`` is described by it, parameters filled in, with no edit to the report."""
    from bench.ground import registry
    from bench.ground.prose import describe

    @registry.rule_def("zz_said_rule", sentence=lambda p: f"the value is at least {p['floor']:g}")
    def zz_said_rule(frame, *, floor: float = 0.0):
        """Fallback words that must not be used."""

    try:
        assert describe("zz_said_rule", {"floor": 2.5}) == "the value is at least 2.5"
        assert describe("zz_said_rule", {"floor": 2.5, "smallest_effect": 0.5}).endswith(
            "; refutable at the smallest effect 0.5")
    finally:
        del registry.RULES._items["zz_said_rule"]


def test_specs_command_and_default_paths(cli, chdir_tmp):
    from bench.ground.resources import installed_specs

    r = cli("specs", "--path")  # no ./specs in this folder: the installed (or checkout) specs
    assert r.exit_code == 0 and Path(r.stdout.strip()) == installed_specs().resolve()
    (chdir_tmp / "specs").mkdir()
    r = cli("specs", "--path")
    assert Path(r.stdout.strip()) == (chdir_tmp / "specs").resolve()

"""`bench rerun RUN` executes again what a record says, cold, and compares both runs as `diff --exact` does; it
refuses when a spec or model on disk no longer matches the record."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest


@pytest.fixture
def specs_root(specs_dir, tmp_path) -> Path:
    root = tmp_path / "specs"
    (root / "circuits").mkdir(parents=True)
    for name in ("induction-heads-exist.toml", "norm-folding-is-exact.toml"):
        shutil.copy(specs_dir / "circuits" / name, root / "circuits" / name)
    return root


def _only_run(tmp_path: Path) -> Path:
    (run,) = (tmp_path / "runs").iterdir()
    return run


def test_rerun_reproduces_a_run_and_refuses_after_a_spec_edit(cli, specs_root, tiny_model_dir, chdir_tmp):
    r = cli("verify", specs_root, "--models", tiny_model_dir, "--no-report", "--seed", "5")
    assert r.exit_code == 0, r.output
    run = _only_run(chdir_tmp)
    r = cli("rerun", run.name, "--no-report")
    assert r.exit_code == 0, r.output
    assert "no differences" in r.output
    runs = sorted(p.name for p in (chdir_tmp / "runs").iterdir())
    new = json.loads((chdir_tmp / "runs" / next(n for n in runs if n != run.name) / "record.json").read_text())
    assert new["settings"]["seed"] == 5 and new["executor"]["name"] == "local"  # measured again, not replayed
    assert not any(c["cache_hit"] for c in new["cells"])  # cold: no frame came from the cache

    spec = specs_root / "circuits" / "induction-heads-exist.toml"
    spec.write_text(spec.read_text().replace("seq_len = 50", "seq_len = 40"))
    r = cli("rerun", run.name, "--no-report")
    assert r.exit_code == 2
    assert "circuits/induction-heads-exist.toml changed since run" in r.output
    assert r.output.strip().count("\n") == 0


def test_rerun_refuses_a_record_without_settings_and_a_changed_model(cli, specs_root, tiny_model_dir, chdir_tmp,
                                                                      tmp_path):
    model = tmp_path / "model"
    shutil.copytree(tiny_model_dir, model)
    assert cli("verify", specs_root / "circuits" / "norm-folding-is-exact.toml", "--models", model,
               "--no-report").exit_code == 0
    run = _only_run(chdir_tmp)
    (model / "config.json").write_text((model / "config.json").read_text().replace("{", '{"edited": 1, ', 1))
    r = cli("rerun", run.name, "--no-report")
    assert r.exit_code == 2 and "changed since run" in r.output and "fingerprint" in r.output

    record = json.loads((run / "record.json").read_text())
    edited = {**record, "seed": 99}
    (run / "record.json").write_text(json.dumps(edited))
    r = cli("rerun", run.name, "--no-report")
    assert r.exit_code == 2 and "edited" in r.output  # a record changed after its run is not re-executed

    del record["settings"], record["record_sha256"]  # as a record written before either existed
    for cell in record["cells"]:
        cell.pop("frame_sha256", None)
    (run / "record.json").write_text(json.dumps(record))
    r = cli("rerun", run.name, "--no-report")
    assert r.exit_code == 2 and "before runs kept their settings" in r.output

"""Every command and exit code, through click's CliRunner, on a tiny random-weight model folder."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

SPECS = ["induction-heads-exist.toml", "k-composition.toml", "norm-folding-is-exact.toml"]


@pytest.fixture
def circuit_specs(specs_dir, tmp_path) -> Path:
    d = tmp_path / "specs" / "circuits"
    d.mkdir(parents=True)
    for name in SPECS:
        shutil.copy(specs_dir / "circuits" / name, d / name)
    return d


def runs(tmp_path) -> list[Path]:
    return sorted((tmp_path / "runs").iterdir())


def record(run_dir: Path) -> dict:
    return json.loads((run_dir / "record.json").read_text())


def test_validate_list_models(cli, specs_dir):
    r = cli("validate", specs_dir)
    assert r.exit_code == 0 and "specs OK" in r.output
    r = cli("list", specs_dir)
    assert r.exit_code == 0 and "circuits.induction-heads-exist" in r.output
    r = cli("models")
    assert r.exit_code == 0 and "smollm2-135m" in r.output and "gemma3-270m" in r.output


def test_validate_bad_spec_is_one_line_exit_2(cli, circuit_specs):
    p = circuit_specs / "k-composition.toml"
    p.write_text(p.read_text().replace("n_baseline = 500", "n_baselines = 500"))
    r = cli("validate", circuit_specs)
    assert r.exit_code == 2
    assert r.output.strip().count("\n") == 0
    assert "k-composition.toml" in r.output and "measure.n_baselines" in r.output and "did you mean" in r.output


def test_verify_then_cached_rerun_loads_no_model(cli, circuit_specs, tiny_model_dir, chdir_tmp, monkeypatch):
    r = cli("verify", circuit_specs, "--models", tiny_model_dir, "--no-report")
    assert r.exit_code == 0, r.output
    (run1,) = runs(chdir_tmp)
    rec = record(run1)
    assert rec["status"] == "complete" and rec["profile"] == "smoke" and len(rec["cells"]) == 3
    for cell in rec["cells"]:
        assert (run1 / cell["frame"]).is_file() and cell["cache_hit"] is False
        assert cell["verdict"]["outcome"] in ("SUPPORTED", "REFUTED", "INCONCLUSIVE")
        assert cell["fingerprint"].startswith("files-sha256:")
    assert "run record:" in r.output and "circuits.norm-folding-is-exact" in r.output

    from bench import models

    def no_loading(*a, **kw):
        raise AssertionError("a cached run must not load a model")

    monkeypatch.setattr(models, "load", no_loading)
    r = cli("verify", circuit_specs, "--models", tiny_model_dir, "--no-report")
    assert r.exit_code == 0, r.output
    run2 = next(p for p in runs(chdir_tmp) if p != run1)  # run ids of runs in the same second do not sort by time
    assert all(c["cache_hit"] for c in record(run2)["cells"])
    replayed = record(run2)  # nothing changed: replayed, and its record says all that the first one said
    assert replayed["executor"]["name"] == "replay" and set(replayed) == set(rec)
    assert replayed["bh_families"] == rec["bh_families"]
    outcomes = lambda rec: [c["verdict"]["outcome"] for c in rec["cells"]]  # noqa: E731
    assert outcomes(record(run2)) == outcomes(rec)

    r = cli("report", run2, "--no-pdf")
    assert r.exit_code == 0 and "circuits.induction-heads-exist" in r.output
    r = cli("diff", run1, run2)
    assert r.exit_code == 0 and "no differences" in r.output
    r = cli("diff", run1, run2, "--exact")
    assert r.exit_code == 0 and "no differences" in r.output

    import pandas as pd  # --exact sees a frame that changed below the estimate, and a reason that changed

    cell = rec["cells"][0]
    f = pd.read_parquet(run2 / cell["frame"])
    f.loc[f.index[-1], "value"] = f["value"].iloc[-1] + 1e-3
    f.to_parquet(run2 / cell["frame"], index=False)
    r2 = record(run2)
    r2["cells"][1]["verdict"]["reason"] += " (edited)"
    (run2 / "record.json").write_text(json.dumps(r2))
    assert "no differences" in cli("diff", run1, run2).output
    r = cli("diff", run1, run2, "--exact")
    assert r.exit_code == 0 and "2 changed cells" in r.output
    assert "│ frame " in r.output and "│ verdict " in r.output, r.output


def test_unknown_model_exit_2(cli, circuit_specs, chdir_tmp):
    r = cli("verify", circuit_specs, "--models", "no/such-model", "--no-report")
    assert r.exit_code == 2
    assert "no/such-model" in r.output and r.output.strip().count("\n") == 0
    assert not (chdir_tmp / "runs").exists()  # nothing written


def test_unknown_key_exit_2(cli, circuit_specs, tiny_model_dir, chdir_tmp):
    p = circuit_specs / "norm-folding-is-exact.toml"
    p.write_text(p.read_text().replace('title = "', 'titel = "x"\ntitle = "'))
    r = cli("verify", circuit_specs, "--models", tiny_model_dir, "--no-report")
    assert r.exit_code == 2 and "norm-folding-is-exact.toml" in r.output and "titel" in r.output
    assert not (chdir_tmp / "runs").exists()


def test_unwritable_runs_dir_exit_2(cli, circuit_specs, tiny_model_dir, tmp_path):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    r = cli("verify", circuit_specs, "--models", tiny_model_dir, "--runs-dir", blocker / "runs", "--no-report")
    assert r.exit_code == 2 and "cannot write runs dir" in r.output


def test_fail_on_refuted_exit_1(cli, circuit_specs, tiny_model_dir, chdir_tmp):
    p = circuit_specs / "induction-heads-exist.toml"  # a random tiny model has no induction head
    r = cli("verify", p, "--models", tiny_model_dir, "--no-report", "--fail-on", "refuted")
    rec = record(runs(chdir_tmp)[-1])
    assert rec["cells"][0]["verdict"]["outcome"] == "REFUTED"
    assert r.exit_code == 1


def test_every_cell_crashing_exit_3(cli, circuit_specs, tiny_model_dir, chdir_tmp):
    empty = chdir_tmp / "empty.txt"
    empty.write_text("")
    p = circuit_specs / "norm-folding-is-exact.toml"
    p.write_text(p.read_text().replace('corpus = "builtin:english"', f'corpus = "text:{empty}"'))
    r = cli("verify", p, "--models", tiny_model_dir, "--no-report")
    assert r.exit_code == 3
    cell = record(runs(chdir_tmp)[-1])["cells"][0]
    assert cell["verdict"]["outcome"] == "ERROR" and "holds no text" in cell["verdict"]["reason"]


def test_corrupt_cache_entry_is_recomputed(cli, circuit_specs, tiny_model_dir, chdir_tmp):
    import os

    p = circuit_specs / "norm-folding-is-exact.toml"
    assert cli("verify", p, "--models", tiny_model_dir, "--no-report").exit_code == 0
    first = record(runs(chdir_tmp)[-1])["cells"][0]
    key = first["cache_key"]
    data = Path(os.environ["BENCH_CACHE"]) / "frames" / key[:2] / f"{key}.parquet"
    data.write_bytes(b"PAR1 garbage")
    r = cli("verify", p, "--models", tiny_model_dir, "--no-report")
    assert r.exit_code == 0 and "corrupt" in r.output
    again = record(runs(chdir_tmp)[-1])["cells"][0]
    assert again["cache_hit"] is False and again["verdict"]["outcome"] == first["verdict"]["outcome"]


def test_interrupted_run_resumes_from_cache(cli, circuit_specs, tiny_model_dir, chdir_tmp, monkeypatch):
    from bench.ground import registry

    info = registry.probe("norm_folding")

    def interrupted(ctx, **kw):
        raise KeyboardInterrupt

    object.__setattr__(info, "fn", interrupted)  # ProbeInfo is frozen; put the real probe back below
    try:
        r = cli("verify", circuit_specs, "--models", tiny_model_dir, "--no-report")
    finally:
        import bench.families.circuits.norm_folding as nf

        object.__setattr__(info, "fn", nf.norm_folding)
    assert r.exit_code == 130 and "resume" in r.output
    rec = record(runs(chdir_tmp)[-1])
    assert rec["status"] == "interrupted" and len(rec["cells"]) == 2  # the two cells before the interruption
    r = cli("verify", circuit_specs, "--models", tiny_model_dir, "--no-report")
    assert r.exit_code == 0
    cells = record(runs(chdir_tmp)[-1])["cells"]
    assert [c["cache_hit"] for c in cells] == [True, True, False]


def test_audit_runs_every_claim_on_an_unnamed_model(cli, circuit_specs, tiny_model_dir, chdir_tmp):
    """No spec names this model: audit runs them all on it, with no code keyed to its name."""
    r = cli("audit", tiny_model_dir, circuit_specs, "--no-pdf")
    assert r.exit_code == 0, r.output
    rec = record(runs(chdir_tmp)[-1])
    assert rec["audit"] == tiny_model_dir.name  # the title's short name; as typed in the settings
    assert rec["settings"]["audit"] == str(tiny_model_dir)
    html = (chdir_tmp / "reports" / rec["run_id"] / "index.html").read_text()
    assert f"Audit of {tiny_model_dir.name}<" in html and f"Audit of {tiny_model_dir}" not in html
    assert {c["spec"]["id"] for c in rec["cells"]} == {f"circuits.{n[:-5]}" for n in SPECS}
    assert {c["model"] for c in rec["cells"]} == {tiny_model_dir.name}  # short name; the full one in model_ref
    assert {c["model_ref"]["location"] for c in rec["cells"]} == {str(tiny_model_dir.resolve())}


def test_library_deprecation_warnings_stay_out_of_a_quiet_run():
    import warnings

    from bench.cli import _quiet_libraries

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        _quiet_libraries(True)
        for module in ("transformers.modeling_utils", "peft.peft_model", "bench.spine.run"):
            warnings.warn_explicit("old API", FutureWarning, "x.py", 1, module=module)
    assert [str(w.message) for w in seen] == ["old API"]  # only bench's own warning is shown

"""bench baseline / bench check: a run checked against the baseline written from it holds; a flipped outcome, a
moved estimate, a changed spec or a missing cell fails (exit 1) and is named; an edited frame is refused (2)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from bench.spine import baseline as bl
from bench.ground.store import load_record
from tests.core.synthetic_runs import make_run

N = 40
BASE = np.random.default_rng(1).normal(1.0, 1.0, N)  # claim fam.a: mean ≈ 1, 95% CI half-width ≈ 0.3
OTHER = np.random.default_rng(2).normal(0.5, 1.0, N)


def cells(a=BASE, b=OTHER, **over):
    out = [{"claim": "fam.a", "model": "m1", "values": a}, {"claim": "fam.b", "model": "m1", "values": b}]
    for c in out:
        c.update(over)
    return out


@pytest.fixture
def base(tmp_path, cli):
    run = make_run(tmp_path / "runs", cells())
    path = tmp_path / "ci" / "baseline.toml"
    r = cli("baseline", run, "-o", path)
    assert r.exit_code == 0, r.output
    return run, path


def half_width(path) -> float:
    c = bl.read(path)["cell"][0]
    assert c["claim"] == "fam.a"
    return (c["ci_high"] - c["ci_low"]) / 2


def test_the_run_a_baseline_was_written_from_holds(base, cli):
    run, path = base
    data = bl.read(path)
    first = data["cell"][0]
    rec = load_record(run)
    assert first["estimate"] == rec["cells"][0]["verdict"]["estimate"]  # written exactly, read back exactly
    assert first["spec_hash"] and first["fingerprint"] == "fp-m1" and first["profile"] == "smoke"
    r = cli("check", run, "--baseline", path)
    assert r.exit_code == 0, r.output
    assert "2 cells: 2 holds   OK" in r.output


def test_a_flipped_outcome_in_the_baseline_fails_and_names_the_cell(base, cli):
    run, path = base
    text = path.read_text()
    i = text.index('claim = "fam.b"')
    path.write_text(text[:i] + text[i:].replace('outcome = "SUPPORTED"', 'outcome = "REFUTED"', 1))
    r = cli("check", run, "--baseline", path)
    assert r.exit_code == 1, r.output
    assert "fam.b" in r.output and "outcome flipped" in r.output and "REFUTED → SUPPORTED" in r.output
    assert "FAILED: 1 cell stopped matching" in r.output


def test_an_edited_frame_is_refused_with_exit_2(base, cli):
    run, path = base
    rel = load_record(run)["cells"][0]["frame"]
    f = pd.read_parquet(run / rel)
    f.loc[0, "value"] += 0.5
    f.to_parquet(run / rel, index=False)
    r = cli("check", run, "--baseline", path)
    assert r.exit_code == 2 and f"frame {run / rel} was edited after the run (fam.a × m1)" in r.output
    # the baseline's own copy of a frame is checked too
    run2 = make_run(run.parent, cells())
    copy = path.parent / "baseline.frames" / "fam.a" / "m1.parquet"
    g = pd.read_parquet(copy)
    g.loc[0, "value"] += 0.5
    g.to_parquet(copy, index=False)
    r = cli("check", run2, "--baseline", path)
    assert r.exit_code == 2 and "baseline frame" in r.output and "fam.a × m1" in r.output


def test_a_planted_shift_larger_than_the_interval_is_caught(base, cli, tmp_path):
    run, path = base
    shifted = make_run(tmp_path / "runs", cells(a=BASE + 3 * half_width(path)))
    r = cli("check", shifted, "--baseline", path, "--json")
    assert r.exit_code == 1, r.output
    rows = {row["claim"]: row for row in json.loads(r.output)}
    assert rows["fam.a"]["status"] == "estimate moved" and rows["fam.a"]["p_adjusted"] < 0.05
    assert rows["fam.b"]["status"] == "holds"


def test_a_shift_inside_noise_is_not(base, cli, tmp_path):
    run, path = base
    hw = half_width(path)
    noise = np.random.default_rng(7).normal(0, 0.05, N)  # zero-mean jitter: not significant
    small = 0.2 * hw  # a constant drift: significant, but a fifth of the baseline's half-width
    wide = np.random.default_rng(8).normal(0, 1.5, N)
    wide += 0.8 * hw - wide.mean()  # moves the mean by 0.8 half-widths, but z = 0.25 / (1.5/√40) ≈ 1: noise
    for values in (BASE + noise, BASE + wide, BASE + small):
        other = make_run(tmp_path / "runs", cells(a=values))
        r = cli("check", other, "--baseline", path, "--json")
        assert r.exit_code == 0, r.output
        row = json.loads(r.output)[0]
        assert row["status"] == "holds" and row["p_adjusted"] is not None
    assert "significant but within the margin" in row["why"]
    r = cli("check", other, "--baseline", path, "--margin", "0")  # any significant move fails at margin 0
    assert r.exit_code == 1 and "estimate moved" in r.output


def test_unpaired_without_baseline_frames(tmp_path, cli):
    run = make_run(tmp_path / "runs", cells())
    path = tmp_path / "b.toml"
    assert cli("baseline", run, "-o", path, "--no-frames").exit_code == 0
    assert not (tmp_path / "b.frames").exists()
    hw = half_width(path)
    inside = make_run(tmp_path / "runs", cells(a=BASE + 0.5 * hw))
    outside = make_run(tmp_path / "runs", cells(a=BASE + 2 * hw))
    assert cli("check", inside, "--baseline", path).exit_code == 0
    r = cli("check", outside, "--baseline", path, "--json")
    assert r.exit_code == 1 and "outside the baseline's interval" in json.loads(r.output)[0]["why"]


def test_spec_model_and_cell_changes_are_named(base, cli, tmp_path):
    run, path = base
    changed_spec = make_run(tmp_path / "runs", cells(spec_version="2"))
    r = cli("check", changed_spec, "--baseline", path)
    assert r.exit_code == 1 and "spec changed since the baseline" in r.output
    other_model = make_run(tmp_path / "runs", cells(a=BASE + 3 * half_width(path), fingerprint="fp-new"))
    r = cli("check", other_model, "--baseline", path, "--json")  # another model: outcomes only, none flipped
    assert r.exit_code == 0 and {row["status"] for row in json.loads(r.output)} == {"model changed"}
    shuffled = make_run(tmp_path / "runs", [cells()[0], {"claim": "fam.c", "model": "m1", "values": OTHER}])
    r = cli("check", shuffled, "--baseline", path, "--json")
    assert r.exit_code == 1
    rows = {(row["claim"], row["status"]) for row in json.loads(r.output)}
    assert rows == {("fam.a", "holds"), ("fam.b", "missing"), ("fam.c", "new")}
    seeded = make_run(tmp_path / "runs", cells(), seed=3)
    r = cli("check", seeded, "--baseline", path)
    assert r.exit_code == 1 and "seed 0 → 3" in r.output

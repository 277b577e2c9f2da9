"""bench compare: a paired bootstrap of A − B over shared units, clustered by sample, BH over claims."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from bench.spine.compare import compare_runs, decision_metric, paired_difference


def frame(values: np.ndarray, samples: np.ndarray, positions: np.ndarray | None = None,
          metric: str = "m") -> pd.DataFrame:
    out = {"metric": metric, "value": values, "sample": samples}
    if positions is not None:
        out["position"] = positions
    return pd.DataFrame(out)


def test_a_known_shift_is_recovered_with_its_interval():
    rng = np.random.default_rng(0)
    samples = np.arange(40)
    base = rng.normal(size=40)
    a = frame(base + 0.5 + rng.normal(scale=0.1, size=40), samples)
    b = frame(base, samples)
    r = paired_difference(a, b, "m")
    assert r["unit"] == "sample" and r["n_units"] == 40
    assert r["difference"] == pytest.approx(0.5, abs=0.05)
    assert r["ci_low"] < 0.5 < r["ci_high"] and r["ci_low"] > 0.4
    assert r["p_value"] < 0.01
    flipped = paired_difference(b, a, "m")
    assert flipped["difference"] == pytest.approx(-r["difference"])


def test_tokens_of_one_text_are_not_independent():
    """Five texts, 200 tokens each; each text has its own offset and the offsets average to zero.  Resampled by
    text there is no difference; resampled by token there would be a 'significant' one."""
    offsets = np.array([1.0, -1.0, 0.8, -0.6, -0.2])
    rng = np.random.default_rng(1)
    samples = np.repeat(np.arange(5), 200)
    positions = np.tile(np.arange(200), 5)
    b_vals = rng.normal(size=1000)
    a_vals = b_vals + offsets[samples] + rng.normal(scale=0.01, size=1000)
    r = paired_difference(frame(a_vals, samples, positions), frame(b_vals, samples, positions), "m")
    assert r["unit"] == "sample" and r["n_units"] == 5
    assert r["ci_low"] < 0 < r["ci_high"]
    assert r["p_value"] > 0.2


def test_no_shared_unit_and_missing_metric_say_so():
    a = frame(np.ones(3), np.arange(3))
    b = frame(np.ones(3), np.arange(3) + 10)
    assert "share no unit" in paired_difference(a, b, "m")["note"]
    assert "missing" in paired_difference(a, b, "other")["note"]


def test_decision_metric_reads_the_rule_or_its_first_sub_rule():
    assert decision_metric({"metric": "x"}) == "x"
    assert decision_metric({"of": [{"rule": "threshold", "metric": "y"}]}) == "y"
    assert decision_metric({"alpha": 0.05}) is None


def _run(tmp_path, name: str, model: str, claims: dict[str, pd.DataFrame]) -> tuple[dict, object]:
    d = tmp_path / name
    cells = []
    for claim, f in claims.items():
        rel = f"frames/{claim}/{model}.parquet"
        (d / rel).parent.mkdir(parents=True, exist_ok=True)
        f.to_parquet(d / rel)
        cells.append({"spec": {"id": claim, "verdict": {"metric": "m"}}, "model": model, "frame": rel,
                      "verdict": {"outcome": "SUPPORTED"}})
    from bench.ground.store import RECORD_FORMAT

    rec = {"format": RECORD_FORMAT, "run_id": name, "status": "complete", "device": {"type": "cpu"}, "cells": cells}
    (d / "record.json").write_text(json.dumps(rec))
    return rec, d


def test_compare_runs_adjusts_over_claims(tmp_path):
    rng = np.random.default_rng(2)
    s = np.arange(30)
    same = rng.normal(size=30)
    a, da = _run(tmp_path, "ra", "alpha", {"c.shift": frame(same + 1.0 + rng.normal(scale=0.1, size=30), s),
                                            "c.none": frame(same + rng.normal(scale=0.1, size=30), s)})
    b, db = _run(tmp_path, "rb", "beta", {"c.shift": frame(same, s), "c.none": frame(same, s)})
    ma, mb, rows = compare_runs(a, da, b, db)
    assert (ma, mb) == ("alpha", "beta")
    by = {r.claim: r for r in rows}
    assert by["c.shift"].p_adjusted < 0.05 and by["c.shift"].difference == pytest.approx(1.0, abs=0.1)
    assert by["c.none"].ci_low < 0 < by["c.none"].ci_high
    assert all(r.p_adjusted >= r.p_value for r in rows)


def test_compare_cli_writes_a_page(tmp_path, cli):
    s = np.arange(10)
    _run(tmp_path, "ra", "alpha", {"c.x": frame(np.arange(10.0) + 1, s)})
    _run(tmp_path, "rb", "beta", {"c.x": frame(np.arange(10.0), s)})
    out = tmp_path / "cmp.html"
    r = cli("compare", tmp_path / "ra", tmp_path / "rb", "--html", out)
    assert r.exit_code == 0, r.output
    assert "c.x" in r.output and "1 claims compared" in r.output
    assert "alpha" in out.read_text() and "c.x" in out.read_text()
    r = cli("compare", tmp_path / "ra", tmp_path / "rb", "--a", "nosuch")
    assert r.exit_code == 2 and "no model 'nosuch'" in r.output

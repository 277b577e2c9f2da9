"""What `bench verify` says before a long run: the slow machine's rates that decide whether to measure this one's,
the total it announces, and the silence before a short run."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from bench.ground import costs as gc
from bench.spine import costs

SPEC = str(Path(__file__).resolve().parents[2] / "specs" / "circuits" / "induction-heads-exist.toml")
SHAPE = gc.Shape(n_layers=2, d_model=4, d_ff=8, n_heads=2, n_kv_heads=1, head_dim=2, vocab=10)
MEASURED = gc.Rates(forward=1e9, backward=5e8, generate=2.5e8, call_layer_s=1e-3, kernel=1e8, base_bytes=1 << 28)
SECONDS_PER = ("call_layer_s", "word_s", "load_fixed_s")  # seconds per thing: larger is slower


def test_the_slow_machine_names_every_rate_and_each_is_slower_than_the_default():
    """A rate left out of SLOW falls back to gc.Rates' default, a fast machine's: a run made mostly of that work
    would be judged short and never announced."""
    fields = {f.name: f for f in dataclasses.fields(gc.Rates)}
    rates = set(fields) - {"machine", "load", "base_bytes"}
    assert set(costs.SLOW) == rates
    for name, value in costs.SLOW.items():
        default = fields[name].default
        if default is dataclasses.MISSING or (name == "head" and not default):  # head's default: the forward rate
            continue
        assert (value > default) if name in SECONDS_PER else (value < default), name


def _row(claim: str, seconds: float, flops: float) -> costs.Row:
    work = gc.Work(flops=flops)
    return costs.Row(claim, "m", 0, "p", seconds, 0, 0, True, None, "text", None, work=(SHAPE, work, None, 1, work))


def test_a_run_short_even_on_a_slow_machine_is_not_timed(monkeypatch):
    from bench.spine import calibrate

    seen = {}

    def plan(specs, opts, **kw):
        seen.update(kw)
        return [_row("a", 100.0, 1e9), _row("b", costs.ANNOUNCE_S - 100.0, 1e9)]

    monkeypatch.setattr(costs, "for_run", plan)
    monkeypatch.setattr(calibrate, "rates", lambda *a, **k: pytest.fail("measured a short run's rates"))
    rows, total = costs.before_run(["spec"], object())
    assert total is None and [r.predicted_s for r in rows] == [100.0, costs.ANNOUNCE_S - 100.0]
    assert seen["rates"] == gc.Rates(**costs.SLOW, base_bytes=calibrate._resident_bytes())
    assert (seen["strict"], seen["executing"]) == (False, True)  # only the cells the run measures; none refused


def test_a_long_run_is_timed_with_this_machines_rates(monkeypatch):
    """Known answer: each row's work (kernel FLOPs only) at the measured kernel rate, 1e8 FLOP/s."""
    from bench.spine import calibrate, run

    monkeypatch.setattr(costs, "for_run", lambda specs, opts, **kw: [_row("a", 150.0, 3e9), _row("b", 40.0, 5e8)])
    asked = []
    monkeypatch.setattr(calibrate, "rates", lambda device, *a, **k: asked.append(device) or MEASURED)
    opts = run.Options(device="cpu")
    rows, total = costs.before_run(["spec"], opts)
    assert asked == ["cpu"]
    assert [r.predicted_s for r in rows] == [pytest.approx(30.0), pytest.approx(5.0)]
    assert total == pytest.approx(35.0)


@pytest.mark.parametrize("jobs", [1, 2])
def test_verify_announces_a_long_runs_total_before_it_starts(cli, tiny_model_dir, monkeypatch, jobs):
    from bench.spine import run

    monkeypatch.setattr(costs, "before_run", lambda specs, opts: ([_row("a", 400.0, 0.0), _row("b", 200.0, 0.0)],
                                                                   600.0))
    monkeypatch.setattr(run, "execute", lambda *a, **k: (_ for _ in ()).throw(AssertionError("the run started")))
    res = cli(*["verify", SPEC, "--models", str(tiny_model_dir), "--no-report", "--jobs", str(jobs)])
    assert res.exit_code == 4 and "the run started" in res.output
    assert "plan: about 10.0 min of work predicted for 2 cells at one process's rates" in res.output
    assert ("worker processes share it out" in res.output) == (jobs > 1)
    before = res.output.index("plan: about")
    assert before < res.output.index("the run started")
    assert "resumes" not in res.output  # ten minutes: nothing to say about stopping


@pytest.mark.parametrize("seconds, said, resumes", [(3599.0, "60.0 min", False), (3600.0, "60.0 min", True),
                                                    (7199.0, "120.0 min", True), (7200.0, "2.0 h", True),
                                                    (104_000.0, "28.9 h", True)])
def test_a_run_of_hours_is_told_in_hours_and_that_a_kill_loses_little(cli, tiny_model_dir, monkeypatch, seconds,
                                                                       said, resumes):
    from bench.spine import run

    monkeypatch.setattr(costs, "before_run", lambda specs, opts: ([_row("a", seconds, 0.0)], seconds))
    monkeypatch.setattr(run, "execute", lambda *a, **k: (_ for _ in ()).throw(AssertionError("the run started")))
    res = cli(*["verify", SPEC, "--models", str(tiny_model_dir), "--no-report"])
    assert f"plan: about {said} of work predicted for 1 cells" in res.output
    assert ("the same command resumes this run" in res.output) == resumes


def test_verify_says_nothing_of_a_short_run(cli, tiny_model_dir, monkeypatch):
    from bench.spine import run

    monkeypatch.setattr(costs, "before_run", lambda specs, opts: ([_row("a", 100.0, 0.0)], None))
    monkeypatch.setattr(run, "execute", lambda *a, **k: (_ for _ in ()).throw(AssertionError("the run started")))
    res = cli(*["verify", SPEC, "--models", str(tiny_model_dir), "--no-report"])
    assert res.exit_code == 4 and "plan:" not in res.output


def test_a_run_whose_work_training_decides_announces_the_range_too(cli, tiny_model_dir, monkeypatch):
    """Known answer: one cell between 300 and 1,200 s (predicted at their geometric mean, 600 s) beside a cell of
    600 s: about 20.0 min, between 15.0 and 30.0."""
    from bench.spine import run

    bounded = _row("a", 600.0, 0.0)
    bounded.predicted_range_s = [300.0, 1200.0]
    monkeypatch.setattr(costs, "before_run", lambda specs, opts: ([bounded, _row("b", 600.0, 0.0)], 1200.0))
    monkeypatch.setattr(run, "execute", lambda *a, **k: (_ for _ in ()).throw(AssertionError("the run started")))
    res = cli(*["verify", SPEC, "--models", str(tiny_model_dir), "--no-report"])
    assert ("plan: about 20.0 min of work predicted for 2 cells at one process's rates, 15.0 min to 30.0 min as "
            "training decides") in res.output


def test_a_run_of_hours_names_the_cells_its_last_run_could_not_decide(cli, tiny_model_dir, monkeypatch, tmp_path):
    """Before an hour or more of work, a cell whose latest record at this profile was INCONCLUSIVE by a failed
    precondition is named with the reason; a cell decided last time, and a short run, say nothing."""
    import json

    from bench.spine import run

    runs = tmp_path / "runs" / "20260101-000000-000-aaaa"
    runs.mkdir(parents=True)
    cells = [{"spec": {"id": claim}, "model": "m", "verdict": {"outcome": outcome, "reason": reason}}
             for claim, outcome, reason in (("a", "INCONCLUSIVE", "precondition not met: n_ablated: min = 0"),
                                            ("b", "SUPPORTED", "ρ = 0.9"))]
    (runs / "record.json").write_text(json.dumps({"profile": "smoke", "cells": cells}))
    monkeypatch.setattr(run, "execute", lambda *a, **k: (_ for _ in ()).throw(AssertionError("the run started")))
    for seconds, said in ((4000.0, True), (600.0, False)):
        monkeypatch.setattr(costs, "before_run", lambda specs, opts, s=seconds: (
            [_row("a", s / 2, 0.0), _row("b", s / 2, 0.0)], s))
        res = cli(*["verify", SPEC, "--models", str(tiny_model_dir), "--no-report", "--device", "cpu",
                    "--runs-dir", str(tmp_path / "runs")])
        assert ("note: a × m: the latest run of this cell at this profile could not decide it: precondition not "
                "met: n_ablated: min = 0" in res.output) == said
        assert "b × m" not in res.output

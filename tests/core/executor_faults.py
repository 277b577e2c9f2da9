"""A probe that kills its own process the first `deaths` times it runs (counted in files under `tally`), for
testing what the Ray executor does when a worker dies mid-cell.  Imported by the test and, through Ray's
worker set-up hook, by every Ray worker, so that both sides know the probe."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pandas as pd

from bench.ground import registry
from bench.ground.schemas import SampleMetrics


def sudden_death(ctx, *, tally: str = "", deaths: int = 0, n: int = 8) -> pd.DataFrame:
    """Per sample: a known value (0.9); dies by SIGKILL on its first `deaths` runs."""
    d = Path(tally)
    d.mkdir(parents=True, exist_ok=True)
    runs = len(list(d.iterdir()))
    (d / f"run-{runs}").write_text(str(os.getpid()))
    if runs < deaths:
        os.kill(os.getpid(), signal.SIGKILL)
    # scores that vary around 0.9 (a constant column has no variance, and no test can call it above 0.5)
    return pd.DataFrame({"sample": pd.array(range(n), dtype="Int64"), "metric": "score",
                         "value": [0.9 + 0.02 * ((i % 3) - 1) for i in range(n)]})


def register() -> None:
    """Register the probe once per process (the registry rejects a second registration)."""
    if registry.PROBES.find("sudden_death") is None:
        registry.probe_def("sudden_death", version=1, schema=SampleMetrics, metrics=("score",),
                           uses_model=False)(sudden_death)


SPEC = """
id = "faults.{name}"
title = "A probe that dies"
source = "test"
claim = "test"
spec_version = 1

[models]
default = ["none"]

[data]
tally = "{tally}"

[measure]
probe = "sudden_death"
deaths = {deaths}

[verdict]
rule = "threshold"
metric = "score"
min = 0.5
"""


def register_without_starts() -> None:
    """As :func:`register`, and this worker sends no "start" event: as when a worker is killed before its queue's
    feeder thread has sent one.  The driver must count the death all the same."""
    register()
    from bench.spine.executors import pool

    real = pool.Event

    def event(kind, **kw):
        return real("note", key=kw.get("key"), message="") if kind == "start" else real(kind, **kw)

    pool.Event = event

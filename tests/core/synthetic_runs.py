"""Run folders built without a model: sealed records with one tidy frame per cell and the verdict the threshold
rule decides on it, so that baselines, checks, hashes and pooling can be tested on numbers set by hand."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from bench import stats
from bench.ground.store import RunWriter


def frame(values, metric: str = "m") -> pd.DataFrame:
    values = np.asarray(values, float)
    return pd.DataFrame({"sample": np.arange(len(values)), "metric": metric, "value": values})


def spec(claim: str, *, min_: float = 0.0, metric: str = "m", version: str = "1") -> dict:
    verdict = {"metric": metric, "reduce": "mean", "unit": "sample", "min": min_}
    return {"id": claim, "title": claim, "source": "test", "claim": "a claim", "path": f"{claim}.toml",
            "family": claim.split(".")[0], "profile": "smoke", "probe": "p", "rule": "threshold", "params": {},
            "verdict": verdict, "hash": f"hash-{claim}-{min_}-{version}", "models": {}, "references": [],
            "control_holds": ""}


def make_run(runs_dir: Path, cells: list[dict], *, seed: int = 0, profile: str = "smoke",
             packages: dict | None = None) -> Path:
    """`cells`: dicts with claim, model, values (one per sample) and optionally min (the threshold), fingerprint
    and spec_version.  Returns the run folder, written by the real RunWriter."""
    header = {"command": "test", "git_revision": None, "packages": packages or {"bench": "0"},
              "python": "3", "platform": "test", "device": {"type": "cpu", "index": None, "name": "cpu",
                                                            "threads": 1},
              "dtype": "float32", "seed": seed, "profile": profile, "models_choice": ["default"], "audit": None,
              "control": None, "revision": None, "executor": {"name": "local"}}
    writer = RunWriter.create(runs_dir, header)
    verdicts = []
    for c in cells:
        s = spec(c["claim"], min_=c.get("min", 0.0), version=c.get("spec_version", "1"))
        f = frame(c["values"]) if c.get("values") is not None else None
        v = stats.evaluate(f, "threshold", {**s["verdict"], "n_resamples": 999}) if f is not None \
            else stats.errored("failed")
        cell = {"spec": s, "model": c["model"], "seed": seed, "probe": {"name": "p", "version": 1},
                "model_ref": None, "fingerprint": c.get("fingerprint", f"fp-{c['model']}"),
                "timings": {"total_s": 0.1}, "cache_key": None, "cache_hit": False, "verdict": v.to_json()}
        writer.add(cell, f)
        verdicts.append(v.to_json())
    writer.finish("complete", verdicts)
    return writer.dir

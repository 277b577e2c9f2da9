"""``bench rerun RUN``: execute again exactly what a run record says, and compare the two runs.

A reader of a published report checks it this way.  The record's settings (every option that can change a
result, see :func:`bench.spine.run.settings`) give the options; its cells give the specs (by path under the specs
root, each checked against the digest it was run with) and the models (each checked against its fingerprint).
A spec or model that no longer matches is refused before anything runs.  Package versions that differ are named
(the comparison then shows what they changed).  The run is cold: nothing is replayed or read from the frame
cache; only the converted model weights and the fetched corpora are shared with the ordinary cache.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Iterator

from bench.ground.errors import ModelError, SpecError, UsageError

INPUTS = ("data", "gguf", "models")  # cache folders of inputs, shared; everything else (results) starts empty


def plan(record: dict[str, Any], specs_root: Path) -> tuple[list, dict[str, Any]]:
    """The specs to run, in the record's order, and the record's settings; UsageError if they cannot be had."""
    from bench.ground.spec import load_spec

    s = record.get("settings")
    if not isinstance(s, dict):
        raise UsageError(f"run {record.get('run_id')} was recorded before runs kept their settings; re-run its "
                         f"command instead: {record.get('command')}")
    specs, seen = [], set()
    for cell in record["cells"]:
        described = cell["spec"]
        if described["id"] in seen:
            continue
        seen.add(described["id"])
        path = specs_root / described["path"]
        if not path.is_file():
            raise UsageError(f"spec {described['path']} of run {record['run_id']} is not under {specs_root}; "
                             f"give the specs folder it was run from")
        try:
            spec = load_spec(path)
        except SpecError as exc:
            raise UsageError(f"spec {path} no longer loads: {exc}") from None
        now = spec.with_profile(s["profile"]).digest()
        if now != described.get("hash"):
            raise UsageError(f"spec {path} changed since run {record['run_id']} (digest {described.get('hash', '?')[:12]}"
                             f" then, {now[:12]} now): a rerun executes only what the record says")
        specs.append(spec)
    return specs, s


def jobs_of(record: dict[str, Any]) -> int:
    """The local worker processes the recorded run used (1 for any other executor): the CPU's float rounding
    depends on the threads each process has, so a rerun splits the machine as the run did."""
    executor = record.get("executor") or {}
    jobs = executor.get("jobs", 1) if executor.get("name") == "local" else 1
    return jobs if isinstance(jobs, int) and jobs >= 1 else 1


def check_models(record: dict[str, Any], revision: str | None) -> None:
    """Every model of the record still resolves to the weights it was run with."""
    from bench import models

    checked: dict[str, str | None] = {}
    for cell in record["cells"]:
        ref, recorded = cell.get("model_ref") or {}, cell.get("fingerprint")
        name = ref.get("name") or cell["model"]
        if recorded is None or name in checked:
            continue
        try:
            checked[name] = models.resolve(name, revision).fingerprint()
        except ModelError as exc:
            raise UsageError(f"model {name} of run {record['run_id']} cannot be had here: {exc}") from None
        if checked[name] != recorded:
            raise UsageError(f"model {name} changed since run {record['run_id']} (fingerprint {recorded} then, "
                             f"{checked[name]} now): a rerun executes only what the record says")


def package_drift(record: dict[str, Any], now: dict[str, str | None]) -> list[str]:
    """`name then → now` for each package whose version differs from the record's."""
    then = record.get("packages") or {}
    return [f"{p} {then.get(p)} → {now.get(p)}" for p in sorted(set(then) | set(now))
            if then.get(p) != now.get(p)]


@contextlib.contextmanager
def cold_cache() -> Iterator[Path]:
    """A fresh cache for results, sharing the ordinary cache's inputs (converted weights, corpora) by link."""
    from bench.ground.store import cache_root

    real = cache_root()
    real.mkdir(parents=True, exist_ok=True)
    fresh = Path(tempfile.mkdtemp(prefix="rerun-", dir=real))
    for name in INPUTS:
        (real / name).mkdir(exist_ok=True)
        (fresh / name).symlink_to(real / name, target_is_directory=True)
    before = os.environ.get("BENCH_CACHE")
    os.environ["BENCH_CACHE"] = str(fresh)
    try:
        yield fresh
    finally:
        if before is None:
            os.environ.pop("BENCH_CACHE", None)
        else:
            os.environ["BENCH_CACHE"] = before
        for name in INPUTS:
            (fresh / name).unlink(missing_ok=True)
        shutil.rmtree(fresh, ignore_errors=True)

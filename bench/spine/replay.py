"""Warm re-runs: a run whose every input is unchanged is replayed from the last complete run with those inputs.

The replay key names everything a run's cells and verdicts depend on: each spec under its profile (its digest
and its path), the run's settings (every option that can change results, resolved in one place,
:func:`bench.spine.run.settings`: models, profile, device, dtype, seed, control, revision, …), the fingerprint of
each model's weights, the data fingerprints of the corpora, the versions of the packages that compute, and a hash
of bench's own source (so a changed probe, rule or schema is never replayed).  On a hit the run record is written
from the stored header, cells and verdicts, and the frames are copied from the cache; no model, no torch, no rule
runs.  The replayed record differs from the stored one only in what describes the invocation (run id, times,
command, git revision, executor) and in the cells' timings.  A run
that had an ERROR or SKIPPED cell is never stored, so a failure is always tried again.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
from importlib import metadata
from pathlib import Path
from typing import Any

from bench.ground.store import atomic_write_json, cache_root, key_of

# Header fields that describe the invocation rather than its results: a replayed record takes them from the
# command that replays it; every other header field is the stored run's.
INVOCATION_FIELDS = ("command", "git_revision", "executor")
PACKAGES = ("torch", "transformers", "pandas", "pandera", "scipy", "numpy", "accelerate", "gguf")


def source_hash() -> str:
    """sha256 over bench's Python source files and templates (names and contents)."""
    root = Path(__file__).resolve().parents[1]
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        if p.is_file() and p.suffix in (".py", ".j2", ".html", ".css", ".toml") and "__pycache__" not in p.parts:
            h.update(f"{p.relative_to(root)}\0".encode())
            h.update(p.read_bytes())
    return h.hexdigest()


def cheap_device(device: str) -> str | None:
    """The device `auto` means, without importing torch: the CPU where neither an NVIDIA device node nor an
    Apple GPU (MPS) can exist; None if unsure (the run then resolves it with torch and skips replay)."""
    if device != "auto":
        return device
    if platform.system() == "Darwin" or any(Path("/dev").glob("nvidia[0-9]*")):
        return None
    return "cpu"


def key(specs, settings: dict[str, Any]) -> str | None:
    """The replay key of a run with these settings (:func:`bench.spine.run.settings`: every option that can change
    results, resolved), or None when an input cannot be fingerprinted cheaply."""
    from bench import models
    from bench.spine import plan

    parts: dict[str, Any] = {"source": source_hash(), "settings": settings,
                             "packages": {p: _version(p) for p in PACKAGES}, "specs": [], "fingerprints": {}}
    try:
        for spec in specs:
            applied = spec.with_profile(settings["profile"])
            parts["specs"].append([applied.path, applied.digest(), plan.data_fingerprint(applied.probe_params())])
            for name in plan.models_for(spec, tuple(settings["models"])):
                if name not in parts["fingerprints"]:
                    ref = models.resolve(name, settings.get("revision"))
                    parts["fingerprints"][name] = ref.fingerprint() if ref.kind != "hub" else None
    except Exception:  # noqa: BLE001 - anything unusual: take the ordinary path, which reports it properly
        return None
    if None in parts["fingerprints"].values():
        return None  # a hub id without a local snapshot: its contents are not pinned
    return key_of(parts)


def _path(k: str) -> Path:
    return cache_root() / "replay" / f"{k}.json"


def load(k: str) -> dict[str, Any] | None:
    try:
        entry = json.loads(_path(k).read_text())
    except (OSError, ValueError):
        return None
    entry["frame_bytes"] = {}
    for cell in entry["cells"]:  # every frame must still be in the cache, undamaged
        if cell.get("frame"):
            data = frame_bytes(cell.get("cache_key") or "")
            if data is None:
                return None
            entry["frame_bytes"][cell["frame"]] = data
    return entry


def store(k: str, record: dict[str, Any]) -> None:
    cells = record["cells"]
    if record.get("status") != "complete" or any(c["verdict"]["outcome"] in ("ERROR", "SKIPPED") for c in cells):
        return
    if any(c.get("frame") and not c.get("cache_key") for c in cells):
        return
    per_run = ("format", "run_id", "status", "started", "ended", "cells", *INVOCATION_FIELDS)
    atomic_write_json(_path(k), {"run_id": record["run_id"],
                                 "header": {h: v for h, v in record.items() if h not in per_run}, "cells": cells})


def frame_bytes(cache_key: str) -> bytes | None:
    """The cached parquet of `cache_key` if its checksum holds, else None (the ordinary path then reports it)."""
    folder = cache_root() / "frames" / cache_key[:2]
    try:
        data = (folder / f"{cache_key}.parquet").read_bytes()
        meta = json.loads((folder / f"{cache_key}.json").read_text())
    except (OSError, ValueError):
        return None
    return data if cache_key and meta.get("sha256") == hashlib.sha256(data).hexdigest() else None


def _version(pkg: str) -> str | None:
    try:
        return metadata.version(pkg)
    except metadata.PackageNotFoundError:
        return None


def enabled() -> bool:
    return os.environ.get("BENCH_NO_REPLAY", "") in ("", "0")

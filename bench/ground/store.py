"""Run records and the content-addressed frame cache.  Every write is atomic (temp file, fsync, rename).

Cache layout, under ``$BENCH_CACHE`` (default ``~/.cache/bench``)::

    frames/<k[:2]>/<k>.parquet    the frame
    frames/<k[:2]>/<k>.json       its sha256 and the parts of the key; written last, so it marks a complete entry

An entry whose parquet is missing, whose checksum differs, or that no longer parses or validates is reported,
deleted and recomputed — never trusted.

Run layout::

    runs/<run-id>/record.json                     rewritten after every cell; status "running" until the end
    runs/<run-id>/frames/<spec-id>/<model>.parquet
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import secrets
import socket
import tempfile
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterator

import pandas as pd

from bench.ground import integrity
from bench.ground.errors import StoreError, UsageError

RECORD_FORMAT = 1
_UMASK = os.umask(0o022)
os.umask(_UMASK)  # read the process umask once (there is no way to read it without setting it)


def cache_root() -> Path:
    return Path(os.environ.get("BENCH_CACHE") or Path.home() / ".cache" / "bench")


sha256_bytes = integrity.sha256_hex  # one implementation of each hash, in bench.ground.integrity
sha256_file = integrity.file_digest


def key_of(parts: dict[str, Any]) -> str:
    """The cache key: sha256 of the canonical JSON of everything that determines a frame."""
    return sha256_bytes(json.dumps(parts, sort_keys=True, separators=(",", ":"), default=str).encode())


def atomic_write_bytes(path: Path, data: bytes) -> None:
    atomic_write(path, lambda f: f.write(data))


def atomic_write(path: Path, write: Callable[[Any], Any]) -> None:
    """`write(f)` into a temporary file beside `path`, synced, then renamed onto `path`: a kill at any point leaves
    the old file or the new one, never half of one (a stream, so a large object need not be held as bytes)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.{os.getpid()}.", suffix=".tmp", dir=path.parent)  # pid: see upkeep
    try:
        os.fchmod(fd, 0o666 & ~_UMASK)  # mkstemp creates 0600; give the file the usual permissions
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_json(path: Path, obj: Any) -> None:
    atomic_write_bytes(path, (json.dumps(obj, indent=1, ensure_ascii=False, default=str) + "\n").encode())


def frame_bytes(frame: pd.DataFrame) -> bytes:
    buf = io.BytesIO()
    frame.to_parquet(buf, index=False)
    return buf.getvalue()


def read_frame(data: bytes) -> pd.DataFrame:
    return pd.read_parquet(io.BytesIO(data))


KEPT_BYTES = 256 << 20  # frames a Cache keeps in memory after reading them (each at most a quarter of it)


# ── the cache ──────────────────────────────────────────────────────────────────────────────────────────────

class Cache:
    """Content-addressed frames.  `warn` receives a one-line message when an entry is found corrupt."""

    def __init__(self, root: Path | None = None, warn: Callable[[str], None] | None = None):
        self.root = Path(root) if root else cache_root()
        self.warn = warn or (lambda msg: None)
        self.waited_s = 0.0  # seconds spent waiting for entries another process was computing (for the timings)
        self._read: dict[str, tuple[str, pd.DataFrame, int]] = {}  # key → (checksum, frame, bytes) read, newest last
        self._read_bytes = 0

    def _paths(self, key: str) -> tuple[Path, Path]:
        d = self.root / "frames" / key[:2]
        return d / f"{key}.parquet", d / f"{key}.json"

    def get(self, key: str, validate: Callable[[pd.DataFrame], pd.DataFrame] | None = None) -> pd.DataFrame | None:
        data_path, meta_path = self._paths(key)
        if not meta_path.exists():
            return None
        try:
            meta = json.loads(meta_path.read_text())
            kept = self._read.get(key)
            if kept is not None and kept[0] == meta["sha256"]:  # read before by this cache, the entry unchanged
                frame = kept[1].copy(deep=True)
            else:
                data = data_path.read_bytes()
                if sha256_bytes(data) != meta["sha256"]:
                    raise ValueError("checksum mismatch")
                frame = read_frame(data)
                frame.attrs.update(meta.get("attrs", {}))
                self._keep(key, meta["sha256"], frame)
            return validate(frame) if validate else frame
        except Exception as exc:  # noqa: BLE001 - any damage means: recompute
            self.warn(f"cache entry {key[:12]} is corrupt ({type(exc).__name__}: {str(exc)[:80]}); recomputing")
            self.drop(key)
            return None

    def _keep(self, key: str, checksum: str, frame: pd.DataFrame) -> None:
        """Keep a copy of a frame read, so that the cells of one process that share it read its file once
        (a cell of the language-neuron family looks up some 20 shared results; each read costs a parquet decode
        and a checksum of the file); the oldest go beyond :data:`KEPT_BYTES`.  An entry whose marker changed
        (written again, or by another process) is read from its file."""
        if int(frame.memory_usage(index=True).sum()) > KEPT_BYTES // 4:  # too large even before its strings
            return
        size = int(frame.memory_usage(index=True, deep=True).sum())
        if size > KEPT_BYTES // 4:
            return
        self.drop_kept(key)
        self._read[key] = (checksum, frame.copy(deep=True), size)
        self._read_bytes += size
        while self._read_bytes > KEPT_BYTES:
            self._read_bytes -= self._read.pop(next(iter(self._read)))[2]

    def has(self, key: str) -> bool:
        """Whether `key` has a complete entry (its marker is written last; damage shows only when it is read)."""
        return self._paths(key)[1].exists()

    def put(self, key: str, frame: pd.DataFrame, parts: dict[str, Any]) -> None:
        data = frame_bytes(frame)
        data_path, meta_path = self._paths(key)
        atomic_write_bytes(data_path, data)
        atomic_write_json(meta_path, {"sha256": sha256_bytes(data), "parts": parts, "attrs": _attrs(frame),
                                      "written": now()})

    def drop_kept(self, key: str) -> None:
        kept = self._read.pop(key, None)
        self._read_bytes -= kept[2] if kept else 0

    def drop(self, key: str) -> None:
        self.drop_kept(key)
        for p in self._paths(key):
            p.unlink(missing_ok=True)

    @contextlib.contextmanager
    def computing(self, key: str, timeout: float | None = None) -> Iterator[None]:
        """Hold the compute lock of one cell, so that two runs on this cache compute it once: the second waits,
        then finds the entry.  A wait longer than `timeout` (default ``$BENCH_LOCK_TIMEOUT`` or 6 h) is a
        StoreError that names the holder."""
        from filelock import FileLock, Timeout

        d = self.root / "locks"
        holder = d / f"{key}.holder"
        wait = _lock_timeout() if timeout is None else timeout
        lock = FileLock(str(d / f"{key}.lock"), timeout=wait)
        try:
            d.mkdir(parents=True, exist_ok=True)
            began = time.perf_counter()
            lock.acquire()
            self.waited_s += time.perf_counter() - began
        except Timeout:  # before OSError: filelock's Timeout is a TimeoutError
            raise StoreError(f"cache entry {key[:12]} is being computed by {_read_holder(holder)}; waited {wait:g} s "
                             f"(raise BENCH_LOCK_TIMEOUT to wait longer)") from None
        except OSError as exc:  # a cache that cannot hold locks still works, unshared
            self.warn(f"cannot lock cache entry {key[:12]} ({exc.strerror or exc}); computing it unlocked")
            yield
            return
        try:
            with contextlib.suppress(OSError):
                atomic_write_json(holder, {"pid": os.getpid(), "host": socket.gethostname(), "since": now()})
            yield
        finally:
            holder.unlink(missing_ok=True)
            lock.release()

    def memo(self, parts: dict[str, Any], compute: Callable[[], pd.DataFrame]) -> pd.DataFrame:
        """Cached sub-result: return the frame stored under `parts`, computing and storing it if absent."""
        key = key_of({"memo": parts})
        frame = self.get(key)
        if frame is None:
            with self.computing(key):
                frame = self.get(key)  # another run may have stored it while this one waited
                if frame is None:
                    frame = compute()
                    self.put(key, frame, {"memo": parts})
        return frame


def _lock_timeout() -> float:
    try:
        return max(0.0, float(os.environ.get("BENCH_LOCK_TIMEOUT", 6 * 3600)))
    except ValueError:
        raise UsageError(f"BENCH_LOCK_TIMEOUT must be a number of seconds, got {os.environ['BENCH_LOCK_TIMEOUT']!r}") from None


def _read_holder(path: Path) -> str:
    try:
        h = json.loads(path.read_text())
        return f"process {h['pid']} on {h['host']} (since {h['since']})"
    except (OSError, ValueError, KeyError, TypeError):
        return "another process"


def _attrs(frame: pd.DataFrame) -> dict[str, Any]:
    try:
        return json.loads(json.dumps(frame.attrs, default=str))
    except (TypeError, ValueError):
        return {}


# ── run records ────────────────────────────────────────────────────────────────────────────────────────────

def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def slug(name: str) -> str:
    """A file-name-safe form of a model name or path."""
    s = re.sub(r"[^A-Za-z0-9._-]+", "_", name.strip("/")).strip("._")
    return s[:80] or "model"


def new_run_id() -> str:
    """Sortable by start time (to the millisecond), unique by a random suffix."""
    return datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S-%f")[:-3] + "-" + secrets.token_hex(2)


@dataclass
class RunWriter:
    """Writes one run's folder.  The record is rewritten, atomically, after every cell."""

    dir: Path
    record: dict[str, Any]
    frame_hashes: dict[str, str] = field(default_factory=dict)  # frame path in the run → sha256 of its bytes

    @classmethod
    def create(cls, runs_dir: Path, header: dict[str, Any]) -> "RunWriter":
        run_id = new_run_id()
        d = Path(runs_dir) / run_id
        try:
            d.mkdir(parents=True, exist_ok=False)
            probe = d / ".write-test"
            probe.write_bytes(b"")
            probe.unlink()
        except OSError as exc:
            raise UsageError(f"cannot write runs dir '{runs_dir}': {exc.strerror or exc}") from None
        record = {"format": RECORD_FORMAT, "run_id": run_id, "status": "running", "started": now(), "ended": None,
                  **header, "cells": []}
        writer = cls(d, record)
        writer.flush()
        return writer

    def frame_path(self, spec_id: str, model: str) -> Path:
        return self.dir / "frames" / spec_id / f"{slug(model)}.parquet"

    def add(self, cell: dict[str, Any], frame: pd.DataFrame | None) -> None:
        if frame is not None:
            path = self.frame_path(cell["spec"]["id"], cell["model"])
            data = frame_bytes(frame)
            atomic_write_bytes(path, data)
            cell["frame"] = str(path.relative_to(self.dir))
            self.frame_hashes[cell["frame"]] = sha256_bytes(data)
        self.record["cells"].append(cell)
        self.flush()

    def finish(self, status: str, verdicts: list[dict[str, Any]] | None = None) -> None:
        if verdicts is not None:
            for cell, verdict in zip(self.record["cells"], verdicts):
                cell["verdict"] = verdict
        self.record["status"] = status
        self.record["ended"] = now()
        self.flush()

    def flush(self) -> None:
        """Write the record, sealed: each frame's sha256 (hashed from the file once, for a frame that was copied
        in rather than added) and the record's own (see :mod:`bench.ground.integrity`)."""
        for cell in self.record["cells"]:
            rel = cell.get("frame")
            if rel:
                if rel not in self.frame_hashes:
                    self.frame_hashes[rel] = sha256_file(self.dir / rel)
                cell[integrity.FRAME_KEY] = self.frame_hashes[rel]
        atomic_write_json(self.dir / "record.json", integrity.seal(self.record))


def find_run(run: str | Path, runs_dir: Path = Path("runs")) -> Path:
    """A run folder from its path, its record.json path, or its id under `runs_dir`."""
    p = Path(run)
    for cand in (p, p.parent if p.name == "record.json" else None, Path(runs_dir) / str(run)):
        if cand is not None and (cand / "record.json").is_file():
            return cand
    raise StoreError(f"no run record at '{run}' (looked for {p}/record.json and {Path(runs_dir) / str(run)}/record.json)")


def load_record(run_dir: Path, verify: bool = False) -> dict[str, Any]:
    """The run record of `run_dir`, checked for structure and, with `verify`, against the hashes written with
    the run (a record or frame edited afterwards is a :class:`~bench.ground.integrity.TamperedError`, exit 2)."""
    path = Path(run_dir) / "record.json"
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError) as exc:
        raise StoreError(f"cannot read run record {path}: {exc}") from None
    if not isinstance(record, dict) or record.get("format") != RECORD_FORMAT or "cells" not in record:
        fmt = record.get("format") if isinstance(record, dict) else None
        raise StoreError(f"{path} is not a bench run record (format {fmt!r})")
    problem = _record_problem(record)
    if problem:
        raise StoreError(f"run record {path} is damaged: {problem}")
    if verify:
        integrity.check(record, Path(run_dir))
    return record


def _record_problem(record: dict) -> str | None:
    """What in a record's structure the summary and report could not read, or None."""
    if not isinstance(record.get("cells"), list):
        return "'cells' is not a list"
    for key in ("run_id", "status"):
        if not isinstance(record.get(key), str):
            return f"'{key}' is missing or not a string"
    for i, cell in enumerate(record["cells"]):
        if not isinstance(cell, dict):
            return f"cell {i} is not a table"
        spec, verdict = cell.get("spec"), cell.get("verdict")
        if not isinstance(spec, dict) or not isinstance(spec.get("id"), str):
            return f"cell {i} has no spec id"
        if not isinstance(cell.get("model"), str):
            return f"cell {i} has no model name"
        if not isinstance(verdict, dict) or not isinstance(verdict.get("outcome"), str):
            return f"cell {i} has no verdict"
        if cell.get("frame") is not None and not isinstance(cell["frame"], str):
            return f"cell {i} has a bad frame path"
        if not isinstance(cell.get("timings", {}), dict) or not all(
                _number(t) for t in cell.get("timings", {}).values()):
            return f"cell {i} has bad timings"
        bad = _verdict_problem(verdict)
        if bad:
            return f"cell {i}: {bad}"
    if not isinstance(record.get("device"), dict) or not isinstance(record["device"].get("type"), str):
        return "'device' is missing"
    return None


def _number(x: Any) -> bool:
    return x is None or (isinstance(x, (int, float)) and not isinstance(x, bool))


def _verdict_problem(v: dict) -> str | None:
    from bench.ground.verdicts import Outcome

    for key in ("estimate", "ci_low", "ci_high", "p_value", "p_adjusted", "n", "effect"):
        if not _number(v.get(key)):
            return f"verdict field '{key}' is not a number"
    if v["outcome"] not in {o.value for o in Outcome}:
        return f"unknown outcome {v['outcome']!r:.40}"
    if not all(isinstance(p, dict) and not _verdict_problem(p) for p in v.get("parts") or []):
        return "a part of the verdict cannot be read"
    for key in ("reason", "rule", "metric", "threshold", "effect_name"):
        if v.get(key) is not None and not isinstance(v[key], str):
            return f"verdict field '{key}' is not text"
    return None


def load_cell_frame(run_dir: Path, cell: dict[str, Any]) -> pd.DataFrame | None:
    rel = cell.get("frame")
    if not rel:
        return None
    try:
        return pd.read_parquet(Path(run_dir) / rel)
    except Exception as exc:  # noqa: BLE001
        raise StoreError(f"cannot read frame {rel} of run {Path(run_dir).name}: {exc}") from None

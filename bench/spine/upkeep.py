"""What a killed run leaves behind, and the cache's inventory.

A run holds two locks while it is alive: ``runs/<run-id>/.alive.lock`` (its record is being written) and
``$BENCH_CACHE/live/<run-id>.lock`` (it may be writing into the cache).  Both are flock locks, which the system
drops when the process dies, however it dies.  The next run therefore knows which records stuck at "running"
belong to dead runs (they are marked "interrupted") and which temporary files are orphans: those older than the
oldest live run's lock, as long as nothing is converting a model.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

from bench.ground import integrity
from bench.ground.store import atomic_write_json, cache_root, now

GRACE_S = 60.0  # a temporary file younger than this is never swept, whatever the locks say


@contextlib.contextmanager
def alive(run_dir: Path, run_id: str, root: Path | None = None) -> Iterator[None]:
    """Hold the locks that mark run `run_id` as alive, for the duration of the block."""
    from filelock import FileLock

    live = (root or cache_root()) / "live"
    locks = [FileLock(str(Path(run_dir) / ".alive.lock")), FileLock(str(live / f"{run_id}.lock"))]
    held = []
    for lock in locks:
        with contextlib.suppress(OSError):  # a read-only cache: the run still works, only unmarked there
            Path(lock.lock_file).parent.mkdir(parents=True, exist_ok=True)
            lock.acquire(timeout=0)
            held.append(lock)
    try:
        yield
    finally:
        for lock in reversed(held):
            lock.release()
        for p in (Path(run_dir) / ".alive.lock", live / f"{run_id}.lock"):
            p.unlink(missing_ok=True)


def _held(path: Path) -> bool:
    """Whether a live process holds the flock lock at `path` (a missing file is not held)."""
    from filelock import FileLock, Timeout

    if not path.exists():
        return False
    lock = FileLock(str(path))
    try:
        lock.acquire(timeout=0)
    except Timeout:
        return True
    except OSError:
        return True  # cannot tell: assume alive, never sweep what might be in use
    lock.release()
    return False


def mark_interrupted(runs_dir: Path, note: Callable[[str], None] = lambda m: None) -> list[str]:
    """Records under `runs_dir` still "running" whose run is dead become "interrupted"; their ids are returned."""
    fixed = []
    if not Path(runs_dir).is_dir():
        return fixed
    for rec_path in sorted(Path(runs_dir).glob("*/record.json")):
        try:
            record = json.loads(rec_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue  # a damaged record is reported by whoever reads it, not rewritten here
        if not isinstance(record, dict) or record.get("status") != "running":
            continue
        if _held(rec_path.parent / ".alive.lock"):
            continue
        record["status"] = "interrupted"
        record["ended"] = record.get("ended") or now()
        record["repaired"] = f"marked interrupted on {now()}: its process was gone"
        try:
            atomic_write_json(rec_path, integrity.seal(record))  # bench's own repair keeps the record sealed
            (rec_path.parent / ".alive.lock").unlink(missing_ok=True)
        except OSError:
            continue  # a runs dir this process may not write: leave it as it is
        fixed.append(str(record.get("run_id", rec_path.parent.name)))
    if fixed:
        note(f"{len(fixed)} earlier run{'s' if len(fixed) != 1 else ''} had been killed; marked interrupted")
    return fixed


def sweep(runs_dir: Path | None = None, root: Path | None = None, note: Callable[[str], None] = lambda m: None) -> int:
    """Remove orphan ``*.tmp`` files and half-done ``.convert-*`` folders older than the oldest live run."""
    root = root or cache_root()
    cutoff = time.time() - GRACE_S
    live = root / "live"
    if live.is_dir():
        for lock in live.glob("*.lock"):
            if _held(lock):
                with contextlib.suppress(OSError):
                    cutoff = min(cutoff, lock.stat().st_mtime)
            else:
                with contextlib.suppress(OSError):
                    lock.unlink(missing_ok=True)
    removed = 0
    places = [root / "frames", root / "data", root / "gguf", root / "partial", root / "trained", root]
    if runs_dir is not None and Path(runs_dir).is_dir():
        places += [d for d in Path(runs_dir).iterdir() if d.is_dir()]
    for place in places:
        if not place.is_dir():
            continue
        for tmp in place.rglob("*.tmp") if place != root else place.glob("*.tmp"):
            removed += _remove_if_older(tmp, cutoff)
    models = root / "models"
    if models.is_dir() and not _held_lock_file(models / ".lock"):
        for d in models.glob(".convert-*"):
            removed += _remove_if_older(d, cutoff)
    if removed:
        note(f"removed {removed} temporary file{'s' if removed != 1 else ''} left by killed runs")
    return removed


def _held_lock_file(path: Path) -> bool:
    """Whether someone holds the fcntl lock that model conversion takes (bench.models.loading._lock)."""
    import fcntl

    if not path.exists():
        return False
    try:
        with open(path, "a+") as f:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return True
            fcntl.flock(f, fcntl.LOCK_UN)
    except OSError:
        return True
    return False


def _writer_pid(path: Path) -> int | None:
    """The pid that bench puts in its temporary names (``.name.<pid>.xxx.tmp``, ``.convert-<pid>-xxx``)."""
    m = re.match(r"^\.(?:convert-(\d+)-|.+\.(\d+)\.[^.]+\.tmp$)", path.name)
    return int(m.group(1) or m.group(2)) if m else None


def _dead(pid: int | None) -> bool:
    if pid is None or pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False  # it exists (another user's, say)
    return False


def _remove_if_older(path: Path, cutoff: float) -> int:
    """Remove `path` when its writer is gone: the process named in it is dead or, for a name without a pid,
    it predates every live run."""
    try:
        st = path.lstat()
        pid = _writer_pid(path)
        if (not _dead(pid)) if pid is not None else st.st_mtime >= cutoff:
            return 0
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()
        return 1
    except OSError:
        return 0


# ── the cache's inventory ──────────────────────────────────────────────────────────────────────────────────

@dataclass(frozen=True)
class Entry:
    key: str
    bytes: int
    kind: str  # "frame" (a cell's frame) or "memo" (a probe's cached sub-result)
    probe: str
    written: str


def entries(root: Path | None = None) -> list[Entry]:
    root = root or cache_root()
    out = []
    for meta in sorted((root / "frames").glob("*/*.json")):
        try:
            info = json.loads(meta.read_text())
            parts = info.get("parts", {}) if isinstance(info, dict) else {}
        except (OSError, ValueError):
            info, parts = {}, {}
        data = meta.with_suffix(".parquet")
        size = sum(p.stat().st_size for p in (meta, data) if p.exists())
        kind = "memo" if isinstance(parts, dict) and "memo" in parts else "frame"
        probe = str(parts.get("probe", "")) if isinstance(parts, dict) else ""
        out.append(Entry(meta.stem, size, kind, probe, str(info.get("written", "")) if isinstance(info, dict) else ""))
    return out


def folder_bytes(path: Path) -> int:
    total = 0
    for dirpath, _, files in os.walk(path):
        for f in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(dirpath, f)).st_size
    return total


def referenced_keys(runs_dir: Path) -> set[str]:
    """Cache keys that some run record under `runs_dir` names."""
    keys: set[str] = set()
    for rec_path in Path(runs_dir).glob("*/record.json") if Path(runs_dir).is_dir() else []:
        try:
            record = json.loads(rec_path.read_text(encoding="utf-8"))
            keys.update(c["cache_key"] for c in record.get("cells", []) if isinstance(c, dict)
                        and isinstance(c.get("cache_key"), str))
        except (OSError, ValueError, AttributeError, TypeError):
            continue
    return keys


def prune(runs_dir: Path, root: Path | None = None) -> tuple[int, int]:
    """Delete the cache entries no record under `runs_dir` references; (entries removed, bytes freed)."""
    root = root or cache_root()
    keep = referenced_keys(runs_dir)
    removed = freed = 0
    for e in entries(root):
        if e.key in keep:
            continue
        d = root / "frames" / e.key[:2]
        for p in (d / f"{e.key}.json", d / f"{e.key}.parquet"):  # marker first: a half-pruned entry reads as absent
            p.unlink(missing_ok=True)
        removed += 1
        freed += e.bytes
    return removed, freed


def saved_states(root: Path | None = None) -> list[Path]:
    """The saved states of training runs that have not finished (a killed run's, which the next run of the same
    command resumes: :mod:`bench.ground.resume`): a probe's under ``partial/``, a fine-tune's beside its entry in
    ``trained/``."""
    root = root or cache_root()
    return sorted([*(root / "partial").glob("*/*.pt"), *(root / "trained").glob("*/*.partial/state.pt")])


def summary(root: Path | None = None) -> dict[str, Any]:
    root = root or cache_root()
    es = entries(root)
    return {
        "root": str(root),
        "frames": sum(e.kind == "frame" for e in es),
        "memos": sum(e.kind == "memo" for e in es),
        "entries_bytes": sum(e.bytes for e in es),
        "models_bytes": folder_bytes(root / "models") if (root / "models").is_dir() else 0,
        "saved_states": len(states := saved_states(root)),
        "saved_state_paths": states,
        "saved_states_bytes": sum(p.stat().st_size for p in states),
        "total_bytes": sum(folder_bytes(c) if c.is_dir() else c.lstat().st_size for c in root.iterdir())
        if root.is_dir() else 0,  # each top folder walked on its own: a linked models folder counts too
    }

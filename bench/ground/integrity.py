"""Tamper-evident run records: the sha256 of every frame file and of the record's own canonical content.

The run writer stores, per cell with a frame, ``frame_sha256`` (the hash of the parquet file's bytes as written)
and, at the top of the record, ``record_sha256``: the hash of the record's canonical JSON (keys sorted, no
whitespace, UTF-8) with that one key left out.  It is recomputed at every rewrite, so a record is sealed at every
moment of its run.  :func:`check` recomputes both and names the first file that no longer matches.

What this guards against is an edit made after the run (a hand-changed outcome, a replaced frame, a half-copied
folder), not a forger: anyone who edits a file can also recompute its hash.  Records written before the seal
existed carry neither key and are read as they are (:func:`sealed` tells them apart); a record that carries frame
hashes but lost its own is treated as edited.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from bench.ground.errors import StoreError

RECORD_KEY = "record_sha256"
FRAME_KEY = "frame_sha256"


class TamperedError(StoreError):
    """A record or frame whose content no longer matches the hash written with the run (exit 2)."""


def canonical(record: dict[str, Any]) -> bytes:
    """The record as canonical JSON without its own hash.  Round-tripped through JSON first, so that the bytes
    are the same whether they are computed from the writer's dict or from the file read back."""
    body = {k: v for k, v in record.items() if k != RECORD_KEY}
    plain = json.loads(json.dumps(body, ensure_ascii=False, default=str))
    return json.dumps(plain, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def record_digest(record: dict[str, Any]) -> str:
    return hashlib.sha256(canonical(record)).hexdigest()


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def file_digest(path: Path, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def seal(record: dict[str, Any]) -> dict[str, Any]:
    """Set the record's own hash (in place) and return the record."""
    record.pop(RECORD_KEY, None)
    record[RECORD_KEY] = record_digest(record)
    return record


def sealed(record: dict[str, Any]) -> bool:
    """Whether the record was written with hashes (its own, or any frame's)."""
    return RECORD_KEY in record or any(isinstance(c, dict) and FRAME_KEY in c for c in record.get("cells", []))


def check(record: dict[str, Any], run_dir: Path) -> None:
    """Raise :class:`TamperedError`, naming the file, when the record or one of its frames was edited after the
    run; return quietly for an intact record and for one written before records were sealed."""
    run_dir = Path(run_dir)
    path = run_dir / "record.json"
    if not sealed(record):
        return
    stored = record.get(RECORD_KEY)
    if not isinstance(stored, str):
        raise TamperedError(f"run record {path} was edited after the run: its frames carry sha256 hashes but "
                            f"its own '{RECORD_KEY}' is missing")
    now = record_digest(record)
    if now != stored:
        raise TamperedError(f"run record {path} was edited after the run: its content hashes to {now[:12]}…, "
                            f"the run wrote {stored[:12]}…")
    for i, cell in enumerate(record["cells"]):
        rel = cell.get("frame")
        if not rel:
            continue
        want = cell.get(FRAME_KEY)
        frame = run_dir / rel
        if not isinstance(want, str):
            raise TamperedError(f"run record {path}: cell {i} ({cell['spec']['id']} × {cell['model']}) has a "
                                f"frame but no '{FRAME_KEY}'")
        if Path(rel).is_absolute() or ".." in Path(rel).parts:
            raise TamperedError(f"run record {path}: cell {i} names a frame outside its run folder: {rel}")
        try:
            got = file_digest(frame)
        except OSError as exc:
            raise TamperedError(f"frame {frame} of run {run_dir.name} cannot be read ({exc.strerror or exc})") from None
        if got != want:
            raise TamperedError(f"frame {frame} was edited after the run ({cell['spec']['id']} × {cell['model']}): "
                                f"it hashes to {got[:12]}…, the record says {want[:12]}…")

"""Text from the user's own files: ``text:PATH`` (one text per non-empty line) and ``jsonl:PATH[#field]``."""

from __future__ import annotations

import json
from pathlib import Path

from bench.ground.errors import SpecError
from bench.ground.store import sha256_file
from bench.corpora import source_def


def _path(variant: str) -> Path:
    path = Path(variant.split("#", 1)[0]).expanduser()
    if not path.is_file():
        raise SpecError(f"corpus file '{path}' does not exist", key="data.corpus")
    return path


def _hash(variant: str) -> str:
    return f"{variant}|{sha256_file(_path(variant))}"


@source_def("text", version=1, fingerprint=_hash)
def text_lines(variant: str) -> list[str]:
    return [line.strip() for line in _path(variant).read_text(encoding="utf-8").splitlines() if line.strip()]


@source_def("jsonl", version=1, fingerprint=_hash)
def jsonl(variant: str) -> list[str]:
    field = variant.split("#", 1)[1] if "#" in variant else "text"
    out = []
    for n, line in enumerate(_path(variant).read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            out.append(str(json.loads(line)[field]))
        except (ValueError, KeyError, TypeError) as exc:
            raise SpecError(f"corpus {variant}: line {n} has no '{field}' ({type(exc).__name__})",
                            key="data.corpus") from None
    return out

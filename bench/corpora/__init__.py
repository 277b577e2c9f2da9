"""Text sources for probes, named in specs as ``source:variant`` (``builtin:english``, ``text:notes.txt`` …).

Each source module registers a loader with :func:`source_def`.  A loader returns a list of strings;
:func:`fingerprint` identifies the exact text a spec will read (files are hashed), and is part of the cache key.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from bench.ground.errors import SpecError
from bench.ground.registry import Registry


@dataclass(frozen=True)
class Source:
    name: str
    version: int
    load: Callable[[str], list[str]]  # variant -> texts
    fingerprint: Callable[[str], str]  # variant -> content identity
    hashed: Callable[[str], int] = lambda variant: 0  # variant -> bytes its fingerprint reads and hashes (planning)


def _discover() -> None:
    from bench.ground.registry import import_submodules

    import_submodules(__name__)


SOURCES: Registry[Source] = Registry("corpus source", _discover)


def source_def(name: str, *, version: int, fingerprint: Callable[[str], str] | None = None,
               hashed: Callable[[str], int] | None = None):
    """Register a loader; `hashed` (for `bench plan`) says how many bytes `fingerprint` reads and hashes."""
    def wrap(fn: Callable[[str], list[str]]):
        SOURCES.add(name, Source(name, version, fn, fingerprint or (lambda variant: variant),
                                 hashed or (lambda variant: 0)))
        return fn

    return wrap


def split(corpus: str) -> tuple[Source, str]:
    name, _, variant = corpus.partition(":")
    source = SOURCES.get(name, on_error=lambda msg: SpecError(f"{msg} in '{corpus}'", key="data.corpus"))
    return source, variant


def load(corpus: str) -> list[str]:
    source, variant = split(corpus)
    return source.load(variant)


def fingerprint_bytes(corpus: str) -> int:
    """Bytes that :func:`fingerprint` reads and hashes each time it is called (0 where it hashes no file)."""
    source, variant = split(corpus)
    return source.hashed(variant)


def fingerprint(corpus: str) -> str:
    source, variant = split(corpus)
    return f"{source.name}@{source.version}:{source.fingerprint(variant)}"

"""Text sources for probes, named in specs as ``source:variant`` (``builtin:english``, ``text:notes.txt`` …).

Each source module registers a loader with :func:`source_def`.  A loader returns a list of strings;
:func:`fingerprint` identifies the exact text a spec will read (files are hashed), and is part of the cache key.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from bench.errors import SpecError
from bench.spec import did_you_mean


@dataclass(frozen=True)
class Source:
    name: str
    version: int
    load: Callable[[str], list[str]]  # variant -> texts
    fingerprint: Callable[[str], str]  # variant -> content identity


_SOURCES: dict[str, Source] = {}


def source_def(name: str, *, version: int, fingerprint: Callable[[str], str] | None = None):
    def wrap(fn: Callable[[str], list[str]]):
        if name in _SOURCES:
            raise ValueError(f"corpus source '{name}' is registered twice")
        _SOURCES[name] = Source(name, version, fn, fingerprint or (lambda variant: variant))
        return fn

    return wrap


def _all() -> dict[str, Source]:
    from bench.registry import import_submodules

    import_submodules(__name__)
    return _SOURCES


def split(corpus: str) -> tuple[Source, str]:
    name, _, variant = corpus.partition(":")
    sources = _all()
    if name not in sources:
        raise SpecError(f"unknown corpus source '{name}' in '{corpus}'" + did_you_mean(name, sources)
                        + f" (known: {', '.join(sorted(sources))})", key="data.corpus")
    return sources[name], variant


def load(corpus: str) -> list[str]:
    source, variant = split(corpus)
    return source.load(variant)


def fingerprint(corpus: str) -> str:
    source, variant = split(corpus)
    return f"{source.name}@{source.version}:{source.fingerprint(variant)}"

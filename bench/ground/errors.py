"""Errors that ``bench`` raises on purpose, each with the exit code the CLI returns for it.

The hierarchy::

    BenchError                 exit 2 unless a subclass says otherwise; message is one line for the user
    ├── SpecError              a spec file is malformed, has an unknown key, a wrong type, an unknown
    │                          probe or rule, a duplicate id …  (names file, key and line where known)
    ├── UsageError             a bad command line: unknown profile, unwritable runs dir, missing run …
    ├── ModelError             a model name that resolves to nothing, or weights that cannot be loaded
    │   └── ArchError          a loaded model whose layout ``bench.models.arch`` does not understand
    ├── StoreError             a run record that cannot be read (the cache never raises: it recomputes)
    └── MeasurementError       exit 3: a probe failed; kept as an ERROR verdict for its cell, and the
                               run exits 3 only when every cell failed

Anything else that escapes is a bug and is shown with its traceback.
"""

from __future__ import annotations

import difflib
from typing import Iterable


class BenchError(Exception):
    """Base class: a one-line message meant for the user, and an exit code."""

    exit_code = 2

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class SpecError(BenchError):
    """A spec that cannot be used. Carries the file, key and line when they are known."""

    def __init__(self, message: str, *, path: str | None = None, key: str | None = None, line: int | None = None):
        where = ""
        if path:
            where = str(path)
            if line:
                where += f":{line}"
            where += ": "
        if key:
            where += f"[{key}] "
        super().__init__(where + message)
        self.path, self.key, self.line = path, key, line


class UsageError(BenchError):
    """A command line that cannot be carried out."""


class ModelError(BenchError):
    """A model that cannot be found or loaded."""


class ArchError(ModelError):
    """A model whose module layout is not one that bench knows how to read."""


class StoreError(BenchError):
    """A run record or frame on disk that cannot be read."""


class MeasurementError(BenchError):
    """A probe failed while measuring."""

    exit_code = 3


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """``"; did you mean 'x'?"`` for the nearest of `choices`, or "" when none is near."""
    near = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f"; did you mean '{near[0]}'?" if near else ""

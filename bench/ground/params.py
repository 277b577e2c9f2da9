"""Typed parameter tables: a probe's parameters as one frozen dataclass, built from a spec's flat keys.

A probe either takes keyword-only parameters (``fn(ctx, *, n: int = 3)``, fine for a handful of its own) or one
table (``fn(ctx, p: Params)``).  A table's fields are parameters; a field whose type is itself a dataclass is a
*group*: the parameters several probes share (the text sample they read, the way neurons are selected, the
decoder they train), declared once and reused.  A spec keeps setting every parameter by its own name in
[data] or [measure] — groups add no nesting to the spec format — and a group field's default instance gives
that probe's defaults for the group's parameters.  Two parameters of one table may not share a name; a field
with ``metadata={"param": False}`` is an internal setting that specs cannot set.

    @dataclass(frozen=True)
    class Sample:
        corpus: str = "brown:all"
        n_texts: int = 96

    @dataclass(frozen=True)
    class LensParams:
        sample: Sample = Sample(n_texts=24)
        micro_batch: int = 8

    build(LensParams, {"n_texts": 6})  →  LensParams(sample=Sample(corpus="brown:all", n_texts=6), micro_batch=8)
"""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass
import types
from typing import Annotated, Any, Literal, Mapping

MISSING = dataclasses.MISSING


@dataclass(frozen=True)
class Param:
    name: str
    annotation: Any
    required: bool
    default: Any = None


def is_table(tp: Any) -> bool:
    """True for a dataclass type (a parameter table or group)."""
    return isinstance(tp, type) and dataclasses.is_dataclass(tp)


def _default(f: dataclasses.Field, owner: Any) -> Any:
    if owner is not None:
        return getattr(owner, f.name)
    if f.default is not MISSING:
        return f.default
    if f.default_factory is not MISSING:  # type: ignore[misc]
        return f.default_factory()  # type: ignore[misc]
    return MISSING


def _members(table: type, owner: Any):
    hints = typing.get_type_hints(table, include_extras=True)
    for f in dataclasses.fields(table):
        if f.init and f.metadata.get("param", True):
            yield f, hints[f.name], _default(f, owner)


def fields(table: type, owner: Any = None) -> dict[str, Param]:
    """Every parameter of `table`, groups flattened, with the defaults `owner` (a default instance) gives."""
    out: dict[str, Param] = {}
    for f, ann, default in _members(table, owner):
        if is_table(ann):
            inner = fields(ann, None if default is MISSING else default)
        else:
            inner = {f.name: Param(f.name, ann, default is MISSING, None if default is MISSING else default)}
        for name, p in inner.items():
            if name in out:
                raise TypeError(f"{table.__qualname__}: two parameters are named '{name}'")
            out[name] = p
    return out


def build(table: type, values: Mapping[str, Any], owner: Any = None) -> Any:
    """An instance of `table` from flat `values` (a spec's [data] and [measure] keys); unset ones keep their
    defaults.  Lists become tuples where the field is a tuple, so a table stays hashable."""
    kwargs = {}
    for f, ann, default in _members(table, owner):
        if is_table(ann):
            kwargs[f.name] = build(ann, values, None if default is MISSING else default)
        elif f.name in values:
            kwargs[f.name] = _coerce(values[f.name], ann)
        elif default is not MISSING:
            kwargs[f.name] = default
        else:
            raise TypeError(f"{table.__qualname__} needs parameter '{f.name}'")
    return table(**kwargs)


def _coerce(value: Any, ann: Any) -> Any:
    origin = typing.get_origin(ann)
    if origin is Annotated:
        return _coerce(value, typing.get_args(ann)[0])
    if (origin is tuple or ann is tuple) and isinstance(value, list):
        return tuple(value)
    return value


def flat(table_value: Any) -> dict[str, Any]:
    """The flat parameter values of a built table (the inverse of :func:`build`)."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(table_value):
        v = getattr(table_value, f.name)
        out.update(flat(v) if is_table(type(v)) else {f.name: v})
    return out


# ── value checking against annotations ──────────────────────────────────────────────────────────────────────

def type_problem(value: Any, annotation: Any) -> str | None:
    """None when `value` (as TOML gives it) fits `annotation`; else a short description of the mismatch."""
    ok = _fits(value, annotation)
    return None if ok else f"must be {_describe(annotation)}, got {type(value).__name__} ({value!r:.40})"


def _fits(value: Any, ann: Any) -> bool:
    if ann is Any:
        return True
    origin = typing.get_origin(ann)
    if origin is Annotated:
        return _fits(value, typing.get_args(ann)[0])
    args = typing.get_args(ann)
    if origin in (typing.Union, types.UnionType):
        return any(_fits(value, a) for a in args)
    if origin is Literal:
        return value in args
    if ann is type(None):
        return value is None
    if ann is bool:
        return isinstance(value, bool)
    if ann is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if ann is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if ann is str:
        return isinstance(value, str)
    if origin in (list, tuple) or ann in (list, tuple):
        if not isinstance(value, (list, tuple)):
            return False
        inner = args[0] if args else Any
        return all(_fits(v, inner) for v in value)
    if origin in (dict, Mapping) or ann in (dict, Mapping) or origin is typing.Mapping:
        if not isinstance(value, Mapping):
            return False
        inner = args[1] if len(args) == 2 else Any
        return all(isinstance(k, str) and _fits(v, inner) for k, v in value.items())
    return isinstance(value, ann) if isinstance(ann, type) else True


def _describe(ann: Any) -> str:
    origin = typing.get_origin(ann)
    args = typing.get_args(ann)
    if origin is Annotated:
        return _describe(args[0])
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_describe(a) for a in args)
    if origin is Literal:
        return "one of " + ", ".join(repr(a) for a in args)
    if ann is type(None):
        return "absent"
    if origin in (list, tuple):
        return f"a list of {_describe(args[0])}" if args else "a list"
    if origin in (dict, Mapping) or origin is typing.Mapping:
        return "a table"
    return getattr(ann, "__name__", str(ann))

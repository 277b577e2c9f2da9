"""Registries of probes (measurements) and verdict rules, keyed by the names specs use.

A probe is a function ``fn(ctx, *, param: type = default, …) -> DataFrame`` registered with
:func:`probe_def`; a rule is ``fn(frame, *, param: type = default, …) -> Verdict`` registered with
:func:`rule_def`.  Their keyword-only parameters, with type annotations, are the parameters a spec may set:
the registry checks a spec's values against them before anything runs.  Registering a name twice is an error;
an unknown name gets a "did you mean".
"""

from __future__ import annotations

import functools
import importlib
import inspect
import pkgutil
import types
import typing
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Literal, Mapping

from bench.spec import did_you_mean

_PROBES: dict[str, "ProbeInfo"] = {}
_RULES: dict[str, "RuleInfo"] = {}


@dataclass(frozen=True)
class Param:
    name: str
    annotation: Any
    required: bool
    default: Any = None


@dataclass(frozen=True)
class _Callable:
    name: str
    fn: Callable
    params: Mapping[str, Param]

    @property
    def doc(self) -> str:
        return inspect.cleandoc(self.fn.__doc__ or "").split("\n\n")[0]

    def check(self, values: Mapping[str, Any]) -> list[tuple[str, Any, str]]:
        """Problems with `values` as (name, value, message); empty when they fit the signature."""
        problems = []
        for name, value in values.items():
            if name not in self.params:
                problems.append((name, value, f"unknown parameter '{name}' for '{self.name}'"
                                 + did_you_mean(name, self.params)))
                continue
            bad = type_problem(value, self.params[name].annotation)
            if bad:
                problems.append((name, value, f"'{name}' {bad}"))
        for p in self.params.values():
            if p.required and p.name not in values:
                problems.append((p.name, None, f"'{self.name}' needs parameter '{p.name}'"))
        return problems


@dataclass(frozen=True)
class ProbeInfo(_Callable):
    version: int = 1
    schema: Any = None  # a pandera DataFrameModel
    metrics: tuple[str, ...] = ()  # metric names the probe's frame may hold
    uses_model: bool = True


@dataclass(frozen=True)
class RuleInfo(_Callable):
    nested: str | None = None  # name of a parameter that holds a list of sub-rule tables ("all")

    def check_all(self, values: Mapping[str, Any], spec) -> None:
        """Raise SpecError for the first problem, recursing into nested sub-rules."""
        from bench.errors import SpecError

        _check_rule(self, values, spec, "verdict", SpecError)


def _check_rule(info: "RuleInfo", values: Mapping[str, Any], spec, where: str, SpecError) -> None:
    for name, _, problem in info.check(values):
        raise SpecError(problem, path=spec.path, key=f"{where}.{name}")
    metrics = probe(spec.probe).metrics
    for key, value in _walk(values):
        if key == "metric" and isinstance(value, str) and metrics and value not in metrics:
            raise SpecError(f"probe '{spec.probe}' has no metric '{value}'" + did_you_mean(value, metrics)
                            + f" (it has: {', '.join(metrics)})", path=spec.path, key=f"{where}.metric")
    if info.nested:
        for i, sub in enumerate(values.get(info.nested, [])):
            sub = dict(sub)
            sub_where = f"{where}.{info.nested}[{i}]"
            if "rule" not in sub:
                raise SpecError("missing required key 'rule'", path=spec.path, key=f"{sub_where}.rule")
            name = sub.pop("rule")
            sub_info = rule(name, on_error=lambda m: SpecError(m, path=spec.path, key=f"{sub_where}.rule"))
            _check_rule(sub_info, sub, spec, sub_where, SpecError)


def _walk(value: Any) -> Iterator[tuple[str, Any]]:
    if isinstance(value, Mapping):
        for k, v in value.items():
            if k == "of":
                continue  # sub-rules are checked on their own
            yield k, v
            yield from _walk(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _walk(v)


def _params(fn: Callable, skip_first: bool = True) -> dict[str, Param]:
    hints = typing.get_type_hints(fn)
    out = {}
    for p in inspect.signature(fn).parameters.values():
        if p.kind is not inspect.Parameter.KEYWORD_ONLY:
            continue
        if p.name not in hints:
            raise TypeError(f"{fn.__qualname__}: parameter '{p.name}' needs a type annotation")
        required = p.default is inspect.Parameter.empty
        out[p.name] = Param(p.name, hints[p.name], required, None if required else p.default)
    return out


def probe_def(name: str, *, version: int, schema: Any, metrics: tuple[str, ...] = (), uses_model: bool = True):
    """Register a probe under `name`.  Bump `version` whenever its output for the same input changes."""

    def wrap(fn: Callable) -> Callable:
        if name in _PROBES:
            raise ValueError(f"probe '{name}' is registered twice")
        _PROBES[name] = ProbeInfo(name=name, fn=fn, params=types.MappingProxyType(_params(fn)), version=version,
                                  schema=schema, metrics=tuple(metrics), uses_model=uses_model)
        return fn

    return wrap


def rule_def(name: str, *, nested: str | None = None):
    """Register a verdict rule under `name`."""

    def wrap(fn: Callable) -> Callable:
        if name in _RULES:
            raise ValueError(f"rule '{name}' is registered twice")
        _RULES[name] = RuleInfo(name=name, fn=fn, params=types.MappingProxyType(_params(fn)), nested=nested)
        return fn

    return wrap


@functools.cache
def import_submodules(package: str) -> None:
    """Import every module of `package` once, so that the registering decorators in them have run."""
    pkg = importlib.import_module(package)
    for mod in pkgutil.iter_modules(pkg.__path__):
        importlib.import_module(f"{package}.{mod.name}")


def _load_all() -> None:
    """Import every probe module and the rules."""
    import_submodules("bench.probes")
    import_submodules("bench.verdicts")


def probe(name: str, on_error: Callable[[str], Exception] | None = None) -> ProbeInfo:
    _load_all()
    if name not in _PROBES:
        msg = f"unknown probe '{name}'" + did_you_mean(name, _PROBES) + f" (known: {', '.join(sorted(_PROBES))})"
        raise (on_error or KeyError)(msg)
    return _PROBES[name]


def rule(name: str, on_error: Callable[[str], Exception] | None = None) -> RuleInfo:
    _load_all()
    if name not in _RULES:
        msg = f"unknown rule '{name}'" + did_you_mean(name, _RULES) + f" (known: {', '.join(sorted(_RULES))})"
        raise (on_error or KeyError)(msg)
    return _RULES[name]


def probes() -> dict[str, ProbeInfo]:
    _load_all()
    return dict(_PROBES)


def rules() -> dict[str, RuleInfo]:
    _load_all()
    return dict(_RULES)


# ── value checking against annotations ──────────────────────────────────────────────────────────────────────

def type_problem(value: Any, annotation: Any) -> str | None:
    """None when `value` (as TOML gives it) fits `annotation`; else a short description of the mismatch."""
    ok = _fits(value, annotation)
    return None if ok else f"must be {_describe(annotation)}, got {type(value).__name__} ({value!r:.40})"


def _fits(value: Any, ann: Any) -> bool:
    if ann is Any:
        return True
    origin = typing.get_origin(ann)
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


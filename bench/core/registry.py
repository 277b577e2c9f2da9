"""Registries of probes (measurements) and verdict rules, keyed by the names specs use.

A probe is a function ``fn(ctx, *, param: type = default, …) -> DataFrame`` or ``fn(ctx, p: Table)`` (a typed
parameter table, see :mod:`bench.core.params`) registered with :func:`probe_def`; a rule is
``fn(frame, *, param: type = default, …) -> Verdict`` registered with :func:`rule_def`.  Their parameters, with
type annotations, are the parameters a spec may set: the registry checks a spec's values against them before
anything runs, and :meth:`ProbeInfo.call` hands a probe its values in the form it declares.  Registering a name twice is an error;
an unknown name gets a "did you mean".
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import inspect
import math
import pkgutil
import types
import typing
from dataclasses import dataclass
from typing import Annotated, Any, Callable, Generic, Iterator, Mapping, TypeVar

from bench.core import params as tables
from bench.core.errors import did_you_mean
from bench.core.params import Param, type_problem

T = TypeVar("T")


class Registry(Generic[T]):
    """Named things of one kind (probes, rules, charts, corpus sources), filled by decorators at import time.

    `discover` imports the modules whose decorators fill it; it runs before the first lookup.  Registering a
    name twice is an error; an unknown name gets a "did you mean" and the list of known names.
    """

    def __init__(self, kind: str, discover: Callable[[], None]):
        self.kind = kind
        self._discover = discover
        self._items: dict[str, T] = {}

    def add(self, name: str, item: T) -> T:
        if name in self._items:
            raise ValueError(f"{self.kind} '{name}' is registered twice")
        self._items[name] = item
        return item

    def get(self, name: str, on_error: Callable[[str], Exception] | None = None) -> T:
        items = self.all()
        if not isinstance(name, str):
            msg = f"a {self.kind} name must be a string, got {type(name).__name__} ({name!r:.40})"
            raise (on_error or KeyError)(msg)
        if name not in items:
            msg = (f"unknown {self.kind} '{name}'" + did_you_mean(name, items)
                   + f" (known: {', '.join(sorted(items))})")
            raise (on_error or KeyError)(msg)
        return items[name]

    def find(self, name: str) -> T | None:
        return self.all().get(name)

    def all(self) -> dict[str, T]:
        self._discover()
        return dict(self._items)


@functools.cache
def import_submodules(package: str, skip: tuple[str, ...] = ()) -> None:
    """Import every module of `package` once (but those named in `skip`), so its registering decorators run."""
    pkg = importlib.import_module(package)
    for mod in pkgutil.iter_modules(pkg.__path__):
        if mod.name not in skip:
            importlib.import_module(f"{package}.{mod.name}")


def families() -> tuple[str, ...]:
    """The claim families: one package each under ``bench.families``."""
    import bench.families as fam

    return tuple(sorted(m.name for m in pkgutil.iter_modules(fam.__path__) if m.ispkg))


@functools.cache
def import_families(kind: str) -> None:
    """Import, in every family, the modules that register `kind`: its charts for ``"charts"``, every other
    module for ``"measure"`` (probes, kernels and family rules).  The core never names a family."""
    for family in families():
        package = f"bench.families.{family}"
        if kind == "charts":
            if importlib.util.find_spec(f"{package}.charts") is not None:
                importlib.import_module(f"{package}.charts")
        else:
            import_submodules(package, skip=("charts",))


def _discover_measure() -> None:
    import_submodules("bench.stats")
    import_families("measure")


PROBES: Registry["ProbeInfo"] = Registry("probe", _discover_measure)
RULES: Registry["RuleInfo"] = Registry("rule", _discover_measure)


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
            bad = type_problem(value, self.params[name].annotation) or range_problem(name, value,
                                                                                    self.params[name].annotation)
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
    table: Any = None  # the parameter table's dataclass, for a probe declared as ``fn(ctx, p: Table)``
    table_default: Any = None  # the instance ``p`` defaults to, whose values are that probe's defaults
    companions: Callable[[Mapping[str, Any], str], list[str]] | None = None  # other models the probe reads

    def call(self, ctx, **values):
        """Run the probe on `values` (flat spec parameters): as one built table, or as keyword arguments."""
        if self.table is None:
            return self.fn(ctx, **values)
        return self.fn(ctx, tables.build(self.table, values, self.table_default))


@dataclass(frozen=True)
class RuleInfo(_Callable):
    nested: str | None = None  # name of a parameter that holds a list of sub-rule tables ("all")

    def check_all(self, values: Mapping[str, Any], spec) -> None:
        """Raise SpecError for the first problem, recursing into nested sub-rules."""
        from bench.core.errors import SpecError

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
            if not isinstance(name, str):
                raise SpecError(f"must be a rule name (a string), got {type(name).__name__} ({name!r:.40})",
                                path=spec.path, key=f"{sub_where}.rule")
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


def _table(fn: Callable) -> tuple[Any, Any]:
    """The parameter table of ``fn(ctx, p: Table [= default])`` and its default instance (or None); (None, None)
    for a function with keyword-only parameters."""
    positional = [p for p in list(inspect.signature(fn).parameters.values())[1:]
                  if p.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    if not positional:
        return None, None
    ann = typing.get_type_hints(fn).get(positional[0].name)
    if len(positional) != 1 or not tables.is_table(ann):
        raise TypeError(f"{fn.__qualname__}: take keyword-only parameters or one parameter table (a dataclass)")
    default = positional[0].default
    return ann, (None if default is inspect.Parameter.empty else default)


def _params(fn: Callable) -> dict[str, Param]:
    table, default = _table(fn)
    if table is not None:
        return tables.fields(table, default)
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


def probe_def(name: str, *, version: int, schema: Any, metrics: tuple[str, ...] = (), uses_model: bool = True,
              companions: Callable[[Mapping[str, Any], str], list[str]] | None = None):
    """Register a probe under `name`.  Bump `version` whenever its output for the same input changes.

    `companions(params, model)` names the other models a cell of the probe reads besides its own (e.g. the
    instruction-tuned variant of a base model): the run loads them for the probe (``ctx.companion(name)``) and
    their fingerprints enter the cell's cache key, so a changed companion is never served from a stale entry."""

    def wrap(fn: Callable) -> Callable:
        table, default = _table(fn)
        PROBES.add(name, ProbeInfo(name=name, fn=fn, params=types.MappingProxyType(_params(fn)), version=version,
                                   schema=schema, metrics=tuple(metrics), uses_model=uses_model, table=table,
                                   table_default=default, companions=companions))
        return fn

    return wrap


# Keys every rule takes besides its own: what a REFUTED needs (bench.stats.sensitivity, applied around the rule
# by bench.stats.evaluate): declared preconditions, and the claim's smallest effect of interest with its source.
COMMON_RULE_PARAMS = {
    "requires": Param("requires", list[dict[str, Any]], False, []),
    "smallest_effect": Param("smallest_effect", float | None, False, None),
    "smallest_effect_source": Param("smallest_effect_source", str, False, ""),
}


def rule_def(name: str, *, nested: str | None = None):
    """Register a verdict rule under `name`; it also takes :data:`COMMON_RULE_PARAMS` (its own declaration of
    one of them wins)."""

    def wrap(fn: Callable) -> Callable:
        params = {**COMMON_RULE_PARAMS, **_params(fn)}
        RULES.add(name, RuleInfo(name=name, fn=fn, params=types.MappingProxyType(params), nested=nested))
        return fn

    return wrap


def probe(name: str, on_error: Callable[[str], Exception] | None = None) -> ProbeInfo:
    return PROBES.get(name, on_error)


def rule(name: str, on_error: Callable[[str], Exception] | None = None) -> RuleInfo:
    return RULES.get(name, on_error)


def probes() -> dict[str, ProbeInfo]:
    return PROBES.all()


def rules() -> dict[str, RuleInfo]:
    return RULES.all()


# ── ranges: from `Annotated[…, Range(…)]`, else from the parameter's name ────────────────────────────────────

@dataclass(frozen=True)
class Range:
    """Allowed interval of a number; None leaves that side unbounded; `open_*` excludes the end point."""

    low: float | None = None
    high: float | None = None
    open_low: bool = False
    open_high: bool = False

    def problem(self, x: float) -> str | None:
        lo_bad = self.low is not None and (x <= self.low if self.open_low else x < self.low)
        hi_bad = self.high is not None and (x >= self.high if self.open_high else x > self.high)
        return f"must be in {self}, got {x!r:.40}" if lo_bad or hi_bad else None

    def __str__(self) -> str:
        lo = "-inf" if self.low is None else f"{self.low:g}"
        hi = "inf" if self.high is None else f"{self.high:g}"
        return f"{'(' if self.open_low or self.low is None else '['}{lo}, {hi}{')' if self.open_high or self.high is None else ']'}"


MAX_COUNT = 10**9  # no count a probe or rule takes comes near this; beyond it a run would never end
PROBABILITY = Range(0, 1, open_low=True, open_high=True)
FRACTION = Range(0, 1)
COUNT = Range(1, MAX_COUNT)
NON_NEGATIVE = Range(0, MAX_COUNT)
POSITIVE = Range(0, None, open_low=True)

Probability = Annotated[float, PROBABILITY]  # a level, a quantile, a rate: strictly between 0 and 1
Fraction = Annotated[float, FRACTION]  # a share: 0 to 1 inclusive
Count = Annotated[int, COUNT]  # a number of things: at least 1
Positive = Annotated[float, POSITIVE]  # a step size or tolerance

# Parameters whose plain `int`/`float` annotation carries no Range get one from their name.  A name listed here
# means the same thing in every probe and rule that takes it (checked over the registry by the tests).
RANGES: Mapping[str, Range] = types.MappingProxyType({
    **{n: PROBABILITY for n in ("alpha", "confidence", "quantile", "bar_quantile", "lap_threshold", "top_rate",
                                "plnd_top", "edge_fraction")},
    **{n: FRACTION for n in ("min_share",)},
    "discard": Range(0, 1, open_high=True),
    **{n: COUNT for n in ("batch", "micro_batch", "micro_tokens", "seq_len", "max_tokens", "max_new_tokens",
                          "doc_tokens", "eval_texts", "id_points", "pv_tokens", "selection_tokens", "steps",
                          "texts_per_step", "positions_per_text", "control_texts", "max_prefix", "prompt_words",
                          "min_n")},
    **{n: NON_NEGATIVE for n in ("skip_first", "skip_last", "hidden", "decoder_layers")},
    **{n: POSITIVE for n in ("lr", "toy_lr", "eps")},
    "lr_decoder": Range(0, None),
    "min_abs": Range(0, None),
})
INT_BOUND = Range(-(2**63), 2**63 - 1)  # TOML integers are 64-bit


def args_of(ann: Any) -> tuple:
    return typing.get_args(ann)


def range_of(name: str, ann: Any) -> Range | None:
    """The Range a parameter's values must lie in, or None when only finiteness applies."""
    if typing.get_origin(ann) is Annotated:
        found = [a for a in args_of(ann)[1:] if isinstance(a, Range)]
        if found:
            return found[0]
    if name in RANGES:
        return RANGES[name]
    if (name.startswith(("n_", "toy_"))) and _base(ann) is int:
        return COUNT
    return None


def _base(ann: Any) -> Any:
    return args_of(ann)[0] if typing.get_origin(ann) is Annotated else ann


def range_problem(name: str, value: Any, ann: Any) -> str | None:
    """None when every number in `value` (a number or a list of them) is finite and in its parameter's range."""
    rng = range_of(name, ann)
    for x in (value if isinstance(value, (list, tuple)) else [value]):
        if isinstance(x, bool) or not isinstance(x, (int, float)):
            continue
        if isinstance(x, float) and not math.isfinite(x):
            return f"must be a finite number, got {x!r}"
        bad = (rng.problem(x) if rng else None) or (INT_BOUND.problem(x) if isinstance(x, int) else None)
        if bad:
            return bad
    return None

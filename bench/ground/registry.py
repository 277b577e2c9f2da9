"""Registries of probes (measurements) and verdict rules, keyed by the names specs use.

A probe is a function ``fn(ctx, *, param: type = default, …) -> DataFrame`` or ``fn(ctx, p: Table)`` (a typed
parameter table, see :mod:`bench.ground.params`) registered with :func:`probe_def`; a rule is
``fn(frame, *, param: type = default, …) -> Verdict`` registered with :func:`rule_def`.  Their parameters, with
type annotations, are the parameters a spec may set: the registry checks a spec's values against them before
anything runs, and :meth:`ProbeInfo.call` hands a probe its values in the form it declares.  Registering a name twice is an error;
an unknown name gets a "did you mean".
"""

from __future__ import annotations

import functools
import importlib
import importlib.metadata
import importlib.util
import inspect
import pkgutil
import types
import typing
from dataclasses import dataclass, field
from typing import Annotated, Any, Callable, Generic, Iterator, Mapping, TypeVar

from bench.ground import params as tables
from bench.ground.errors import did_you_mean
from bench.ground.params import Param, type_problem
from bench.ground.ranges import (  # noqa: F401 - re-exported: the registry is where parameters are checked
    COUNT, FRACTION, INT_BOUND, MAX_COUNT, NON_NEGATIVE, POSITIVE, PROBABILITY, RANGES, Count, Fraction, Positive,
    Probability, Range, args_of, range_of, range_problem,
)

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


FAMILY_GROUP = "bench.families"  # the entry-point group an installed package registers its families under
BUILTIN_FAMILIES = "bench.families"  # bench's own families: one subpackage each, read as entry points
GENERIC_RULES = "bench.stats"  # the package whose modules register the generic decision rules


def family_packages() -> dict[str, str]:
    """Every claim family, name → its importable package: bench's own (the subpackages of
    ``bench.families``) and those of installed packages that declare an entry point in the group
    ``bench.families`` (``name = "package"``).  Both kinds are loaded the same way, by package name: the ground
    imports no family, and no family is named here.  Two families of one name are an error."""
    out: dict[str, str] = {}
    for mod in pkgutil.iter_modules(importlib.import_module(BUILTIN_FAMILIES).__path__):
        if mod.ispkg:
            out[mod.name] = f"{BUILTIN_FAMILIES}.{mod.name}"
    for ep in importlib.metadata.entry_points(group=FAMILY_GROUP):
        if out.get(ep.name, ep.module) != ep.module:
            raise ValueError(f"two families are named '{ep.name}': {out[ep.name]} and {ep.module}")
        out[ep.name] = ep.module
    return dict(sorted(out.items()))


def families() -> tuple[str, ...]:
    """The names of the claim families (see :func:`family_packages`)."""
    return tuple(family_packages())


@functools.cache
def import_families(kind: str) -> None:
    """Import, in every family, the modules that register `kind`: its charts for ``"charts"``, every other
    module for ``"measure"`` (probes, kernels and family rules)."""
    for package in family_packages().values():
        if kind == "charts":
            if importlib.util.find_spec(f"{package}.charts") is not None:
                importlib.import_module(f"{package}.charts")
        else:
            import_submodules(package, skip=("charts",))


def _discover_measure() -> None:
    import_submodules(GENERIC_RULES)
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
    tables: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # table parameters → their allowed keys
    band: bool = False  # min and max may be given together (a band); otherwise exactly one of them
    sentence: Callable[[Mapping[str, Any]], str] | None = None  # the rule in words, from its parameters

    def check_all(self, values: Mapping[str, Any], spec) -> None:
        """Raise SpecError for the first problem, recursing into nested sub-rules."""
        from bench.ground.errors import SpecError

        _check_rule(self, values, spec, "verdict", SpecError)

    def selectors(self) -> tuple[str, ...]:
        """Parameters whose tables select frame rows (``{metric = …, column = value}``): every parameter typed as
        a table, or a list of tables, except the sub-rules and the tables this rule declares with their keys."""
        return tuple(n for n, p in self.params.items()
                     if n != self.nested and n not in self.tables and _is_table_type(p.annotation))

    def constraint_problem(self, values: Mapping[str, Any]) -> tuple[str, str] | None:
        """(key, message) for a combination of values that fits every type yet means nothing, else None."""
        if self.nested and not values.get(self.nested):
            return self.nested, f"'{self.name}' needs at least one sub-rule in '{self.nested}'"
        optional = [n for n in ("min", "max") if n in self.params and self.params[n].default is None
                    and not self.params[n].required]
        lo, hi = values.get("min"), values.get("max")
        if len(optional) < 2:
            return None
        if lo is None and hi is None:
            return "min", f"'{self.name}' needs a bound: set 'min' or 'max'"
        if lo is not None and hi is not None:
            if not self.band:
                return "max", f"'{self.name}' takes one bound: 'min' or 'max', not both"
            if isinstance(lo, (int, float)) and isinstance(hi, (int, float)) and lo >= hi:
                return "max", f"'{self.name}': min ({lo:g}) must lie below max ({hi:g})"
        return None


def _is_table_type(ann: Any) -> bool:
    """A table (``dict[str, …]``), a list of tables, or either of them optional."""
    ann = typing.get_args(ann)[0] if typing.get_origin(ann) is Annotated else ann
    origin, args = typing.get_origin(ann), typing.get_args(ann)
    if origin in (typing.Union, types.UnionType):
        return any(_is_table_type(a) for a in args if a is not type(None))
    if origin in (list, tuple):
        return bool(args) and _is_table_type(args[0])
    return origin in (dict, Mapping) or ann in (dict, Mapping)


def frame_columns(probe_name: str) -> tuple[str, ...]:
    """The columns a probe's frames have (its schema is strict), or () when the probe declares no schema."""
    schema = probe(probe_name).schema
    if schema is None:
        return ()
    return tuple(schema.to_schema().columns)


def _check_rule(info: "RuleInfo", values: Mapping[str, Any], spec, where: str, SpecError) -> None:
    for name, _, problem in info.check(values):
        raise SpecError(problem, path=spec.path, key=f"{where}.{name}")
    bad = info.constraint_problem(values)
    if bad:
        raise SpecError(bad[1], path=spec.path, key=f"{where}.{bad[0]}")
    _check_tables(info, values, spec, where, SpecError)
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


def _check_tables(info: "RuleInfo", values: Mapping[str, Any], spec, where: str, SpecError) -> None:
    """Every key of a row selector is a column of the probe's frame; every key of a declared table is one of
    its keys.  An unknown key is a typo that would otherwise select nothing, or be ignored."""
    columns = frame_columns(spec.probe)
    run_column = values.get("training_runs")
    if columns and isinstance(run_column, str) and run_column not in columns:
        raise SpecError(f"'training_runs' names '{run_column}', which is not a column of the probe's frame"
                        + did_you_mean(run_column, columns) + f" (columns: {', '.join(columns)})",
                        path=spec.path, key=f"{where}.training_runs")
    checks = [(n, columns, "column of the probe's frame") for n in info.selectors() if columns]
    checks += [(n, keys, "key") for n, keys in info.tables.items()]
    for name, allowed, what in checks:
        value = values.get(name)
        tables_ = value if isinstance(value, (list, tuple)) else [value]
        for i, table in enumerate(tables_):
            if not isinstance(table, Mapping):
                continue
            at = f"{where}.{name}" + (f"[{i}]" if isinstance(value, (list, tuple)) else "")
            for key in table:
                if key not in allowed:
                    raise SpecError(f"unknown key '{key}' in '{name}'" + did_you_mean(key, allowed)
                                    + f" (each key must be a {what}: {', '.join(allowed)})",
                                    path=spec.path, key=f"{at}.{key}")
            rows = table.get("where") if name == "requires" else None
            if columns and isinstance(rows, Mapping):
                for col in rows:
                    if col not in columns:
                        raise SpecError(f"'where' names '{col}', which is not a column of the probe's frame"
                                        + did_you_mean(str(col), columns) + f" (columns: {', '.join(columns)})",
                                        path=spec.path, key=f"{at}.where.{col}")


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
    hints = typing.get_type_hints(fn, include_extras=True)  # Annotated ranges (Probability, Count) kept
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
    "training_runs": Param("training_runs", str | None, False, None),  # the frame column naming training runs
}
COMMON_TABLE_KEYS = {"requires": ("metric", "min", "max", "why", "where")}  # a precondition: a metric, its bounds


def rule_def(name: str, *, nested: str | None = None, table_keys: Mapping[str, tuple[str, ...]] | None = None,
             band: bool = False, sentence: Callable[[Mapping[str, Any]], str] | None = None):
    """Register a verdict rule under `name`; it also takes :data:`COMMON_RULE_PARAMS` (its own declaration of
    one of them wins).

    A parameter typed as a table (``dict[str, Any]``) or a list of tables is a row selector, whose keys must be
    columns of the probe's frame, unless it is `nested` (sub-rules) or listed in `table_keys` with its allowed keys.
    A rule with optional ``min`` and ``max`` takes exactly one of them (or both, as a band, when `band`); a nested
    rule needs a sub-rule.  `sentence(params)` says the rule in words for the report and the claim catalogue.
    """

    def wrap(fn: Callable) -> Callable:
        params = types.MappingProxyType({**COMMON_RULE_PARAMS, **_params(fn)})
        unknown = sorted(set(table_keys or {}) - set(params))
        if unknown:
            raise TypeError(f"rule '{name}': table_keys {unknown} are not parameters")
        RULES.add(name, RuleInfo(name=name, fn=fn, params=params, nested=nested,
                                 tables=types.MappingProxyType({**COMMON_TABLE_KEYS, **(table_keys or {})}),
                                 band=band, sentence=sentence))
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

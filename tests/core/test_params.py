"""Typed parameter tables: flat spec keys → nested frozen dataclasses, with per-probe group defaults."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from bench.ground import params, registry


@dataclass(frozen=True)
class Sample:
    corpus: str = "brown:all"
    n_texts: int = 96
    languages: tuple[str, ...] = ()


@dataclass(frozen=True)
class Table:
    sample: Sample = Sample(n_texts=24)
    steps: int = 10
    internal: int = field(default=7, metadata={"param": False})


def test_fields_flatten_groups_with_the_owner_defaults():
    got = {name: p.default for name, p in params.fields(Table).items()}
    assert got == {"corpus": "brown:all", "n_texts": 24, "languages": (), "steps": 10}  # 24, not Sample's 96
    assert not any(p.required for p in params.fields(Table).values())


def test_build_fills_groups_from_flat_values_and_keeps_the_rest():
    t = params.build(Table, {"n_texts": 6, "languages": ["en", "de"]})
    assert t == Table(sample=Sample(corpus="brown:all", n_texts=6, languages=("en", "de")), steps=10)
    assert isinstance(t.sample.languages, tuple) and hash(t)  # lists become tuples: the table stays hashable
    assert params.flat(t) == {"corpus": "brown:all", "n_texts": 6, "languages": ("en", "de"), "steps": 10,
                              "internal": 7}
    assert params.build(Table, {}, Table(sample=Sample(n_texts=3), steps=2)).sample.n_texts == 3


def test_a_name_twice_in_one_table_is_an_error():
    @dataclass(frozen=True)
    class Clash:
        sample: Sample = Sample()
        n_texts: int = 3

    with pytest.raises(TypeError, match="two parameters are named 'n_texts'"):
        params.fields(Clash)


def test_a_required_parameter_without_a_value_is_named():
    @dataclass(frozen=True)
    class Needs:
        k: int

    assert params.fields(Needs)["k"].required
    with pytest.raises(TypeError, match="needs parameter 'k'"):
        params.build(Needs, {})


def test_registry_checks_and_calls_a_table_probe():
    seen = []

    def fn(ctx, p: Table = Table(steps=4)):
        seen.append(p)

    table, default = registry._table(fn)
    assert table is Table and default == Table(steps=4)
    info = registry.ProbeInfo(name="t", fn=fn, params=registry._params(fn), table=table, table_default=default)
    assert info.params["steps"].default == 4 and "internal" not in info.params
    assert info.check({"n_texts": "many"})[0][2].startswith("'n_texts' must be int")
    assert "unknown parameter 'internal'" in info.check({"internal": 1})[0][2]
    info.call(None, corpus="text:x.txt")
    assert seen == [Table(sample=Sample(corpus="text:x.txt", n_texts=24), steps=4)]


def test_a_probe_takes_keywords_or_one_table():
    def two(ctx, a: Table, b: Table): ...

    def plain(ctx, a: int): ...

    for fn in (two, plain):
        with pytest.raises(TypeError, match="one parameter table"):
            registry._table(fn)


def test_the_selection_group_is_declared_once_for_every_selecting_probe():
    names = ("corpus", "languages", "eval_texts", "selection_tokens", "doc_tokens", "top_rate", "bar_quantile",
             "lap_threshold", "plnd_top", "pv_tokens")
    probes = [registry.probe(n) for n in ("activation_stats", "layer_distribution", "deactivation", "steering")]
    defaults = {tuple(p.params[n].default for n in names) for p in probes}
    assert len(defaults) == 1 and all(p.table is not None for p in probes)

"""Validation is total at every depth: unknown keys in the tables that rules take (selectors, baselines, flags,
`given`, at any depth of sub-rules), rules set up so that they cannot decide, and empty texts exit 2 at
`bench validate`, naming the key, before anything runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.ground import registry
from bench.ground.errors import SpecError
from bench.ground.spec import load_spec
from bench.spine.checks import check_spec

ROOT = Path(__file__).resolve().parents[2]
INDUCTION = (ROOT / "specs" / "circuits" / "induction-heads-exist.toml").read_text()
KCOMP = (ROOT / "specs" / "circuits" / "k-composition.toml").read_text()


def _write(tmp_path: Path, name: str, text: str) -> Path:
    d = tmp_path / "circuits"
    d.mkdir(exist_ok=True)
    p = d / name
    p.write_text(text)
    return p


def _rejects(path: Path, key: str, *needles: str) -> str:
    with pytest.raises(SpecError) as exc:
        check_spec(load_spec(path))
    msg = str(exc.value)
    assert f"[{key}]" in msg, msg
    assert "\n" not in msg
    for n in needles:
        assert n in msg, msg
    return msg


@pytest.mark.parametrize("old,new,key,needles", [
    ('b = { metric = "loss_second" }', 'b = { metrics = "loss_second" }', "verdict.of[1].b.metrics",
     ("did you mean 'metric'",)),
    ('a = { metric = "loss_first" }', 'a = { metric = "loss_first", layr = 3 }', "verdict.of[1].a.layr",
     ("did you mean 'layer'",)),
    ('min = 0.4 ', 'max = 0.4\nmin = 0.3 ', "verdict.of[0].max", ("not both",)),
    ('by = ["layer", "head"]', 'by = ["layer", "head"]\nn_resamples = 199', "verdict.of[0].n_resamples", ("200",)),
])
def test_nested_problems_in_induction_spec(tmp_path, old, new, key, needles):
    assert old in INDUCTION
    _rejects(_write(tmp_path, "induction-heads-exist.toml", INDUCTION.replace(old, new, 1)), key, *needles)


def test_threshold_without_a_bound(tmp_path):
    text = INDUCTION.replace("min = 0.4 ", "# min removed ", 1)
    _rejects(_write(tmp_path, "induction-heads-exist.toml", text), "verdict.of[0].min", "needs a bound")


def test_all_without_sub_rules(tmp_path):
    head, _, tail = INDUCTION.partition("[[verdict.of]]")
    tail = tail[tail.index("[[reference]]"):]
    _rejects(_write(tmp_path, "induction-heads-exist.toml", head + "of = []\n\n" + tail), "verdict.of",
             "at least one sub-rule")


@pytest.mark.parametrize("old,new,key", [
    ('flag = { metric = "qk_norm" }', 'flag = { metric = "qk_norm", prob = 1 }', "verdict.flag.prob"),
])
def test_flag_and_baselines_keys(tmp_path, old, new, key):
    assert old in KCOMP
    _rejects(_write(tmp_path, "k-composition.toml", KCOMP.replace(old, new, 1)), key, "unknown key")


def test_baseline_entry_typo(tmp_path):
    start = KCOMP.index("baselines = [")
    end = KCOMP.index("]", KCOMP.index("}", start))
    block = KCOMP[start:end]
    entries = block.count("{")
    assert entries >= 2
    last = block.rindex("}")
    text = KCOMP[:start] + block[:last] + ', ruel = "x" ' + block[last:] + KCOMP[end:]
    _rejects(_write(tmp_path, "k-composition.toml", text), f"verdict.baselines[{entries - 1}].ruel", "unknown key")


@pytest.mark.parametrize("key", ["title", "claim", "source"])
def test_empty_texts(tmp_path, key):
    lines = INDUCTION.split("\n")
    if key == "claim":
        start = INDUCTION.index('claim = """')
        end = INDUCTION.index('"""', start + 11) + 3
        text = INDUCTION[:start] + 'claim = "   "' + INDUCTION[end:]
    else:
        text = "\n".join(f'{key} = ""' if ln.startswith(f"{key} = ") else ln for ln in lines)
    _rejects(_write(tmp_path, "induction-heads-exist.toml", text), key, "empty")


def test_every_table_parameter_of_every_rule_is_checked():
    """A rule parameter typed as a table is a selector (its keys are frame columns), a sub-rule list, or a table
    the rule declares with its keys: none is left unchecked."""
    for name, info in registry.rules().items():
        for pname, p in info.params.items():
            if registry._is_table_type(p.annotation):
                assert pname in info.selectors() or pname == info.nested or pname in info.tables, (name, pname)


def test_cli_names_the_nested_key(tmp_path, cli):
    p = _write(tmp_path, "induction-heads-exist.toml",
               INDUCTION.replace('b = { metric = "loss_second" }', 'b = { metrics = "loss_second" }', 1))
    res = cli("validate", str(p))
    assert res.exit_code == 2
    assert "verdict.of[1].b.metrics" in res.output


def test_a_preconditions_where_names_columns_of_the_probes_frame(tmp_path):
    """A typo in `[[verdict.requires]] where` selected no rows and surfaced only at verdict time, as an error of
    the run; `bench validate` now names it."""
    text = (ROOT / "specs" / "notes" / "lora-worse-than-full-ft.toml").read_text()
    old = 'where = { condition = "full_ft" }'
    assert old in text
    name = "lora-worse-than-full-ft.toml"
    ok, bad = tmp_path / "ok" / "notes", tmp_path / "bad" / "notes"
    for d, body in ((ok, text), (bad, text.replace(old, 'where = { conditon = "full_ft" }', 1))):
        d.mkdir(parents=True)
        (d / name).write_text(body)
    check_spec(load_spec(ok / name))  # the shipped spec passes
    with pytest.raises(SpecError) as exc:
        check_spec(load_spec(bad / name))
    msg = str(exc.value)
    assert "[verdict.requires[1].where.conditon]" in msg, msg
    assert "did you mean 'condition'" in msg and "not a column" in msg, msg


@pytest.mark.parametrize("old,new,needle", [
    ('where = { condition = "full_ft" }', 'where = "full_ft"', "where must be a table"),
    ('min = 0.5                     #', '# min = 0.5                   #', "needs metric, why and min and/or max"),
])
def test_a_broken_precondition_is_refused_at_validate(tmp_path, old, new, needle):
    """A precondition without a bound or with a `where` that is not a table was refused only when a run first
    refuted the claim (a ValueError of that cell); now `bench validate` names it."""
    text = (ROOT / "specs" / "notes" / "lora-worse-than-full-ft.toml").read_text()
    assert text.count(old) == 1
    d = tmp_path / "notes"
    d.mkdir()
    (d / "lora-worse-than-full-ft.toml").write_text(text.replace(old, new))
    with pytest.raises(SpecError) as exc:
        check_spec(load_spec(d / "lora-worse-than-full-ft.toml"))
    assert "[verdict.requires]" in str(exc.value) and needle in str(exc.value), str(exc.value)


@pytest.mark.parametrize("spec,old,new,key", [
    ("knowledge/lora-learns-unknown-facts.toml", "measure.k = 4", "measure.k = 0", "measure.k"),
    ("knowledge/lora-learns-unknown-facts.toml", "measure.k = 4", "measure.k = 4\nmeasure.dropout = 1.0",
     "measure.dropout"),
    ("generalization/rl-generalizes-sft-memorizes.toml", "measure.seeds = 2", "measure.seeds = 0", "measure.seeds"),
    ("generalization/rl-generalizes-sft-memorizes.toml", "measure.seeds = 2", "measure.seeds = 2\n"
     "measure.temperature = 0.0", "measure.temperature"),
])
def test_a_training_setting_out_of_range_is_refused_at_validate(tmp_path, spec, old, new, key):
    """Zero prompts, zero seeds, a dropout of 1 or a temperature of 0 were refused only by the probe, after the
    models had loaded (or not at all); each is now out of its parameter's range at `bench validate`."""
    text = (ROOT / "specs" / spec).read_text()
    assert text.count(old) == 1, old
    d = tmp_path / spec.split("/")[0]
    d.mkdir()
    path = d / spec.split("/")[1]
    path.write_text(text.replace(old, new))
    with pytest.raises(SpecError) as exc:
        check_spec(load_spec(path))
    assert f"[{key}]" in str(exc.value) and "profile 'smoke'" in str(exc.value), str(exc.value)

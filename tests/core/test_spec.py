"""Spec loading and validation: every kind of bad input names the file, the key and (where known) the line."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from bench.ground.errors import SpecError
from bench.ground.spec import load_spec, load_specs
from bench.spine.checks import check_spec

GOOD = textwrap.dedent('''\
    id = "demo.good-claim"
    title = "A claim"
    source = "Someone 2024"
    claim = "Something holds."
    spec_version = 1

    [models]
    default = ["tiny"]

    [data]
    seq_len = 12
    batch = 8

    [measure]
    probe = "induction"

    [verdict]
    rule = "threshold"
    metric = "induction_score"
    reduce = "max_group_mean"
    by = ["layer", "head"]
    min = 0.4

    [[reference]]
    model = "gpt2"
    metric = "induction_score"
    value = 0.9
    where = "a demo"

    [profiles.smoke]
    data.batch = 4
    ''')


def write(tmp_path: Path, text: str, name: str = "good-claim.toml", family: str = "demo") -> Path:
    d = tmp_path / family
    d.mkdir(exist_ok=True)
    p = d / name
    p.write_text(text)
    return p


def test_good_spec_loads_and_checks(tmp_path):
    spec = load_spec(write(tmp_path, GOOD))
    check_spec(spec)
    assert spec.id == "demo.good-claim" and spec.family == "demo"
    assert spec.probe == "induction" and spec.rule == "threshold"
    assert spec.probe_params() == {"seq_len": 12, "batch": 8}
    assert spec.references[0].value == 0.9
    with pytest.raises(TypeError):
        spec.data["batch"] = 3  # frozen


def test_profile_overrides_data_and_changes_hash(tmp_path):
    spec = load_spec(write(tmp_path, GOOD))
    smoke = spec.with_profile("smoke")
    assert smoke.probe_params()["batch"] == 4 and smoke.profile == "smoke"
    assert spec.with_profile("full").probe_params()["batch"] == 8  # undefined profile: base values
    assert smoke.digest() != spec.with_profile("full").digest()


def error_of(tmp_path, text, name="good-claim.toml") -> SpecError:
    with pytest.raises(SpecError) as info:
        check_spec(load_spec(write(tmp_path, text, name)))
    return info.value


def test_malformed_toml_names_line(tmp_path):
    err = error_of(tmp_path, GOOD.replace('title = "A claim"', 'title = "A claim'))
    assert "malformed TOML" in str(err) and err.line == 2 and "good-claim.toml:2" in str(err)


def test_unknown_key_suggests_near_name(tmp_path):
    err = error_of(tmp_path, GOOD.replace("[verdict]\n", "[verdict]\n").replace('title =', 'titel = "x"\ntitle ='))
    assert "unknown key 'titel'" in str(err) and "did you mean 'title'" in str(err) and err.line == 2


def test_unknown_probe_parameter_names_key_and_line(tmp_path):
    err = error_of(tmp_path, GOOD.replace("seq_len = 12", "seqlen = 12"))
    assert err.key == "data.seqlen" and "did you mean 'seq_len'" in str(err) and err.line == 11


def test_wrong_type(tmp_path):
    err = error_of(tmp_path, GOOD.replace("seq_len = 12", 'seq_len = "twelve"'))
    assert "'seq_len' must be int" in str(err) and err.key == "data.seq_len"
    err = error_of(tmp_path, GOOD.replace("spec_version = 1", 'spec_version = "1"'))
    assert err.key == "spec_version" and "must be int" in str(err)


def test_wrong_rule_parameter_type(tmp_path):
    err = error_of(tmp_path, GOOD.replace("min = 0.4", 'min = "high"'))
    assert err.key == "verdict.min" and "must be float" in str(err)


def test_unknown_probe_and_rule(tmp_path):
    err = error_of(tmp_path, GOOD.replace('probe = "induction"', 'probe = "inductoin"'))
    assert "unknown probe 'inductoin'" in str(err) and "did you mean 'induction'" in str(err)
    err = error_of(tmp_path, GOOD.replace('rule = "threshold"', 'rule = "treshold"'))
    assert "unknown rule 'treshold'" in str(err) and "did you mean 'threshold'" in str(err)


def test_metric_unknown_to_probe(tmp_path):
    err = error_of(tmp_path, GOOD.replace('metric = "induction_score"\nreduce', 'metric = "induction"\nreduce'))
    assert "has no metric 'induction'" in str(err)


def test_id_must_match_file_name(tmp_path):
    err = error_of(tmp_path, GOOD, name="other-name.toml")
    assert "does not match the file name" in str(err)


def test_duplicate_id(tmp_path):
    write(tmp_path, GOOD)
    write(tmp_path, GOOD, family="again")
    with pytest.raises(SpecError, match="duplicate id 'demo.good-claim'"):
        load_specs([tmp_path])


def test_profile_cannot_touch_verdict_or_unknown_keys(tmp_path):
    err = error_of(tmp_path, GOOD.replace("data.batch = 4", "verdict.min = 0.1"))
    assert "unknown key 'verdict'" in str(err)
    err = error_of(tmp_path, GOOD.replace("data.batch = 4", "data.bacth = 4"))
    assert "unknown parameter 'bacth'" in str(err) and "profile 'smoke'" in str(err)


def test_missing_required_and_missing_file(tmp_path):
    err = error_of(tmp_path, GOOD.replace('source = "Someone 2024"\n', ""))
    assert "missing required key 'source'" in str(err)
    with pytest.raises(SpecError, match="no such file") as missing:
        load_specs([tmp_path / "nope.toml"])
    assert "--models" not in str(missing.value)
    # `--models a b` makes b a spec path: the error says how to name two models
    with pytest.raises(SpecError, match=r"no such file or folder \(if this is a model.*--models A --models B"):
        load_specs(["gemma3-270m+random-init"])


def test_nested_rule_checked(tmp_path):
    text = GOOD.replace('[verdict]\nrule = "threshold"', '[verdict]\nrule = "all"\n[[verdict.of]]\nrule = "threshold"')
    check_spec(load_spec(write(tmp_path, text)))
    bad = text.replace('min = 0.4', 'mini = 0.4')
    err = error_of(tmp_path, bad)
    assert "verdict.of[0].mini" in str(err) and "did you mean 'min'" in str(err)


def test_shipped_specs_are_valid(specs_dir):
    specs = load_specs([specs_dir])
    assert len(specs) >= 4
    for s in specs:
        check_spec(s)

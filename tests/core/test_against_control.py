"""Claims decided against their untrained control ([control] decide = "difference"): the control cell is
planned without --control (once with it), the spec key is validated, and a warm replay writes the record a cold
run writes, with the decision that needs both frames."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.spine import against, plan
from bench.ground.errors import SpecError
from bench.ground.spec import load_spec
from tests.core.test_replay_settings import _new_record, _records, comparable

SPEC = '''
id = "circuits.induction-heads-exist"
title = "An induction head, decided against the control"
source = "Elhage et al. 2021"
claim = "Some head is an induction head, more than in an untrained model of the same architecture."
spec_version = 1

[models]
default = ["smollm2-135m"]

[data]
corpus = "synthetic:repeated-random"
seq_len = 12
batch = 10

[measure]
probe = "induction"

[verdict]
rule = "threshold"
metric = "induction_score"
reduce = "max_group_mean"
by = ["layer", "head"]
min = 0.4
'''


def write(tmp_path: Path, control: str = '[control]\ndecide = "difference"\n') -> Path:
    d = tmp_path / "specs" / "circuits"
    d.mkdir(parents=True, exist_ok=True)
    path = d / "induction-heads-exist.toml"
    path.write_text(SPEC + "\n" + control, encoding="utf-8")
    return path


def test_the_control_cell_is_planned_without_the_control_option(tmp_path):
    spec = load_spec(write(tmp_path))
    assert spec.control_decide == "difference"
    models = [c.model for c in plan.build([spec], ("m",), "smoke", (0,))]
    assert models == ["m", "m+random-init"]
    assert [c.model for c in plan.build([spec], ("m",), "smoke", (0,), "random-init")] == models  # not twice
    assert [c.model for c in plan.build([spec], ("m+random-init",), "smoke", (0,))] == ["m+random-init"]
    plain = load_spec(write(tmp_path / "plain", control=""))
    assert [c.model for c in plan.build([plain], ("m",), "smoke", (0,))] == ["m"]
    assert (against.p_values(spec), against.p_values(plain)) == (2, 1)  # what an unrun member adds to BH


def test_an_unrun_member_counts_the_p_values_its_rule_carries():
    """A gate is a precondition, not a test: `gated` counts its claim's p-values, and an `all` each part's, nested
    or not (a gated claim that is an `all` of two ratios carries two)."""
    from bench.spine.against import _tests

    ratio = {"rule": "baseline_ratio"}
    assert _tests("threshold", {}) == 1 and _tests("all", {"of": [ratio, ratio]}) == 2
    assert _tests("gated", {"of": [{"rule": "threshold"}, {"rule": "all", "of": [ratio, ratio]}]}) == 2
    assert _tests("all", {"of": [ratio, {"rule": "all", "of": [ratio, ratio, ratio]}]}) == 4
    assert _tests("gated", {"of": [{"rule": "accuracy_floor"}, ratio]}) == 1


@pytest.mark.parametrize("table, words", [
    ('[control]\ndecide = "diference"\n', "unknown value 'diference' for 'decide' (known: difference); did you mean"),
    ('[control]\ndecide = 1\n', "must be str"),
    ('[control]\ndecide = "difference"\nholds = "exact algebra"\n', "exclude each other"),
])
def test_validation_names_the_decide_key(tmp_path, table, words):
    with pytest.raises(SpecError) as exc:
        load_spec(write(tmp_path, table))
    assert "control.decide" in str(exc.value) and words in str(exc.value)


def test_a_rule_without_an_arm_cannot_be_decided_against_its_control(tmp_path):
    from bench.spine.checks import check_spec

    path = write(tmp_path)
    path.write_text(path.read_text().replace('reduce = "max_group_mean"', 'reduce = "max"'), encoding="utf-8")
    check_spec(load_spec(path))  # the threshold rule has an arm (a worst case is refused when deciding)
    path.write_text(path.read_text().replace('rule = "threshold"', 'rule = "trend"').replace(
        'reduce = "max"\nby = ["layer", "head"]\n', ""), encoding="utf-8")
    with pytest.raises(SpecError, match=r"control\.decide.*rule 'trend' cannot be decided against its control"):
        check_spec(load_spec(path))


ALL = SPEC.replace('rule = "threshold"\nmetric', 'rule = "all"\nalpha = 0.01\n[[verdict.of]]\nrule = "threshold"\nmetric') + \
    '\n[[verdict.of]]\nrule = "threshold"\nmetric = "induction_score"\nreduce = "mean"\nmin = 0.0\n'


@pytest.mark.parametrize("table, words", [
    ('[control]\ndecide = "difference"\n', "[control.decide] a combined rule is decided against its control on one "
     "of its parts: name it with 'part'"),
    ('[control]\npart = 1\n', "[control.part] names the part that is decided against the control: it needs 'decide'"),
    ('[control]\ndecide = "difference"\npart = 2\n', "[control.part] 2 is not the index of a part: verdict.of has 2"),
    ('[control]\ndecide = "difference"\npart = -1\n', "[control.part] -1 is not the index of a part"),
    ('[control]\ndecide = "difference"\npart = "1"\n', "[control.part] must be an integer"),
    ('[control]\ndecide = "difference"\npart = true\n', "[control.part] must be an integer"),
])
def test_the_part_of_a_combined_rule_is_validated(tmp_path, table, words):
    path = write(tmp_path, table)
    path.write_text(ALL + "\n" + table, encoding="utf-8")
    with pytest.raises(SpecError) as exc:
        load_spec(path)
    assert words in str(exc.value)


def test_a_plain_rule_has_no_part(tmp_path):
    with pytest.raises(SpecError, match=r"control\.part.*only a combined rule .* this spec's rule is 'threshold'"):
        load_spec(write(tmp_path, '[control]\ndecide = "difference"\npart = 0\n'))


def test_a_combined_rule_is_decided_against_its_control_on_the_named_part(tmp_path):
    from bench.spine.checks import check_spec

    path = write(tmp_path)
    path.write_text(ALL + '\n[control]\ndecide = "difference"\npart = 1\n', encoding="utf-8")
    spec = load_spec(path)
    check_spec(spec)
    # the part's own parameters, with the spec's alpha (the part sets none)
    assert spec.control_rule() == ("threshold", {"metric": "induction_score", "reduce": "mean", "min": 0.0,
                                                 "alpha": 0.01})
    assert spec.describe()["control_part"] == 1 and against.p_values(spec) == 3
    plain = load_spec(write(tmp_path / "plain"))
    assert plain.control_rule() == ("threshold", plain.rule_params()) and "control_part" not in plain.digest()
    path.write_text(ALL + '\n[control]\ndecide = "difference"\npart = 0\n', encoding="utf-8")
    assert load_spec(path).digest() != spec.digest()


def test_the_digest_changes_with_decide_and_plain_specs_keep_theirs(tmp_path):
    a, b = load_spec(write(tmp_path / "a")), load_spec(write(tmp_path / "b", control=""))
    assert a.digest() != b.digest()
    assert b.describe()["control_decide"] == "" and a.describe()["control_decide"] == "difference"


def test_warm_replay_equals_cold_for_a_spec_decided_against_its_control(cli, tmp_path, tiny_model_dir, chdir_tmp):
    write(chdir_tmp)
    args = ["verify", chdir_tmp / "specs" / "circuits", "--models", tiny_model_dir, "--no-report"]
    r = cli(*args)
    assert r.exit_code == 0, r.output
    cold = _new_record(chdir_tmp, {})
    trained, control = cold["cells"]
    assert control["model"] == f"{trained['model']}+random-init" and cold["control"] is None
    assert trained["against_control"] == control["model"] and "against_control" not in control
    v = trained["verdict"]
    assert v["rule"] == "against_control" and len(v["parts"]) == 2
    assert v["parts"][1]["metric"] == "induction_score: trained − control" and v["parts"][1]["n"] == 10
    assert v["estimate"] == v["parts"][0]["estimate"]  # the headline is the trained model's own estimate
    assert control["verdict"]["rule"] == "threshold"  # the control keeps its own, absolute verdict
    seen = _records(chdir_tmp)
    assert cli(*args).exit_code == 0
    warm = _new_record(chdir_tmp, seen)
    assert warm["executor"]["name"] == "replay" and comparable(warm) == comparable(cold)


def test_the_report_shows_trained_and_control_side_by_side(cli, tmp_path, tiny_model_dir, chdir_tmp):
    from bench.report.html import context, render_html

    write(chdir_tmp)
    assert cli("verify", chdir_tmp / "specs" / "circuits", "--models", tiny_model_dir, "--no-report").exit_code == 0
    (run_dir,) = (chdir_tmp / "runs").iterdir()
    record = json.loads((run_dir / "record.json").read_text())
    trained, control = record["cells"]
    (claim,) = context(record, run_dir, with_charts=False)["claims"]
    rows = claim["cells"][trained["model"]]["side_by_side"]
    assert [r["label"] for r in rows] == ["trained", "untrained control", "trained − control"]
    assert rows[0]["estimate"] == trained["verdict"]["parts"][0]["estimate"]
    assert (rows[1]["model"], rows[1]["estimate"], rows[1]["outcome"]) == (
        control["model"], control["verdict"]["estimate"], control["verdict"]["outcome"])
    assert (rows[2]["estimate"], rows[2]["ci_low"]) == (trained["verdict"]["parts"][1]["estimate"],
                                                        trained["verdict"]["parts"][1]["ci_low"])
    assert claim["cells"][control["model"]]["side_by_side"] == []
    html = render_html(record, run_dir)
    assert "Trained and untrained control side by side" in html and "Decided against the model's random-init" in html


def test_a_claim_decided_against_its_control_is_not_flagged_for_passing_on_it():
    from bench.models.controls import FLAG, flag

    outcomes = {("f.c", "m"): "SUPPORTED"}
    assert flag({"id": "f.c"}, "m", outcomes) == FLAG
    assert flag({"id": "f.c", "control_decide": "difference"}, "m", outcomes) is None

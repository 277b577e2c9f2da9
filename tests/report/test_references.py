"""Published figures beside measured ones."""

from __future__ import annotations

from bench.report.references import nearest, placement_chart, placement_rows, same_metric

REFS = [{"model": "gpt2", "metric": "induction_score", "value": 0.9, "where": "demo"},
        {"model": "pythia", "metric": "induction_score", "value": 0.5, "where": "paper"},
        {"model": "opt", "metric": "loss_drop", "value": 3.0, "where": "fig 2"}]


def test_nearest_picks_the_closest_value_of_the_same_metric():
    assert nearest(REFS, "induction_score", 0.6)["model"] == "pythia"
    assert nearest(REFS, "induction_score", 0.95)["model"] == "gpt2"
    assert nearest(REFS, "max induction_score", 0.95)["model"] == "gpt2"  # a label that contains the name
    assert nearest(REFS, "loss_drop", None)["model"] == "opt"
    assert nearest(REFS, "something_else", 0.5) is None


def test_a_claim_whose_references_share_one_metric_uses_them_for_any_label():
    refs = [{"model": "a", "metric": "pearson_r", "value": 0.4, "where": "t2"},
            {"model": "b", "metric": "pearson_r", "value": 0.1, "where": "t2"}]
    assert [r["model"] for r in same_metric(refs, "r(C, E)")] == ["a", "b"]
    assert nearest(refs, "r(C, E)", 0.15)["model"] == "b"
    assert same_metric(REFS, "r(C, E)") == []  # mixed metrics: no guessing


def test_placement_rows_and_chart():
    spec = {"references": REFS, "hash": "0" * 64}
    cells = {"m1": {"metric": "induction_score", "estimate": 0.7, "ci_low": 0.6, "ci_high": 0.8},
             "m2": {"metric": "induction_score", "estimate": None}}
    rows = placement_rows(spec, cells)
    assert {(r["who"], r["kind"]) for r in rows} == {("m1", "measured here"), ("gpt2", "published"),
                                                     ("pythia", "published")}
    assert placement_chart(spec, cells) is not None
    assert placement_chart({"references": [], "hash": "0" * 64}, cells) is None

"""The language-neuron decision rules on hand-made frames whose verdict is known."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from bench.families.langneurons.probes import frame
from bench.stats import Outcome, evaluate

LANGS = ["de", "en", "es", "fr"]


def deact_frame(delta: dict[str, np.ndarray], n: int = 30, noise: float = 0.02, seed: int = 0,
                diagonal: dict[str, dict[str, float]] | None = None) -> pd.DataFrame:
    """Per-text bits for base and edited models: text i of language y has 100 bytes and 100 bits unedited;
    zeroing set x adds delta[method][x, y] · 100 bits on average (so ΔBPB ≈ delta)."""
    rng = np.random.default_rng(seed)
    rows = []
    for y in LANGS:
        for i in range(n):
            rows += [("none", None, y, None, None, i, "bits", 100.0), (None, None, y, None, None, i, "bytes", 100.0)]
    for method, mat in delta.items():
        for a, x in enumerate(LANGS):
            for b, y in enumerate(LANGS):
                if np.isnan(mat[a, b]):
                    continue
                for i in range(n):
                    rows.append((method, x, y, None, None, i, "bits", 100.0 + 100 * (mat[a, b] + noise * rng.normal())))
    return frame(rows)


def diag_only(values) -> np.ndarray:
    m = np.full((4, 4), np.nan)
    np.fill_diagonal(m, values)
    return m


STRONG = np.full((4, 4), 0.01) + np.diag([0.3, 0.2, 0.25, 0.4])
WEAK = np.full((4, 4), 0.05)


def test_diagonal_dominance_supported_and_refuted():
    v = evaluate(deact_frame({"lape": STRONG}), "diagonal_dominance", {"method": "lape"})
    assert v.outcome is Outcome.SUPPORTED and v.estimate == 1.0
    inverted = np.full((4, 4), 0.3) - np.diag([0.29] * 4)
    v = evaluate(deact_frame({"lape": inverted}), "diagonal_dominance", {"method": "lape"})
    assert v.outcome is Outcome.REFUTED


def test_diagonal_dominance_needs_a_full_matrix():
    v = evaluate(deact_frame({"lape": diag_only([0.3] * 4)}), "diagonal_dominance", {"method": "lape"})
    assert v.outcome is Outcome.INCONCLUSIVE and "no full" in v.reason


def test_baseline_ratio_max_and_min():
    f = deact_frame({"lape": STRONG, "rs": diag_only([0.01] * 4)})
    params = {"numerator": {"method": "rs", "entries": "diagonal"},
              "denominator": {"method": "lape", "entries": "diagonal"}}
    v = evaluate(f, "baseline_ratio", {**params, "max": 0.25})
    assert v.outcome is Outcome.SUPPORTED and v.estimate == pytest.approx(0.01 / 0.2875, rel=0.2)
    v = evaluate(f, "baseline_ratio", {**params, "min": 5.0})  # random ≥ 5 × LAPE: clearly false
    assert v.outcome is Outcome.REFUTED
    off = {"numerator": {"method": "lape", "entries": "diagonal"},
           "denominator": {"method": "lape", "entries": "off_diagonal"}, "min": 3.0}
    assert evaluate(f, "baseline_ratio", off).outcome is Outcome.SUPPORTED


def test_baseline_ratio_language_filters():
    f = deact_frame({"plnd": diag_only([0.2, 0.001, 0.3, 0.25])})
    p = {"numerator": {"method": "plnd", "entries": "diagonal", "languages": ["en"]},
         "denominator": {"method": "plnd", "entries": "diagonal", "exclude": ["en"]}, "max": 0.2}
    assert evaluate(f, "baseline_ratio", p).outcome is Outcome.SUPPORTED
    f = deact_frame({"plnd": diag_only([0.2, 0.3, 0.3, 0.25])})
    assert evaluate(f, "baseline_ratio", p).outcome is Outcome.REFUTED


def test_largest_of():
    f = deact_frame({"lape": STRONG, "lap": diag_only([0.1] * 4), "rs": diag_only([0.0] * 4)})
    v = evaluate(f, "largest_of", {"target": "lape", "methods": ["lap", "rs"]})
    assert v.outcome is Outcome.SUPPORTED and v.effect_name == "lape − lap"
    v = evaluate(f, "largest_of", {"target": "rs", "methods": ["lape", "lap"]})
    assert v.outcome is Outcome.REFUTED


def test_related_exceeds_unrelated():
    m = np.full((4, 4), 0.01)
    np.fill_diagonal(m, 0.3)
    m[2, 3] = m[3, 2] = 0.1  # es ↔ fr
    f = deact_frame({"lape": m})
    v = evaluate(f, "related_exceeds_unrelated", {"method": "lape", "groups": [["es", "fr"]]})
    assert v.outcome is Outcome.SUPPORTED and v.estimate == pytest.approx(0.09, abs=0.02)
    m[2, 3] = m[3, 2] = 0.0
    m[2, 0] = m[3, 1] = 0.2  # es's set hurts German, fr's set hurts English: the reverse of the claim
    v = evaluate(deact_frame({"lape": m}), "related_exceeds_unrelated", {"method": "lape", "groups": [["es", "fr"]]})
    assert v.outcome is Outcome.REFUTED


def layer_frame(edge: int, total: int, uniform: float = 0.4, spread: float = 0.05, reps: int = 40) -> pd.DataFrame:
    """Full-data counts and `reps` split-half replicates whose shares spread ±`spread` around edge/total."""
    rows = [("lape", None, None, None, None, None, "edge_count", edge),
            ("lape", None, None, None, None, None, "total_count", total),
            ("lape", None, None, None, None, None, "uniform_share", uniform)]
    shares = edge / total + np.linspace(-spread, spread, reps)
    for r, sh in enumerate(shares):
        rows += [("lape", None, None, None, None, r, "edge_count", round(sh * 1000)),
                 ("lape", None, None, None, None, r, "total_count", 1000)]
    return frame(rows)


def test_binomial_share_decides_on_split_half_replicates():
    assert evaluate(layer_frame(90, 100), "binomial_share", {"min_share": 0.6}).outcome is Outcome.SUPPORTED
    assert evaluate(layer_frame(30, 100), "binomial_share", {"min_share": 0.6}).outcome is Outcome.REFUTED
    assert evaluate(layer_frame(63, 100), "binomial_share", {"min_share": 0.6}).outcome is Outcome.INCONCLUSIVE
    assert evaluate(layer_frame(3, 4), "binomial_share", {"min_share": 0.6}).outcome is Outcome.INCONCLUSIVE
    # 63 of 100 neurons would pass an exact binomial test over neurons at 0.6 only with n ≈ 1,000; here 630 of
    # 1,000 with replicates spread ±0.1: the selection's own noise decides, not the neuron count
    v = evaluate(layer_frame(630, 1000, spread=0.1), "binomial_share", {"min_share": 0.6})
    assert v.outcome is Outcome.INCONCLUSIVE and "split-half replicate" in v.reason and v.n == 40


def test_binomial_share_without_replicates_is_inconclusive():
    f = layer_frame(900, 1000, reps=0)
    v = evaluate(f, "binomial_share", {"min_share": 0.6})
    assert v.outcome is Outcome.INCONCLUSIVE and "replicates" in v.reason


def test_arg_extreme_over_replicates():
    rows = [("lape", k, None, None, None, None, "n_selected", v) for k, v in {"en": 3, "de": 9, "fr": 7}.items()]
    for r in range(30):  # en is the minimum in 28 of 30 replicates, fr in 2
        counts = {"en": 3, "de": 9, "fr": 7} if r >= 2 else {"en": 8, "de": 9, "fr": 7}
        rows += [("lape", k, None, None, None, r, "n_selected", v) for k, v in counts.items()]
    p = {"metric": "n_selected", "over": "set_lang", "extreme": "min", "expect": ["en"], "unit": "sample",
         "replicates": True}
    v = evaluate(frame(rows), "arg_extreme", p)
    assert v.p_value == pytest.approx(3 / 31) and v.effect == pytest.approx(28 / 30)
    assert v.outcome is Outcome.INCONCLUSIVE and v.n == 30  # 2 of 30 replicates elsewhere: p ≈ 0.1
    stable = [r for r in rows if r[5] is None or r[5] >= 2]
    assert evaluate(frame(stable), "arg_extreme", p).outcome is Outcome.SUPPORTED  # p = 1/29
    exact = evaluate(frame(rows), "arg_extreme", {k: p[k] for k in ("metric", "over", "extreme", "expect")})
    assert exact.outcome is Outcome.SUPPORTED and "exact" in exact.reason  # replicate rows are not mixed in


def counts_frame(counts: dict[str, int]) -> pd.DataFrame:
    return frame([("lape", k, None, None, None, None, "n_selected", v) for k, v in counts.items()])


def test_arg_extreme_exact():
    p = {"metric": "n_selected", "where": {"method": "lape"}, "over": "set_lang", "extreme": "min", "expect": ["en"]}
    assert evaluate(counts_frame({"en": 3, "de": 9, "fr": 7}), "arg_extreme", p).outcome is Outcome.SUPPORTED
    assert evaluate(counts_frame({"en": 8, "de": 9, "fr": 7}), "arg_extreme", p).outcome is Outcome.REFUTED
    assert evaluate(counts_frame({"en": 7, "de": 9, "fr": 7}), "arg_extreme", p).outcome is Outcome.INCONCLUSIVE


def sim_frame(peak: int, L: int = 10, n: int = 20, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rows = [(None, None, None, l, None, s, "mean_cosine", 1.0 - 0.05 * abs(l - peak) + 0.01 * rng.normal())
            for s in range(n) for l in range(L)]
    return frame(rows)


def test_arg_extreme_band_with_bootstrap():
    p = {"metric": "mean_cosine", "over": "layer", "extreme": "max", "band": [0.2, 0.8], "unit": "sample"}
    v = evaluate(sim_frame(5), "arg_extreme", p)
    assert v.outcome is Outcome.SUPPORTED and v.estimate == 5
    assert evaluate(sim_frame(9), "arg_extreme", p).outcome is Outcome.REFUTED


def test_rules_are_registered_with_their_parameters():
    from bench.ground import registry

    for name in ("diagonal_dominance", "baseline_ratio", "largest_of", "related_exceeds_unrelated",
                 "binomial_share", "arg_extreme"):
        assert name in registry.rules()


def test_english_spared_needs_an_english_set_to_zero():
    """The shipped spec's rule: with English's PLND set empty, its row equals the unedited model (ΔBPB 0, no
    noise), which passes the ratio vacuously; the precondition makes that INCONCLUSIVE. With one English
    neuron zeroed and the same small effect, the claim is decided (SUPPORTED)."""
    from bench.ground.spec import load_spec

    spec = load_spec(Path(__file__).parents[3] / "specs" / "plnd" / "understanding-layers-spare-english.toml")
    rule, params = spec.rule, spec.rule_params()

    def with_sizes(f, en):
        sizes = [("plnd", x, None, None, None, None, "n_ablated", float(en if x == "en" else 20)) for x in LANGS]
        return pd.concat([f, frame(sizes)], ignore_index=True)

    empty = deact_frame({"plnd": diag_only([0.2, 0.0, 0.3, 0.25])}, noise=0.0)
    alone = evaluate(empty, "baseline_ratio", {k: v for k, v in params["of"][1].items() if k != "rule"})
    assert alone.outcome is Outcome.SUPPORTED  # what the rule alone said of an empty set
    v = evaluate(with_sizes(empty, 0), rule, params)
    assert v.outcome is Outcome.INCONCLUSIVE and v.reason.startswith("precondition not met: n_ablated")
    assert evaluate(with_sizes(empty, 1), rule, params).outcome is Outcome.SUPPORTED


def test_collapse_needs_every_language_to_have_a_set_to_zero():
    """The shipped spec's rule on ratios that pass: with every language's set non-empty they are SUPPORTED;
    with three sets reported empty (`n_ablated` 0), the claim about every language is INCONCLUSIVE by its
    precondition, whatever the ratios say."""
    from bench.ground.spec import load_spec

    spec = load_spec(Path(__file__).parents[3] / "specs" / "plnd" / "deactivation-collapses-language.toml")
    rule, params = spec.rule, spec.rule_params()
    plnd = np.full((4, 4), 0.005) + np.diag([0.3, 0.35, 0.25, 0.4])
    f = deact_frame({"plnd": plnd, "rs-plnd": np.full((4, 4), 0.01)})

    def sized(empty):
        rows = [("plnd", x, None, None, None, None, "n_ablated", 0.0 if x in empty else 20.0) for x in LANGS]
        return pd.concat([f, frame(rows)], ignore_index=True)

    assert evaluate(sized(()), rule, params).outcome is Outcome.SUPPORTED
    v = evaluate(sized(("de", "es", "fr")), rule, params)
    assert v.outcome is Outcome.INCONCLUSIVE and "precondition not met: n_ablated: min n_ablated = 0" in v.reason

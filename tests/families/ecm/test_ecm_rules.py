"""The ecm decision rules on constructed frames: McNemar on discordant pairs, Spearman trend over counts,
and the floor precondition that makes a model that cannot do the task INCONCLUSIVE."""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import stats

from bench.ground.spec import load_spec
from bench.stats import Outcome, evaluate


def _paired(cot: list[int], direct: list[int]) -> pd.DataFrame:
    rows = [(i, c, v) for c, vals in (("cot", cot), ("direct", direct)) for i, v in enumerate(vals)]
    return pd.DataFrame(rows, columns=["item", "condition", "value"]).assign(metric="correct")


def test_mcnemar_gain_uses_only_discordant_pairs():
    # 10 items right in both, 12 right only with cot, 1 right only direct, 7 wrong in both
    cot = [1] * 10 + [1] * 12 + [0] * 1 + [0] * 7
    direct = [1] * 10 + [0] * 12 + [1] * 1 + [0] * 7
    v = evaluate(_paired(cot, direct), "mcnemar_gain", {"a": {"condition": "cot"}, "b": {"condition": "direct"}})
    assert v.outcome is Outcome.SUPPORTED
    assert np.isclose(v.p_value, stats.binomtest(12, 13, 0.5, alternative="greater").pvalue)
    assert np.isclose(v.estimate, 11 / 30) and v.n == 30
    assert "12 items right only with cot, 1 only with direct" in v.reason
    back = evaluate(_paired(direct, cot), "mcnemar_gain", {"a": {"condition": "cot"}, "b": {"condition": "direct"}})
    assert back.outcome is Outcome.REFUTED and back.estimate < 0


def test_mcnemar_gain_without_discordant_pairs_is_not_supported():
    same = [1, 0] * 10
    v = evaluate(_paired(same, same), "mcnemar_gain", {"a": {"condition": "cot"}, "b": {"condition": "direct"}})
    assert v.outcome is not Outcome.SUPPORTED and v.p_value == 1.0


def _demos_frame(acc: dict[int, float], n_items: int = 40) -> pd.DataFrame:
    """Exactly round(a · n) items right at each count, a different subset per count."""
    rows = [(i, k, float((i * 7 + j * 11) % n_items < round(a * n_items)))
            for j, (k, a) in enumerate(acc.items()) for i in range(n_items)]
    return pd.DataFrame(rows, columns=["item", "n_demos", "value"]).assign(metric="correct")


def _spec_rule(name: str):
    spec = load_spec(f"specs/ecm/{name}.toml")
    return spec.rule, spec.rule_params()


def test_icl_spec_rule_on_rising_flat_and_floor_frames():
    rule, params = _spec_rule("icl-improves-with-demonstrations")
    rising = evaluate(_demos_frame({0: 0.05, 1: 0.3, 2: 0.45, 4: 0.6, 8: 0.75}), rule, params)
    assert rising.outcome is Outcome.SUPPORTED and rising.estimate == 1.0 and rising.ci_low > 0
    falling = evaluate(_demos_frame({0: 0.75, 1: 0.6, 2: 0.45, 4: 0.3, 8: 0.05}), rule, params)
    assert falling.outcome is Outcome.REFUTED and falling.estimate == -1.0
    floor = evaluate(_demos_frame({0: 0.0, 1: 0.0, 2: 0.02, 4: 0.0, 8: 0.03}), rule, params)
    assert floor.outcome is Outcome.INCONCLUSIVE and "precondition" in floor.reason


def test_cot_spec_rule_on_constructed_frames():
    rule, params = _spec_rule("cot-helps-multistep")
    cot = [1] * 8 + [1] * 14 + [0] * 2 + [0] * 16
    direct = [1] * 8 + [0] * 14 + [1] * 2 + [0] * 16
    assert evaluate(_paired(cot, direct), rule, params).outcome is Outcome.SUPPORTED
    weak = evaluate(_paired([1] + [0] * 39, [0] * 40), rule, params)  # 2.5% correct at best: below the floor
    assert weak.outcome is Outcome.INCONCLUSIVE and "precondition" in weak.reason


def test_mcnemar_gain_names_itself_its_test_and_its_defaults():
    """The verdict carries the rule's name, what was compared, the one-sided bound and the default α; the
    default `min_n` (10 paired items) decides whether there is anything to test; the sentence pairs by item."""
    from bench.ground import registry

    params = {"a": {"condition": "cot"}, "b": {"condition": "direct"}}
    cot, direct = [1] * 8 + [0] * 2, [0] * 8 + [1] * 2
    v = evaluate(_paired(cot, direct), "mcnemar_gain", params)
    assert (v.rule, v.threshold, v.effect_name, v.alpha, v.n) == ("mcnemar_gain", "gain > 0", "accuracy gain", 0.05, 10)
    assert "cot" in v.metric and "direct" in v.metric and v.metric.startswith("accuracy ")
    few = evaluate(_paired(cot[:9], direct[:9]), "mcnemar_gain", params)
    assert few.outcome is Outcome.INCONCLUSIVE and few.reason == "only 9 paired items (< 10)"
    assert few.rule == "mcnemar_gain"
    said = registry.rule("mcnemar_gain").sentence(params)
    assert said.startswith("accuracy under [condition = cot] minus under [condition = direct], paired by item, "
                           "is > 0 (exact McNemar test, α = 0.05")

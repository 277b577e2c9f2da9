"""The shipped generalization specs' decisions on constructed frames. sft-needed-before-rl: RL that lowers the SFT
start's out-of-distribution accuracy while the base model, near 0, has nothing to lose must not read as "RL works
without SFT". rl-generalizes-sft-memorizes: an RL arm that never learned the training task must not refute "RL
generalizes" by what it lost, however well the SFT arm learned."""

from __future__ import annotations

import pandas as pd

from bench.families.generalization import probes
from bench.ground.spec import load_spec
from bench.stats import Outcome, evaluate

N = 40  # held-out hands per split (the smoke profile's n_eval)


def _run(seed: int, gain_sft: list[float], gain_base: list[float]) -> list[pd.DataFrame]:
    r, hands = probes._rows, list(range(N))
    return [r("rl_gain", "rl", gain_sft, split="ood", sample=hands, seed=seed),
            r("rl_gain", "base_rl", gain_base, split="ood", sample=hands, seed=seed),
            r("converged", "rl", [1.0], seed=seed), r("converged", "base_rl", [1.0], seed=seed)]


def _decide(*runs: list[pd.DataFrame]):
    r, hands = probes._rows, list(range(N))
    shared = [r("format_ok", "base", [0.0] * N, split="id", sample=hands),  # the base cannot follow the format
              r("format_ok", "initial", [1.0] * N, split="id", sample=hands),  # the SFT start can
              r("base_format_rate", "base", [0.0]), r("initial_format_rate", "initial", [1.0])]
    spec = load_spec("specs/generalization/sft-needed-before-rl.toml").with_profile("smoke")
    return evaluate(pd.concat([*shared, *(f for run in runs for f in run)], ignore_index=True), spec.rule,
                    spec.rule_params())


def test_rl_that_only_loses_the_sft_starts_hands_does_not_refute():
    """RL from the SFT start loses 12 of 40 OOD hands it had; RL from the base gains none (it had none to lose):
    the paired difference lies wholly below 0, yet nothing shows RL working without SFT."""
    lost = [-1.0] * 12 + [0.0] * (N - 12)
    v = _decide(_run(0, lost, [0.0] * N), _run(1, lost, [0.0] * N))
    assert v.outcome is Outcome.INCONCLUSIVE, v.reason
    assert "RL from the base model raised its out-of-distribution accuracy" in v.reason
    assert "measured 0" in v.reason


def test_rl_that_works_from_the_base_as_well_refutes():
    """RL from the base model gains 12 of 40 OOD hands, RL from the SFT start none: the claim is refuted, and
    the new precondition holds (0.3 ≥ 0.01)."""
    won = [1.0] * 12 + [0.0] * (N - 12)
    v = _decide(_run(0, [0.0] * N, won), _run(1, [0.0] * N, won))
    assert v.outcome is Outcome.REFUTED, v.reason
    assert "RL from the base model raised its out-of-distribution accuracy" in (v.sensitivity or "")


def test_rl_that_works_only_after_sft_supports():
    won = [1.0] * 12 + [0.0] * (N - 12)
    v = _decide(_run(0, won, [0.0] * N), _run(1, won, [0.0] * N))
    assert v.outcome is Outcome.SUPPORTED, v.reason


def _arms(seed: int, rl_id: float, rl_ood: list[float], sft_id: float, sft_ood: list[float]) -> list[pd.DataFrame]:
    r, hands = probes._rows, list(range(N))
    return [r("correct", "rl", rl_ood, split="ood", sample=hands, seed=seed),
            r("correct", "sft", sft_ood, split="ood", sample=hands, seed=seed),
            r("trained_id_accuracy", "rl", [rl_id], split="id", seed=seed),
            r("trained_id_accuracy", "sft", [sft_id], split="id", seed=seed),
            r("converged", "rl", [1.0], seed=seed), r("converged", "sft", [1.0], seed=seed)]


def _generalizes(*runs: list[pd.DataFrame]):
    r, hands = probes._rows, list(range(N))
    start = [1.0] * 16 + [0.0] * (N - 16)  # the start solves 16 of 40 OOD hands
    shared = [r("format_ok", "initial", [1.0] * N, split="id", sample=hands),
              r("correct", "initial", [1.0] * 20 + [0.0] * 20, split="id", sample=hands),
              r("correct", "initial", start, split="ood", sample=hands),
              r("initial_format_rate", "initial", [1.0]), r("initial_ood_accuracy", "initial", [0.4], split="ood")]
    spec = load_spec("specs/generalization/rl-generalizes-sft-memorizes.toml").with_profile("smoke")
    return evaluate(pd.concat([*shared, *(f for run in runs for f in run)], ignore_index=True), spec.rule,
                    spec.rule_params())


def test_an_rl_arm_that_learned_nothing_does_not_refute_rl_generalizes():
    """The RL arm answers nothing (0.1 in distribution, every OOD hand lost) while the SFT arm learned the rule
    (1.0) and kept the start's OOD hands: the mean of the two arms (0.55) would pass a pooled precondition."""
    gone, kept = [0.0] * N, [1.0] * 16 + [0.0] * (N - 16)
    v = _generalizes(_arms(0, 0.1, gone, 1.0, kept), _arms(1, 0.1, gone, 1.0, kept))
    assert v.outcome is Outcome.INCONCLUSIVE, v.reason
    assert "the RL arm learned the in-distribution rule" in v.reason and "measured 0.1" in v.reason


def test_arms_that_both_learned_refute_when_rl_loses_ood_hands():
    gone, kept = [0.0] * N, [1.0] * 16 + [0.0] * (N - 16)
    v = _generalizes(_arms(0, 0.9, gone, 1.0, kept), _arms(1, 0.9, gone, 1.0, kept))
    assert v.outcome is Outcome.REFUTED, v.reason
    assert "the RL arm learned the in-distribution rule" in (v.sensitivity or "")

"""The shipped sft-needed-before-rl spec's decision on constructed frames: RL that lowers the SFT start's
out-of-distribution accuracy while the base model, near 0, has nothing to lose must not read as "RL works
without SFT"."""

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

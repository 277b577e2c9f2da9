"""The shipped knowledge specs' decision rules on constructed frames: a run whose loss flattened while the adapter
took in few of its facts must not read as "LoRA cannot learn them"."""

from __future__ import annotations

import pandas as pd
import pytest

from bench.ground.spec import load_spec
from bench.stats import Outcome, evaluate


def _run(seed: int, reliability: list[float], fitted: list[float], converged: float) -> pd.DataFrame:
    """One training run's rows as the knowledge probe writes them (uk_only, 10 trained facts)."""
    facts = list(range(len(reliability)))
    rows = [pd.DataFrame({"metric": "reliability", "sample": facts, "value": reliability}),
            pd.DataFrame({"metric": "fitted", "sample": facts, "value": fitted}),
            pd.DataFrame({"metric": "converged", "sample": [pd.NA], "value": [converged]})]
    return pd.concat(rows, ignore_index=True).assign(condition="uk_only", seed=seed)


def _decide(*runs: pd.DataFrame):
    spec = load_spec("specs/knowledge/lora-learns-unknown-facts.toml")
    frame = pd.concat(runs, ignore_index=True)
    frame["sample"] = frame["sample"].astype("Int64")
    return evaluate(frame, spec.rule, spec.rule_params())


LOW = [0.0, 0.0, 0.0, 0.25, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]


def test_a_flat_loss_with_few_facts_taken_in_is_inconclusive():
    """The pattern of smollm2-135m's runs: loss flattened, 4 (and 1) of 10 facts answered as trained, reliability
    near 0 in every run.  The paper's recipe did not put the facts in, so the reliability cannot refute it."""
    v = _decide(_run(42, LOW, [1.0] * 4 + [0.0] * 6, 1.0), _run(1337, LOW, [1.0] + [0.0] * 9, 1.0))
    assert v.outcome is Outcome.INCONCLUSIVE
    assert "could not have shown the effect: the adapter took in the Unknown facts" in v.reason
    assert "measured 0.4" in v.reason and "measured 0.1" in v.reason


def test_facts_taken_in_but_not_recalled_under_the_prompts_is_refuted():
    """Every fact answered as trained and the loss flat, yet the few-shot prompts recall almost none: the claim's
    measurement could have shown it, and it did not hold."""
    v = _decide(_run(42, LOW, [1.0] * 10, 1.0), _run(1337, LOW, [1.0] * 9 + [0.0], 1.0))
    assert v.outcome is Outcome.REFUTED
    assert all("precondition held: the adapter took in the Unknown facts" in p.sensitivity for p in v.parts)


@pytest.mark.parametrize("converged", [0.0, 1.0])
def test_a_loss_still_moving_is_inconclusive_even_with_the_facts_in(converged):
    v = _decide(_run(42, LOW, [1.0] * 10, converged), _run(1337, LOW, [1.0] * 10, 1.0))
    assert v.outcome is (Outcome.REFUTED if converged else Outcome.INCONCLUSIVE)
    if not converged:
        assert "loss flattened" in v.reason


def test_ten_facts_cannot_support_the_claim_but_a_hundred_can():
    """≥ 0.9 from 0/1 reliabilities is the exact binomial test per run: 10 of 10 gives p = 0.9^10 = 0.35, so the
    smoke profile's 10 facts cannot support the claim (its spec says so); the full profile trains 100 facts, where
    100 of 100 gives p = 0.9^100 and every run supports it."""
    ten = _decide(_run(42, [1.0] * 10, [1.0] * 10, 1.0), _run(1337, [1.0] * 10, [1.0] * 10, 1.0))
    assert ten.outcome is Outcome.INCONCLUSIVE
    assert all(p.p_value == pytest.approx(0.9 ** 10) for p in ten.parts)
    spec = load_spec("specs/knowledge/lora-learns-unknown-facts.toml")
    assert (spec.with_profile("full").probe_params()["n_train"], spec.with_profile("smoke").probe_params()["n_train"]) == (100, 10)
    hundred = _decide(_run(42, [1.0] * 100, [1.0] * 100, 1.0), _run(1337, [1.0] * 100, [0.0] * 100, 0.0))
    assert hundred.outcome is Outcome.SUPPORTED
    assert all(p.p_value == pytest.approx(0.9 ** 100) for p in hundred.parts)

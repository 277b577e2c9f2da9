"""Both specs end to end on the real embedded SmolLM2, with a tiny budget: the cell ends in an outcome, not
ERROR, and the second spec reuses the first one's cached stages."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import models, stats
from bench.core import registry, schemas
from bench.core.context import ProbeContext
from bench.core.spec import load_spec
from bench.core.store import Cache

pytestmark = pytest.mark.embedded
SPECS = Path(__file__).resolve().parents[3] / "specs" / "generalization"
TINY = {"n_train": 4, "n_eval": 10, "steps": 1, "batch": 2, "group": 2, "n_demos": 1, "max_new_tokens": 6}


@pytest.fixture(scope="module")
def smollm():
    if models.cache_state("smollm2-135m") != "ready":
        pytest.skip("embedded model smollm2-135m is not prepared (make setup)")
    return models.load(models.resolve("smollm2-135m"))


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return Cache(tmp_path_factory.mktemp("gen-cache"))


@pytest.mark.parametrize("name", ["rl-generalizes-sft-memorizes", "sft-needed-before-rl"])
def test_spec_end_to_end(smollm, cache, name):
    spec = load_spec(SPECS / f"{name}.toml").with_profile("smoke")
    info = registry.probe(spec.probe)
    ctx = ProbeContext(model=smollm, seed=0, cache=cache)
    frame = schemas.validate(info.fn(ctx, **{**spec.probe_params(), **TINY}), info.schema, info.metrics)
    verdict = stats.evaluate(frame, spec.rule, spec.rule_params())
    assert verdict.outcome is not stats.Outcome.ERROR, verdict.reason
    assert verdict.outcome in (stats.Outcome.SUPPORTED, stats.Outcome.REFUTED, stats.Outcome.INCONCLUSIVE)
    assert frame.attrs["notes"] and (frame["metric"] == "train_flops").any()

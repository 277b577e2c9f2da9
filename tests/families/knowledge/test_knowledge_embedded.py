"""Each knowledge claim end to end on an embedded model with a tiny budget: the spec's probe and rule run and
reach an outcome with its evidence (any outcome: the tiny budget decides nothing)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import stats
from bench.ground import schemas
from bench.ground.context import ProbeContext
from bench.ground.registry import probe
from bench.ground.spec import load_spec
from bench.ground.store import Cache
from bench.stats import Outcome

SPECS = Path(__file__).resolve().parents[3] / "specs"
TINY = dict(n_pool=8, max_pool=16, k=2, max_new=4, n_train=2, n_mix=2, seeds=[42], epochs=1, batch=2)




@pytest.mark.embedded
@pytest.mark.parametrize("path", ["knowledge/lora-learns-unknown-facts.toml", "knowledge/new-facts-erode-known.toml",
                                  "knowledge/mixing-known-reduces-damage.toml", "notes/lora-worse-than-full-ft.toml"])
def test_claim_end_to_end(one_thread, smollm, tmp_path, path):
    spec = load_spec(SPECS / path).with_profile("smoke")
    info = probe(spec.probe)
    params = {**spec.probe_params(), **TINY, "corpus": "facts:country-capital"}
    ctx = ProbeContext(model=smollm, seed=0, cache=Cache(tmp_path))
    frame = schemas.validate(info.call(ctx, **params), info.schema, info.metrics)
    verdict = stats.evaluate(frame, spec.rule, spec.rule_params())
    assert verdict.outcome is not Outcome.ERROR and verdict.reason
    assert (frame["metric"] == "train_loss").any()

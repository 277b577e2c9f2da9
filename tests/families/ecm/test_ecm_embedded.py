"""Each ecm spec end to end on the real embedded SmolLM2 with a tiny budget: probe → schema → the spec's rule;
the charts render.  (Marked `embedded`; needs `make setup`.)"""

from __future__ import annotations

import pytest
import vl_convert

from bench.ground import registry, schemas
from bench.ground.context import ProbeContext
from bench.ground.spec import load_spec
from bench.ground.charts import chart_for
from bench.stats import Outcome, evaluate

pytestmark = pytest.mark.embedded




@pytest.mark.parametrize("name, tiny", [
    ("ecm/icl-improves-with-demonstrations", {"n_items": 3, "demos": [0, 2, 4], "tasks": ["successor"]}),
    ("ecm/cot-helps-multistep", {"n_items": 2, "n_demos": 1, "max_new_tokens_cot": 24}),
    ("circuits/direct-path-bigrams", {"n_texts": 200, "n_first": 10, "top_k": 5}),
])
def test_spec_end_to_end_with_a_tiny_budget(smollm, name, tiny):
    spec = load_spec(f"specs/{name}.toml").with_profile("smoke")
    info = registry.probe(spec.probe)
    frame = schemas.validate(info.call(ProbeContext(model=smollm, seed=0), **{**spec.probe_params(), **tiny}),
                             info.schema, info.metrics)
    verdict = evaluate(frame, spec.rule, spec.rule_params())
    assert verdict.outcome in (Outcome.SUPPORTED, Outcome.REFUTED, Outcome.INCONCLUSIVE), verdict
    chart = chart_for(spec.probe)(frame)
    assert vl_convert.vegalite_to_svg(chart.to_json()).startswith("<svg")
    if spec.probe == "icl_demonstrations":
        assert len(frame) == 3 * 3 and set(frame["n_demos"]) == {0, 2, 4}
        assert frame[frame["n_demos"] == 4]["value"].mean() >= 2 / 3  # SmolLM2 continues n → n + 1 when shown
    if spec.probe == "cot_multistep":
        assert set(frame["condition"]) == {"cot", "direct"} and frame["output"].str.len().gt(0).all()
    if spec.probe == "direct_path_bigrams":
        assert (frame["metric"] == "spearman").sum() >= 8

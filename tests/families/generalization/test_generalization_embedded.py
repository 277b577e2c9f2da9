"""Both specs end to end on the real embedded SmolLM2, with a tiny budget: the cell ends in an outcome, not
ERROR, and the second spec reuses the first one's cached stages."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from bench import stats
from bench.ground import registry, schemas
from bench.ground.context import ProbeContext
from bench.ground.spec import load_spec
from bench.ground.store import Cache

pytestmark = pytest.mark.embedded
SPECS = Path(__file__).resolve().parents[3] / "specs" / "generalization"
TINY = {"n_init": 4, "init_steps": 1, "n_train": 4, "n_eval": 10, "steps": 1, "batch": 2, "group": 2, "sft_batch": 2,
        "max_new_tokens": 6, "seeds": 2, "curve_points": 0}




@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return Cache(tmp_path_factory.mktemp("gen-cache"))


@pytest.mark.parametrize("name", ["rl-generalizes-sft-memorizes", "sft-needed-before-rl"])
def test_spec_end_to_end(smollm, cache, name):
    spec = load_spec(SPECS / f"{name}.toml").with_profile("smoke")
    info = registry.probe(spec.probe)
    ctx = ProbeContext(model=smollm, seed=0, cache=cache)
    frame = schemas.validate(info.call(ctx, **{**spec.probe_params(), **TINY}), info.schema, info.metrics)
    verdict = stats.evaluate(frame, spec.rule, spec.rule_params())
    assert verdict.outcome is not stats.Outcome.ERROR, verdict.reason
    assert verdict.outcome in (stats.Outcome.SUPPORTED, stats.Outcome.REFUTED, stats.Outcome.INCONCLUSIVE)
    assert frame.attrs["notes"] and (frame["metric"] == "train_flops").any()


def test_batched_greedy_answers_equal_transformers_generate(smollm, one_thread):
    """A value on the real model: the left-padded, KV-cached batch decoding that scores every stage gives, prompt
    by prompt, the text transformers' own greedy ``generate`` gives (cut at the end of the line), and the
    verifier scores both alike."""
    from bench.families.generalization import tasks
    from bench.models import decoding

    task = tasks.TaskConfig(2, None, "+", 100)
    demos = tasks.demo_items(task, "ood", 3, 0, faces=True)
    items = tasks.generate(task, "ood", 6, 0, stream=3, need_face=True)
    prompts = [tasks.prompt(it, demos) for it in items]
    tok = smollm.tokenizer
    got = decoding.decode(smollm.hf, tok, prompts, 12, micro_batch=4).texts  # two batches of unequal padding
    for p, it, text in zip(prompts, items, got):
        ids, mask = decoding.encode_prompts(tok, [p], "cpu")
        with torch.no_grad():
            out = smollm.hf.generate(input_ids=ids, attention_mask=mask, max_new_tokens=12, do_sample=False,
                                     pad_token_id=decoding.pad_id(tok))
        ref = tok.decode(out[0, ids.shape[1]:], skip_special_tokens=True).split("\n", 1)[0]
        assert text == ref, p
        assert tasks.score(text, it.values, it.target) == tasks.score(ref, it.values, it.target)

"""Values on the real embedded SmolLM2, not shapes: the shared-prefix answers equal transformers' own greedy
``generate``, invented facts are never answered, and well-known capitals mostly are (a trained model, not noise)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from bench.corpora.facts import fictional, geonames, matches
from bench.families.knowledge.categorise import (
    Prompts,
    answer_after,
    ask,
    count_correct,
    demo_block,
)

pytestmark = pytest.mark.embedded
WELL_KNOWN = ("France", "Germany", "Italy", "Spain", "Japan", "Russia", "China", "Egypt", "Canada", "Greece")




@pytest.fixture(scope="module")
def capitals():
    facts = {f.subject: f for f in geonames("country-capital")}
    return [facts[s] for s in WELL_KNOWN], [f for s, f in facts.items() if s not in WELL_KNOWN][:8]


def test_shared_prefix_answers_equal_transformers_generate(smollm, capitals, one_thread):
    known, demos = capitals
    hf, tok = smollm.hf, smollm.tokenizer
    prefix = demo_block(demos[:4])
    fast = answer_after(hf, tok, prefix, [ask(f) for f in known], max_new=8)
    for fact, got in zip(known, fast):
        ids = torch.tensor([tok(prefix + ask(fact))["input_ids"]])  # the whole prompt, tokenized as one text
        with torch.no_grad():
            out = hf.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=8, do_sample=False,
                              pad_token_id=tok.eos_token_id)
        assert got == tok.decode(out[0, ids.shape[1]:]).split("\n")[0].strip(), fact.subject


def test_groups_decoded_together_answer_as_transformers_generate_on_each_prompt(smollm, capitals, one_thread):
    """Two relations' prompts in one shared batch (capital questions after capital demonstrations, country
    questions after city demonstrations, split across micro-batches): each answer is transformers' greedy
    ``generate`` of that whole prompt, so no row reads another group's prefix (the answers differ by group)."""
    from bench.models import decoding

    known, demos = capitals
    hf, tok = smollm.hf, smollm.tokenizer
    cities = geonames("city-country")
    groups = [[demo_block(demos[:4]) + ask(f) for f in known[:5]],
              [demo_block(cities[:4]) + ask(f) for f in cities[10:15]]]
    got = decoding.decode_groups(hf, tok, groups, 8, micro_batch=3)
    for group, answers in zip(groups, got):
        for prompt, answer in zip(group, answers):
            ids = torch.tensor([tok(prompt)["input_ids"]])
            with torch.no_grad():
                out = hf.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=8,
                                  do_sample=False, pad_token_id=tok.eos_token_id)
            assert answer.strip() == tok.decode(out[0, ids.shape[1]:]).split("\n")[0].strip(), prompt[-60:]
    assert not set(got[0]) & set(got[1])  # capitals on one side, countries on the other


def test_invented_facts_are_never_known_and_real_capitals_mostly_are(smollm, capitals, one_thread):
    known, demos = capitals
    prompts = Prompts.draw(demos, k=2, shots=4, rng=np.random.default_rng(0))
    invented = count_correct(smollm.hf, smollm.tokenizer, fictional(8, seed=0), prompts, max_new=8)
    assert invented.tolist() == [0] * 8  # the guaranteed-Unknown control: no model can know these
    real = count_correct(smollm.hf, smollm.tokenizer, known, prompts, max_new=8)
    assert (real == 2).sum() >= 6, dict(zip(WELL_KNOWN, real.tolist()))  # HighlyKnown for most of the ten
    assert matches("Paris, France.", ("Paris",))

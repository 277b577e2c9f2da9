"""Input edits and answer matching for the QA probe; prefix reconstruction on a tiny model."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from bench.families.microscope.contextual import DecoderConfig, decoder_copy, examples, run
from bench.families.microscope.layerpass import Item
from bench.families.microscope.qa import capital_facts, edit, is_correct, prompt, stop_words


def test_edits():
    s = "What is the capital of France?"
    stops = stop_words()
    assert edit(s, "original") == s
    assert edit(s, "no_punctuation") == "What is the capital of France"
    assert edit(s, "no_articles") == "What is capital of France?"
    assert edit(s, "no_stopwords", stops) == "capital France?"
    assert edit("Name the capital city of Côte d'Ivoire.", "no_articles") == "Name capital city of Côte d'Ivoire."


def test_prompt_keeps_the_scaffold_and_demonstrated_answers():
    demos, facts = capital_facts(5, 2)
    assert len(demos) == 2 and len(facts) == 5 and {d.subject for d in demos}.isdisjoint(f.subject for f in facts)
    p = prompt(demos, facts[0], "no_punctuation", stop_words())
    assert p.count("Question:") == 3 and p.endswith("Answer:") and f"Answer: {demos[0].aliases[0]}" in p
    assert "?" not in p


@pytest.mark.parametrize("answer,ok", [(" Paris", True), (" paris.\nQuestion", True), (" Paris, France", True),
                                       (" Parisian", False), (" Lyon", False), ("", False)])
def test_alias_matching(answer, ok):
    assert is_correct(answer, ("Paris",)) is ok


def test_alias_matching_ignores_accents():
    assert is_correct(" Brasilia", ("Brasília",)) and is_correct(" Bogotá is", ("Bogota",))


def test_examples_reconstruct_the_prefix_without_special_tokens():
    it = Item(0, (1, 10, 11, 12, 13), ("special", "noun", "verb", "determiner", "noun"))
    exs = examples(it, max_prefix=2)
    assert [x.position for x in exs] == [2, 3, 4]  # position 1's prefix is only BOS
    assert exs[0].prefix == (10,) and exs[-1].prefix == (11, 12)


def test_decoder_copy_truncates_and_leaves_the_model_alone(loaded_tiny):
    dec = decoder_copy(loaded_tiny, 1)
    assert len(dec.model.layers) == 1 and len(loaded_tiny.hf.model.layers) == 2
    assert dec.model.layers[0].self_attn.q_proj.weight.data_ptr() != \
        loaded_tiny.hf.model.layers[0].self_attn.q_proj.weight.data_ptr()
    ids = torch.tensor([[1, 2, 3]])
    assert dec(input_ids=ids).logits.shape == (1, 3, loaded_tiny.hf.config.vocab_size)


def test_prefix_reconstruction_learns_on_a_tiny_model(loaded_tiny):
    """Training lowers the held-out loss below the untrained one; the original model is not changed."""
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    items = [Item(i, tuple(int(t) for t in rng.integers(5, 13, 12)), ("noun",) * 12) for i in range(24)]  # 8 ids
    before = [p.detach().clone() for p in loaded_tiny.hf.parameters()]
    cfg = DecoderConfig(steps=40, texts_per_step=4, positions_per_text=6, lr=3e-3, lr_decoder=1e-3,
                        train_decoder="all", max_prefix=4, control_texts=4)
    out = run(loaded_tiny, items[4:], items[:4], cfg, torch.Generator().manual_seed(0))
    assert len(out["trained"]) == len(out["eval"]) and len(out["untrained"]) == len(out["control"])
    assert np.mean(out["trained"][: len(out["control"])]) < 0.9 * np.mean(out["untrained"])
    assert out["train_loss"][-5:].mean() < out["train_loss"][:5].mean()
    assert all(torch.equal(a, b) for a, b in zip(before, loaded_tiny.hf.parameters()))

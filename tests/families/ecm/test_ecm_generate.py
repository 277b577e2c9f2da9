"""Batched greedy generation against plain ``transformers`` ``generate``, with and without the KV cache."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
import torch

from bench.families.ecm.generate import cut, greedy, left_pad
from tests.conftest import build_tiny


@dataclass
class _Model:
    hf: object
    tokenizer: object
    device: torch.device = torch.device("cpu")


def _plain(model, texts: list[str], n: int) -> list[str]:
    """transformers' own greedy generate, left-padded, one text at a time (no padding at all)."""
    tok = model.tokenizer
    out = []
    for t in texts:
        ids = torch.tensor([tok(t)["input_ids"]])
        g = model.hf.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=n,
                              do_sample=False, pad_token_id=tok.eos_token_id, eos_token_id=tok.eos_token_id)
        out.append(tok.decode(g[0, ids.shape[1]:], skip_special_tokens=True))
    return out


@pytest.mark.parametrize("family", ["llama", "gemma3"])
def test_greedy_matches_plain_generate_with_shared_prefixes(family, tiny_tokenizer, one_thread):
    model = _Model(build_tiny(family, vocab=len(tiny_tokenizer)), tiny_tokenizer)
    prefixes = ["The cat sat on the mat.\n", "A dog ran far away from the house and\n", "The cat sat on the mat.\n"]
    prompts = ["It was", "the sun is a star that", "Why"]
    want = _plain(model, [p + q for p, q in zip(prefixes, prompts)], 6)
    for cache in (True, False):
        got = greedy(model, prompts, prefix=prefixes, max_new_tokens=6, stop=None, batch=2, use_cache=cache)
        assert got == want
    # one prefix for all, and no prefix: the same continuations
    joined = greedy(model, [p + q for p, q in zip(prefixes, prompts)], max_new_tokens=6, stop=None)
    assert joined == want


def test_per_row_budgets_and_stop_marker(tiny_tokenizer, one_thread):
    model = _Model(build_tiny("llama", vocab=len(tiny_tokenizer)), tiny_tokenizer)
    long = _plain(model, ["The cat"], 8)[0]
    got = greedy(model, ["The cat", "The cat"], max_new_tokens=[8, 2], stop=None)
    assert got[0] == long and long.startswith(got[1]) and len(got[1]) < len(long)
    marker = long[3:5]
    assert greedy(model, ["The cat"], max_new_tokens=8, stop=marker) == [cut(long, marker)]


def test_left_pad_and_cut():
    ids, mask = left_pad([[5, 6], [7]], pad=0)
    assert ids.tolist() == [[5, 6], [0, 7]] and mask.tolist() == [[1, 1], [0, 1]]
    assert cut(" Paris\nItaly", "\n") == " Paris" and cut("abc", None) == "abc"


def test_bad_budgets_are_rejected(tiny_tokenizer):
    model = _Model(build_tiny("llama", vocab=len(tiny_tokenizer)), tiny_tokenizer)
    with pytest.raises(ValueError, match="budget"):
        greedy(model, ["a", "b"], max_new_tokens=[3])

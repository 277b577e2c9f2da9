"""Batched greedy generation against plain ``transformers`` ``generate``, with and without the KV cache."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
import torch

from bench.models import decoding
from bench.models.decoding import cut, greedy, left_pad
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


# ── one decoder, three layouts: a mixed batch gives each prompt what it gives alone ─────────────────────────

PREFIXES = ["The cat sat on the mat.\n", "A dog ran far away from the house and\n", "", "The cat sat on the mat.\n"]
PROMPTS = ["It was", "the sun is a star that", "Why do birds", "A tree"]


@pytest.mark.parametrize("family", ["llama", "gemma3"])
def test_mixed_prefixes_budgets_and_stops_give_what_each_prompt_gives_alone(family, tiny_tokenizer, one_thread):
    """Four prompts under three prefixes (one empty), four budgets and four stop strings, two to a batch: each
    row's text is the one it gets decoded alone, and the stops and budgets did cut (the test can fail)."""
    model = _Model(build_tiny(family, seed=2, vocab=len(tiny_tokenizer)), tiny_tokenizer)
    budgets = [9, 3, 7, 5]
    free = [greedy(model, [q], prefix=p, max_new_tokens=b, stop=None)[0]
            for p, q, b in zip(PREFIXES, PROMPTS, budgets)]
    stops = [free[0][len(free[0]) // 2:][:2] or None, None, free[2][-3:-1] or None, "\n"]
    alone = [greedy(model, [q], prefix=p, max_new_tokens=b, stop=s)[0]
             for p, q, b, s in zip(PREFIXES, PROMPTS, budgets, stops)]
    got = greedy(model, PROMPTS, prefix=PREFIXES, max_new_tokens=budgets, stop=stops, batch=2)
    assert got == alone
    assert got[0] == cut(free[0], stops[0]) and len(got[0]) < len(free[0])  # the first stop string cut row 0
    assert got[2] == cut(free[2], stops[2]) and len(got[2]) < len(free[2])
    assert got[1] == free[1]  # no stop: the budget of 3 tokens ended it
    longer = greedy(model, [PROMPTS[1]], prefix=PREFIXES[1], max_new_tokens=9, stop=None)[0]
    assert longer.startswith(got[1]) and len(longer) > len(got[1])


def test_shared_token_prefix_with_per_prompt_budgets_and_stops(tiny_tokenizer, one_thread):
    """:func:`decode`: per-prompt budgets and stop strings give each prompt's own tokens, in a micro-batch."""
    hf = build_tiny("llama", seed=1, vocab=len(tiny_tokenizer))
    head = "Question: which city is the capital?\nAnswer:"
    prompts = [head + " one", head + " two words", head + " and three words here", head + " four"]
    budgets = [2, 8, 5, 8]
    free = decoding.decode(hf, tiny_tokenizer, prompts, 8, stop=None).texts
    stops = [None, None, free[2][2:4] or None, free[3][-2:] or None]
    batch = decoding.decode(hf, tiny_tokenizer, prompts, budgets, stop=stops, micro_batch=3)
    assert batch.prompts.n_prefix > 5
    for i, (p, b, s) in enumerate(zip(prompts, budgets, stops)):
        one = decoding.decode(hf, tiny_tokenizer, [p], b, stop=s, share=False)
        assert batch.texts[i] == one.texts[0]
        assert batch.ids[i][batch.mask[i].bool()].tolist() == one.ids[0][one.mask[0].bool()].tolist()
    assert batch.mask[0].sum() == 2 and free[0].startswith(batch.texts[0])  # the budget of 2 ended row 0
    assert batch.texts[2] == cut(free[2], stops[2]) and len(batch.texts[2]) < len(free[2])  # its stop cut row 2


@pytest.mark.parametrize("drop", [False, True])
def test_whole_rows_give_each_row_alone_whether_finished_rows_stay_or_leave(drop, tiny_tokenizer, one_thread):
    model = _Model(build_tiny("llama", vocab=len(tiny_tokenizer)), tiny_tokenizer)
    rows = [tiny_tokenizer(t)["input_ids"] for t in ("The cat", "A dog ran far away from", "Why")]
    budgets = [6, 2, 4]
    got = decoding.greedy_rows(model, rows, budgets, pad=0, drop=drop)
    want = _plain(model, ["The cat", "A dog ran far away from", "Why"], 6)
    assert got[0] == want[0]
    for r, b, text in zip(rows, budgets, got):
        assert text == decoding.greedy_rows(model, [r], b, pad=0)[0]
    assert want[1].startswith(got[1]) and len(got[1]) < len(want[1])


def test_one_stop_per_prompt_is_checked(tiny_tokenizer):
    model = _Model(build_tiny("llama", vocab=len(tiny_tokenizer)), tiny_tokenizer)
    with pytest.raises(ValueError, match="stop"):
        greedy(model, ["a", "b"], max_new_tokens=3, stop=["\n"])

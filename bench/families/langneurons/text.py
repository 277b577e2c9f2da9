"""Texts → token ids → padded micro-batches.

Every text starts with the tokenizer's BOS token (or, lacking one, its EOS token, the document separator of
GPT-2-style vocabularies), so that the model predicts every token of the text and bits per byte cover all of
its bytes.  A tokenizer with neither cannot be scored this way and raises an error.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

import torch

from bench.ground.errors import BenchError


def start_id(tokenizer) -> int:
    for name in ("bos_token_id", "eos_token_id"):
        value = getattr(tokenizer, name, None)
        if value is not None:
            return int(value)
    raise BenchError("the tokenizer has neither a BOS nor an EOS token to start a text with")


def pad_id(tokenizer) -> int:
    value = getattr(tokenizer, "pad_token_id", None)
    return int(value) if value is not None else start_id(tokenizer)


def encode(tokenizer, text: str, max_tokens: int | None = None) -> list[int]:
    """[start] + the text's tokens (no other special tokens), cut to `max_tokens` text tokens."""
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    if max_tokens is not None:
        ids = ids[:max_tokens]
    return [start_id(tokenizer), *ids]


def documents(tokenizer, texts: list[str], *, doc_tokens: int, budget: int) -> list[list[int]]:
    """Consecutive texts joined by newlines into documents of `doc_tokens` text tokens, until `budget` tokens."""
    docs: list[list[int]] = []
    buf: list[str] = []
    have = 0
    for text in texts:
        buf.append(text)
        have += len(tokenizer(text, add_special_tokens=False)["input_ids"]) + 1
        if have >= doc_tokens:
            docs.append(encode(tokenizer, "\n".join(buf), doc_tokens))
            buf, have = [], 0
            if len(docs) * doc_tokens >= budget:
                break
    return docs


@dataclass(frozen=True)
class Batch:
    ids: torch.Tensor        # (B, T) right-padded
    mask: torch.Tensor       # (B, T) 1 for real tokens
    rows: tuple[int, ...]    # which input sequence each row is


def groups(seqs: list[list[int]], *, max_tokens: int, sort: bool = True) -> Iterator[list[int]]:
    """The sequence indices of each micro-batch of :func:`batches` (its cost model counts the same groups)."""
    order = sorted(range(len(seqs)), key=lambda i: len(seqs[i])) if sort else list(range(len(seqs)))
    i = 0
    while i < len(order):
        j = i + 1
        while j < len(order) and (j + 1 - i) * len(seqs[order[j]]) <= max_tokens:
            j += 1
        yield order[i:j]
        i = j


def batches(seqs: list[list[int]], *, max_tokens: int, pad: int, sort: bool = True) -> Iterator[Batch]:
    """Micro-batches of at most `max_tokens` padded tokens; sequences sorted by length to waste little padding."""
    for rows in groups(seqs, max_tokens=max_tokens, sort=sort):
        T = max(len(seqs[r]) for r in rows)
        ids = torch.full((len(rows), T), pad, dtype=torch.long)
        mask = torch.zeros((len(rows), T), dtype=torch.long)
        for b, r in enumerate(rows):
            ids[b, : len(seqs[r])] = torch.tensor(seqs[r])
            mask[b, : len(seqs[r])] = 1
        yield Batch(ids, mask, tuple(rows))

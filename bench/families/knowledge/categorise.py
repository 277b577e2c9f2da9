"""Knowledge categories (Pletenev et al. 2025): ask each question under k different 4-shot prompts, greedy,
≤ `max_new` tokens, stop at the end of the answer line; HighlyKnown = all k correct, MaybeKnown = some,
Unknown = none.

Speed: each 4-shot prefix is run once and its KV cache copied along the batch for every group of questions
(:func:`answer_after`); a group's questions are padded between the prefix and the question (masked, with
position ids that continue the prefix), so every row sees exactly the tokens it would see alone.  The head runs
on the last position only.  :func:`answer_plain` is the same greedy decoding without the shared cache (full
left-padded prompts), kept for the parity test and the benchmark.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
import torch

from bench.corpora.facts import Fact, matches
from bench.models.train import body_of, head_of

HK, MK, UK = "HighlyKnown", "MaybeKnown", "Unknown"


def demo_block(demos: Sequence[Fact]) -> str:
    return "".join(f"Question: {d.question()}\nAnswer: {d.answer}\n\n" for d in demos)


def ask(fact: Fact, phrasing: int = 0) -> str:
    return f"Question: {fact.question(phrasing)}\nAnswer:"


def category(n_correct: int, k: int) -> str:
    return HK if n_correct == k else UK if n_correct == 0 else MK


@dataclass(frozen=True)
class Prompts:
    """k few-shot prefixes per relation, each with its own `shots` demonstrations drawn from `demos`."""

    prefixes: dict[str, tuple[str, ...]]

    @classmethod
    def draw(cls, demos: Sequence[Fact], k: int, shots: int, rng: np.random.Generator) -> "Prompts":
        out: dict[str, tuple[str, ...]] = {}
        for rel in sorted({d.relation for d in demos}):
            pool = [d for d in demos if d.relation == rel]
            if len(pool) < shots:
                raise ValueError(f"{len(pool)} demonstrations of '{rel}' for {shots}-shot prompts")
            out[rel] = tuple(demo_block([pool[i] for i in rng.choice(len(pool), shots, replace=False)])
                             for _ in range(k))
        return cls(out)

    @property
    def k(self) -> int:
        return min(len(v) for v in self.prefixes.values())


def _pad_id(tok) -> int:
    return tok.pad_token_id if tok.pad_token_id is not None else (tok.eos_token_id or 0)


def _ids(tok, text: str, special: bool) -> list[int]:
    return tok(text, add_special_tokens=special)["input_ids"]


@torch.no_grad()
def _greedy(lm, tok, ids: torch.Tensor, mask: torch.Tensor, pos: torch.Tensor, cache, max_new: int) -> list[str]:
    """Greedy continuation of a batch (B, S) whose earlier context, if any, is in `cache`; text up to '\\n'."""
    body, head = body_of(lm), head_of(lm)
    B = ids.shape[0]
    out: list[list[int]] = [[] for _ in range(B)]
    done = torch.zeros(B, dtype=torch.bool)
    eos = tok.eos_token_id
    for _ in range(max_new):
        res = body(input_ids=ids, attention_mask=mask, position_ids=pos, cache=cache, use_cache=True)
        cache = res.cache
        nxt = head(res.last_hidden_state[:, -1]).argmax(-1)                       # (B,)
        for i in range(B):
            if done[i]:
                continue
            t = int(nxt[i])
            if t == eos:
                done[i] = True
                continue
            out[i].append(t)
            if "\n" in tok.decode(out[i][-1:]):
                done[i] = True
        if bool(done.all()):
            break
        ids = nxt[:, None]                                                         # (B, 1)
        mask = torch.cat([mask, torch.ones((B, 1), dtype=mask.dtype, device=mask.device)], dim=1)
        pos = pos[:, -1:] + 1
    return [tok.decode(o).split("\n")[0].strip() for o in out]


def answer_after(lm, tok, prefix: str, questions: Sequence[str], *, max_new: int = 32, batch: int = 32) -> list[str]:
    """Greedy answers to `questions`, each appended to `prefix`, reusing the prefix's KV cache."""
    device = next(lm.parameters()).device
    pre = _ids(tok, prefix, True)
    if not pre:
        return answer_plain(lm, tok, prefix, questions, max_new=max_new, batch=batch)
    with torch.no_grad():
        base = body_of(lm)(input_ids=torch.tensor([pre], device=device), use_cache=True).cache
    P = len(pre)
    pad = _pad_id(tok)
    answers: list[str] = []
    for s in range(0, len(questions), batch):
        qs = [_ids(tok, q, False) for q in questions[s: s + batch]]
        B, S = len(qs), max(len(q) for q in qs)
        ids = torch.full((B, S), pad, dtype=torch.long)
        qmask = torch.zeros((B, S), dtype=torch.long)
        for i, q in enumerate(qs):  # padding sits between the prefix and the question
            ids[i, S - len(q):] = torch.tensor(q)
            qmask[i, S - len(q):] = 1
        mask = torch.cat([torch.ones((B, P), dtype=torch.long), qmask], dim=1)    # (B, P + S)
        pos = (mask.cumsum(-1) - 1).clamp(min=0)[:, P:]                          # (B, S)
        cache = copy.deepcopy(base)
        cache.batch_repeat_interleave(B)
        answers += _greedy(lm, tok, ids.to(device), mask.to(device), pos.to(device), cache, max_new)
    return answers


def answer_plain(lm, tok, prefix: str, questions: Sequence[str], *, max_new: int = 32, batch: int = 32) -> list[str]:
    """The same greedy answers from whole left-padded prompts (no shared cache)."""
    device = next(lm.parameters()).device
    pre = _ids(tok, prefix, True) if prefix else _ids(tok, "", True)
    pad = _pad_id(tok)
    answers: list[str] = []
    for s in range(0, len(questions), batch):
        seqs = [pre + _ids(tok, q, not pre) for q in questions[s: s + batch]]
        B, T = len(seqs), max(len(q) for q in seqs)
        ids = torch.full((B, T), pad, dtype=torch.long)
        mask = torch.zeros((B, T), dtype=torch.long)
        for i, q in enumerate(seqs):
            ids[i, T - len(q):] = torch.tensor(q)
            mask[i, T - len(q):] = 1
        pos = (mask.cumsum(-1) - 1).clamp(min=0)
        answers += _greedy(lm, tok, ids.to(device), mask.to(device), pos.to(device), None, max_new)
    return answers


Answerer = Callable[..., list[str]]


def count_correct(lm, tok, facts: Sequence[Fact], prompts: Prompts, *, max_new: int = 32, batch: int = 32,
                  answer: Answerer = answer_after,
                  progress: Callable[[float, str], None] = lambda f, m="": None) -> np.ndarray:
    """(n_facts,) number of the k prompts under which each fact is answered correctly."""
    counts = np.zeros(len(facts), dtype=int)
    rels = sorted({f.relation for f in facts})
    jobs = [(rel, j) for rel in rels for j in range(prompts.k)]
    for n, (rel, j) in enumerate(jobs):
        idx = [i for i, f in enumerate(facts) if f.relation == rel]
        outs = answer(lm, tok, prompts.prefixes[rel][j], [ask(facts[i]) for i in idx], max_new=max_new,
                      batch=batch)
        for i, o in zip(idx, outs):
            counts[i] += matches(o, facts[i].aliases)
        progress((n + 1) / len(jobs), f"categorising: prompt {n + 1}/{len(jobs)}")
    return counts


def zero_shot_correct(lm, tok, facts: Sequence[Fact], *, phrasing: int = 0, max_new: int = 32,
                      batch: int = 32) -> np.ndarray:
    """(n_facts,) 0/1: the fact answered correctly when asked exactly as in training (no demonstrations)."""
    outs = answer_plain(lm, tok, "", [ask(f, phrasing) for f in facts], max_new=max_new, batch=batch)
    return np.array([int(matches(o, f.aliases)) for o, f in zip(outs, facts)])

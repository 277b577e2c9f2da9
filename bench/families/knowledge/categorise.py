"""Knowledge categories (Pletenev et al. 2025): ask each question under k different 4-shot prompts, greedy,
≤ `max_new` tokens, stop at the end of the answer line; HighlyKnown = all k correct, MaybeKnown = some,
Unknown = none.

Each prompt is the whole text (prefix + question) tokenized as one string, as a model would be prompted (the
prefix tokenized on its own can end in a different token: SmolLM2 writes the demonstrations' closing blank
line as one token alone and as two before "Question").  Speed (:func:`count_correct`, through
:func:`bench.models.decoding.decode_groups`): the token prefix that all prompts of a group share (the
demonstrations and "Question: What is the capital of") is run once and its KV cache copied into its rows; the
rows of all k prompts and relations share the batches; finished answers leave the batch; the head runs on the
last position only.  :func:`answer_after` decodes one group alone the same way.  :func:`answer_plain` is the same greedy decoding of
whole left-padded prompts, kept for the parity test and the benchmark.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from bench.corpora.facts import Fact, matches
from bench.models import decoding

HK, MK, UK = "HighlyKnown", "MaybeKnown", "Unknown"


def demo_block(demos: Sequence[Fact]) -> str:
    return "".join(f"Question: {d.question()}\nAnswer: {d.answer}\n\n" for d in demos)


def ask(fact: Fact, phrasing: int = 0) -> str:
    return f"Question: {fact.question(phrasing)}\nAnswer:"


def category(n_correct: int, k: int) -> str:
    return HK if n_correct == k else UK if n_correct == 0 else MK


@dataclass(frozen=True)
class Prompts:
    """k few-shot prefixes per relation, each with its own `shots` demonstrations from `demos`; the k sets are
    disjoint (the paper's 10 × 4-shot prompts use 10 disjoint sets), so k · shots demonstrations per relation."""

    prefixes: dict[str, tuple[str, ...]]

    @classmethod
    def draw(cls, demos: Sequence[Fact], k: int, shots: int, rng: np.random.Generator) -> "Prompts":
        out: dict[str, tuple[str, ...]] = {}
        for rel in sorted({d.relation for d in demos}):
            pool = [d for d in demos if d.relation == rel]
            if len(pool) < k * shots:
                raise ValueError(f"{len(pool)} demonstrations of '{rel}' for {k} disjoint {shots}-shot prompts "
                                 f"(need {k * shots})")
            perm = rng.permutation(len(pool))
            out[rel] = tuple(demo_block([pool[i] for i in perm[j * shots: (j + 1) * shots]]) for j in range(k))
        return cls(out)

    @property
    def k(self) -> int:
        return min(len(v) for v in self.prefixes.values())


def answer_after(lm, tok, prefix: str, questions: Sequence[str], *, max_new: int = 32, batch: int = 32) -> list[str]:
    """Greedy answers to `questions`, each appended to `prefix` (the prompts' common token prefix runs once)."""
    return _answers(lm, tok, prefix, questions, max_new, batch, share=True)


def answer_plain(lm, tok, prefix: str, questions: Sequence[str], *, max_new: int = 32, batch: int = 32) -> list[str]:
    """The same greedy answers from whole left-padded prompts (no shared cache)."""
    return _answers(lm, tok, prefix, questions, max_new, batch, share=False)


def _answers(lm, tok, prefix: str, questions: Sequence[str], max_new: int, batch: int, share: bool) -> list[str]:
    if not questions:
        return []
    comp = decoding.decode(lm, tok, [prefix + q for q in questions], max_new, micro_batch=batch, share=share)
    return [t.strip() for t in comp.texts]


Answerer = Callable[..., list[str]]


def count_correct(lm, tok, facts: Sequence[Fact], prompts: Prompts, *, max_new: int = 32, batch: int = 32,
                  answer: Answerer | None = None,
                  progress: Callable[[float, str], None] = lambda f, m="": None) -> np.ndarray:
    """(n_facts,) number of the k prompts under which each fact is answered correctly.  By default every
    (relation, prompt) group is decoded in shared batches of `batch` rows (:func:`decoding.decode_groups`: a
    decoding step reads all the weights however few rows it has); `answer` (e.g. :func:`answer_after`) asks
    group by group instead."""
    counts = np.zeros(len(facts), dtype=int)
    rels = sorted({f.relation for f in facts})
    jobs = [(rel, j) for rel in rels for j in range(prompts.k)]
    idx = {rel: [i for i, f in enumerate(facts) if f.relation == rel] for rel in rels}
    if answer is None:
        say = f"categorising: {len(jobs)} prompts × {len(facts)} facts"
        progress(0.0, say)
        groups = [[prompts.prefixes[rel][j] + ask(facts[i]) for i in idx[rel]] for rel, j in jobs]
        outs = [[t.strip() for t in g] for g in decoding.decode_groups(lm, tok, groups, max_new, micro_batch=batch,
                                                                       progress=lambda f: progress(f, say))]
    else:
        outs = [answer(lm, tok, prompts.prefixes[rel][j], [ask(facts[i]) for i in idx[rel]], max_new=max_new,
                       batch=batch) for rel, j in jobs]
    for (rel, _), out in zip(jobs, outs):
        for i, o in zip(idx[rel], out):
            counts[i] += matches(o, facts[i].aliases)
    progress(1.0, f"categorising: {len(jobs)} prompts done")
    return counts


def zero_shot_correct(lm, tok, facts: Sequence[Fact], *, phrasing: int = 0, max_new: int = 32,
                      batch: int = 32) -> np.ndarray:
    """(n_facts,) 0/1: the fact answered correctly when asked exactly as in training (no demonstrations)."""
    outs = answer_plain(lm, tok, "", [ask(f, phrasing) for f in facts], max_new=max_new, batch=batch)
    return np.array([int(matches(o, f.aliases)) for o, f in zip(outs, facts)])

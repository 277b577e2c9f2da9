"""The experiment behind every knowledge claim, in cached pieces (so the four specs share their work).

1. Split the fact set: per relation, the first `n_demos` facts (the most populous places) are demonstrations
   (k disjoint sets of `shots`); the next ones form the pool, read in chunks of `n_pool` facts down the
   population rank.  Categorise the first chunk with the base model (memo ``before`` per chunk) and grow the
   pool chunk by chunk, each harder than the last, until it holds `n_train` Unknown facts (or `max_pool` facts).
2. Pick the training facts (Unknown facts of the pool, or invented ones) and, for ``uk_hk``, HighlyKnown facts
   of the pool; the rest of the pool is held out (the whole first chunk, and the HighlyKnown facts of the others).
3. Per (condition, seed): train through :func:`bench.models.train.derived` for `epochs` over the condition's
   examples, so every Unknown fact is seen `epochs` times in every condition (the paper's epochs over the whole
   mix; a mix adds steps on top), categorise held-out and trained facts again with the same k prompts, and ask
   the trained facts zero-shot exactly as trained (memo ``after``).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pandas as pd

from bench.corpora.facts import Fact, fictional, load_facts
from bench.families.knowledge.categorise import UK, Prompts, ask, category, count_correct, zero_shot_correct
from bench.models import train
from bench.models.train import Example, Recipe

# Version of how answers are produced, in the sub-results' keys.  2: each prompt tokenized as one text (the
# prefix and the question were tokenized apart, which can split the blank line between them differently).
# 3: the k prompts' demonstration sets are disjoint.  4: all groups of prompts decoded in shared batches (the
# same answers up to float rounding, which can tip a greedy choice).  5: the first decoding step's output head on
# contiguous states (:func:`bench.models.logits.contiguous_head`; float rounding again).
ANSWERS = 5


@dataclass(frozen=True)
class Design:
    corpus: str
    n_demos: int
    n_pool: int
    k: int
    shots: int
    max_new: int
    eval_batch: int
    unknown: str
    n_train: int
    n_mix: int
    max_pool: int = 0   # the pool grows up to this many facts (0: `n_pool`, no growth)

    def parts(self) -> dict[str, Any]:
        return dict(self.__dict__)


def split(design: Design) -> tuple[list[Fact], list[list[Fact]]]:
    """(demonstrations, pool chunks) of the fact set, in a fixed order: chunk c holds, per relation, the
    facts ranked c·⌈n_pool / relations⌉ … after the demonstrations, at most `max_pool` facts in all."""
    facts = load_facts(design.corpus.partition(":")[2])
    rels = list(dict.fromkeys(f.relation for f in facts))
    per = math.ceil(design.n_pool / len(rels))
    of = {rel: [f for f in facts if f.relation == rel] for rel in rels}
    demos = [f for rel in rels for f in of[rel][: design.n_demos]]
    chunks: list[list[Fact]] = []
    room = max(design.max_pool, design.n_pool)
    for c in range(math.ceil(room / design.n_pool)):
        lo = design.n_demos + c * per
        chunk = [f for rel in rels for f in of[rel][lo: lo + per]][: min(design.n_pool, room)]
        if not chunk:
            break
        chunks.append(chunk)
        room -= len(chunk)
    return demos, chunks


def before(ctx, design: Design, say=lambda f, m="": None) -> tuple[np.ndarray, Prompts, list[Fact]]:
    """(per-pool-fact correct counts, the prompts, the pool) for the base model, cached per chunk.  The pool
    grows by a chunk while it holds fewer than `n_train` Unknown facts (when training on pool facts)."""
    demos, chunks = split(design)
    prompts = Prompts.draw(demos, design.k, design.shots, ctx.rng(1))
    lm, tok = ctx.model.hf, ctx.model.tokenizer
    pool: list[Fact] = []
    counts = np.zeros(0, dtype=int)
    for c, chunk in enumerate(chunks):
        if c and (design.unknown != "pool" or int((counts == 0).sum()) >= design.n_train):
            break

        def compute(chunk=chunk, c=c) -> pd.DataFrame:
            got = count_correct(lm, tok, chunk, prompts, max_new=design.max_new, batch=design.eval_batch,
                                progress=lambda f, m: say(f, f"base model, pool chunk {c + 1}: {m}"))
            return pd.DataFrame({"sample": np.arange(len(chunk)), "value": got.astype(float)})

        parts = {"knowledge": "before", "answers": ANSWERS, "model": ctx.model.fingerprint,
                 "design": _eval_parts(design), "seed": ctx.seed, "chunk": c}
        frame = ctx.memo(parts, compute)
        counts = np.concatenate([counts, frame.sort_values("sample")["value"].to_numpy(int)])
        pool += chunk
    return counts, prompts, pool


def _eval_parts(design: Design) -> dict[str, Any]:
    p = design.parts()
    for key in ("unknown", "n_train", "n_mix", "max_pool"):
        p.pop(key)
    return p


@dataclass(frozen=True)
class Split:
    train: list[tuple[int, Fact]]   # (sample id, fact): the Unknown facts trained on
    mix: list[tuple[int, Fact]]     # HighlyKnown facts added in ``uk_hk``
    held: list[int]                 # pool indices held out
    note: str


def choose(ctx, design: Design, counts: np.ndarray, pool: list[Fact]) -> Split:
    """Training facts, the HighlyKnown mix and the held-out facts; no held-out fact is trained on in any
    condition.  Held out: every unused fact of the first chunk, and the unused HighlyKnown facts of the rest."""
    rng = ctx.rng(2)
    order = rng.permutation(len(pool))
    uk = [int(i) for i in order if counts[i] == 0]
    hk = [int(i) for i in order if counts[i] == design.k]
    if design.unknown == "fictional":
        train_facts = [(len(pool) + j, f) for j, f in enumerate(fictional(design.n_train, ctx.seed))]
        used: set[int] = set()
    else:
        train_facts = [(i, pool[i]) for i in uk[: design.n_train]]
        used = {i for i, _ in train_facts}
    mix = [(i, pool[i]) for i in hk if i not in used][: design.n_mix]
    used |= {i for i, _ in mix}
    held = [i for i in range(len(pool)) if i not in used and (i < design.n_pool or counts[i] == design.k)]
    tally = Counter((pool[i].relation, category(int(counts[i]), design.k)) for i in range(len(pool)))
    per_rel = "; ".join(f"{rel}: " + ", ".join(f"{tally[rel, c]} {c}" for c in ("HighlyKnown", "MaybeKnown", UK))
                        for rel in dict.fromkeys(f.relation for f in pool))
    short = (f" — fewer than the {design.n_train} asked: the pool stopped at {len(pool)} facts "
             f"(max_pool or the end of the source)"
             if design.unknown == "pool" and len(uk) < design.n_train else "")
    note = (f"pool of {len(pool)} facts before training (k = {design.k}), grown to "
            f"{math.ceil(len(pool) / design.n_pool)} chunk(s) of {design.n_pool}: {per_rel}; "
            f"{len(train_facts)} {'invented' if design.unknown == 'fictional' else 'Unknown'} facts trained{short}, "
            f"{len(mix)} HighlyKnown facts for the mix, {len(held)} held out")
    return Split(train_facts, mix, held, note)


def examples(condition: str, sp: Split) -> list[Example]:
    def ex(f: Fact, phrasing: int = 0) -> Example:
        return Example(ask(f, phrasing), f" {f.answer}\n")

    base = [ex(f) for _, f in sp.train]
    if condition == "uk_paraphrase":
        return base + [ex(f, 1) for _, f in sp.train]
    if condition == "uk_hk":
        return base + [ex(f) for _, f in sp.mix]
    return base


def recipe_for(condition: str, lora: Recipe, full_lr: float, seed: int) -> Recipe:
    """`epochs` over the condition's examples (steps = None): each Unknown fact is seen `epochs` times in every
    condition, and a mix adds its steps on top, as the paper's epochs over the whole training set."""
    r = replace(lora, steps=None, seed=seed)
    if condition == "full_ft":
        r = replace(r, method="full", lr=full_lr, dropout=0.0)
    return r


def exposures(condition: str, sp: Split, recipe: Recipe) -> np.ndarray:
    """(n_train,) how many times the training loop shows each Unknown fact as asked (its first phrasing)."""
    seen = Counter(i for b in train.batch_order(len(examples(condition, sp)), recipe) for i in b)
    return np.array([seen[j] for j in range(len(sp.train))])


def converged(losses, tail: float = 0.2, tol: float = 0.05) -> bool:
    """The loss has flattened: the mean over the last `tail` of the steps differs by less than `tol` (relative)
    from the mean over the `tail` before it.  Windows of several steps average out the batch-to-batch noise of
    a mix.  A linear decay slows the last steps by itself, and a whole-example loss averages the answer's few
    tokens with the question's, so a flat tail is necessary, not proof, of a fit: ``fitted`` says whether the
    facts went in."""
    x = np.asarray(losses, float)
    s = max(1, math.ceil(tail * len(x)))
    if len(x) < 2 * s:
        return False
    a, b = float(x[-2 * s: -s].mean()), float(x[-s:].mean())
    return abs(a - b) < tol * abs(a)


def after(ctx, design: Design, condition: str, recipe: Recipe, sp: Split, prompts: Prompts, pool: list[Fact],
          say=lambda f, m="": None) -> pd.DataFrame:
    """Rows ``after_correct`` (per held-out and trained fact: correct under how many of the k prompts),
    ``fitted`` (per trained fact: answered zero-shot exactly as trained) and ``train_loss`` (per step) of one
    trained model, cached."""
    exs = examples(condition, sp)
    lm, tok = ctx.model.hf, ctx.model.tokenizer
    root = ctx.cache.root if ctx.cache is not None else None

    def compute() -> pd.DataFrame:
        with train.derived(lm, tok, ctx.model.fingerprint, exs, recipe, root=root,
                           progress=lambda f, m="": say(0.6 * f, f"{condition}: {m}")) as t:
            trained = [f for _, f in sp.train]
            facts = [pool[i] for i in sp.held] + trained
            counts = count_correct(t.model, tok, facts, prompts, max_new=design.max_new, batch=design.eval_batch,
                                   progress=lambda f, m="": say(0.6 + 0.4 * f, f"{condition}: {m}"))
            zero = zero_shot_correct(t.model, tok, trained, max_new=design.max_new, batch=design.eval_batch)
            losses = t.losses
        ids = list(sp.held) + [i for i, _ in sp.train]
        rows = [pd.DataFrame({"metric": "after_correct", "sample": ids, "value": counts.astype(float)}),
                pd.DataFrame({"metric": "fitted", "sample": [i for i, _ in sp.train],
                              "value": zero.astype(float)}),
                pd.DataFrame({"metric": "train_loss", "step": np.arange(len(losses)), "value": losses})]
        return pd.concat(rows, ignore_index=True)

    parts = {"knowledge": "after", "answers": ANSWERS, "model": ctx.model.fingerprint, "design": design.parts(),
             "seed": ctx.seed, "condition": condition, "recipe": recipe.params(), "data": train.data_hash(exs)}
    return ctx.memo(parts, compute)

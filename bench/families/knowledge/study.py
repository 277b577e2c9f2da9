"""The experiment behind every knowledge claim, in cached pieces (so the four specs share their work).

1. Split the fact set: per relation, the first `n_demos` facts (the most populous places) are demonstrations;
   the next ones form the pool.  Categorise the pool with the base model (memo ``before``).
2. Pick the training facts (Unknown facts of the pool, or invented ones) and, for ``uk_hk``, HighlyKnown facts
   of the pool; the rest of the pool is held out.
3. Per (condition, seed): train through :func:`bench.models.train.derived` at the same number of optimizer
   steps for every condition, categorise held-out and trained facts again, and ask the trained facts zero-shot
   exactly as trained (memo ``after``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pandas as pd

from bench.corpora.facts import Fact, fictional, load_facts
from bench.families.knowledge.categorise import Prompts, ask, count_correct, zero_shot_correct
from bench.models import train
from bench.models.train import Example, Recipe

# Version of how answers are produced, in the sub-results' keys.  2: each prompt tokenized as one text (the
# prefix and the question were tokenized apart, which can split the blank line between them differently).
ANSWERS = 2


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

    def parts(self) -> dict[str, Any]:
        return dict(self.__dict__)


def split(design: Design) -> tuple[list[Fact], list[Fact]]:
    """(demonstrations, pool) of the fact set, in a fixed order."""
    variant = design.corpus.partition(":")[2]
    facts = load_facts(variant)
    rels = list(dict.fromkeys(f.relation for f in facts))
    per = math.ceil(design.n_pool / len(rels))
    demos, pool = [], []
    for rel in rels:
        of = [f for f in facts if f.relation == rel]
        demos += of[: design.n_demos]
        pool += of[design.n_demos: design.n_demos + per]
    return demos, pool[: design.n_pool]


def before(ctx, design: Design, say=lambda f, m="": None) -> tuple[np.ndarray, Prompts, list[Fact]]:
    """(per-pool-fact correct counts, the prompts, the pool) for the base model, cached."""
    demos, pool = split(design)
    prompts = Prompts.draw(demos, design.k, design.shots, ctx.rng(1))
    lm, tok = ctx.model.hf, ctx.model.tokenizer

    def compute() -> pd.DataFrame:
        counts = count_correct(lm, tok, pool, prompts, max_new=design.max_new, batch=design.eval_batch,
                               progress=lambda f, m="": say(f, f"base model: {m}"))
        return pd.DataFrame({"sample": np.arange(len(pool)), "value": counts.astype(float)})

    parts = {"knowledge": "before", "answers": ANSWERS, "model": ctx.model.fingerprint,
             "design": _eval_parts(design), "seed": ctx.seed}
    frame = ctx.memo(parts, compute)
    return frame.sort_values("sample")["value"].to_numpy(int), prompts, pool


def _eval_parts(design: Design) -> dict[str, Any]:
    p = design.parts()
    for key in ("unknown", "n_train", "n_mix"):
        p.pop(key)
    return p


@dataclass(frozen=True)
class Split:
    train: list[tuple[int, Fact]]   # (sample id, fact): the Unknown facts trained on
    mix: list[tuple[int, Fact]]     # HighlyKnown facts added in ``uk_hk``
    held: list[int]                 # pool indices held out
    note: str


def choose(ctx, design: Design, counts: np.ndarray, pool: list[Fact]) -> Split:
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
    held = [i for i in range(len(pool)) if i not in used]
    note = (f"pool of {len(pool)} facts before training: {len(hk)} HighlyKnown, "
            f"{len(pool) - len(hk) - len(uk)} MaybeKnown, {len(uk)} Unknown (k = {design.k}); "
            f"{len(train_facts)} {'invented' if design.unknown == 'fictional' else 'Unknown'} facts trained, "
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


def recipe_for(condition: str, lora: Recipe, full_lr: float, n_train: int, seed: int) -> Recipe:
    """Every condition runs the steps of `epochs` over the Unknown facts alone (matched optimizer steps)."""
    steps = lora.epochs * math.ceil(max(n_train, 1) / lora.batch)
    r = replace(lora, steps=steps, seed=seed)
    if condition == "full_ft":
        r = replace(r, method="full", lr=full_lr, dropout=0.0)
    return r


def after(ctx, design: Design, condition: str, recipe: Recipe, sp: Split, prompts: Prompts, pool: list[Fact],
          say=lambda f, m="": None) -> pd.DataFrame:
    """Rows ``after_correct`` (per held-out and trained fact), ``reliability`` (per trained fact, zero-shot)
    and ``train_loss`` (per step) of one trained model, cached."""
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
                pd.DataFrame({"metric": "reliability", "sample": [i for i, _ in sp.train],
                              "value": zero.astype(float)}),
                pd.DataFrame({"metric": "train_loss", "step": np.arange(len(losses)), "value": losses})]
        return pd.concat(rows, ignore_index=True)

    parts = {"knowledge": "after", "answers": ANSWERS, "model": ctx.model.fingerprint, "design": design.parts(),
             "seed": ctx.seed, "condition": condition, "recipe": recipe.params(), "data": train.data_hash(exs)}
    return ctx.memo(parts, compute)

"""Cost model of the knowledge probe (:mod:`bench.ground.costs`), mirroring :mod:`.study`: the base model's
categorisation of the pool (k few-shot prompts per fact), then per condition and seed a training run and the
categorisation of the held-out and trained facts again, with a zero-shot check of the trained ones."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from bench.ground.costs import Cost, Planned, Work, cost_def
from bench.families.knowledge import study
from bench.families.knowledge.categorise import Prompts, ask
from bench.models import costs as mc
from bench.models.train import Example, Recipe


def answer_tokens(m: Planned, fact) -> int:
    """Tokens of an answer in the demonstrations' format, " <answer>" and the newline that stops decoding."""
    return len(m.tokenizer(f" {fact.answer}\n", add_special_tokens=False)["input_ids"])


def _count_correct(m: Planned, facts, prompts: Prompts, max_new: int, batch: int) -> Work:
    """:func:`.categorise.count_correct`: the groups of every relation and prompt decoded in shared batches,
    each answer counted at the length of the fact's own answer (:func:`answer_tokens`)."""
    rels = sorted({f.relation for f in facts})
    jobs = [(rel, j) for rel in rels for j in range(prompts.k)]
    groups = [[prompts.prefixes[rel][j] + ask(f) for f in facts if f.relation == rel] for rel, j in jobs]
    lengths = [[answer_tokens(m, f) for f in facts if f.relation == rel] for rel, _ in jobs]
    return mc.decode_groups(m.tokenizer, groups, max_new, micro_batch=batch, window=m.shape.window,
                            lengths=lengths)


@cost_def("knowledge_shift")
def knowledge_cost(m: Planned, *, corpus: str, n_demos: int, n_pool: int, max_pool: int, k: int, shots: int,
                   max_new: int, eval_batch: int, unknown: str, n_train: int, n_mix: int, conditions: list[str],
                   seeds: list[int], r: int, lora_alpha: float, rslora: bool, dropout: float, targets: str,
                   lr: float, batch: int, epochs: int, schedule: str, full_lr: float, loss: str) -> Cost:
    design = study.Design(corpus, n_demos, n_pool, k, shots, max_new, eval_batch, unknown, n_train, n_mix, max_pool)
    demos, chunks = study.split(design)
    prompts = Prompts.draw(demos, k, shots, np.random.default_rng([m.seed, 1]))
    # The pool's first chunk only: it grows by a chunk while fewer than n_train of its facts are Unknown, which
    # depends on the model's answers (SmolLM2-135M and Gemma 3 270M: 2–3 chunks of 48 in the smoke profile, 1 of
    # 1,000 in the full one, where counting every chunk up to max_pool booked 4 chunks' categorisation)
    grow = chunks[:1]
    ask_key = f"{corpus}|{n_demos}|{n_pool}|{k}|{shots}|{max_new}|{eval_batch}"  # what the memo keys hold
    parts = [(f"knowledge-before|{ask_key}|{c}", _count_correct(m, chunk, prompts, max_new, eval_batch))
             for c, chunk in enumerate(grow)]
    first = chunks[0] if chunks else []
    trained = first[:n_train]  # stand-ins of the same format for the facts the run will pick
    mix = first[n_train: n_train + n_mix]
    lora = Recipe(method="lora", epochs=epochs, batch=batch, lr=lr, schedule=schedule, r=r, alpha=lora_alpha,
                  rslora=rslora, dropout=dropout, targets=targets, loss=loss)
    ev = _count_correct(m, first, prompts, max_new, eval_batch)  # the same prompts after every training run
    zero = mc.decode(m.tokenizer, [ask(f) for f in trained], [min(max_new, answer_tokens(m, f)) for f in trained],
                     micro_batch=eval_batch, share=False)
    for s in (list(seeds) or [m.seed]):
        for cond in conditions:
            rec = study.recipe_for(cond, lora, full_lr, s)
            exs = [Example(ask(f), f" {f.answer}\n") for f in trained]
            exs += ([Example(ask(f, 1), f" {f.answer}\n") for f in trained] if cond == "uk_paraphrase" else
                    [Example(ask(f), f" {f.answer}\n") for f in mix] if cond == "uk_hk" else [])
            full = rec.method == "full"
            tw = mc.fit(m.tokenizer, exs, replace(rec), m.shape.n_params if full else mc.lora_params(m.shape, targets, r),
                        window=m.shape.window)
            if full:
                tw = tw + mc.full_fit_fresh(m.shape, tw, m.dtype_bytes)
            parts.append((f"knowledge-after|{ask_key}|{unknown}|{n_train}|{n_mix}|{max_pool}|{cond}|{rec}",
                          tw + ev + zero))
    held = max(0, len(first) - n_train - n_mix)  # each rule decides per training run, so units are per run
    return Cost(tuple(parts), units=held, unit="held-out facts per training run",
                units_of=dict.fromkeys(("reliability", "fitted"), (len(trained), "trained facts per training run")),
                notes=(f"the pool counted as its first chunk of {len(first)} facts: it grows, by chunks up to "
                       f"max_pool = {max_pool}, only while fewer than n_train = {n_train} of them are Unknown",
                       f"each answer counted at its own length in the demonstrations' format (' <answer>' and "
                       f"the newline that stops decoding), not at its budget of max_new = {max_new} tokens: an answer "
                       f"that runs on costs up to that",
                       "held-out facts counted as the first chunk's (which facts are held out depends on the answers)"))

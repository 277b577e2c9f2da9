"""The knowledge probe: categories before and after training under each condition, as per-fact indicators.

Rows (``sample`` = fact index in the pool, so conditions and seeds pair on the same facts; ``seed`` = the
training run, so a rule can take the fact within the run as its unit or average the runs per fact):

``negative_shift``  held-out fact HighlyKnown before → 1 if no longer HighlyKnown after (HK → MK/UK)
``positive_shift``  held-out fact not HighlyKnown before → 1 if HighlyKnown after
``reliability``     trained fact → share of the k few-shot prompts (the categorisation's) under which it is
                    answered correctly after training
``fitted``          trained fact → 1 if answered correctly when asked zero-shot exactly as trained (the zero-shot
                    reliability: did the adapter take the fact in at all)
``known_after``     trained fact → 1 if not Unknown after (correct under at least one of the k prompts)
``exposures``       trained fact → how many times the training loop showed it (equal in every condition)
``converged``       per condition and seed (no ``sample``) → 1 if the training loss flattened: the mean over the
                    last 20% of steps within 5% of the mean over the 20% before (:func:`study.converged`)
``baseline_erosion`` per seed (condition ``uk_only``, no ``sample``) → the share of held-out HighlyKnown facts
                    that training on the Unknown facts alone eroded: the damage a mix could reduce (a
                    precondition of the mixing contrast, which cannot be shown when there is nothing to reduce)
``before_correct``  pool fact → number of the k prompts answered correctly by the base model
``train_loss``      loss per optimizer step of each condition and seed
"""

from __future__ import annotations

from typing import Literal

import numpy as np
import pandas as pd

from bench.ground import context
from bench.ground.errors import SpecError
from bench.ground.ranges import Count
from bench.ground.registry import probe_def
from bench.families.knowledge import study
from bench.families.knowledge.schemas import CONDITIONS, KnowledgeFrame
from bench.models.train import Recipe, Targets

METRICS = ("negative_shift", "positive_shift", "reliability", "fitted", "known_after", "exposures", "converged",
           "baseline_erosion", "before_correct", "train_loss")


@probe_def("knowledge_shift", version=3, schema=KnowledgeFrame, metrics=METRICS)
def knowledge_shift(ctx, *, corpus: str = "facts:country-capital", n_demos: int = 40, n_pool: int = 200,
                    max_pool: int = 0, k: Count = 10, shots: int = 4, max_new: int = 32, eval_batch: int = 128,
                    unknown: Literal["pool", "fictional"] = "pool", n_train: int = 10, n_mix: int = 10,
                    conditions: list[str] = ["uk_only"],  # noqa: B006 - never mutated
                    seeds: list[int] = [],  # noqa: B006 - empty: the run's seed
                    r: Count = 1, lora_alpha: float = 2.0, rslora: bool = True, dropout: float = 0.1,
                    targets: Targets = "ffn", lr: float = 1e-3, batch: int = 8, epochs: int = 10,
                    schedule: Literal["constant", "linear"] = "linear", full_lr: float = 1e-5,
                    loss: Literal["example", "answer"] = "example") -> pd.DataFrame:
    """Per-fact knowledge shifts and reliability after LoRA / full fine-tuning on Unknown facts."""
    if not corpus.startswith("facts:"):
        raise SpecError(f"the knowledge probe reads a fact set ('facts:…'), not '{corpus}'", key="data.corpus")
    bad = [c for c in conditions if c not in CONDITIONS]
    if bad or not conditions:
        raise SpecError(f"unknown conditions {bad} (known: {', '.join(CONDITIONS)})", key="measure.conditions")
    if min(k, shots, n_pool, n_train, epochs, batch) < 1:
        raise SpecError("k, shots, n_pool, n_train, epochs and batch must be ≥ 1", key="measure")
    if n_demos < k * shots:
        raise SpecError(f"n_demos = {n_demos} per relation cannot give {k} disjoint {shots}-shot prompts "
                        f"(need {k * shots})", key="data.n_demos")
    design = study.Design(corpus, n_demos, n_pool, k, shots, max_new, eval_batch, unknown, n_train, n_mix, max_pool)
    lora = Recipe(method="lora", epochs=epochs, batch=batch, lr=lr, schedule=schedule, r=r, alpha=lora_alpha,
                  rslora=rslora, dropout=dropout, targets=targets, loss=loss)
    seeds = list(seeds) or [ctx.seed]
    jobs = [(c, s) for s in seeds for c in conditions]
    n_jobs = len(jobs) + 1

    def stage(i):
        return context.part(ctx.progress, i, n_jobs)

    counts, prompts, pool = study.before(ctx, design, stage(0))
    sp = study.choose(ctx, design, counts, pool)
    notes = [sp.note]
    if not sp.train:
        notes.append("no Unknown fact to train on")
        return _frame([_base_rows(counts)], notes)
    rows = [_base_rows(counts)]
    for j, (cond, seed) in enumerate(jobs):
        rec = study.recipe_for(cond, lora, full_lr, seed)
        got = study.after(ctx, design, cond, rec, sp, prompts, pool, stage(j + 1))
        part = _condition_rows(got, counts, sp, k, cond, seed, study.exposures(cond, sp, rec))
        rows.append(part)
        notes.append(_summary(part, cond, seed))
        rows += [b for b in [_baseline(part, cond, seed)] if b is not None]
    notes.append(f"{len(seeds)} training seed(s) {seeds}; every condition runs {epochs} epochs over its examples "
                 f"(batch {batch}), so each Unknown fact is seen {epochs} times in each; loss on the "
                 f"{'whole formatted example' if loss == 'example' else 'answer tokens only'}")
    return _frame(rows, notes)


def _base_rows(counts) -> pd.DataFrame:
    return pd.DataFrame({"metric": "before_correct", "sample": range(len(counts)), "value": counts.astype(float)})


def _condition_rows(got: pd.DataFrame, counts, sp: study.Split, k: int, cond: str, seed: int,
                    seen: np.ndarray) -> pd.DataFrame:
    ac = got[got["metric"] == "after_correct"]
    after = pd.Series(ac["value"].to_numpy(float), index=ac["sample"].astype(int).to_numpy())
    held = [i for i in sp.held if i in after.index]
    hk = [i for i in held if counts[i] == k]
    rest = [i for i in held if counts[i] < k]
    trained = [i for i, _ in sp.train]
    fit = got[got["metric"] == "fitted"]
    loss = got[got["metric"] == "train_loss"]
    parts = [
        pd.DataFrame({"metric": "negative_shift", "sample": hk, "value": [float(after[i] < k) for i in hk]}),
        pd.DataFrame({"metric": "positive_shift", "sample": rest, "value": [float(after[i] == k) for i in rest]}),
        pd.DataFrame({"metric": "reliability", "sample": trained, "value": [after[i] / k for i in trained]}),
        pd.DataFrame({"metric": "fitted", "sample": fit["sample"].astype(int).to_list(),
                      "value": fit["value"].to_list()}),
        pd.DataFrame({"metric": "known_after", "sample": trained, "value": [float(after[i] > 0) for i in trained]}),
        pd.DataFrame({"metric": "exposures", "sample": trained, "value": seen.astype(float)}),
        pd.DataFrame({"metric": ["converged"], "value": [float(study.converged(loss["value"].to_numpy(float)))]}),
        pd.DataFrame({"metric": "train_loss", "step": loss["step"].astype(int).to_list(),
                      "value": loss["value"].to_list()}),
    ]
    out = pd.concat([p for p in parts if not p.empty], ignore_index=True)
    out["condition"] = cond
    out["seed"] = seed
    out["n_train"] = len(trained)
    return out


def _baseline(part: pd.DataFrame, cond: str, seed: int) -> pd.DataFrame | None:
    """The ``baseline_erosion`` row of one ``uk_only`` run (none for other conditions or no HighlyKnown fact)."""
    neg = part.loc[part["metric"] == "negative_shift", "value"]
    if cond != "uk_only" or neg.empty:
        return None
    return pd.DataFrame({"metric": ["baseline_erosion"], "value": [float(neg.mean())], "condition": cond,
                         "seed": seed})


def _summary(part: pd.DataFrame, cond: str, seed: int) -> str:
    def of(metric):
        return part.loc[part["metric"] == metric, "value"]

    loss, neg = of("train_loss"), of("negative_shift")
    return (f"{cond} seed {seed}: {len(loss)} steps, loss {loss.iloc[0]:.3g} → {loss.iloc[-1]:.3g} "
            f"({'flattened' if of('converged').iloc[0] else 'still moving'}), fitted {int(of('fitted').sum())}/"
            f"{len(of('fitted'))}, reliability {of('reliability').mean():.2f}, "
            f"eroded {int(neg.sum())}/{len(neg)} HighlyKnown")


def _frame(rows: list[pd.DataFrame], notes: list[str]) -> pd.DataFrame:
    out = pd.concat(rows, ignore_index=True)
    for col in ("sample", "condition", "seed", "n_train", "step"):
        if col not in out.columns:
            out[col] = None
    out = out[["metric", "value", "sample", "condition", "seed", "n_train", "step"]]
    for col in ("sample", "seed", "n_train", "step"):
        out[col] = out[col].astype("Int64")
    out["condition"] = out["condition"].astype(object).where(out["condition"].notna(), None)
    out.attrs["notes"] = notes
    return out

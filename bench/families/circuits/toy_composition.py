"""Induction needs composition: train 1- and 2-layer attention-only toys, and look for layer-0 induction heads.

Two parts, in one tidy frame:

* ``toy-1L`` and ``toy-2L``: tiny attention-only transformers of the same width, trained with the same seed on
  sequences that contain repeated random spans (``bench.families.circuits.toy``), then scored on held-out repeated random
  sequences (the same sequences for both, so the comparison is paired by sequence).  The pair is trained
  `toy_runs` times with seeds run seed, run seed + 1, …; the column ``train_seed`` names the run, so a rule
  with ``training_runs = "train_seed"`` decides on every training run (``bench.stats.training_runs``);
* ``model``: the induction score of every head of the model under test, on repeated random tokens.  A head in
  the first layer sees only token and position embeddings, so the claim predicts no induction head there.

The toy part does not depend on the model; it is cached once per seed and configuration.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd

from bench.ground.registry import probe_def
from bench.families.circuits import toy
from bench.families.circuits.lm import Repeats, head_rows, sample_rows
from bench.families.circuits.schemas import ToyHeadScores

METRICS = ("induction_score", "prev_token_score", "loss_first", "loss_second", "loss_drop")


def toy_frame(cfg: toy.ToyConfig, n_eval: int, progress, device) -> pd.DataFrame:
    """Both toys of one training run: trained on `device`, scored on `n_eval` held-out repeated sequences."""
    parts = []
    for k, n_layers in enumerate((1, 2)):
        c = toy.ToyConfig(**{**asdict(cfg), "n_layers": n_layers})
        model = toy.train(c, progress=lambda step, total, k=k: progress((k + step / total) / 2,
                                                                         f"training {n_layers}-layer toy"),
                          device=device)
        r = toy.evaluate(model, c, n_seq=n_eval, seed=cfg.seed + 10_000)
        subject = f"toy-{n_layers}L"
        first, second = np.asarray(r["loss_first"]), np.asarray(r["loss_second"])
        parts += [head_rows(np.asarray(r["induction"]), "induction_score", subject),
                  head_rows(np.asarray(r["prev_token"]), "prev_token_score", subject),
                  sample_rows(first, "loss_first", subject), sample_rows(second, "loss_second", subject),
                  sample_rows(first - second, "loss_drop", subject)]
    return pd.concat(parts, ignore_index=True)


@dataclass(frozen=True)
class ToyParams:
    repeats: Repeats = Repeats()
    toy_vocab: int = 64
    toy_width: int = 64
    toy_heads: int = 4
    toy_period: int = 24
    toy_steps: int = 500
    toy_batch: int = 64
    toy_lr: float = 1e-2
    toy_eval: int = 64
    toy_runs: int = 3


@probe_def("toy_composition", version=2, schema=ToyHeadScores, metrics=METRICS)
def toy_composition(ctx, p: ToyParams) -> pd.DataFrame:
    """Toy 1-layer vs 2-layer induction (scores, loss drop) and the model's per-head induction scores."""
    if p.toy_runs < 1:
        raise ValueError(f"toy_runs must be at least 1, got {p.toy_runs}")
    toy_eval, runs = p.toy_eval, []
    for r in range(p.toy_runs):  # each run cached on its own: a smoke profile's runs are the full profile's first
        cfg = toy.ToyConfig(vocab=p.toy_vocab, d_model=p.toy_width, n_heads=p.toy_heads, period=p.toy_period,
                            steps=p.toy_steps, batch=p.toy_batch, lr=p.toy_lr, seed=ctx.seed + r)
        progress = (lambda f, m, r=r: ctx.progress((r + f) / p.toy_runs, f"{m} (run {r + 1} of {p.toy_runs})"))
        # the toys have no model to follow: they train on the run's device (ctx.device); a GPU's sums round
        # differently from the CPU's, so its runs are cached apart (the CPU key is unchanged)
        where = {} if ctx.device.type == "cpu" else {"device": ctx.device.type}
        toys = ctx.memo({"fn": "toy_composition", "v": 1, "cfg": asdict(cfg), "n_eval": toy_eval, **where},
                        lambda cfg=cfg, progress=progress: toy_frame(cfg, toy_eval, progress, ctx.device))
        runs.append(toys.assign(train_seed=cfg.seed))
    heads = p.repeats.scores(ctx)
    heads = heads[heads["metric"] == "induction_score"].assign(subject="model", train_seed=pd.NA)
    frame = pd.concat(runs + [heads], ignore_index=True)
    for col in ("sample", "layer", "head", "train_seed"):
        frame[col] = frame[col].astype("Int64")
    frame.attrs["notes"] = [f"toy models: width {p.toy_width}, {p.toy_heads} heads, vocab {p.toy_vocab}, "
                            f"{p.toy_steps} steps of batch {p.toy_batch}, lr {p.toy_lr}, {p.toy_runs} training "
                            f"runs (seeds {ctx.seed}–{ctx.seed + p.toy_runs - 1})"]
    return frame

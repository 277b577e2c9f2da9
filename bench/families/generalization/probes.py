"""The probe: the paper's design at small scale.  An SFT-initialised checkpoint that follows the output format
(``initial``, trained on hands disjoint from the arms' training hands) is the start of both arms; SFT and
verifier-reward RL then train on the same in-distribution hands at equal training FLOPs, each with several
seeds, and the same held-out in- and out-of-distribution hands are scored at every stage.  ``base`` (the model
as shipped) and RL from it (``base_rl``) serve ``sft-needed-before-rl``.

Every stage is a cached sub-result (``ctx.memo``) keyed by the model fingerprint, the task, the training
hyper-parameters, the stage and the seed, so the two specs of this family share the base and initial
evaluations and the RL runs, and a warm re-run trains and generates nothing.  The SFT-initialised weights live
in the training engine's cache of trained weights (:func:`bench.models.train.derived`).
"""

from __future__ import annotations

import contextlib
from dataclasses import asdict

import numpy as np
import pandas as pd

from bench.ground.errors import BenchError
from bench.ground.ranges import Count, NonNegative
from bench.ground.registry import probe_def
from bench.ground.resume import Resume
from bench.families.generalization import tasks
from bench.families.generalization.schemas import StageScores
from bench.families.generalization.train_loop import (
    TrainConfig,
    adapted,
    config,
    converged,
    curve_of,
    flops_of,
    step_tokens,
    steps_for_flops,
    train,
    train_flops,
)
from bench.models import decoding
from bench.models import train as engine

METRICS = ("correct", "format_ok", "rl_gain", "train_loss", "train_reward", "train_flops", "converged",
           "ckpt_accuracy", "ckpt_flops", "initial_format_rate", "base_format_rate", "initial_ood_accuracy",
           "trained_id_accuracy")
ARMS = ("sft", "rl", "base_rl")
VERSION = 10  # 2: LoRA matrices drawn from the run seed (they came from the process's global generator)
# 3: the prompts' shared prefix runs once (same numbers up to float rounding, so a near-tie may break otherwise)
# 4: greedy decoding drops finished answers from the batch (float rounding again)
# 5: the paper's design: SFT-initialised start, equal FLOPs, seeds, shaped reward, base / base_rl stages
# 6: one-number precondition rows (initial_format_rate …); the stages themselves are as in 5
# 7: trained by the engine: its fused AdamW and its answer loss (prompt and answer as one right-padded
#    sequence) round differently from the family's former unfused AdamW and left-padded loss (training losses
#    move by < 3e-6 on SmolLM2-135M; every answer, reward and FLOPs count the same)
# 8: the first decoding step's output head on contiguous states (:func:`bench.models.logits.contiguous_head`;
#    answers and samples as before up to float rounding)
# 9: the verifier reads only decimal digits as numbers.  A sampled answer holding a digit-like character that
#    ``int`` cannot read (a superscript ²) raised and ended the cell; it is now an illegal character, as "x"
#    is.  The one such answer that did not raise, a stated value of that kind after no formula ("=²"), scored
#    −2 (every card left out) and now scores −3 (illegal), as "=x" did; a stage that met it would differ, so
#    the stages are keyed afresh
# 10: `format_ok` asks for a combination of numbers: with two or more cards a bare number is no formula.
#    smollm2-135m, asked for four cards to reach a target it is shown (the full profile), answered the target
#    alone (" 24.") to every hand, which passed as following the format (1.0), so the premise that the base model
#    cannot follow it could never hold.  Rewards and `correct` are unchanged
STAGE_VERSION = 9  # what keys the cached stages: bumped only when a stage's own frame changes (9: format_ok, 10)


class TaskSetupError(BenchError):
    """Probe parameters that describe no runnable task."""


def _rows(metric: str, stage: str, values, split=None, sample=None, step=None, seed=None) -> pd.DataFrame:
    n = len(values)

    def col(x):
        return pd.array(x if isinstance(x, list) else [x] * n, dtype="Int64")

    return pd.DataFrame({"metric": metric, "value": np.asarray(values, float), "stage": stage,
                         "split": split if isinstance(split, list) else [split] * n, "sample": col(sample),
                         "step": col(step), "seed": col(seed)})


@probe_def("sft_vs_rl", version=VERSION, schema=StageScores, metrics=METRICS)
def sft_vs_rl(ctx, *, arms: list[str] = ["sft", "rl"],  # noqa: B006 (never mutated)
              n_cards: Count = 4, target: NonNegative = 24, ops: str = "+-*/", max_target: Count = 100,
              show_target: bool = True, demos: NonNegative = 0, demo_faces: bool = False,
              n_init: int = 128, init_steps: int = 32, init_faces: bool = False,
              n_train: int = 256, n_eval: int = 128, steps: int = 100, batch: int = 8, group: int = 8,
              sft_batch: int = 8, lr: float = 1e-4, adapter: str = "lora", lora_rank: int = 8,
              max_new_tokens: int = 24, temperature: float = 1.0, micro_batch: int = 16, reward: str = "shaped",
              seeds: Count = 2, curve_points: int = 1) -> pd.DataFrame:
    """Held-out accuracy (in and out of distribution) of the base model, the SFT-initialised checkpoint, and
    after SFT / RL from that checkpoint at equal FLOPs, and after RL from the base model, per training seed.

    ``target = 0`` draws each hand's target from the positive integers ≤ ``max_target`` its cards reach;
    ``show_target = false`` hides it (the answer states its value).  The SFT arm takes as many steps of
    ``sft_batch`` hands as reach the RL arm's estimated FLOPs.
    """
    bad = sorted(set(arms) - set(ARMS))
    if bad or not arms:
        raise TaskSetupError(f"unknown arms {bad} (known: {', '.join(ARMS)})")
    if adapter not in ("lora", "full") or not set(ops) <= set(tasks.OPS) or n_cards < 1 or steps < 1:
        raise TaskSetupError("adapter must be 'lora' or 'full', ops a subset of '+-*/', n_cards and steps ≥ 1")
    if reward not in tasks.REWARDS or seeds < 1 or curve_points < 0:
        raise TaskSetupError(f"reward must be one of {sorted(tasks.REWARDS)}, seeds ≥ 1, curve_points ≥ 0")
    task = tasks.TaskConfig(n_cards, target or None, ops, max_target, show_target=show_target)
    cfg = {"batch": batch, "group": group, "lr": lr, "adapter": adapter, "lora_rank": lora_rank,
           "lora_alpha": 2 * lora_rank, "max_new_tokens": max_new_tokens, "temperature": temperature}
    run = _Run(ctx, task, dict(demos=demos, demo_faces=demo_faces, n_init=n_init, init_faces=init_faces,
                               n_train=n_train, n_eval=n_eval), micro_batch, cfg,
               dict(init_steps=init_steps, steps=steps, sft_batch=sft_batch, reward=reward,
                    curve_points=curve_points))
    frames = [run.stage("base")] if "base_rl" in arms else []
    if {"sft", "rl"} & set(arms):
        frames.append(run.stage("initial"))
    for arm in ("sft", "rl", "base_rl"):
        if arm in arms:
            frames += [run.stage(arm, s) for s in range(seeds)]
    out = pd.concat(frames, ignore_index=True)
    gains = [_gain(out, "rl", "initial")] if "rl" in arms else []
    gains += [_gain(out, "base_rl", "base")] if "base_rl" in arms else []
    out = pd.concat([out, *gains, *_summaries(out)], ignore_index=True)
    out.attrs["notes"] = run.notes(out)
    return out


def _summaries(frame: pd.DataFrame) -> list[pd.DataFrame]:
    """One-number rows, each under its own metric name, for preconditions that select rows by metric alone:
    the start's and the base's format rate (all held-out hands), the start's OOD accuracy (room for SFT to
    lower it), and each trained arm run's in-distribution accuracy (whether it learned the training rule)."""
    out = []
    for stage in ("initial", "base"):
        f = frame[(frame["metric"] == "format_ok") & (frame["stage"] == stage)]
        if not f.empty:
            out.append(_rows(f"{stage}_format_rate", stage, [f["value"].mean()]))
    c = frame[frame["metric"] == "correct"]
    ood = c[(c["stage"] == "initial") & (c["split"] == "ood")]
    if not ood.empty:
        out.append(_rows("initial_ood_accuracy", "initial", [ood["value"].mean()], split="ood"))
    arms = c[c["stage"].isin(["sft", "rl", "base_rl"]) & (c["split"] == "id")]
    for (stage, seed), g in arms.groupby(["stage", "seed"]):
        out.append(_rows("trained_id_accuracy", stage, [g["value"].mean()], split="id", seed=int(seed)))
    return out


def _gain(frame: pd.DataFrame, after: str, before: str) -> pd.DataFrame:
    """Per (seed, item): correctness after the RL run `after` minus correctness of its start `before`."""
    c = frame[frame["metric"] == "correct"]
    b = c[c["stage"] == before].set_index(["split", "sample"])["value"]
    a = c[c["stage"] == after]
    d = a["value"].to_numpy() - b.reindex(pd.MultiIndex.from_frame(a[["split", "sample"]])).to_numpy()
    return _rows("rl_gain", after, d, split=list(a["split"]), sample=[int(x) for x in a["sample"]],
                 seed=[int(x) for x in a["seed"]])


class _Run:
    """The task's items and prompts, and each stage computed (or read from the cache) on demand."""

    def __init__(self, ctx, task: tasks.TaskConfig, data: dict, micro_batch: int, cfg: dict, plan: dict):
        self.ctx, self.task, self.micro, self.cfg, self.plan = ctx, task, micro_batch, cfg, plan
        seed = ctx.seed
        self.train_items = tasks.generate(task, "id", data["n_train"], seed, stream=1)
        init_task = tasks.TaskConfig(**{**asdict(task), "face_share": 0.5 if data["init_faces"] else 0.0})
        self.init_items = tasks.generate(init_task, "id", data["n_init"], seed, stream=4)
        self.eval_items = {"id": tasks.generate(task, "id", data["n_eval"], seed, stream=2, need_face=True),
                           "ood": tasks.generate(task, "ood", data["n_eval"], seed, stream=3, need_face=True)}
        self.demos = {r: tasks.demo_items(task, r, data["demos"], seed, faces=data["demo_faces"])
                      for r in ("id", "ood")}
        self.base = {"probe": "sft_vs_rl", "version": STAGE_VERSION, "model": ctx.model.fingerprint,
                     "task": asdict(task), **data, "seed": seed, "max_new_tokens": cfg["max_new_tokens"]}
        self.hf, self.tok = ctx.model.hf, ctx.model.tokenizer
        self.n_params = sum(p.numel() for p in self.hf.parameters())

    # ── configurations and data ───────────────────────────────────────────────────────────────────────────
    def _cfg(self, method: str, steps: int, batch: int | None = None, seed: int | None = None) -> TrainConfig:
        return config(method, steps=steps, **{**self.cfg, **({"batch": batch} if batch else {})},
                      seed=self.ctx.seed if seed is None else seed)

    def init_cfg(self) -> TrainConfig:
        return self._cfg("sft", self.plan["init_steps"], self.plan["sft_batch"])

    def rl_cfg(self) -> TrainConfig:
        return self._cfg("rl", self.plan["steps"])

    def order(self, seed: int) -> list[tasks.Item]:
        """The training hands in the order seed `seed` sees them (the seed's own permutation)."""
        return tasks.training_order(self.train_items, self.ctx.seed, seed)

    def prompts(self, items) -> list[str]:
        return [tasks.prompt(it, self.demos[it.rule]) for it in items]

    @staticmethod
    def targets(items) -> list[str]:
        return [f" {it.solution}\n" for it in items]

    def sft_cfg(self, seed: int) -> TrainConfig:
        """The SFT arm: `sft_batch` hands a step, as many steps as reach the RL arm's FLOPs on this seed."""
        items = self.order(seed)
        prompts = self.prompts(items)
        budget = sum(flops_of(self.n_params, self.rl_cfg(), *t) for t in step_tokens(self.tok, self.rl_cfg(), prompts))
        probe = self._cfg("sft", 1, self.plan["sft_batch"])
        n = steps_for_flops(self.tok, self.n_params, probe, prompts, self.targets(items), budget)
        return self._cfg("sft", n, self.plan["sft_batch"])

    # ── stages ────────────────────────────────────────────────────────────────────────────────────────────
    def evaluate(self, model, stage: str, seed: int | None = None) -> pd.DataFrame:
        out = []
        for split, items in self.eval_items.items():
            self.ctx.progress(0.0, f"{stage}: answering {len(items)} {split} items")
            comp = decoding.decode(model, self.tok, self.prompts(items), self.cfg["max_new_tokens"],
                                   micro_batch=self.micro)
            checks = [tasks.check(t, it.values, it.target, it.hidden) for t, it in zip(comp.texts, items)]
            idx = list(range(len(items)))
            out.append(_rows("correct", stage, [float(c.correct) for c in checks], split, idx, seed=seed))
            out.append(_rows("format_ok", stage, [float(c.format_ok) for c in checks], split, idx, seed=seed))
        return pd.concat(out, ignore_index=True)

    def stage(self, name: str, seed: int | None = None) -> pd.DataFrame:
        hp: dict = {"init": self.init_cfg().describe(), "n_init_items": len(self.init_items)}
        if name == "base":
            hp = {}
        elif name != "initial":
            cfg = self.sft_cfg(seed) if name == "sft" else self.rl_cfg()
            hp = {**({} if name == "base_rl" else hp), "train": cfg.describe(), "reward": self.plan["reward"],
                  "curve_points": self.plan["curve_points"]}
        parts = {**self.base, "stage": name, "run_seed": seed, "hp": hp}
        resume = (self.ctx.resume(parts, label=f"generalization: the {name} arm's run, seed {seed}")  # training
                  if name not in ("base", "initial") else None)
        frame = self.ctx.memo(parts, lambda: self._compute(name, seed, resume))
        if resume is not None:  # stored: its saved state has done its job
            resume.clear()
        return frame

    def _compute(self, name: str, seed: int | None, resume: Resume | None = None) -> pd.DataFrame:
        if name == "base":
            return self.evaluate(self.hf, "base")
        if name == "initial":
            with self.initialised("initial") as t:
                cfg, prompts = self.init_cfg(), self.prompts(self.init_items)
                curve = curve_of(self.tok, cfg, prompts, self.targets(self.init_items), t.losses)
                return pd.concat([self._curve_rows("initial", None, cfg, curve),
                                  self.evaluate(t.model, "initial")], ignore_index=True)
        cfg = self.sft_cfg(seed) if name == "sft" else self.rl_cfg()
        with self.start(name, seed) as model:
            curve = self._fit(model, cfg, name, self.order(seed), seed, resume)
            final = self.evaluate(model, name, seed)
        return pd.concat([*self._ckpts, self._ckpt_rows(name, seed, cfg, cfg.steps, final),
                          self._curve_rows(name, seed, cfg, curve), final], ignore_index=True)

    def _curve_rows(self, name, seed, cfg: TrainConfig, curve) -> pd.DataFrame:
        metric = "train_loss" if cfg.method == "sft" else "train_reward"
        return pd.concat([_rows(metric, name, curve.value, step=list(curve.step), seed=seed),
                          _rows("train_flops", name, [train_flops(self.n_params, cfg, curve)], seed=seed),
                          _rows("converged", name, [float(converged(curve.value))], seed=seed)],
                         ignore_index=True)

    def _ckpt_rows(self, name, seed, cfg: TrainConfig, step: int, scored: pd.DataFrame) -> pd.DataFrame:
        counts = step_tokens(self.tok, cfg, self.prompts(self.order(seed)), self.targets(self.order(seed)))
        flops = sum(flops_of(self.n_params, cfg, *t) for t in counts[:step])
        acc = scored[scored["metric"] == "correct"].groupby("split")["value"].mean()
        return pd.concat([_rows("ckpt_accuracy", name, acc.to_numpy(), split=list(acc.index), step=step, seed=seed),
                          _rows("ckpt_flops", name, [flops], step=step, seed=seed)], ignore_index=True)

    def _fit(self, model, cfg: TrainConfig, name: str, items, seed: int | None, resume: Resume | None = None):
        """Train an arm's run; the evaluations at its checkpoints go to ``self._ckpts`` (and with `resume`, into
        the saved state, so a resumed run has those of the steps before its last save)."""
        prompts = self.prompts(items)
        progress = lambda f, m="": self.ctx.progress(f, f"{name}: {m}")
        carry = resume.carry if resume is not None else {}
        carry["ckpts"] = []
        every = cfg.steps // (self.plan["curve_points"] + 1)  # an arm's run (every caller names its seed)

        def checkpoint(step: int) -> None:
            carry["ckpts"].append(self._ckpt_rows(name, seed, cfg, step, self.evaluate(model, name, seed)))

        gen = self.ctx.generator(stream=20 + 100 * (seed or 0) + (name == "base_rl"))
        kw = dict(generator=gen, progress=progress, checkpoints=checkpoint, every=every, resume=resume)
        if cfg.method == "sft":
            curve = train(model, self.tok, cfg, prompts, targets=self.targets(items), **kw)
        else:
            fn = tasks.REWARDS[self.plan["reward"]]
            curve = train(model, self.tok, cfg, prompts, reward=lambda i, text: fn(text, items[i]),
                          micro_batch=self.micro, **kw)
        self._ckpts = list(carry["ckpts"])
        return curve

    @contextlib.contextmanager
    def start(self, name: str, seed: int):
        """The model an arm run trains: the SFT-initialised checkpoint, or for ``base_rl`` the base model with
        fresh adapters (LoRA's B = 0) drawn from the run's own seed."""
        if name == "base_rl":
            with adapted(self.hf, self._cfg("rl", 1, seed=self.ctx.seed * 1000 + 1 + seed)) as model:
                yield model
            return
        with self.initialised(name) as t:
            yield t.model

    @contextlib.contextmanager
    def initialised(self, name: str):
        """The engine's :class:`~bench.models.train.Trained` for the SFT-initialised checkpoint both arms start from, trained on the
        initialisation hands by the engine and kept in the engine's cache of trained weights (the adapters, or a
        full copy), so every arm and seed starts from the same weights and only the first run trains them."""
        items = self.init_items
        examples = [engine.Example(p, t) for p, t in zip(self.prompts(items), self.targets(items))]
        root = self.ctx.cache.root if self.ctx.cache is not None else None
        with engine.derived(self.hf, self.tok, self.ctx.model.fingerprint, examples, self.init_cfg().recipe,
                            root=root, progress=lambda f, m="": self.ctx.progress(f, f"{name}: {m}")) as t:
            yield t

    def notes(self, frame: pd.DataFrame) -> list[str]:
        c = frame[frame["metric"].isin(["correct", "format_ok"])]
        acc = c.groupby(["metric", "stage", "split"])["value"].mean()
        flops = frame[frame["metric"] == "train_flops"].groupby("stage")["value"].mean()
        steps = frame[frame["metric"].isin(["train_loss", "train_reward"])].groupby("stage")["step"].max() + 1
        t = self.task
        out = [(f"task: {t.n_cards} cards, ops {t.ops}, target "
                f"{'hidden (the answer states its value)' if not t.show_target else t.target or 'drawn'}; "
                f"{len(self.init_items)} hands for the SFT-initialised checkpoint, {len(self.train_items)} other "
                f"training hands (J/Q/K = 10), {len(self.eval_items['id'])} held-out hands per split, each with "
                f"a face card"),
               ("training: " + ", ".join(f"{k} {v}" for k, v in {**self.cfg, **self.plan}.items())
                + "; SFT and RL start from the same SFT-initialised weights, see the same hands in each seed's "
                  "order and are compared at equal estimated training FLOPs"),
               "steps per run: " + ", ".join(f"{s} {int(v)}" for s, v in steps.items()),
               (f"units: {frame['seed'].dropna().nunique()} training seeds per arm × {len(self.eval_items['id'])} "
                f"held-out hands per split (the same hands for every seed and stage)"),
               "accuracy: " + "; ".join(f"{s}/{sp} {v:.3f}" for (m, s, sp), v in acc.items() if m == "correct"),
               "format followed: " + "; ".join(f"{s}/{sp} {v:.3f}" for (m, s, sp), v in acc.items()
                                               if m == "format_ok")]
        out += [f"training FLOPs (estimate, mean over seeds) {s}: {v:.3g}" for s, v in flops.items()]
        return out

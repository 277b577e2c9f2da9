"""The probe: train the model under test by SFT and by verifier-reward RL on in-distribution GeneralPoints items,
and score the same held-out in- and out-of-distribution items before and after each.

Every stage is a cached sub-result (``ctx.memo``) keyed by the model fingerprint, the task, the training
hyper-parameters and the seed, so the two specs of this family share the initial evaluation, the SFT run and
the RL run, and a warm re-run trains and generates nothing.  The SFT adapter weights are cached too (LoRA
only: they are small), so the SFT→RL stage of ``sft-needed-before-rl`` starts from them without re-training.
"""

from __future__ import annotations

import json
from dataclasses import asdict

import numpy as np
import pandas as pd
import torch

from bench.core.errors import BenchError
from bench.core.registry import probe_def
from bench.families.generalization import tasks
from bench.models import decoding
from bench.families.generalization.schemas import StageScores
from bench.families.generalization.train_loop import (
    TrainConfig,
    adapted,
    load_trainable,
    train,
    train_flops,
    trainable_state,
)

METRICS = ("correct", "rl_gain", "train_loss", "train_reward", "train_flops")
ARMS = ("sft", "rl", "sft_rl")
VERSION = 4  # 2: LoRA matrices drawn from the run seed (they came from the process's global generator)
# 3: the prompts' shared prefix runs once (same numbers up to float rounding, so a near-tie may break otherwise)
# 4: greedy decoding drops finished answers from the batch (float rounding again)


class TaskSetupError(BenchError):
    """Probe parameters that describe no runnable task."""


def _rows(metric: str, stage: str, values, split=None, sample=None, step=None) -> pd.DataFrame:
    n = len(values)
    return pd.DataFrame({"metric": metric, "value": np.asarray(values, float), "stage": stage,
                         "split": split if isinstance(split, list) else [split] * n, "sample": pd.array(sample if sample is not None else [None] * n,
                                                                  dtype="Int64"),
                         "step": pd.array(step if step is not None else [None] * n, dtype="Int64")})


@probe_def("sft_vs_rl", version=VERSION, schema=StageScores, metrics=METRICS)
def sft_vs_rl(ctx, *, arms: list[str] = ["sft", "rl"],  # noqa: B006 (never mutated)
              n_cards: int = 4, target: int = 24, ops: str = "+-*/", max_target: int = 100, n_demos: int = 0,
              demo_faces: bool = False,
              n_train: int = 256, n_eval: int = 128, steps: int = 100, batch: int = 8, group: int = 8,
              lr: float = 1e-4, adapter: str = "lora", lora_rank: int = 8, max_new_tokens: int = 24,
              temperature: float = 1.0, micro_batch: int = 16) -> pd.DataFrame:
    """Held-out accuracy (in and out of distribution) of the initial model and after SFT / RL / SFT→RL.

    ``target = 0`` draws each hand's target from the positive integers ≤ ``max_target`` its cards reach.
    """
    bad = sorted(set(arms) - set(ARMS))
    if bad or not arms:
        raise TaskSetupError(f"unknown arms {bad} (known: {', '.join(ARMS)})")
    if adapter not in ("lora", "full") or not set(ops) <= set(tasks.OPS) or n_cards < 1 or steps < 1:
        raise TaskSetupError("adapter must be 'lora' or 'full', ops a subset of '+-*/', n_cards and steps ≥ 1")
    task = tasks.TaskConfig(n_cards, target or None, ops, max_target)
    cfg = {"steps": steps, "batch": batch, "group": group, "lr": lr, "adapter": adapter, "lora_rank": lora_rank,
           "lora_alpha": 2 * lora_rank, "max_new_tokens": max_new_tokens, "temperature": temperature}
    run = _Run(ctx, task, n_demos, demo_faces, n_train, n_eval, micro_batch, cfg)
    frames = [run.stage("initial")]
    need = set(arms) | ({"sft"} if "sft_rl" in arms else set())
    for arm in ("sft", "rl", "sft_rl"):
        if arm in need:
            frames.append(run.stage(arm))
    out = pd.concat(frames, ignore_index=True)
    gains = [_gain(out, "rl", "initial")] if "rl" in arms else []
    gains += [_gain(out, "sft_rl", "sft")] if "sft_rl" in arms else []
    out = pd.concat([out, *gains], ignore_index=True)
    out.attrs["notes"] = run.notes(out)
    return out


def _gain(frame: pd.DataFrame, after: str, before: str) -> pd.DataFrame:
    c = frame[frame["metric"] == "correct"]
    a = c[c["stage"] == after].set_index(["split", "sample"])["value"]
    b = c[c["stage"] == before].set_index(["split", "sample"])["value"]
    d = (a - b.reindex(a.index)).dropna()
    return _rows("rl_gain", after, d.to_numpy(), split=list(d.index.get_level_values(0)),
                 sample=list(d.index.get_level_values(1)))


class _Run:
    """The task's items and prompts, and each stage computed (or read from the cache) on demand."""

    def __init__(self, ctx, task: tasks.TaskConfig, n_demos, demo_faces, n_train, n_eval, micro_batch, cfg: dict):
        self.ctx, self.task, self.micro, self.cfg = ctx, task, micro_batch, cfg
        seed = ctx.seed
        self.train_items = tasks.generate(task, "id", n_train, seed, stream=1)
        self.eval_items = {"id": tasks.generate(task, "id", n_eval, seed, stream=2, need_face=True),
                           "ood": tasks.generate(task, "ood", n_eval, seed, stream=3, need_face=True)}
        self.demos = {r: tasks.demo_items(task, r, n_demos, seed, faces=demo_faces) for r in ("id", "ood")}
        self.base = {"probe": "sft_vs_rl", "version": VERSION, "model": ctx.model.fingerprint,
                     "task": asdict(task), "n_demos": n_demos, "demo_faces": demo_faces, "n_train": n_train,
                     "n_eval": n_eval,
                     "seed": seed, "max_new_tokens": cfg["max_new_tokens"]}
        self.hf, self.tok, self.arch = ctx.model.hf, ctx.model.tokenizer, ctx.model.arch
        self.n_params = sum(p.numel() for p in self.hf.parameters())

    def _train_cfg(self, method: str) -> TrainConfig:
        return TrainConfig(method=method, **self.cfg)

    def prompts(self, items) -> list[str]:
        return [tasks.prompt(it, self.demos[it.rule]) for it in items]

    def evaluate(self, model, stage: str) -> pd.DataFrame:
        out = []
        for split, items in self.eval_items.items():
            self.ctx.progress(0.0, f"{stage}: answering {len(items)} {split} items")
            comp = decoding.decode(model, self.tok, self.prompts(items), self.cfg["max_new_tokens"],
                                   micro_batch=self.micro)
            ok = [float(tasks.score(t, it.values, it.target)) for t, it in zip(comp.texts, items)]
            out.append(_rows("correct", stage, ok, split=split, sample=list(range(len(items)))))
        return pd.concat(out, ignore_index=True)

    def stage(self, name: str) -> pd.DataFrame:
        hp = {} if name == "initial" else self._train_cfg("sft" if name == "sft" else "rl").describe()
        parts = {**self.base, "stage": name, "train": hp,
                 "sft_train": self._train_cfg("sft").describe() if name == "sft_rl" else None}
        return self.ctx.memo(parts, lambda: self._compute(name))

    def _compute(self, name: str) -> pd.DataFrame:
        if name == "initial":
            return self.evaluate(self.hf, "initial")
        cfg = self._train_cfg("sft" if name == "sft" else "rl")
        with adapted(self.hf, self.arch, cfg, self.ctx.seed) as model:
            frames = []
            if name == "sft_rl":
                self._start_from_sft(model)
            curve = self._fit(model, cfg, name)
            metric = "train_loss" if cfg.method == "sft" else "train_reward"
            frames.append(_rows(metric, name, curve.value, step=list(curve.step)))
            frames.append(_rows("train_flops", name, [train_flops(self.n_params, cfg, curve)]))
            frames.append(self.evaluate(model, name))
            if name == "sft" and cfg.adapter == "lora":
                self._store_sft_weights(model)
        out = pd.concat(frames, ignore_index=True)
        out.attrs["timing"] = {"gen_s": round(curve.gen_seconds, 2), "update_s": round(curve.update_seconds, 2)}
        return out

    def _fit(self, model, cfg: TrainConfig, name: str):
        items = self.train_items
        prompts = self.prompts(items)
        progress = lambda f, m="": self.ctx.progress(f, f"{name}: {m}")
        if cfg.method == "sft":
            return train(model, self.tok, cfg, prompts, targets=[f" {it.solution}\n" for it in items],
                         generator=self.ctx.generator(stream=20), progress=progress)
        reward = lambda i, text: float(tasks.score(text, items[i].values, items[i].target))
        return train(model, self.tok, cfg, prompts, reward=reward,
                     generator=self.ctx.generator(stream=21 if name == "rl" else 22), progress=progress)

    # SFT adapter weights, cached as one row per tensor (name, shape, float32 bytes)
    def _weights_parts(self) -> dict:
        return {**self.base, "stage": "sft-weights", "train": self._train_cfg("sft").describe()}

    def _store_sft_weights(self, model) -> None:
        state = trainable_state(model)
        frame = pd.DataFrame({"name": list(state), "shape": [json.dumps(list(t.shape)) for t in state.values()],
                              "data": [t.float().numpy().tobytes() for t in state.values()]})
        self.ctx.memo(self._weights_parts(), lambda: frame)

    def _start_from_sft(self, model) -> None:
        cfg = self._train_cfg("sft")
        if cfg.adapter == "full":  # full weights are too large to cache: train SFT again (deterministic)
            self._fit(model, cfg, "sft_rl (SFT part)")
            return

        def missing() -> pd.DataFrame:  # only when the SFT stage's results were cached without its weights
            with adapted(self.hf, self.arch, cfg, self.ctx.seed) as m2:
                self._fit(m2, cfg, "sft (for SFT→RL)")
                state = trainable_state(m2)
            return pd.DataFrame({"name": list(state), "shape": [json.dumps(list(t.shape)) for t in state.values()],
                                 "data": [t.float().numpy().tobytes() for t in state.values()]})

        frame = self.ctx.memo(self._weights_parts(), missing)
        state = {r.name: torch.from_numpy(np.frombuffer(r.data, dtype=np.float32).copy()).view(json.loads(r.shape))
                 for r in frame.itertuples()}
        load_trainable(model, state)

    def notes(self, frame: pd.DataFrame) -> list[str]:
        c = frame[frame["metric"] == "correct"]
        acc = c.groupby(["stage", "split"])["value"].mean()
        flops = frame[frame["metric"] == "train_flops"].set_index("stage")["value"]
        out = [(f"task: {self.task.n_cards} cards, target {self.task.target or 'drawn'}, ops {self.task.ops}; "
                f"{len(self.train_items)} training hands (J/Q/K = 10), {len(self.eval_items['id'])} held-out hands "
                f"per split, each with a face card"),
               ("training: " + ", ".join(f"{k} {v}" for k, v in self.cfg.items()) + "; same prompts, order, "
                "optimizer (AdamW) and number of steps for SFT and RL"),
               "accuracy: " + "; ".join(f"{s}/{sp} {v:.3f}" for (s, sp), v in acc.items())]
        out += [f"training FLOPs (estimate) {s}: {v:.3g}" for s, v in flops.items()]
        return out

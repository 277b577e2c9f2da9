"""LLM-Microscope contextualization: how much of its prefix a token's states let a decoder reconstruct (C_i),
beside the token's non-linearity E_i from the shared layer pass, for the class and correlation claims; and the
same pair of numbers for a base and an instruction-tuned variant of one model.

Texts: the first `n_eval` texts of the shared pass are scored; texts `n_texts` … `n_texts + n_train − 1` of the
same corpus train the decoder, so no scored text is seen in training.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
import pandas as pd
import torch

from bench import models as models_mod
from bench.core.errors import BenchError, ModelError
from bench.core.registry import probe_def
from bench.families.microscope.contextual import DecoderConfig, run
from bench.families.microscope.layerpass import finish, layer_pass_memo, prepare_items
from bench.families.microscope.schemas import TokenLayerMetrics

METRICS = ("context_loss", "context_loss_untrained", "context_loss_shuffled", "token_error_mean",
           "decoder_loss_ratio", "decoder_gain_vs_shuffled", "train_loss")


def measure(ctx, model, *, corpus, n_texts, max_tokens, micro_batch, n_eval, n_train, cfg: DecoderConfig,
            subject: str | None = None) -> tuple[pd.DataFrame, list[str]]:
    """C_i with its controls, and E_i, for the eval tokens of `model`."""
    if n_eval > n_texts or n_eval < 2 or n_train < 1:
        raise BenchError("need 2 ≤ n_eval ≤ n_texts and n_train ≥ 1")
    items = prepare_items(model.tokenizer, corpus, n_texts + n_train, max_tokens)
    eval_items = [it for it in items if it.sample < n_eval]
    train_items = [it for it in items if it.sample >= n_texts]
    if not train_items:
        raise BenchError(f"corpus {corpus} has no text beyond the first {n_texts} to train the decoder on")
    shared = layer_pass_memo(ctx, corpus=corpus, n_texts=n_texts, max_tokens=max_tokens, micro=micro_batch,
                             model=model)
    err = shared[(shared["metric"] == "token_error_mean") & (shared["sample"] < n_eval)]
    out = run(model, train_items, eval_items, cfg, ctx.generator(stream=11), ctx.progress)
    rows = [(x.sample, x.position, x.cls, "context_loss", float(v)) for x, v in zip(out["eval"], out["trained"])]
    rows += [(x.sample, x.position, x.cls, "context_loss_untrained", float(v))
             for x, v in zip(out["control"], out["untrained"])]
    rows += [(x.sample, x.position, x.cls, "context_loss_shuffled", float(v))
             for x, v in zip(out["control"], out["shuffled"])]
    frame = pd.DataFrame(rows, columns=["sample", "position", "cls", "metric", "value"])
    ctrl = frame[frame["metric"] != "context_loss"].pivot_table(index="sample", columns="metric", values="value")
    trained = frame[frame["metric"] == "context_loss"].groupby("sample")["value"].mean()
    per_text = pd.DataFrame({"trained": trained.reindex(ctrl.index), "untrained": ctrl["context_loss_untrained"],
                             "shuffled": ctrl["context_loss_shuffled"]})
    extra = pd.concat([
        pd.DataFrame({"sample": per_text.index, "metric": "decoder_loss_ratio",
                      "value": (per_text["trained"] / per_text["untrained"]).to_numpy()}),
        pd.DataFrame({"sample": per_text.index, "metric": "decoder_gain_vs_shuffled",
                      "value": (per_text["shuffled"] - per_text["trained"]).to_numpy()}),
        pd.DataFrame({"sample": np.arange(len(out["train_loss"])), "metric": "train_loss",
                      "value": out["train_loss"], "condition": "training"}),
    ], ignore_index=True)
    frame = pd.concat([frame, err[["sample", "position", "cls", "metric", "value"]], extra], ignore_index=True)
    frame["subject"] = subject
    top = int(np.argmax(out["pool"]))
    notes = [f"decoder: {cfg.decoder_layers or 'all'} blocks of a copy of the model, trained: {cfg.train_decoder}; "
             f"MLP width {cfg.hidden or model.arch.d_model}; {cfg.steps} steps × {cfg.texts_per_step} texts × "
             f"{cfg.positions_per_text} positions; lr {cfg.lr:g} (encoder), {cfg.lr_decoder:g} (decoder); "
             f"prefixes ≤ {cfg.max_prefix} tokens; trained on {len(train_items)} texts in {out['seconds']:.0f} s",
             f"held-out loss per prefix token: untrained {np.mean(out['untrained']):.3f}, trained "
             f"{np.mean(out['trained']):.3f}, trained with another text's embedding {np.mean(out['shuffled']):.3f}; "
             f"pooling weight peaks at layer {top} ({out['pool'][top]:.2f})"]
    return frame, notes


@probe_def("contextualization", version=1, schema=TokenLayerMetrics, metrics=METRICS)
def contextualization(
    ctx, *, corpus: str = "brown:all", n_texts: int = 96, max_tokens: int = 32, micro_batch: int = 16,
    n_eval: int = 16, n_train: int = 128, hidden: int = 0, steps: int = 30, texts_per_step: int = 4,
    positions_per_text: int = 4, lr: float = 3e-3, lr_decoder: float = 0.0,
    train_decoder: Literal["all", "blocks", "none"] = "none", max_prefix: int = 8, decoder_layers: int = 0,
    control_texts: int = 8,
) -> pd.DataFrame:
    """Prefix-reconstruction loss C_i per token (with untrained and shuffled controls) and E_i per token."""
    cfg = DecoderConfig(hidden=hidden, steps=steps, texts_per_step=texts_per_step,
                        positions_per_text=positions_per_text, lr=lr, lr_decoder=lr_decoder,
                        train_decoder=train_decoder, max_prefix=max_prefix, decoder_layers=decoder_layers,
                        control_texts=control_texts)
    torch.manual_seed(ctx.seed)  # the encoder's initial weights
    frame, notes = measure(ctx, ctx.model, corpus=corpus, n_texts=n_texts, max_tokens=max_tokens,
                           micro_batch=micro_batch, n_eval=n_eval, n_train=n_train, cfg=cfg)
    return finish(frame, notes)


@probe_def("context_pair", version=2, schema=TokenLayerMetrics, metrics=METRICS)
def context_pair(
    ctx, *, instruct_of: dict[str, str] = {}, corpus: str = "brown:all", n_texts: int = 96,  # noqa: B006
    max_tokens: int = 32, micro_batch: int = 16, n_eval: int = 16, n_train: int = 128, hidden: int = 0,
    steps: int = 30, texts_per_step: int = 4, positions_per_text: int = 4, lr: float = 3e-3,
    lr_decoder: float = 0.0, train_decoder: Literal["all", "blocks", "none"] = "none", max_prefix: int = 8,
    decoder_layers: int = 0, control_texts: int = 8,
) -> pd.DataFrame:
    """C_i and E_i of a base model (subject "base") and of its instruction-tuned variant ("instruct").

    `instruct_of` maps a base model's name to its instruction-tuned variant's name; the cell's model may be
    either side.  A model with no entry has no counterpart: the frame is empty and says so.
    """
    name = ctx.model.name
    pair = next(((b, i) for b, i in instruct_of.items() if name in (b, i)), None)
    if pair is None:
        frame = finish(pd.DataFrame(columns=["metric", "value"]))
        frame.attrs["notes"] = [f"no base/instruct counterpart of '{name}' is given in the spec's measure.instruct_of "
                                f"(pairs: {', '.join(f'{b} → {i}' for b, i in instruct_of.items()) or 'none'}): "
                                f"the claim needs the same model before and after instruction tuning, and no "
                                f"pair is invented"]
        return frame
    other = pair[1] if name == pair[0] else pair[0]
    try:
        counterpart = models_mod.load(models_mod.resolve(other), ctx.model.device.type)
    except ModelError as exc:
        frame = finish(pd.DataFrame(columns=["metric", "value"]))
        frame.attrs["notes"] = [f"the counterpart '{other}' of '{name}' is not available: {exc}"]
        return frame
    cfg = DecoderConfig(hidden=hidden, steps=steps, texts_per_step=texts_per_step,
                        positions_per_text=positions_per_text, lr=lr, lr_decoder=lr_decoder,
                        train_decoder=train_decoder, max_prefix=max_prefix, decoder_layers=decoder_layers,
                        control_texts=control_texts)
    frames, notes = [], []
    for model, role in ((ctx.model, "base" if name == pair[0] else "instruct"),
                        (counterpart, "instruct" if name == pair[0] else "base")):
        torch.manual_seed(ctx.seed)
        f, n = measure(ctx, model, corpus=corpus, n_texts=n_texts, max_tokens=max_tokens, micro_batch=micro_batch,
                       n_eval=n_eval, n_train=n_train, cfg=cfg, subject=role)
        frames.append(f)
        notes += [f"{role} ({model.name}): {x}" for x in n]
    return finish(pd.concat(frames, ignore_index=True), notes)

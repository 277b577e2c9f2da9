"""Hidden states of every layer for tagged English text, and the one shared pass that the LLM-Microscope probes
read (layer linearity, per-token errors, centrality), memoised per model and data.

Layer l = 0 is the input of the first block (the embeddings, as ``output_hidden_states[0]``); layer l ≥ 1 is
the output of block l − 1, *before* any final norm (``output_hidden_states`` applies the final norm to its last
entry; the probes need the raw residual stream).  States are captured with hooks on the blocks; only the base
model runs, so the LM head costs nothing here.

Which tokens count: every token of a text except position 0 and special tokens (BOS).  The first position
attends only to itself, is the attention sink of these models and has an outlying norm; identical in every
text, it would dominate the Frobenius norms of the linearity fit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

import numpy as np
import pandas as pd
import torch

from bench import corpora
from bench.ground.errors import BenchError
from bench.corpora.tagged import SPECIAL, tagged_texts, token_classes
from bench.families.microscope.intrinsic import anisotropy, mean_cosine_to_others
from bench.families.microscope.linearity import (
    GramStats,
    adjusted_score,
    crossfit_sums,
    heldout_score,
    solve,
    token_errors,
)
from bench.models import hooks
from bench.models.decoding import pad_id


@dataclass(frozen=True)
class Sample:
    """The tagged text a probe reads (the shared pass runs once for probes that read the same sample)."""

    corpus: str = "brown:all"
    n_texts: int = 96
    max_tokens: int = 32
    micro_batch: int = 16

    def checked(self) -> "Sample":
        if self.n_texts < 2 or self.max_tokens < 4:
            raise BenchError("need n_texts ≥ 2 and max_tokens ≥ 4")
        return self


@dataclass(frozen=True)
class Item:
    """One tokenised text with a class per token."""

    sample: int
    ids: tuple[int, ...]
    classes: tuple[str, ...]

    @property
    def usable(self) -> np.ndarray:
        """(T,) bool: positions that enter the analyses (not position 0, not special tokens)."""
        ok = np.array([c != SPECIAL for c in self.classes])
        ok[:1] = False
        return ok


def prepare_items(tokenizer, corpus: str, n_texts: int, max_tokens: int) -> list[Item]:
    """The first `n_texts` texts of `corpus`, tokenised (model's own special tokens, truncated to `max_tokens`)."""
    if not getattr(tokenizer, "is_fast", False):
        raise BenchError("token classes need a fast tokenizer (offset mapping); this model's tokenizer is slow")
    out = []
    for i, t in enumerate(tagged_texts(corpus, n_texts)):
        enc = tokenizer(t.text, return_offsets_mapping=True, truncation=True, max_length=max_tokens)
        out.append(Item(i, tuple(enc["input_ids"]), tuple(token_classes(t, enc["offset_mapping"]))))
    return [it for it in out if it.usable.sum() >= 2]


def batches(items: list[Item], micro: int, pad_id: int) -> Iterator[tuple[list[Item], torch.Tensor, torch.Tensor]]:
    """Right-padded micro-batches: (items, ids (B, T), attention mask (B, T))."""
    for i in range(0, len(items), micro):
        group = items[i : i + micro]
        T = max(len(it.ids) for it in group)
        ids = torch.full((len(group), T), pad_id, dtype=torch.long)
        mask = torch.zeros((len(group), T), dtype=torch.long)
        for j, it in enumerate(group):
            ids[j, : len(it.ids)] = torch.tensor(it.ids)
            mask[j, : len(it.ids)] = 1
        yield group, ids, mask


@torch.no_grad()
def block_states(model, ids: torch.Tensor, mask: torch.Tensor, *, logits: bool = False):
    """(states (L+1, B, T, d) float32, logits (B, T, V) or None) of a LoadedModel on one batch."""
    arch = model.arch
    paths = [b.path for b in arch.blocks]
    with hooks.capture(model.hf, paths[:1], inputs=True) as first, hooks.capture(model.hf, paths) as outs:
        dev = model.device
        if logits:
            out = model.hf(input_ids=ids.to(dev), attention_mask=mask.to(dev), use_cache=False)
        else:
            model.hf.base_model(input_ids=ids.to(dev), attention_mask=mask.to(dev), use_cache=False)
    states = [first[paths[0]][0]] + [outs[p][0] for p in paths]
    states = torch.stack([s.float().reshape(ids.shape[0], ids.shape[1], -1).cpu() for s in states])
    return states, (out.logits.float().cpu() if logits else None)


def _selected(states: torch.Tensor, group: list[Item]) -> tuple[torch.Tensor, list[tuple[int, int, str]]]:
    """Usable tokens of a batch: (states (L+1, n, d), [(sample, position, class)])."""
    rows, index = [], []
    for j, it in enumerate(group):
        for p in np.flatnonzero(it.usable):
            rows.append((j, int(p)))
            index.append((it.sample, int(p), it.classes[p]))
    b = torch.tensor([r[0] for r in rows])
    t = torch.tensor([r[1] for r in rows])
    return states[:, b, t, :], index


KEEP_BYTES = 2 << 30  # pass 1 keeps the selected states of its first batches up to this size for pass 2


def layer_pass(model, items: list[Item], micro: int, progress=lambda f, m="": None,
               keep_bytes: int = KEEP_BYTES) -> pd.DataFrame:
    """Two passes over `items`: Gram sums (pass 1), then per-token errors and centrality (pass 2).

    Pass 2 needs the maps of pass 1, so it sees the states again: those pass 1 kept (up to `keep_bytes` of
    float32 states: a smoke profile's whole sample) are reused, the others are computed anew by the same forward
    (the same numbers), so memory stays bounded on paper-scale samples.  Odd-numbered texts form the held-out
    half for ``linearity_heldout`` (maps fitted on the even ones).
    """
    L, d = model.arch.n_layers, model.arch.d_model
    total, test = GramStats.empty(L, d), GramStats.empty(L, d)
    unit_sum = torch.zeros(L + 1, d, dtype=torch.float64)
    pid = pad_id(model.tokenizer)
    n_batches = -(-len(items) // micro)
    kept: dict[int, tuple[torch.Tensor, list]] = {}
    kept_bytes = 0
    for k, (group, ids, mask) in enumerate(batches(items, micro, pid)):
        states, _ = block_states(model, ids, mask)
        sel, index = _selected(states, group)
        size = sel.numel() * sel.element_size()
        if kept_bytes + size <= keep_bytes:
            kept[k] = (sel, index)
            kept_bytes += size
        total.update(sel)
        odd = torch.tensor([s % 2 == 1 for s, _, _ in index])
        if odd.any():
            test.update(sel[:, odd])
        unit_sum += torch.nn.functional.normalize(sel.double(), dim=-1).sum(dim=1)
        progress(0.5 * (k + 1) / n_batches, "hidden states, pass 1 (Gram sums)")
    maps = solve(total)
    two_folds = 0 < test.n < total.n
    held = heldout_score(total.minus(test), test) if two_folds else torch.full((L,), float("nan"))
    fit_for = (solve(test), solve(total.minus(test))) if two_folds else None  # maps for even / odd texts
    parts = []
    for k, (group, ids, mask) in enumerate(batches(items, micro, pid)):
        if k in kept:
            sel, index = kept.pop(k)
        else:
            states, _ = block_states(model, ids, mask)
            sel, index = _selected(states, group)
        err = token_errors(maps, sel).numpy()  # (n, L)
        unit = torch.nn.functional.normalize(sel.double(), dim=-1)  # (L+1, n, d)
        cen = torch.stack([mean_cosine_to_others(unit[l], unit_sum[l], total.n) for l in range(L + 1)]).T.numpy()
        parts.append(_token_rows(index, err, "token_error"))
        parts.append(_token_rows(index, err.mean(axis=1, keepdims=True), "token_error_mean", layered=False))
        parts.append(_token_rows(index, cen, "centrality"))
        if fit_for is not None:
            parts += _crossfit_rows(fit_for, sel, index)
        progress(0.5 + 0.5 * (k + 1) / n_batches, "hidden states, pass 2 (per-token errors)")
    aniso = [anisotropy(total.covariance(l)) for l in range(L + 1)]
    layer_rows = pd.DataFrame({
        "sample": pd.NA, "position": pd.NA, "cls": None,
        "layer": list(range(L)) * 3 + list(range(L + 1)) + [pd.NA, pd.NA],
        "metric": ["linearity"] * L + ["linearity_heldout"] * L + ["linearity_adjusted"] * L
                  + ["anisotropy"] * (L + 1) + ["n_tokens", "hidden_size"],
        "value": np.concatenate([maps.score.numpy(), held.numpy(), adjusted_score(maps.score, total.n, d).numpy(),
                                 np.array(aniso), [float(total.n), float(d)]]),
    })
    frame = pd.concat([*parts, layer_rows], ignore_index=True)
    frame = frame[np.isfinite(frame["value"].to_numpy(float))]
    frame.attrs["notes"] = [f"{total.n} tokens of {len(items)} texts (position 0 and special tokens left out); "
                            f"held-out linearity: maps fitted on {total.n - test.n} tokens of even-numbered texts, "
                            f"scored on {test.n} of odd-numbered ones; cross-fitted sums (linearity_cv_resid, "
                            f"linearity_cv_total): each half scored by the maps of the other; "
                            f"N = {total.n} tokens = {total.n / d:.1f} per hidden dimension (d = {d})"]
    return frame


def _crossfit_rows(fit_for, sel: torch.Tensor, index) -> list[pd.DataFrame]:
    """Per-text sums of the cross-fitted residual and total squares, per layer pair: two (texts × L) tables."""
    samples = np.array([s for s, _, _ in index])
    odd = samples % 2 == 1
    L = sel.shape[0] - 1
    resid, total = np.zeros((len(samples), L)), np.zeros((len(samples), L))
    for fold, mask in ((0, ~odd), (1, odd)):
        if mask.any():
            r, t = crossfit_sums(fit_for[fold], sel[:, torch.from_numpy(mask)])  # (L, n_fold)
            resid[mask], total[mask] = r.T.numpy(), t.T.numpy()
    out = []
    for metric, vals in (("linearity_cv_resid", resid), ("linearity_cv_total", total)):
        per = pd.DataFrame(vals).groupby(samples).sum()  # (texts in this batch, L)
        out.append(pd.DataFrame({"sample": np.repeat(per.index.to_numpy(), L), "position": pd.NA,
                                 "layer": np.tile(np.arange(L), len(per)), "cls": None, "metric": metric,
                                 "value": per.to_numpy().reshape(-1)}))
    return out


def _token_rows(index, values: np.ndarray, metric: str, layered: bool = True) -> pd.DataFrame:
    n, k = values.shape
    sample = np.repeat([s for s, _, _ in index], k)
    position = np.repeat([p for _, p, _ in index], k)
    cls = np.repeat([c for _, _, c in index], k)
    layer = np.tile(np.arange(k), n) if layered else np.full(n * k, -1)
    out = pd.DataFrame({"sample": sample, "position": position, "layer": layer, "cls": cls, "metric": metric,
                        "value": values.reshape(-1).astype(float)})
    if not layered:
        out["layer"] = pd.NA
    return out


def layer_pass_memo(ctx, *, corpus: str, n_texts: int, max_tokens: int, micro: int, model=None) -> pd.DataFrame:
    """:func:`layer_pass` of `model` (default: the context's), cached so that several probes share it."""
    m = model or ctx.model

    def compute() -> pd.DataFrame:
        ctx.progress(0.0, "tagging and tokenising text")
        items = prepare_items(m.tokenizer, corpus, n_texts, max_tokens)
        return layer_pass(m, items, micro, ctx.progress)

    parts = {"fn": "microscope_layer_pass", "v": 2, "model": m.fingerprint, "dtype": str(m.dtype),
             "device": m.device.type, "corpus": corpora.fingerprint(corpus), "n_texts": n_texts,
             "max_tokens": max_tokens}
    frame = ctx.memo(parts, compute)
    return typed(frame)


def typed(frame: pd.DataFrame) -> pd.DataFrame:
    for col in ("sample", "position", "layer"):
        if col in frame.columns:
            frame[col] = frame[col].astype("Int64")
    return frame


def collect_states(model, items: list[Item], limit: int, micro: int) -> tuple[torch.Tensor, list]:
    """States (L+1, n, d) of the usable tokens of the first texts, up to `limit` tokens, and their index."""
    kept, index = [], []
    count = 0
    for group, ids, mask in batches(items, micro, pad_id(model.tokenizer)):
        states, _ = block_states(model, ids, mask)
        sel, idx = _selected(states, group)
        take = min(limit - count, sel.shape[1])
        kept.append(sel[:, :take])
        index += idx[:take]
        count += take
        if count >= limit:
            break
    return torch.cat(kept, dim=1), index


def finish(frame: pd.DataFrame, notes: list[str] | None = None, *, trained: bool = False) -> pd.DataFrame:
    """Give a family frame every column of :class:`bench.families.microscope.schemas.TokenLayerMetrics` (with
    `trained`, of ``TrainedTokenMetrics``: ``train_seed`` too), typed, and its notes."""
    out = frame.copy()
    extra = ["train_seed"] if trained else []
    for col in extra:
        out[col] = out[col].astype("Int64") if col in out.columns else pd.array([pd.NA] * len(out), dtype="Int64")
    for col in ("subject", "condition", "cls"):
        if col not in out.columns:
            out[col] = None
    for col in ("sample", "position", "layer"):
        if col not in out.columns:
            out[col] = pd.NA
    out = typed(out)[["subject", "condition", "sample", "position", "layer", "cls", *extra, "metric", "value"]]
    out = out.reset_index(drop=True)
    out.attrs["notes"] = list(notes if notes is not None else frame.attrs.get("notes", []))
    return out

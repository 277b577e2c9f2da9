"""Small helpers around a loaded causal LM that several probes share."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterator, Literal

import numpy as np
import pandas as pd
import torch

from bench.families.circuits import attention_metrics as am
from bench.models.hooks import attention_implementation

LOGIT_BUDGET = 48_000_000  # floats of logits held at once: sets the micro-batch size for big vocabularies


def candidate_ids(tokenizer, vocab_size: int) -> torch.Tensor:
    """Ordinary token ids: below the model's vocabulary size, not special and not added tokens."""
    excluded = set(tokenizer.all_special_ids) | set(getattr(tokenizer, "added_tokens_decoder", {}) or {})
    ids = [i for i in range(min(vocab_size, len(tokenizer))) if i not in excluded]
    return torch.tensor(ids, dtype=torch.long)


def micro_batch(seq_len: int, vocab: int, wanted: int) -> int:
    return max(1, min(wanted, LOGIT_BUDGET // max(1, seq_len * vocab)))


def chunks(ids: torch.Tensor, size: int) -> Iterator[torch.Tensor]:
    for i in range(0, ids.shape[0], size):
        yield ids[i : i + size]


@torch.no_grad()
def repeat_head_scores(model, *, seq_len: int, n_seq: int, batch: int, generator: torch.Generator,
                       progress: Callable[[float, str], None] = lambda f, m="": None) -> dict[str, np.ndarray]:
    """Run repeated random sequences through `model` (a LoadedModel) and score every head.

    Returns numpy arrays: ``induction`` and ``prev_token`` (N, layers, heads); ``loss_first`` and
    ``loss_second`` (N,) in nats.  Sequences are ``seq_len`` random ordinary tokens repeated once, no BOS.
    """
    hf, cfg = model.hf, model.hf.config.get_text_config()
    ids = am.repeated_random_tokens(candidate_ids(model.tokenizer, cfg.vocab_size), n_seq, seq_len, generator)
    mb = micro_batch(2 * seq_len, cfg.vocab_size, batch)
    ind, prev, first, second = [], [], [], []
    with attention_implementation(hf, "eager"):
        for i, x in enumerate(chunks(ids, mb)):
            x = x.to(model.device)
            out = hf(input_ids=x, attention_mask=torch.ones_like(x), output_attentions=True, use_cache=False)
            pats = torch.stack([a.float() for a in out.attentions], dim=1)  # (B, layers, H, T, T)
            B, Ly, H, T, _ = pats.shape
            flat = pats.reshape(B * Ly, H, T, T)
            ind.append(am.induction_scores(flat, seq_len).reshape(B, Ly, H).cpu())
            prev.append(am.previous_token_scores(flat).reshape(B, Ly, H).cpu())
            f, s = am.copy_losses(out.logits, x, seq_len)
            first.append(f.cpu())
            second.append(s.cpu())
            progress(min(1.0, (i + 1) * mb / n_seq), "repeated random tokens")
    return {"induction": torch.cat(ind).numpy(), "prev_token": torch.cat(prev).numpy(),
            "loss_first": torch.cat(first).numpy(), "loss_second": torch.cat(second).numpy()}


def head_rows(scores: np.ndarray, metric: str, subject: str | None = None) -> pd.DataFrame:
    """(N, layers, heads) array -> tidy rows (subject, sample, layer, head, metric, value)."""
    n, ly, h = scores.shape
    s, l, hh = np.meshgrid(np.arange(n), np.arange(ly), np.arange(h), indexing="ij")
    return pd.DataFrame({"subject": subject, "sample": s.ravel(), "layer": l.ravel(), "head": hh.ravel(),
                         "metric": metric, "value": scores.ravel().astype(float)})


def sample_rows(values: np.ndarray, metric: str, subject: str | None = None) -> pd.DataFrame:
    """(N,) array -> tidy rows with null layer and head."""
    return pd.DataFrame({"subject": subject, "sample": np.arange(len(values)), "layer": pd.NA, "head": pd.NA,
                         "metric": metric, "value": np.asarray(values, float)})


@dataclass(frozen=True)
class Repeats:
    """The repeated random token sequences the head scores read: `batch` sequences of `seq_len` tokens, twice."""

    corpus: Literal["synthetic:repeated-random"] = "synthetic:repeated-random"
    seq_len: int = 50
    batch: int = 16

    def scores(self, ctx) -> pd.DataFrame:
        if self.seq_len < 4 or self.batch < 1:
            raise ValueError("seq_len must be ≥ 4 and batch ≥ 1")
        return repeat_scores_memo(ctx, seq_len=self.seq_len, n_seq=self.batch)


def repeat_scores_memo(ctx, *, seq_len: int, n_seq: int, micro: int = 8) -> pd.DataFrame:
    """`repeat_head_scores` of the context's model as a tidy frame, cached so probes can share it."""
    m = ctx.model

    def compute() -> pd.DataFrame:
        r = repeat_head_scores(m, seq_len=seq_len, n_seq=n_seq, batch=micro, generator=ctx.generator(),
                               progress=ctx.progress)
        return pd.concat([head_rows(r["induction"], "induction_score"),
                          head_rows(r["prev_token"], "prev_token_score"),
                          sample_rows(r["loss_first"], "loss_first"),
                          sample_rows(r["loss_second"], "loss_second")], ignore_index=True)

    parts = {"fn": "repeat_head_scores", "v": 1, "model": m.fingerprint, "dtype": str(m.dtype),
             "device": m.device.type, "seq_len": seq_len, "n_seq": n_seq, "seed": ctx.seed}
    frame = ctx.memo(parts, compute)
    for col in ("sample", "layer", "head"):
        frame[col] = frame[col].astype("Int64")
    return frame


def mean_head_matrix(frame: pd.DataFrame, metric: str) -> np.ndarray:
    """Mean over samples of a per-head metric -> (layers, heads)."""
    rows = frame[frame["metric"] == metric]
    table = rows.groupby(["layer", "head"])["value"].mean().unstack("head")
    return table.sort_index().to_numpy(float)

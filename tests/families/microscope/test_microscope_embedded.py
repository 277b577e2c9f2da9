"""The microscope probes on the real embedded SmolLM2 (small budgets): parity, sanity and frame shapes."""

from __future__ import annotations

import pytest
import torch

from bench.ground import registry, schemas
from bench.ground.context import ProbeContext
from bench.ground.store import Cache

pytestmark = pytest.mark.embedded




def _run(m, tmp_path, probe: str, **params):
    info = registry.probe(probe)
    ctx = ProbeContext(model=m, seed=0, cache=Cache(tmp_path / "frames"))
    return schemas.validate(info.call(ctx, **params), info.schema, info.metrics)


def test_real_model_states_equal_output_hidden_states(smollm):
    from bench.families.microscope.layerpass import block_states

    ids = torch.tensor([smollm.tokenizer("The capital of Germany is Berlin.")["input_ids"]])
    states, _ = block_states(smollm, ids, torch.ones_like(ids))
    with torch.no_grad():
        ref = smollm.hf(input_ids=ids, output_hidden_states=True).hidden_states
    for l in range(len(ref) - 1):
        assert torch.allclose(states[l], ref[l], atol=1e-4)


def test_family_on_the_real_model(smollm, tmp_path):
    data = {"corpus": "brown:all", "n_texts": 8, "max_tokens": 20, "micro_batch": 8}
    lin = _run(smollm, tmp_path, "nonlinearity", **data)
    assert (lin["metric"] == "linearity").sum() == smollm.arch.n_layers  # every pair, the last one included
    cen = _run(smollm, tmp_path, "centrality", **data)
    assert cen["layer"].nunique() == smollm.arch.n_layers + 1
    lens = _run(smollm, tmp_path, "logit_lens", corpus="brown:all", n_texts=2, max_tokens=20)
    assert lens[lens["metric"] == "lens_final_gap"]["value"].max() < 1e-3
    assert lens[lens["metric"] == "model_loss"]["value"].mean() < 8  # a real model, not noise
    ctxf = _run(smollm, tmp_path, "contextualization", **data, n_eval=2, n_train=2, steps=2, batch=4, prefix=4,
                decoder_layers=1)
    assert {"context_loss", "context_loss_blind", "context_loss_layer0", "token_error_mean", "decoder_gain_vs_blind",
            "decoder_gain_vs_shuffled", "decoder_gain_vs_layer0", "context_added_pos_centred"} <= set(ctxf["metric"])
    assert set(ctxf[ctxf["metric"] == "train_loss"]["condition"]) == {"states", "blind", "layer0"}
    ro = _run(smollm, tmp_path, "contextualization", **data, n_eval=2, n_train=2, steps=2, batch=4, prefix=4,
              reader="readout", hidden=16)
    first = ro[(ro["metric"] == "train_loss")].groupby("condition")["value"].first()
    # the readouts start at zero: both decoders' first loss is the uniform one over the restricted vocabulary
    assert first["states"] == pytest.approx(first["blind"], abs=1e-5)
    assert first["layer0"] == pytest.approx(first["blind"], abs=1e-5)
    qa = _run(smollm, tmp_path, "token_removal", n_questions=4, max_new_tokens=3)
    assert set(qa["condition"].dropna()) == {"original", "no_stopwords", "no_punctuation", "no_articles"}
    pair = _run(smollm, tmp_path, "context_pair", **data)
    assert pair.empty and "no pair is invented" in pair.attrs["notes"][0]


def test_final_layer_lens_loss_equals_the_models_own_loss(smollm, tmp_path):
    """A value, not a shape: the last layer read through the lens is the model, so its per-token loss equals the
    loss transformers computes for the same text (labels = inputs, the positions the probe scores)."""
    from bench.families.microscope.layerpass import prepare_items

    lens = _run(smollm, tmp_path, "logit_lens", corpus="brown:all", n_texts=2, max_tokens=20)
    it = prepare_items(smollm.tokenizer, "brown:all", 2, 20)[0]
    ids = torch.tensor([it.ids])
    with torch.no_grad():
        logits = smollm.hf(input_ids=ids).logits[0].float()
    pos = [p for p in range(len(it.ids) - 1) if it.usable[p]]
    ref = torch.nn.functional.cross_entropy(logits[pos], ids[0, [p + 1 for p in pos]], reduction="none")
    rows = lens[(lens["sample"] == it.sample) & (lens["metric"] == "lens_loss")
                & (lens["layer"] == smollm.arch.n_layers)].sort_values("position")
    assert rows["position"].tolist() == pos
    assert rows["value"].to_numpy() == pytest.approx(ref.numpy(), abs=2e-3)


def test_crossfitted_linearity_on_real_states_equals_a_plain_fit(smollm, tmp_path):
    """The streamed cross-fitted sums against a plain least-squares fit on the even texts scored on the odd ones."""
    from bench.families.microscope.layerpass import collect_states, prepare_items

    data = {"corpus": "brown:all", "n_texts": 8, "max_tokens": 20, "micro_batch": 8}
    lin = _run(smollm, tmp_path, "nonlinearity", **data)
    items = prepare_items(smollm.tokenizer, "brown:all", 8, 20)
    states, index = collect_states(smollm, items, 10_000, 8)  # (L+1, n, d)
    odd = torch.tensor([s % 2 == 1 for s, _, _ in index])
    h = states[:2].double()  # layer pair 0 → 1 is enough for a value check
    fit, test = h[:, ~odd], h[:, odd]
    mx, my = fit[0].mean(0), fit[1].mean(0)
    A = torch.linalg.lstsq(fit[0] - mx, fit[1] - my, rcond=None, driver="gelsd").solution
    r = (test[0] - mx) @ A - (test[1] - my)
    want_resid = float((r * r).sum())
    got = lin[(lin["metric"] == "linearity_cv_resid") & (lin["layer"] == 0)]
    got = got[got["sample"].astype(int) % 2 == 1]["value"].sum()
    assert got == pytest.approx(want_resid, rel=1e-3)

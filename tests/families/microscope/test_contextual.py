"""Prefix reconstruction (contextualization C_i) on tiny models with known answers.

The central task: token ids drawn uniformly and independently, so no decoder can guess a prefix from the language
prior (the best state-blind loss is log V'); each example's states hold its prefix (layer j: a code of the token
j + 1 steps back) under a huge constant outlier coordinate, as real residual streams have.  A decoder that reads
the states must beat the state-blind and the shuffled controls by a wide margin; one that does not read them must
fail the gate.
"""

from __future__ import annotations

import math
import re
import types

import numpy as np
import pandas as pd
import pytest
import torch

from bench import stats
from bench.families.microscope.context_metrics import control_rows
from bench.families.microscope.context_probe import full_prefix_examples, start_id
from bench.families.microscope.contextual import (
    Decoder,
    DecoderConfig,
    Encoder,
    Pool,
    Readout,
    decoder_copy,
    fit,
    other_text,
    schedule,
    standardiser,
)
from bench.families.microscope.layerpass import Item
from bench.models import arch as arch_mod
from bench.models.train import lora_targets
from tests.conftest import build_tiny

K, V0, FIRST = 2, 12, 5  # prefix length, distinct ids, first id used


def _task(n: int, seed: int, d: int = 32) -> Pool:
    """Layer j < K holds a code of the token j + 1 steps back; the last layer holds only noise."""
    g = torch.Generator().manual_seed(seed)
    prefixes = torch.randint(FIRST, FIRST + V0, (n, K), generator=g)  # (n, K), oldest first
    codes = torch.randn(K, V0, d, generator=torch.Generator().manual_seed(99))  # one code book per layer
    states = torch.stack([codes[j][prefixes[:, K - 1 - j] - FIRST] for j in range(K)]
                         + [torch.zeros(n, d)], dim=1)  # (n, K+1, d)
    states = states + 0.1 * torch.randn(states.shape, generator=g)
    states[..., 0] += 300.0  # the outlier coordinate
    return Pool(states, prefixes)


CFG = DecoderConfig(prefix=K, hidden=64, decoder_layers=0, lora_rank=4, steps=80, batch=32, lr=1e-2, lr_lora=1e-2)
VOCAB = torch.arange(FIRST, FIRST + V0)


def _loaded(family, **over):
    hf = build_tiny(family, **over)
    return types.SimpleNamespace(hf=hf, arch=arch_mod.inspect(hf), device=torch.device("cpu"))


@pytest.fixture(scope="module")
def decoder_lm():
    """A tiny LM that can be a decoder at all: weights at the usual 1/√d scale and unit-scale (tied) embeddings,
    so that its head can be confident (build_tiny's 0.02 initialisation caps every logit near 0)."""
    m = _loaded("llama", initializer_range=0.2)
    with torch.no_grad():
        m.hf.get_input_embeddings().weight.normal_(0.0, 1.0, generator=torch.Generator().manual_seed(0))
    return m


@pytest.fixture
def pools():
    return _task(640, 0), _task(128, 1)


def _fit(model, pool, blind=False, seed=0, cfg=CFG):
    return fit(model, pool, cfg, vocab=VOCAB, start_id=0, seed=seed, blind=blind)


def test_trained_decoder_reads_the_states_and_beats_both_controls(decoder_lm, pools):
    train, test = pools
    before = [p.detach().clone() for p in decoder_lm.hf.parameters()]
    trained, blind = _fit(decoder_lm, train), _fit(decoder_lm, train, blind=True)
    own, bl = trained.loss(test), blind.loss(test)
    samples, positions = np.repeat(np.arange(8), 16), np.tile(np.arange(16), 8)
    shuffled = trained.loss(Pool(test.states[other_text(samples, positions)], test.prefixes))
    chance = math.log(V0)
    assert bl.mean() > 0.85 * chance  # the prior cannot help: ids are independent and uniform
    assert own.mean() < bl.mean() - 1.0  # the state is read
    assert shuffled.mean() > own.mean() + 1.0  # ... and it is this token's state that helps
    assert trained.train_loss[-10:].mean() < trained.train_loss[:10].mean() - 1.0
    assert all(torch.equal(a, b) for a, b in zip(before, decoder_lm.hf.parameters()))  # the model is untouched
    assert not any("lora" in n for n, _ in decoder_lm.hf.named_modules())

    index = pd.DataFrame({"sample": samples, "position": positions, "cls": "noun"})
    frame = control_rows(index, {"context_loss": own, "context_loss_blind": bl, "context_loss_shuffled": shuffled})
    for metric in ("decoder_gain_vs_blind", "decoder_gain_vs_shuffled"):
        v = stats.evaluate(frame, "threshold", {"metric": metric, "min": 0.0})
        assert v.outcome is stats.Outcome.SUPPORTED and v.estimate > 1.0


def test_a_state_blind_encoder_fails_the_gate(decoder_lm, pools):
    """An encoder that ignores its input, standing in for the trained one, is no better than the blind control."""
    train, test = pools
    cfg = DecoderConfig(**{**CFG.__dict__, "steps": 40})  # no number of steps teaches a blind encoder to see
    ignoring = _fit(decoder_lm, train, blind=True, seed=3, cfg=cfg)
    blind = _fit(decoder_lm, train, blind=True, cfg=cfg)
    samples, positions = np.repeat(np.arange(8), 16), np.tile(np.arange(16), 8)
    own = ignoring.loss(test)
    index = pd.DataFrame({"sample": samples, "position": positions, "cls": "noun"})
    frame = control_rows(index, {"context_loss": own, "context_loss_blind": blind.loss(test),
                                 "context_loss_shuffled": ignoring.loss(
                                     Pool(test.states[other_text(samples, positions)], test.prefixes))})
    for metric in ("decoder_gain_vs_blind", "decoder_gain_vs_shuffled"):
        v = stats.evaluate(frame, "threshold", {"metric": metric, "min": 0.0})
        assert v.outcome is not stats.Outcome.SUPPORTED, (metric, v.reason)
        assert abs(v.estimate) < 0.3


def test_same_seed_same_training(decoder_lm, pools):
    train, _ = pools
    cfg = DecoderConfig(prefix=K, hidden=16, lora_rank=2, steps=5, batch=8)
    a, b = _fit(decoder_lm, train, cfg=cfg), _fit(decoder_lm, train, cfg=cfg)
    assert np.array_equal(a.train_loss, b.train_loss)
    assert all(torch.equal(x, y) for x, y in zip(a.decoder.lora, b.decoder.lora))
    c = _fit(decoder_lm, train, cfg=cfg, seed=1)
    assert not np.array_equal(a.train_loss, c.train_loss)


READOUT = DecoderConfig(prefix=K, hidden=32, reader="readout", steps=150, batch=32, lr=1e-2, dropout=0.1,
                        weight_decay=0.01)


def test_same_seed_same_training_whatever_the_process_drew_before(decoder_lm, pools):
    """Dropout masks come from the run seed, not from the process's global generator: the same cell gives the
    same decoder whichever cells ran before it."""
    train, _ = pools
    cfg = DecoderConfig(**{**READOUT.__dict__, "steps": 5})
    torch.manual_seed(123)
    a = _fit(decoder_lm, train, cfg=cfg)
    torch.rand(1000)  # another cell's draws
    b = _fit(decoder_lm, train, cfg=cfg)
    assert np.array_equal(a.train_loss, b.train_loss)
    state = torch.get_rng_state()
    _fit(decoder_lm, train, cfg=cfg)
    assert torch.equal(state, torch.get_rng_state())  # and the global generator is left as it was


def _gate_frame(trained, blind, test):
    samples, positions = np.repeat(np.arange(8), 16), np.tile(np.arange(16), 8)
    index = pd.DataFrame({"sample": samples, "position": positions, "cls": "noun"})
    shuffled = trained.loss(Pool(test.states[other_text(samples, positions)], test.prefixes))
    return control_rows(index, {"context_loss": trained.loss(test), "context_loss_blind": blind.loss(test),
                                "context_loss_shuffled": shuffled})


def test_readout_reads_the_states_and_a_blind_readout_fails_the_gate(decoder_lm, pools):
    """The per-offset readouts learn the planted prefixes; a readout that sees zeros in place of the trained one
    gains nothing over the blind control."""
    train, test = pools
    trained, blind = _fit(decoder_lm, train, cfg=READOUT), _fit(decoder_lm, train, blind=True, cfg=READOUT)
    assert blind.loss(test).mean() > 0.85 * math.log(V0)
    frame = _gate_frame(trained, blind, test)
    for metric in ("decoder_gain_vs_blind", "decoder_gain_vs_shuffled"):
        v = stats.evaluate(frame, "threshold", {"metric": metric, "min": 0.0})
        assert v.outcome is stats.Outcome.SUPPORTED and v.estimate > 1.0, (metric, v.reason)
    ignoring = _fit(decoder_lm, train, blind=True, seed=3, cfg=READOUT)
    frame = _gate_frame(ignoring, blind, test)
    for metric in ("decoder_gain_vs_blind", "decoder_gain_vs_shuffled"):
        v = stats.evaluate(frame, "threshold", {"metric": metric, "min": 0.0})
        assert v.outcome is not stats.Outcome.SUPPORTED and abs(v.estimate) < 0.3, (metric, v.reason)


def test_readout_trained_and_blind_start_from_the_same_weights(decoder_lm, pools):
    """The readouts' last layer starts at zero: before any step both decoders give every example the same loss,
    the uniform one over the restricted vocabulary (the tiny model's head has no bias)."""
    train, test = pools
    cfg = DecoderConfig(**{**READOUT.__dict__, "steps": 1, "lr": 0.0})
    a, b = _fit(decoder_lm, train, cfg=cfg), _fit(decoder_lm, train, blind=True, cfg=cfg)
    assert np.allclose(a.loss(test), b.loss(test), atol=1e-5)
    assert np.allclose(a.loss(test), math.log(V0), atol=1e-4)


def test_readout_loss_is_the_cross_entropy_through_the_unembedding(decoder_lm):
    """Offset j's vector, times the head's rows for the vocabulary, gives the logits: a hand-computed reference."""
    head = decoder_lm.hf.get_output_embeddings()
    g = torch.Generator().manual_seed(0)
    e = torch.randn(3, K * 32, generator=g)
    pre = torch.randint(FIRST, FIRST + V0, (3, K), generator=g)
    got = Readout(head, VOCAB)(e, pre)
    logits = e.view(3, K, 32) @ head.weight.detach()[VOCAB].T  # (3, K, V0)
    ref = torch.stack([torch.stack([-torch.log_softmax(logits[i, j], -1)[pre[i, j] - FIRST] for j in range(K)]).mean()
                       for i in range(3)])
    assert torch.allclose(got, ref, atol=1e-5)


def test_standardiser_removes_the_outlier_coordinate(pools):
    train, _ = pools
    mean, std = standardiser(train.states)
    x = (train.states - mean) / std
    assert torch.allclose(x.mean(0), torch.zeros_like(mean), atol=1e-3)
    assert torch.allclose(x.std(0, unbiased=False), torch.ones_like(std), atol=1e-3)
    raw = torch.nn.functional.normalize(train.states[:, 0], dim=-1)
    std_ = torch.nn.functional.normalize(x[:, 0], dim=-1)
    assert (raw @ raw.T).mean() > 0.99 and (std_ @ std_.T).mean().abs() < 0.1  # tokens no longer look alike


def test_blind_encoder_output_does_not_depend_on_the_states(pools):
    train, test = pools
    mean, std = standardiser(train.states)
    enc = Encoder(mean, std, 16, 1.0, blind=True)
    assert torch.equal(enc(test.states[:1]), enc(test.states[1:2]))
    seeing = Encoder(mean, std, 16, 1.0)
    assert not torch.equal(seeing(test.states[:1]), seeing(test.states[1:2]))


@pytest.mark.parametrize("family", ["llama", "gemma3"])
def test_decoder_loss_equals_transformers_cross_entropy(family):
    """Full vocabulary: the loss is the cross-entropy of plain transformers logits on [start, e, w_1 … w_{k−1}];
    a restricted vocabulary renormalises those same logits over its ids."""
    m = _loaded(family)
    torch.manual_seed(0)
    e = torch.randn(4, 32)
    pre = torch.randint(3, 40, (4, 5))
    vocab = torch.arange(m.arch.vocab_size)
    dec = Decoder(m, DecoderConfig(prefix=5, lora_rank=2), vocab, start_id=1)
    with torch.no_grad():
        got = dec(e, pre)
        emb = m.hf.get_input_embeddings()
        inputs = torch.cat([emb(torch.ones(4, 1, dtype=torch.long)), e[:, None], emb(pre[:, :-1])], dim=1)
        logits = m.hf(inputs_embeds=inputs).logits[:, 1:].float()  # (4, 5, V)
        ref = torch.nn.functional.cross_entropy(logits.transpose(1, 2), pre, reduction="none").mean(1)
        assert torch.allclose(got, ref, atol=1e-5)
        sub = torch.arange(3, 40)
        small = Decoder(m, DecoderConfig(prefix=5, lora_rank=2), sub, start_id=1)(e, pre)
        ref_sub = torch.nn.functional.cross_entropy(logits[..., sub].transpose(1, 2), pre - 3,
                                                    reduction="none").mean(1)
        assert torch.allclose(small, ref_sub, atol=1e-5)


def test_lora_targets_come_from_the_module_tree():
    m = _loaded("llama")
    t = lora_targets(m.arch, "all", 1)
    assert "model.layers.0.self_attn.q_proj" in t and "model.layers.0.mlp.down_proj" in t
    assert not any(".layers.1." in p for p in t) and len(t) == 7
    assert len(lora_targets(m.arch, "all", 0)) == 14


def test_decoder_copy_truncates_and_leaves_the_model_alone(loaded_tiny):
    dec = decoder_copy(loaded_tiny, 1)
    assert len(dec.model.layers) == 1 and len(loaded_tiny.hf.model.layers) == 2
    assert dec.model.layers[0].self_attn.q_proj.weight.data_ptr() != \
        loaded_tiny.hf.model.layers[0].self_attn.q_proj.weight.data_ptr()
    assert dec.get_input_embeddings() is loaded_tiny.hf.get_input_embeddings()  # shared, frozen, not copied
    assert dec(input_ids=torch.tensor([[1, 2, 3]])).logits.shape == (1, 3, loaded_tiny.hf.config.vocab_size)
    with pytest.raises(ValueError, match="decoder_layers = 3, but this model has 2 blocks"):
        decoder_copy(loaded_tiny, 3)  # more blocks than the model has: an error, not a silent "all"


def test_only_full_prefixes_are_examples():
    it = Item(0, (1, 10, 11, 12, 13, 14), ("special", "noun", "verb", "determiner", "noun", "noun"))
    ex = full_prefix_examples(it, 3)
    assert ex == [(4, (10, 11, 12)), (5, (11, 12, 13))]  # BOS is not a prefix token; position 3 has only two


def test_start_token_is_the_tokenizers_own(tiny_tokenizer):
    items = [Item(0, (7, 10, 11), ("special", "noun", "noun")), Item(1, (7, 12, 13), ("special", "noun", "noun"))]
    assert start_id(tiny_tokenizer, items) == 7
    plain = [Item(0, (10, 11), ("noun", "noun"))]
    assert start_id(tiny_tokenizer, plain) == tiny_tokenizer.bos_token_id


def test_shuffled_control_takes_another_text_at_the_nearest_position():
    samples = np.array([0, 0, 0, 1, 1, 2])
    positions = np.array([3, 4, 9, 3, 5, 4])
    idx = other_text(samples, positions)
    assert list(idx) == [3, 3, 4, 5, 5, 1]
    assert all(samples[idx] != samples)


def test_schedule_warms_up_then_decays():
    f = [schedule(s, 100, 0.1) for s in range(100)]
    assert f[0] == pytest.approx(0.1) and f[9] == pytest.approx(1.0) and f[10] == pytest.approx(1.0)
    assert all(a >= b for a, b in zip(f[10:], f[11:])) and f[-1] < 0.01


def test_chart_shows_the_training_curves_beside_the_classes():
    import vl_convert

    from bench.ground.charts import chart_for

    rows = [(s, p, cls, m, 1.0 + 0.1 * p) for s in range(3) for p, cls in enumerate(["noun", "determiner"] * 3)
            for m in ("context_loss", "context_loss_blind", "context_loss_layer0", "context_loss_shuffled",
                      "context_added_pos_centred")]
    frame = pd.DataFrame(rows, columns=["sample", "position", "cls", "metric", "value"])
    curves = pd.DataFrame([(k, None, None, "train_loss", 3.0 - 0.01 * k, c) for c in ("states", "blind", "layer0")
                           for k in range(50)], columns=["sample", "position", "cls", "metric", "value", "condition"])
    svg = vl_convert.vegalite_to_svg(chart_for("contextualization")(pd.concat([frame, curves])).to_json())
    assert "state-blind" in svg and "optimiser step" in svg and "determiner" in svg
    assert "layer 0 only" in svg and "Context added beyond layer 0" in svg


def test_probe_frame_on_a_tiny_model_validates_and_gates(loaded_tiny, tmp_path):
    """The whole probe on tagged text: every metric present, the schema holds, the spec's gated rule runs."""
    from bench.ground import registry, schemas
    from bench.ground.context import ProbeContext
    from bench.ground.store import Cache

    info = registry.probe("contextualization")
    ctx = ProbeContext(model=loaded_tiny, seed=0, cache=Cache(tmp_path / "frames"))
    frame = schemas.validate(info.call(ctx, corpus="brown:all", n_texts=6, max_tokens=16, n_eval=3, n_train=3,
                                     prefix=3, decoder_layers=1, lora_rank=2, steps=3, batch=8),
                             info.schema, info.metrics)
    assert set(info.metrics) <= set(frame["metric"])
    scored = frame[frame["metric"] == "context_loss"]
    assert len(scored) == (frame["metric"] == "context_loss_blind").sum() and (scored["position"] >= 3).all()
    assert "state-blind" in frame.attrs["notes"][1]
    gates = [{"rule": "threshold", "metric": m, "min": 0.0} for m in ("decoder_gain_vs_blind",
                                                                     "decoder_gain_vs_shuffled")]
    claim = {"rule": "correlation", "x": {"metric": "context_loss"}, "y": {"metric": "token_error_mean"}}
    v = stats.evaluate(frame, "gated", {"of": [*gates, claim]})
    assert v.outcome is stats.Outcome.INCONCLUSIVE  # 3 steps teach nothing: the gate or the sample size says so


def test_decoder_runs_are_separate_trainings_named_by_train_seed(loaded_tiny, tmp_path):
    """`decoder_runs = 2`: every trained number comes twice (train_seed 0 and 1, different seeds, so different
    losses), E_i once with no train_seed; a rule with `training_runs` decides on each run."""
    from bench.ground import registry, schemas
    from bench.ground.context import ProbeContext
    from bench.ground.store import Cache

    info = registry.probe("contextualization")
    ctx = ProbeContext(model=loaded_tiny, seed=0, cache=Cache(tmp_path / "frames"))
    frame = schemas.validate(info.call(ctx, corpus="brown:all", n_texts=6, max_tokens=16, n_eval=3, n_train=3,
                                     prefix=3, reader="readout", hidden=8, steps=4, batch=8, decoder_runs=2),
                             info.schema, info.metrics)
    c = frame[frame["metric"] == "context_loss"]
    assert sorted(c["train_seed"].unique().tolist()) == [0, 1]
    a = c[c["train_seed"] == 0].sort_values(["sample", "position"])["value"].to_numpy()
    b = c[c["train_seed"] == 1].sort_values(["sample", "position"])["value"].to_numpy()
    assert len(a) == len(b) > 0 and not np.allclose(a, b)  # two trainings, not one copied
    e = frame[frame["metric"] == "token_error_mean"]
    assert len(e) > 0 and e["train_seed"].isna().all()
    assert (frame[frame["metric"] == "train_loss"].groupby("train_seed").size() == 3 * 4).all()
    v = stats.evaluate(frame, "threshold", {"metric": "decoder_gain_vs_blind", "min": 0.0, "min_n": 2,
                                            "training_runs": "train_seed"})
    assert v.runs == 2 and len(v.parts) == 2


class _Killed(Exception):
    pass


@pytest.mark.parametrize("reader", ["lm", "readout"])
def test_a_killed_decoder_training_resumes_to_the_same_losses_and_weights(decoder_lm, pools, tmp_path, reader):
    """Known answer: 12 steps of 64 of 640 examples (a fresh order drawn at step 10) with dropout, killed after 7
    with its state saved every 3 steps, then run again: the losses, the schedule, the encoder and the LoRA
    matrices of the run that was never stopped, bit for bit; run once more, nothing is trained."""
    from dataclasses import replace

    from bench.ground.resume import Resume

    train, _ = pools
    cfg = replace(CFG, steps=12, batch=64, dropout=0.1, reader=reader)
    clean = fit(decoder_lm, train, cfg, vocab=VOCAB, start_id=0, seed=3)

    def die(fraction, message=""):
        if fraction >= 7 / 12:
            raise _Killed

    path = tmp_path / "decoder.pt"
    with pytest.raises(_Killed):
        fit(decoder_lm, train, cfg, vocab=VOCAB, start_id=0, seed=3, progress=die, resume=Resume(path, 3, 0))
    assert torch.load(path, weights_only=False)["step"] == 6
    for again in range(2):
        said = []
        got = fit(decoder_lm, train, cfg, vocab=VOCAB, start_id=0, seed=3, resume=Resume(path, 3, 0),
                  progress=lambda f, m="": said.append(f))
        assert len(said) == (6 if again == 0 else 0)  # resumed at step 6; then finished, nothing left to run
        assert np.array_equal(got.train_loss, clean.train_loss) and np.array_equal(got.lr, clean.lr)
        enc, want = got.encoder.state_dict(), clean.encoder.state_dict()
        assert all(torch.equal(enc[n], want[n]) for n in want)
        assert len(got.decoder.lora) == (0 if reader == "readout" else len(clean.decoder.lora))
        assert all(torch.equal(a, b) for a, b in zip(got.decoder.lora, clean.decoder.lora))


def test_a_killed_probe_resumes_its_decoders_and_leaves_no_saved_state(loaded_tiny, tmp_path):
    """The whole probe, killed in its second decoder run: run again on the same cache it trains only what the
    first run had not finished (the first run's three decoders come back from their saved states) and returns the
    frame of a run never stopped; once it has returned, no saved state is left."""
    from bench.ground import registry
    from bench.ground.context import ProbeContext
    from bench.ground.store import Cache

    info = registry.probe("contextualization")
    kw = dict(corpus="brown:all", n_texts=6, max_tokens=16, n_eval=3, n_train=3, prefix=3, reader="readout",
              hidden=8, steps=6, batch=8, decoder_runs=2)
    clean = info.call(ProbeContext(model=loaded_tiny, seed=0, cache=Cache(tmp_path / "a")), **kw)

    def die(fraction, message=""):
        if "run 2 of 2" in message and re.search(r": step \d+/\d+ loss \d", message):
            raise _Killed

    with pytest.raises(_Killed):
        info.call(ProbeContext(model=loaded_tiny, seed=0, cache=Cache(tmp_path / "b"), progress=die), **kw)
    assert len(list((tmp_path / "b" / "partial").rglob("*.pt"))) == 3  # run 1's decoders, saved at their end
    said = []
    again = info.call(ProbeContext(model=loaded_tiny, seed=0, cache=Cache(tmp_path / "b"),
                                   progress=lambda f, m="": said.append(m)), **kw)
    # (the shared layer pass comes back from the cache the killed run filled: its strings as pandas strings)
    pd.testing.assert_frame_equal(again, clean, check_dtype=False)
    trained = [m for m in said if re.search(r"decoder( \(blind\))?: step \d+/6 loss \d", m)]  # a training step's words
    assert trained and all("run 2 of 2" in m for m in trained)  # run 1 was not trained again
    assert not list((tmp_path / "b" / "partial").rglob("*.pt"))

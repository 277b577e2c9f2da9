"""The layer-0 control, the position adjustment and the wiring of the three decoders, with known answers.

Planted tasks: token ids drawn uniformly (so the prior over prefixes cannot help), 8 texts × 16 positions,
determiners and nouns alternating.  Only the determiners' states say anything about their prefix; *where* they
say it decides whether that counts as stored context:

* in layer 0 (the token's embedding, i.e. its identity determines its prefix) — a decoder fed layer 0 alone does
  as well as the one fed every layer, so nothing is stored beyond identity: the claim must not be SUPPORTED,
  although raw C is far lower for determiners (the old decision called that SUPPORTED);
* in layers 1 … K only (layer 0 holds an unrelated identity) — the contextual states add the prefix: SUPPORTED.
"""

from __future__ import annotations

import dataclasses
import math
import types

import numpy as np
import pandas as pd
import pytest
import torch

from bench import stats
from bench.families.microscope.context_metrics import centred_by_position, control_rows, summary
from bench.families.microscope.context_probe import fit_decoders, heldout_losses, layer0, scored
from bench.families.microscope.contextual import DecoderConfig, Pool, other_text
from bench.models import arch as arch_mod
from tests.conftest import build_tiny

K, V0, FIRST, D = 2, 12, 5, 32
TEXTS, POSITIONS = 8, 16
CFG = DecoderConfig(prefix=K, hidden=32, reader="readout", steps=150, batch=32, lr=1e-2, dropout=0.1,
                    weight_decay=0.01)
VOCAB = torch.arange(FIRST, FIRST + V0)
GATES = [{"rule": "threshold", "metric": f"decoder_gain_vs_{c}", "min": 0.0} for c in ("blind", "shuffled", "layer0")]
CLAIM = {"rule": "group_comparison", "metric": "context_added_pos_centred", "a": ["determiner"], "b": ["noun"],
         "side": "greater", "delta": 0.1}
OLD_CLAIM = {"rule": "group_comparison", "metric": "context_loss", "a": ["determiner"], "b": ["noun"],
             "side": "less", "delta": -0.1}


@pytest.fixture(autouse=True)
def one_thread():
    """These tensors are tiny: one thread is all they need, and a second one only waits on a busy machine."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@pytest.fixture(scope="module")
def lm():
    """A tiny LM whose unit-scale tied embeddings let a readout through its head be confident."""
    hf = build_tiny("llama", initializer_range=0.2)
    with torch.no_grad():
        hf.get_input_embeddings().weight.normal_(0.0, 1.0, generator=torch.Generator().manual_seed(0))
    return types.SimpleNamespace(hf=hf, arch=arch_mod.inspect(hf), device=torch.device("cpu"))


def _rule(frame: pd.DataFrame, spec: dict) -> stats.Verdict:
    """A spec table (with its `rule` key) evaluated on `frame`, as the run evaluates it."""
    return stats.evaluate(frame, spec["rule"], {k: v for k, v in spec.items() if k != "rule"})


def _planted(n: int, seed: int, where: str) -> Pool:
    """Examples in the order of :func:`_index`; determiners (:func:`_is_det`), whose prefix is planted in layer 0
    (`where = "layer0"`) or in layers 1 … K (`where = "context"`); nouns' states hold nothing about theirs."""
    g = torch.Generator().manual_seed(seed)
    prefixes = torch.randint(FIRST, FIRST + V0, (n, K), generator=g)
    codes = torch.randn(K, V0, D, generator=torch.Generator().manual_seed(99))
    own = torch.randn(n, D, generator=g)  # the token's own identity, unrelated to its prefix
    det = torch.from_numpy(_is_det(n))[:, None]
    prefix_code = sum(codes[j][prefixes[:, K - 1 - j] - FIRST] for j in range(K))  # (n, D)
    layers = []
    if where == "layer0":  # identity determines the prefix; later layers add only noise
        layers.append(torch.where(det, prefix_code, own))
        layers += [layers[0] + 0.5 * torch.randn(n, D, generator=g) for _ in range(K)]
    else:  # layer 0 is an unrelated identity; layer j + 1 holds the token j + 1 steps back
        layers.append(own)
        layers += [torch.where(det, codes[j][prefixes[:, K - 1 - j] - FIRST], torch.randn(n, D, generator=g))
                   for j in range(K)]
    states = torch.stack(layers, dim=1) + 0.05 * torch.randn(n, K + 1, D, generator=g)
    states[..., 0] += 100.0  # an outlier coordinate, as real residual streams have
    return Pool(states, prefixes)


def _is_det(n: int) -> np.ndarray:
    """Row r is token r % POSITIONS of text r // POSITIONS; determiners and nouns alternate, and every position
    holds both classes across texts (so centring per position leaves the class difference alone)."""
    r = np.arange(n)
    return (r // POSITIONS + r % POSITIONS) % 2 == 0


def _index(n: int) -> pd.DataFrame:
    return pd.DataFrame({"sample": np.arange(n) // POSITIONS, "position": np.arange(n) % POSITIONS,
                         "cls": np.where(_is_det(n), "determiner", "noun")})


def _frame(lm, where: str) -> pd.DataFrame:
    train, test = _planted(768, 0, where), _planted(TEXTS * POSITIONS, 1, where)
    index = _index(len(test))
    swap = other_text(index["sample"].to_numpy(), index["position"].to_numpy())
    fits = fit_decoders(lm, train, CFG, vocab=VOCAB, start_id=0, seed=0, keep=lambda n, f: scored(n, f, test, swap))
    return control_rows(index, heldout_losses(fits))


def test_context_held_by_the_tokens_identity_is_not_stored_context(lm):
    frame = _frame(lm, "layer0")
    det = frame[(frame["metric"] == "context_loss") & (frame["cls"] == "determiner")]["value"].mean()
    noun = frame[(frame["metric"] == "context_loss") & (frame["cls"] == "noun")]["value"].mean()
    assert det < noun - 1.0  # raw C: the determiners' states do give their prefix away ...
    old = stats.evaluate(frame, "gated", {"of": [*GATES[:2], OLD_CLAIM]})
    assert old.outcome is stats.Outcome.SUPPORTED  # ... which the raw-C decision took for stored context
    gate = _rule(frame, GATES[2])
    assert gate.outcome is not stats.Outcome.SUPPORTED and gate.estimate < 0.15, gate.reason
    v = stats.evaluate(frame, "gated", {"of": [*GATES, CLAIM]})
    assert v.outcome is stats.Outcome.INCONCLUSIVE and "decoder_gain_vs_layer0" in v.reason
    added = _rule(frame, CLAIM)
    assert added.outcome is not stats.Outcome.SUPPORTED and abs(added.estimate) < 0.3, added.reason


def test_context_in_the_contextual_layers_is_stored_context(lm):
    frame = _frame(lm, "context")
    gate = _rule(frame, GATES[2])
    assert gate.outcome is stats.Outcome.SUPPORTED and gate.estimate > 0.5, gate.reason
    v = stats.evaluate(frame, "gated", {"of": [*GATES, CLAIM]})
    assert v.outcome is stats.Outcome.SUPPORTED and v.estimate > 0.5, v.reason
    det = frame[(frame["metric"] == "context_added_pos_centred") & (frame["cls"] == "determiner")]["value"]
    assert det.mean() > 0.5 * math.log(V0)  # about log V0 nats per prefix token for the determiners


def test_layer0_keeps_only_the_embedding_layer():
    pool = Pool(torch.arange(2 * 3 * 4, dtype=torch.float).view(2, 3, 4), torch.zeros(2, 1, dtype=torch.long))
    assert torch.equal(layer0(pool).states, pool.states[:, :1]) and layer0(pool).states.shape == (2, 1, 4)


def test_centring_by_position_by_hand():
    pos = np.array([3, 3, 4, 4, 4, 5])
    got = centred_by_position(pos, np.array([1.0, 3.0, 0.0, 3.0, 6.0, 7.0]))
    assert np.allclose(got, [-1.0, 1.0, -3.0, 0.0, 3.0, 0.0])


def test_control_rows_by_hand():
    index = pd.DataFrame({"sample": [0, 0, 1, 1], "position": [5, 6, 5, 6], "cls": ["noun"] * 4})
    loss = {"context_loss": np.array([1.0, 2.0, 3.0, 6.0]), "context_loss_blind": np.array([2.0, 2.0, 4.0, 6.0]),
            "context_loss_layer0": np.array([2.0, 4.0, 3.0, 6.0]),
            "context_loss_shuffled": np.array([1.0, 2.0, 3.0, 6.0])}
    errors = pd.DataFrame({"sample": [0, 0, 1, 1, 1], "position": [5, 6, 5, 6, 2], "value": [1.0, 0.0, 3.0, 4.0, 9.0]})
    f = control_rows(index, loss, errors)

    def get(metric):
        return f[f["metric"] == metric].sort_values(["sample", "position"])["value"].to_numpy()

    assert np.allclose(get("decoder_gain_vs_layer0"), [1.5, 0.0])  # (2+4)/2 − (1+2)/2; (3+6)/2 − (3+6)/2
    assert np.allclose(get("decoder_gain_vs_blind"), [0.5, 0.5])
    assert np.allclose(get("decoder_gain_vs_shuffled"), [0.0, 0.0])
    # C_layer0 − C = [1, 2, 0, 0]; position 5: mean ½, position 6: mean 1
    assert np.allclose(get("context_added_pos_centred"), [0.5, 1.0, -0.5, -1.0])
    assert np.allclose(get("context_loss_pos_centred"), [-1.0, -2.0, 1.0, 2.0])
    assert np.allclose(get("token_error_pos_centred"), [-1.0, -2.0, 1.0, 2.0])  # position 2 has no C: left out


def _trend_frame(shared: float, seed: int = 0) -> pd.DataFrame:
    """C and E both rising with position, plus a token-level component they share with weight `shared`."""
    rng = np.random.default_rng(seed)
    n_texts, n_pos = 30, 20
    index = pd.DataFrame({"sample": np.repeat(np.arange(n_texts), n_pos),
                          "position": np.tile(np.arange(6, 6 + n_pos), n_texts), "cls": "noun"})
    pos = index["position"].to_numpy(float)
    common = rng.normal(size=len(index))
    c = 0.2 * pos + rng.normal(size=len(index)) + shared * common
    e = 0.2 * pos + rng.normal(size=len(index)) + shared * common
    layer0_loss = c + 1.0 + rng.normal(size=len(index))
    loss = {"context_loss": c, "context_loss_blind": c + 2.0, "context_loss_layer0": layer0_loss,
            "context_loss_shuffled": c + 2.0}
    errors = index.assign(metric="token_error_mean", value=e)
    frame = pd.concat([control_rows(index, loss, errors), errors], ignore_index=True)
    return frame


RAW = {"rule": "correlation", "x": {"metric": "context_loss"}, "y": {"metric": "token_error_mean"}}
ADJUSTED = {"rule": "correlation", "x": {"metric": "context_loss_pos_centred"},
            "y": {"metric": "token_error_pos_centred"}, "given": {"metric": "context_loss_layer0_pos_centred"}}


def test_a_shared_trend_with_position_is_not_a_correlation_between_tokens():
    frame = _trend_frame(shared=0.0)
    raw = _rule(frame, RAW)
    assert raw.outcome is stats.Outcome.SUPPORTED and raw.estimate > 0.4  # the paper's plain r sees the trend
    adj = _rule(frame, ADJUSTED)
    assert adj.outcome is not stats.Outcome.SUPPORTED and abs(adj.estimate) < 0.1, adj.reason
    assert "pos_centred" in adj.metric  # the verdict names C and E as centred per position
    line = summary(frame)[-1]
    assert "plain Pearson r(C, E)" in line and "Table 2" in line


def test_a_token_level_correlation_survives_the_position_adjustment():
    frame = _trend_frame(shared=1.0)
    adj = _rule(frame, ADJUSTED)
    # population value: r(x, y) = ½, r(x, z) = 2/√6, r(y, z) = 1/√6 → partial r = (½ − ⅓) / √(⅓ · ⅚) ≈ 0.316
    assert adj.outcome is stats.Outcome.SUPPORTED and 0.2 < adj.estimate < 0.45, adj.reason


def test_a_class_gap_made_by_position_is_not_a_class_gap():
    """Determiners sit late, nouns early, and what the states add grows with position alone: raw values show a
    class gap, the position-centred ones none."""
    rng = np.random.default_rng(0)
    n_texts = 20
    pos = np.tile(np.arange(6, 26), n_texts)
    index = pd.DataFrame({"sample": np.repeat(np.arange(n_texts), 20), "position": pos,
                          "cls": np.where(pos >= 16, "determiner", np.where(pos >= 12, "noun", "verb"))})
    c = 5.0 - 0.1 * pos + 0.3 * rng.normal(size=len(pos))
    loss = {"context_loss": c, "context_loss_blind": c + 1.0, "context_loss_layer0": np.full(len(pos), 5.0),
            "context_loss_shuffled": c + 1.0}
    frame = control_rows(index, loss)
    raw = _rule(frame, {**OLD_CLAIM, "b": ["noun", "verb"]})
    assert raw.outcome is stats.Outcome.SUPPORTED
    v = _rule(frame, {**CLAIM, "b": ["noun", "verb"]})
    assert v.outcome is not stats.Outcome.SUPPORTED, v.reason


def test_the_three_decoders_train_for_the_configured_steps_and_learn(loaded_tiny, tmp_path):
    """Wiring of the probe on a tiny model: each decoder's curve has `steps` entries, starts at the uniform loss
    over the restricted vocabulary (the readouts' last layer starts at zero) and falls; the state-blind and
    layer-0 controls end below the uniform guess on the held-out tokens.  A control trained for fewer steps than
    the trained decoder (a gate between a trained and an untrained decoder) fails here."""
    from bench.ground import registry
    from bench.ground.context import ProbeContext
    from bench.ground.store import Cache

    steps = 60
    info = registry.probe("contextualization")
    ctx = ProbeContext(model=loaded_tiny, seed=0, cache=Cache(tmp_path / "frames"))
    frame = info.call(ctx, corpus="brown:all", n_texts=6, max_tokens=24, n_eval=3, n_train=12, prefix=2,
                      reader="readout", hidden=16, steps=steps, batch=16, lr=0.1, warmup=0.05)
    curves = frame[frame["metric"] == "train_loss"]
    assert set(curves["condition"]) == {"states", "blind", "layer0"}
    n_vocab = int(frame.attrs["notes"][0].split("softmax over ")[1].split()[0])
    for cond, c in curves.groupby("condition"):
        v = c.sort_values("sample")["value"].to_numpy()
        assert list(c.sort_values("sample")["sample"]) == list(range(steps)), cond
        assert v[0] == pytest.approx(math.log(n_vocab), abs=1e-3), cond
        assert v[-5:].mean() < v[0] - 0.3, (cond, v[0], v[-5:].mean())
    for metric in ("context_loss_blind", "context_loss_layer0"):
        held = frame[frame["metric"] == metric]["value"].mean()
        assert held < math.log(n_vocab) - 0.1, (metric, held)  # an untrained control sits at log V'


def test_summary_counts_only_scored_tokens_by_hand():
    """E_i rows of tokens without a C (too early for a full prefix) are not counted in the class means."""
    index = pd.DataFrame({"sample": [0, 0, 1, 1], "position": [5, 6, 5, 6],
                          "cls": ["determiner", "noun", "noun", "determiner"]})
    loss = {"context_loss": np.array([1.0, 2.0, 3.0, 4.0]), "context_loss_blind": np.array([2.0, 2.0, 4.0, 6.0]),
            "context_loss_layer0": np.array([2.0, 4.0, 3.0, 6.0])}
    errors = pd.DataFrame({"sample": [0, 0, 1, 1, 1], "position": [5, 6, 5, 6, 2], "cls": ["determiner", "noun",
                           "noun", "determiner", "noun"], "metric": "token_error_mean",
                           "value": [1.0, 0.0, 3.0, 4.0, 9.0]})
    frame = pd.concat([control_rows(index, loss, errors), errors], ignore_index=True)
    line = summary(frame)[0]
    # determiners: C (1 + 4)/2 = 2.5, C_layer0 − C ((2−1) + (6−4))/2 = 1.5; nouns: C 2.5, C_layer0 − C 1.0
    assert "function words (2 tokens): C 2.500" in line and "C_layer0 − C +1.500" in line
    assert "content words (2 tokens): C 2.500" in line and "C_layer0 − C +1.000" in line


def test_measure_checks_its_sizes_and_hands_each_setting_to_its_place(monkeypatch):
    """The guards (2 ≤ n_eval ≤ n_texts, n_train ≥ 1, runs ≥ 1, texts beyond the scored ones to train on), the
    text budget and length handed to the texts and to the shared layer pass with the model, and which texts are
    scored (the first n_eval) and which train the decoders (those after the first n_texts)."""
    from bench.families.microscope import context_probe as cp
    from bench.ground.errors import BenchError

    class Stop(Exception):
        pass

    seen, pools = {}, []

    def prepare(tok, corpus, n, max_tokens):
        seen["prepare"] = (tok, corpus, n, max_tokens)
        return [types.SimpleNamespace(sample=i) for i in range(n)]

    def memo(ctx, *, corpus, n_texts, max_tokens, micro, model=None):
        seen["memo"] = (corpus, n_texts, max_tokens, micro, model)
        return pd.DataFrame({"metric": ["token_error_mean"], "sample": [0], "value": [0.5]})

    def build_pool(model, items, prefix, micro):
        pools.append(sorted(it.sample for it in items))
        if len(pools) % 2 == 0:
            raise Stop
        return None, None

    monkeypatch.setattr(cp, "prepare_items", prepare)
    monkeypatch.setattr(cp, "layer_pass_memo", memo)
    monkeypatch.setattr(cp, "build_pool", build_pool)
    ctx = types.SimpleNamespace(progress=lambda f, m="": None)
    model = types.SimpleNamespace(tokenizer="tok")
    kw = dict(corpus="c", n_texts=5, max_tokens=17, micro_batch=3, cfg=types.SimpleNamespace(prefix=2))
    with pytest.raises(Stop):
        cp.measure(ctx, model, n_eval=2, n_train=1, **kw)  # the smallest sizes allowed
    assert seen == {"prepare": ("tok", "c", 6, 17), "memo": ("c", 5, 17, 3, model)}
    assert pools == [[5], [0, 1]]  # trains on the text after the first 5, scores the first 2
    pools.clear()
    with pytest.raises(Stop):
        cp.measure(ctx, model, n_eval=5, n_train=3, **kw)
    assert pools == [[5, 6, 7], [0, 1, 2, 3, 4]]
    for n_eval, n_train in ((6, 1), (1, 1), (2, 0)):  # more scored than texts; fewer than two; none to train on
        with pytest.raises(BenchError, match=r"^need 2 ≤ n_eval ≤ n_texts and n_train ≥ 1$"):
            cp.measure(ctx, model, n_eval=n_eval, n_train=n_train, **kw)
    with pytest.raises(BenchError, match="^decoder_runs must be at least 1, got 0$"):
        cp.measure(ctx, model, n_eval=2, n_train=1, runs=0, **kw)
    monkeypatch.setattr(cp, "prepare_items", lambda tok, corpus, n, max_tokens: [
        types.SimpleNamespace(sample=i) for i in range(5)])  # the corpus ends at the scored texts
    with pytest.raises(BenchError, match="^corpus c has no text beyond the first 5 to train the decoder on$"):
        cp.measure(ctx, model, n_eval=2, n_train=1, **kw)


@pytest.mark.parametrize("vocab", ["corpus", "full"])
def test_measure_hands_the_decoders_their_vocabulary_and_the_scored_texts_errors(monkeypatch, vocab):
    """The softmax's token ids (every prefix id of both pools for "corpus", the model's whole vocabulary
    otherwise), the start id, a seed per run, and the shared pass's E_i of the scored texts only (sample < n_eval)
    handed to the control rows; the progress starts at 0 with the hidden states; a test pool with fewer than two
    scored texts is refused."""
    from bench.families.microscope import context_probe as cp
    from bench.families.microscope.contextual import Pool
    from bench.ground.errors import BenchError

    class Stop(Exception):
        pass

    said, got = [], {}
    FIT = types.SimpleNamespace(train_loss=np.zeros(2))
    pools = {5: Pool(torch.zeros(2, 3, 4), torch.tensor([[7, 8], [9, 7]])),
             0: Pool(torch.zeros(3, 3, 4), torch.tensor([[1, 2], [2, 3], [3, 4]]))}
    index = pd.DataFrame({"sample": [0, 1, 1], "position": [2, 2, 3], "cls": ["a", "b", "a"]})

    def build_pool(model, items, prefix, micro):
        return pools[items[0].sample], index

    def fit_decoders(model, train, cfg, *, vocab, start_id, seed, progress, resume, keep):
        got.update(vocab=sorted(vocab.tolist()), start=start_id, seed=seed, train=train,
                   saved={name: resume(name) for name in ("states", "blind")}, keep=keep)
        return {"states": FIT}

    def control_rows(idx, loss, err):
        got.update(loss=loss, err=err.reset_index(drop=True))
        raise Stop

    shared = pd.DataFrame({"metric": ["token_error_mean"] * 3 + ["other"], "sample": [0, 1, 2, 0],
                           "position": [1, 1, 1, 1], "cls": ["a"] * 4, "value": [0.1, 0.2, 0.3, 0.4]})
    monkeypatch.setattr(cp, "prepare_items", lambda tok, corpus, n, mt: [types.SimpleNamespace(sample=i)
                                                                          for i in range(n)])
    monkeypatch.setattr(cp, "layer_pass_memo", lambda ctx, **kw: shared)
    monkeypatch.setattr(cp, "build_pool", build_pool)
    monkeypatch.setattr(cp, "start_id", lambda tok, items: 42)
    monkeypatch.setattr(cp, "fit_decoders", fit_decoders)
    monkeypatch.setattr(cp, "heldout_losses", lambda fits: ("loss of", fits["states"]))
    monkeypatch.setattr(cp, "control_rows", control_rows)
    gen = torch.Generator().manual_seed(0)
    ctx = types.SimpleNamespace(progress=lambda f, m="": said.append((f, m)), generator=lambda stream: gen,
                                resume=lambda parts, label="": ("saved under", parts))
    model = types.SimpleNamespace(tokenizer="tok", arch=types.SimpleNamespace(vocab_size=11), fingerprint="fp")
    cfg = DecoderConfig(prefix=2, vocab=vocab)
    with pytest.raises(Stop):
        cp.measure(ctx, model, corpus="c", n_texts=5, max_tokens=9, micro_batch=2, n_eval=2, n_train=1, cfg=cfg)
    expected = int(torch.randint(0, 2**31 - 1, (1,), generator=torch.Generator().manual_seed(0)))
    assert got["vocab"] == ([1, 2, 2, 3, 3, 4, 7, 7, 8, 9] if vocab == "corpus" else list(range(11)))
    assert got["start"] == 42 and got["seed"] == expected and got["train"] is pools[5]
    # each decoder training saves its state under everything it depends on (a killed run resumes it, no other)
    assert got["saved"] == {name: ("saved under", {
        "probe": "prefix-decoder", "model": "fp", "corpus": "c", "n_texts": 5, "n_train": 1, "max_tokens": 9,
        "micro_batch": 2, "decoder": dataclasses.asdict(cfg), "seed": expected, "fit": name})
        for name in ("states", "blind")}
    assert got["loss"] == ("loss of", FIT)
    # each decoder is scored as its training ends, on the scored pool (3 tokens), not the training pool (2)
    fitted = types.SimpleNamespace(train_loss=np.zeros(2), seconds=1.0, encoder=types.SimpleNamespace(
        weights=lambda: np.ones(3)), loss=lambda pool: np.arange(float(len(pool))))
    assert got["keep"]("blind", fitted).heldout["context_loss_blind"].tolist() == [0.0, 1.0, 2.0]
    assert got["err"]["sample"].tolist() == [0, 1] and got["err"]["value"].tolist() == [0.1, 0.2]
    assert said[0] == (0.0, "prefix decoder: hidden states")
    for bad in (pd.DataFrame({"sample": [0, 0, 0], "position": [2, 3, 4], "cls": ["a"] * 3}),
                pd.DataFrame({"sample": pd.Series([], dtype=int), "position": [], "cls": []})):
        index = bad
        pools[0] = Pool(torch.zeros(len(bad), 3, 4), torch.zeros(len(bad), 2, dtype=torch.long))
        with pytest.raises(BenchError, match="^fewer than two scored texts have a token with 2 tokens before it$"):
            cp.measure(ctx, model, corpus="c", n_texts=5, max_tokens=9, micro_batch=2, n_eval=2, n_train=1,
                       cfg=cfg)


def test_the_decoder_starts_from_the_texts_own_first_token_else_bos_else_eos_else_says_why():
    from bench.families.microscope import context_probe as cp
    from bench.ground.errors import BenchError

    special = cp.SPECIAL
    item = lambda first, cls: types.SimpleNamespace(ids=[first, 5, 6], classes=[cls, "word", "word"])  # noqa: E731
    tok = lambda bos, eos: types.SimpleNamespace(bos_token_id=bos, eos_token_id=eos)  # noqa: E731
    assert cp.start_id(tok(1, 2), [item(9, special), item(9, special)]) == 9  # every text starts with 9
    assert cp.start_id(tok(1, 2), [item(9, special), item(8, special)]) == 1  # no common first: BOS
    assert cp.start_id(tok(None, 2), [item(9, "word")]) == 2
    with pytest.raises(BenchError, match="^the tokenizer has no BOS or EOS token to start the prefix decoder from$"):
        cp.start_id(tok(None, None), [item(9, "word")])


def test_the_probe_hands_measure_its_sample_decoder_runs_and_subject(monkeypatch):
    from bench.families.microscope import context_probe as cp

    seen = {}
    monkeypatch.setattr(cp, "measure", lambda ctx, model, **kw: seen.update(ctx=ctx, model=model, **kw) or "done")
    p = cp.ContextParams(n_eval=5, n_train=7, decoder_runs=3)
    assert cp._measure("ctx", "model", p, subject="instruct") == "done"
    s = p.sample
    assert seen == {"ctx": "ctx", "model": "model", "corpus": s.corpus, "n_texts": s.n_texts,
                    "max_tokens": s.max_tokens, "micro_batch": s.micro_batch, "n_eval": 5, "n_train": 7,
                    "cfg": p.decoder, "subject": "instruct", "runs": 3}


def _three_scored_tokens() -> tuple[Pool, pd.DataFrame]:
    """A pool of three tokens of texts 0, 1, 1 (prefixes of 4 distinct token ids, zero states) and its index."""
    return (Pool(torch.zeros(3, 3, 4), torch.tensor([[1, 2], [2, 3], [3, 4]])),
            pd.DataFrame({"sample": [0, 1, 1], "position": [2, 2, 3], "cls": ["a", "b", "a"]}))


def _scripted_texts_and_pools(monkeypatch, pool, index):
    """measure's inputs scripted: n numbered texts, one scored token's E_i (text 0), `pool` and `index` for both
    the training and the scored pools, start token 0."""
    from bench.families.microscope import context_probe as cp

    monkeypatch.setattr(cp, "prepare_items", lambda tok, corpus, n, mt: [types.SimpleNamespace(sample=i)
                                                                          for i in range(n)])
    monkeypatch.setattr(cp, "layer_pass_memo", lambda ctx, **kw: pd.DataFrame(
        {"metric": ["token_error_mean"], "sample": [0], "position": [1], "cls": ["a"], "value": [0.1]}))
    monkeypatch.setattr(cp, "build_pool", lambda model, items, prefix, micro: (pool, index))
    monkeypatch.setattr(cp, "start_id", lambda tok, items: 0)


def test_each_decoder_training_run_has_its_own_seed_and_its_share_of_the_progress(monkeypatch):
    """Run r trains with the drawn seed + r (the seed drawn from the context's stream 11), and reports its progress
    within its share of the bar (0.05 + 0.9·(r + f)/runs, "… (run r+1 of runs)"), then its held-out losses."""
    from bench.families.microscope import context_probe as cp

    class Stop(Exception):
        pass

    said, seeds, streams, saved = [], [], [], []
    pool, index = _three_scored_tokens()
    fit = types.SimpleNamespace(train_loss=np.zeros(2))

    def fit_decoders(model, train, cfg, *, vocab, start_id, seed, progress, resume, keep):
        seeds.append(seed)
        saved.append(resume("states"))
        progress(0.5, "training")
        progress(1.0)
        trained = types.SimpleNamespace(train_loss=np.zeros(2), seconds=1.0, loss=lambda p: np.zeros(len(p)),
                                        encoder=types.SimpleNamespace(weights=lambda: np.ones(3)))
        keep("layer0", trained)  # the last decoder of the run, scored as its training ends
        return {"states": fit}

    def heldout_losses(fits):
        if len(seeds) == 2:
            raise Stop
        return "loss"

    _scripted_texts_and_pools(monkeypatch, pool, index)
    monkeypatch.setattr(cp, "fit_decoders", fit_decoders)
    monkeypatch.setattr(cp, "heldout_losses", heldout_losses)
    monkeypatch.setattr(cp, "control_rows", lambda idx, loss, err: pd.DataFrame({"metric": ["c"], "value": [0.0]}))

    def generator(stream):
        streams.append(stream)
        return torch.Generator().manual_seed(7)

    ctx = types.SimpleNamespace(progress=lambda f, m="": said.append((round(f, 6), m)), generator=generator,
                                resume=lambda parts, label="": (parts["seed"], parts["fit"]))
    model = types.SimpleNamespace(tokenizer="tok", arch=types.SimpleNamespace(vocab_size=11), fingerprint="fp")
    with pytest.raises(Stop):
        cp.measure(ctx, model, corpus="c", n_texts=5, max_tokens=9, micro_batch=2, n_eval=2, n_train=1,
                   cfg=DecoderConfig(prefix=2, vocab="corpus"), runs=2)
    drawn = int(torch.randint(0, 2**31 - 1, (1,), generator=torch.Generator().manual_seed(7)))
    assert streams == [11] and seeds == [drawn, drawn + 1]
    assert saved == [(drawn, "states"), (drawn + 1, "states")]  # each run's trainings save apart
    assert said == [(0.0, "prefix decoder: hidden states"), (0.275, "training (run 1 of 2)"), (0.5, " (run 1 of 2)"),
                    (0.5, "prefix decoder 'layer0': held-out losses (run 1 of 2)"), (0.725, "training (run 2 of 2)"),
                    (0.95, " (run 2 of 2)"), (0.95, "prefix decoder 'layer0': held-out losses (run 2 of 2)")]


def test_measure_labels_every_row_with_its_subject_and_run(monkeypatch):
    """Run to its end on scripted pieces: every row carries the subject it was measured for (context_pair's
    "base" or "instruct"), the decoder rows their training run as an integer column, E_i none."""
    from bench.families.microscope import context_probe as cp

    pool, index = _three_scored_tokens()
    fit = types.SimpleNamespace(train_loss=np.arange(6.0), seconds=1.0, weights=np.array([0.2, 0.8]))
    loss = pd.DataFrame({c: [1.0] for c in ("context_loss", "context_loss_blind", "context_loss_layer0",
                                            "context_loss_shuffled")})
    _scripted_texts_and_pools(monkeypatch, pool, index)
    names, cleared, labels = ("states", "blind", "layer0"), [], []

    class Saved:  # a decoder training's saved state: cleared once the result is complete, not before
        def __init__(self, parts, label=""):
            self.parts = parts
            labels.append(label)

        def clear(self):
            cleared.append((self.parts["seed"], self.parts["fit"]))

    def fit_decoders(*a, resume, **k):
        for name in names:
            resume(name)
        assert not cleared
        return dict.fromkeys(names, fit)

    monkeypatch.setattr(cp, "fit_decoders", fit_decoders)
    monkeypatch.setattr(cp, "heldout_losses", lambda fits: loss)
    monkeypatch.setattr(cp, "control_rows", lambda idx, loss, err: pd.DataFrame(
        {"sample": [0], "position": [2], "cls": ["a"], "metric": ["context_loss"], "value": [1.0]}))
    monkeypatch.setattr(cp, "summary", lambda frame: [])
    ctx = types.SimpleNamespace(progress=lambda f, m="": None, generator=lambda stream: torch.Generator(),
                                resume=Saved)
    model = types.SimpleNamespace(tokenizer="tok", arch=types.SimpleNamespace(vocab_size=11, d_model=4, n_layers=2),
                                  fingerprint="fp")
    cfg = DecoderConfig(prefix=2, vocab="corpus", reader="readout", hidden=0, dropout=0.1, weight_decay=0.0,
                        steps=10, batch=4, lr=1e-3, warmup=0.1)
    frame, notes = cp.measure(ctx, model, corpus="c", n_texts=5, max_tokens=9, micro_batch=2, n_eval=2, n_train=1,
                              cfg=cfg, subject="instruct", runs=2)
    seed = int(torch.randint(0, 2**31 - 1, (1,), generator=torch.Generator()))
    assert cleared == [(seed + r, name) for r in range(2) for name in names]
    assert labels == [f"microscope: prefix decoder '{n}', run {r} of 2" for r in (1, 2) for n in names]
    assert (frame["subject"] == "instruct").all()
    assert str(frame["train_seed"].dtype) == "Int64"
    runs = frame[frame["metric"] == "context_loss"]["train_seed"].tolist()
    assert runs == [0, 1] and frame[frame["metric"] == "token_error_mean"]["train_seed"].isna().all()
    assert "2 decoder trainings" in notes[2]


def test_a_pool_holds_each_full_prefix_tokens_states_prefix_and_index(monkeypatch):
    """build_pool on scripted batches: each full-prefix token's states at its position, its k previous ids, and
    its (sample, position, cls) row, in order; no such token gives empty pools with the same columns."""
    from bench.families.microscope import context_probe as cp

    items = [types.SimpleNamespace(sample=4, classes=["s", "w", "p", "w"]),
             types.SimpleNamespace(sample=7, classes=["s", "w", "w", "w"])]
    states = torch.arange(3 * 2 * 4 * 5, dtype=torch.float32).reshape(3, 2, 4, 5)  # (L+1, B, T, d)
    monkeypatch.setattr(cp, "batches", lambda its, micro, pad: [(its, None, None)])
    monkeypatch.setattr(cp, "pad_id", lambda tok: 0)
    monkeypatch.setattr(cp, "block_states", lambda model, ids, mask: (states, None))
    monkeypatch.setattr(cp, "full_prefix_examples", lambda it, k: [(2, [10 + it.sample, 11]), (3, [12, 13])]
                        if it.sample == 4 else [(3, [20, 21])])
    model = types.SimpleNamespace(tokenizer=None, arch=types.SimpleNamespace(n_layers=2, d_model=5))
    pool, index = cp.build_pool(model, items, 2, 8)
    assert index.columns.tolist() == ["sample", "position", "cls"]
    assert index.values.tolist() == [[4, 2, "p"], [4, 3, "w"], [7, 3, "w"]]
    assert pool.prefixes.tolist() == [[14, 11], [12, 13], [20, 21]] and pool.prefixes.dtype == torch.long
    assert torch.equal(pool.states, torch.stack([states[:, 0, 2], states[:, 0, 3], states[:, 1, 3]]))
    monkeypatch.setattr(cp, "full_prefix_examples", lambda it, k: [])
    pool, index = cp.build_pool(model, items, 2, 8)
    assert len(pool) == 0 and tuple(pool.states.shape) == (0, 3, 5) and index.columns.tolist() == ["sample",
                                                                                                    "position", "cls"]


def test_a_pool_keeps_no_batchs_states_alive(monkeypatch):
    """Each batch's (L+1, B, T, d) states are freed before the next batch runs (the pool copies the tokens it
    keeps; a view of one would hold the whole batch until the end: every training text at once at full size), and
    the pool is the same as one built from the batches stacked."""
    import weakref

    from bench.families.microscope import context_probe as cp

    items = [types.SimpleNamespace(sample=s, classes=["s", "w", "p", "w"]) for s in range(3)]
    made, alive = [], []

    def block_states(model, ids, mask):
        alive.append(sum(r() is not None for r in made))  # earlier batches' states still held when this one runs
        st = torch.randn(3, 1, 4, 5)  # (L+1, B, T, d)
        made.append(weakref.ref(st))
        kept.append(st.clone())
        return st, None

    kept = []
    monkeypatch.setattr(cp, "batches", lambda its, micro, pad: [([it], None, None) for it in its])
    monkeypatch.setattr(cp, "pad_id", lambda tok: 0)
    monkeypatch.setattr(cp, "block_states", block_states)
    monkeypatch.setattr(cp, "full_prefix_examples", lambda it, k: [(2, [1, 2]), (3, [2, 3])])
    model = types.SimpleNamespace(tokenizer=None, arch=types.SimpleNamespace(n_layers=2, d_model=5))
    pool, index = cp.build_pool(model, items, 2, 1)
    assert alive == [0, 0, 0]
    assert torch.equal(pool.states, torch.stack([k[:, 0, p] for k in kept for p in (2, 3)]))
    assert index["sample"].tolist() == [0, 0, 1, 1, 2, 2]


READOUT = ("decoder: a probing approximation of C_i, not the paper's decoder — per-offset readouts (2 vectors in the "
           "residual space, read through the frozen unembedding) from an MLP of width 4, dropout 0.1, weight decay 0")
PAPER = ("decoder: the paper's — all of 2 blocks of a copy of the model with LoRA r = 8 (α = 16, lr 0.0002) on every "
         "projection; MLP width 4")


@pytest.mark.parametrize("reader, how, n_runs", [("readout", READOUT, 2), ("lm", PAPER, 1)])
def test_measure_notes_say_how_each_decoder_trained_and_what_it_scored(monkeypatch, reader, how, n_runs):
    """Known answer, word for word, on scripted pieces: the decoder's description (width = d_model when hidden is
    0, every block when decoder_layers is 0), the first five and last five training losses of each decoder, the
    seconds, the pools' sizes, the first run's held-out losses, each run's C, the pooling weight's peak, and a
    summary of the first run's rows and E_i only; the runs' line only when there are several."""
    from bench.families.microscope import context_probe as cp

    pool, index = _three_scored_tokens()

    def fit(k, seconds):  # losses 0, k, 2k, … 11k: the first five average 2k, the last five 9k
        return types.SimpleNamespace(train_loss=np.arange(12.0) * k, seconds=seconds,
                                     weights=np.array([0.1, 0.65, 0.25]))

    fits = {"states": fit(1, 12.4), "blind": fit(2, 3.6), "layer0": fit(3, 0.2)}
    runs = iter([1.0, 1.5])

    def heldout_losses(f):
        c = next(runs)
        return pd.DataFrame({"context_loss": [c], "context_loss_blind": [2.0], "context_loss_layer0": [3.0],
                             "context_loss_shuffled": [4.0]})

    _scripted_texts_and_pools(monkeypatch, pool, index)
    monkeypatch.setattr(cp, "fit_decoders", lambda *a, **k: fits)
    monkeypatch.setattr(cp, "heldout_losses", heldout_losses)
    monkeypatch.setattr(cp, "control_rows", lambda idx, loss, err: pd.DataFrame(
        {"sample": [0], "position": [2], "cls": ["a"], "metric": ["context_loss"], "value": [1.0]}))
    monkeypatch.setattr(cp, "summary", lambda frame: [
        f"summary of runs {sorted(int(x) for x in set(frame['train_seed'].dropna()))}, {int(frame['train_seed'].isna().sum())} E"])
    ctx = types.SimpleNamespace(progress=lambda f, m="": None, generator=lambda stream: torch.Generator())
    model = types.SimpleNamespace(tokenizer="tok", arch=types.SimpleNamespace(vocab_size=11, d_model=4, n_layers=2))
    cfg = types.SimpleNamespace(prefix=2, vocab="corpus", reader=reader, hidden=0, dropout=0.1, weight_decay=0.0,
                                steps=10, batch=4, lr=1e-3, warmup=0.1, decoder_layers=0, lora_rank=8,
                                lora_alpha=16.0, lr_lora=2e-4)
    _, notes = cp.measure(ctx, model, corpus="c", n_texts=5, max_tokens=9, micro_batch=2, n_eval=2, n_train=1,
                          cfg=cfg, runs=n_runs)
    seed = int(torch.randint(0, 2**31 - 1, (1,), generator=torch.Generator()))
    assert notes == [
        f"{how}; 10 steps × 4 examples for each of the three decoders, lr 0.001 (encoder), warm-up 10% then cosine; "
        "prefix of 2 tokens; softmax over 4 token ids (corpus); 3 training tokens of 1 texts; trained in 12 s, "
        "state-blind control in 4 s, layer-0 control in 0 s",
        "held-out loss per prefix token on 3 tokens of 2 texts: trained 1.000, state-blind 2.000, layer 0 only 3.000, "
        "trained with another token's states 4.000; training loss (first 5 → last 5 steps) states 2.00 → 9.00; "
        "blind 4.00 → 18.00; layer0 6.00 → 27.00; pooling weight peaks at layer 1 (0.65)",
        *([f"2 decoder trainings (seeds {seed}…{seed + 1}, column train_seed): held-out C per run 1.000, 1.500; "
           "the lines above describe the first"] if n_runs == 2 else []),
        "summary of runs [0], 1 E"]


def test_fit_decoders_trains_each_decoder_on_its_own_pool_and_shares_out_the_progress(monkeypatch):
    """Scripted training: the trained decoder and the state-blind one read the training pool (the blind one told
    so), the layer-0 control the pool cut to layer 0; each gets the same settings, and its progress fills its own
    third of the bar with its own words."""
    from bench.families.microscope import context_probe as cp

    pool = Pool(torch.arange(24.0).reshape(2, 3, 4), torch.tensor([[1, 2], [3, 4]]))
    calls, said = [], []

    def fit(model, p, cfg, *, vocab, start_id, seed, blind, resume, progress=lambda f, m="": None):
        calls.append((p.states.clone(), bool(blind), vocab, start_id, seed, resume))
        progress(0.5, f"step of {len(calls)}")
        progress(1.0)
        return len(calls)

    monkeypatch.setattr(cp, "fit", fit)
    out = cp.fit_decoders("model", pool, CFG, vocab="V", start_id=7, seed=3,
                          progress=lambda f, m="": said.append((round(f, 6), m)), resume=lambda name: f"at {name}")
    assert out == {"states": 1, "blind": 2, "layer0": 3}
    assert [c[1:] for c in calls] == [(False, "V", 7, 3, "at states"), (True, "V", 7, 3, "at blind"),
                                      (False, "V", 7, 3, "at layer0")]  # each saves its own state
    assert torch.equal(calls[0][0], pool.states) and torch.equal(calls[1][0], pool.states)
    assert torch.equal(calls[2][0], layer0(pool).states)
    assert said == [(round(1 / 6, 6), "step of 1"), (round(1 / 3, 6), ""), (0.5, "step of 2"),
                    (round(2 / 3, 6), ""), (round(5 / 6, 6), "step of 3"), (1.0, "")]


def test_each_decoder_is_kept_as_numbers_before_the_next_one_trains(monkeypatch):
    """Order of events on scripted trainings: `keep` sees each decoder as soon as its training ends, before the
    next one starts, and only what it returns is kept (one LoRA copy of the model alive at a time, not three)."""
    from bench.families.microscope import context_probe as cp

    pool = Pool(torch.zeros(2, 3, 4), torch.tensor([[1, 2], [3, 4]]))
    events = []

    def fit(model, p, cfg, *, blind, resume, progress, **kw):
        events.append(("train", resume))
        return f"decoder {resume}"

    monkeypatch.setattr(cp, "fit", fit)
    out = cp.fit_decoders("model", pool, CFG, vocab="V", start_id=0, seed=0, resume=lambda name: name,
                          keep=lambda name, fitted: events.append(("keep", name, fitted)) or f"numbers of {name}")
    assert events == [("train", "states"), ("keep", "states", "decoder states"), ("train", "blind"),
                      ("keep", "blind", "decoder blind"), ("train", "layer0"), ("keep", "layer0", "decoder layer0")]
    assert out == {n: f"numbers of {n}" for n in ("states", "blind", "layer0")}


def test_scored_reads_what_each_decoder_was_trained_to_read():
    """Known answer: a fake decoder whose loss is each example's layer-0 state (first coordinate); the trained
    decoder is scored on the pool and on the swapped pool, the blind one on the pool, the layer-0 one on layer 0
    only; the training loss, seconds and pooling weights are carried over."""
    states = torch.zeros(3, 2, 1)
    states[:, 0, 0] = torch.tensor([10.0, 20.0, 30.0])
    test = Pool(states, torch.zeros(3, 2, dtype=torch.long))
    seen = []

    def loss(pool):
        seen.append(pool.states.shape[1])
        return pool.states[:, 0, 0].numpy().astype(float)

    fitted = types.SimpleNamespace(train_loss=np.array([3.0, 2.0]), seconds=4.5, loss=loss,
                                   encoder=types.SimpleNamespace(weights=lambda: np.array([0.25, 0.75])))
    swap = np.array([2, 0, 1])
    t = scored("states", fitted, test, swap)
    assert t.heldout["context_loss"].tolist() == [10.0, 20.0, 30.0]
    assert t.heldout["context_loss_shuffled"].tolist() == [30.0, 10.0, 20.0]
    assert t.train_loss.tolist() == [3.0, 2.0] and t.seconds == 4.5 and t.weights.tolist() == [0.25, 0.75]
    assert list(scored("blind", fitted, test, swap).heldout) == ["context_loss_blind"]
    seen.clear()
    assert scored("layer0", fitted, test, swap).heldout["context_loss_layer0"].tolist() == [10.0, 20.0, 30.0]
    assert seen == [1]  # the layer-0 decoder reads layer 0 alone
    parts = {"states": t, "blind": scored("blind", fitted, test, swap), "layer0": scored("layer0", fitted, test, swap)}
    assert list(heldout_losses(parts)) == ["context_loss", "context_loss_blind", "context_loss_layer0",
                                           "context_loss_shuffled"]  # the frame's order

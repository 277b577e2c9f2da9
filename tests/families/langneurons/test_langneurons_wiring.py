"""Wiring of the language-neuron probes: which language's neurons, statistics, texts and bits go where.

Every probe reads the parallel split, the per-language statistics, the selected sets and the bits of each
condition through :mod:`bench.families.langneurons.shared`; here those are scripted, so the right frame is known:
language k owns neurons {10k, …, 10k + k} (k + 1 of them, distinct sizes), zeroing language x's set costs its
own texts 0.5 bit per byte and the others' 0.1, a steered output is in the target language for a share that
depends on the prompt.  A probe that pairs a set with the wrong language, divides by the wrong bytes or mixes
prompts up gives other numbers.  (The selection formulas have their own known-answer tests.)
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch

from bench.ground import registry, schemas
from bench.ground.context import ProbeContext
from bench.corpora.parallel import Parallel, Split
from bench.families.langneurons import edit, shared, stats, steer, steer_probes
from bench.families.langneurons import text as tx

LANGS = ("en", "de", "fr")
L, F = 3, 12
TEXTS = tuple((f"one two three four five six {u} " * (u + 1), f"eins zwei drei vier {u}!", f"un deux trois {u}{u}")
              for u in range(5))
SPLIT = Split(Parallel(LANGS, TEXTS[:2]), Parallel(LANGS, TEXTS[2:]), 0)
SETS = {lang: np.arange(10 * k, 10 * k + k + 1) for k, lang in enumerate(LANGS)}


def _owner(neurons: np.ndarray) -> str:
    return next(lang for lang, idx in SETS.items() if np.array_equal(idx, neurons))


def _p(k: int) -> np.ndarray:
    return (np.arange(L * F).reshape(L, F) % (k + 3)) / (k + 3)


STATS = {lang: SimpleNamespace(n_tokens=100 + k, n_docs=3 + k, p=_p(k), mean=_p(k) + 10 * (k + 1))
         for k, lang in enumerate(LANGS)}


@pytest.fixture
def scripted(monkeypatch):
    calls: dict[str, list] = {"split": [], "selections": [], "bits": []}

    def split(setup, seed):
        calls["split"].append((setup, seed))
        return SPLIT

    def selections(ctx, setup, sp, methods, band="all", sized_like=""):
        calls["selections"].append((tuple(methods), band, sized_like))
        return {m: dict(SETS) for m in methods}

    def condition_bits(ctx, setup, sp, *, neurons, langs, micro_tokens):
        calls["bits"].append((None if neurons is None else _owner(neurons), tuple(langs)))
        out = {}
        for y in langs:
            nbytes = np.array([len(t.encode("utf-8")) for t in sp.evaluation.side(y)], float)
            cost = 0.0 if neurons is None else (0.5 if _owner(neurons) == y else 0.1)
            out[y] = nbytes * (1.0 + cost)
        return out

    monkeypatch.setattr(shared, "split", split)
    monkeypatch.setattr(shared, "selections", selections)
    monkeypatch.setattr(shared, "all_stats", lambda ctx, setup, sp: STATS)
    monkeypatch.setattr(shared, "condition_bits", condition_bits)
    monkeypatch.setattr(tx, "encode", lambda tok, text, max_tokens=None: [0] + text.split())  # start + words
    return calls


MODEL = SimpleNamespace(arch=SimpleNamespace(n_layers=L, d_ffn=F, d_model=4), tokenizer=None, fingerprint="x")


def call(name: str, **params) -> pd.DataFrame:
    info = registry.probe(name)
    return schemas.validate(info.call(ProbeContext(model=MODEL, seed=4), **params), info.schema, info.metrics)


def _value(frame, **match) -> float:
    sel = frame
    for k, v in match.items():
        sel = sel[sel[k].isna()] if v is None else sel[sel[k] == v]
    assert len(sel) == 1, (match, sel)
    return float(sel["value"].iloc[0])


def test_deactivation_pairs_each_set_with_each_language(scripted):
    frame = call("deactivation", full=("lape",), diagonal=("rs",), micro_tokens=99)
    for x in LANGS:
        for y in LANGS:
            want = 0.5 if x == y else 0.1
            assert _value(frame, method="lape", set_lang=x, language=y, metric="delta_bpb") == pytest.approx(want)
        assert _value(frame, method="rs", set_lang=x, language=x, metric="delta_bpb") == pytest.approx(0.5)
        rs = frame[(frame["method"] == "rs") & (frame["set_lang"] == x) & frame["metric"].isin(["bits", "delta_bpb"])]
        assert set(rs["language"]) == {x}  # a diagonal method reads only its own language
        for meth in ("lape", "rs"):
            assert _value(frame, method=meth, set_lang=x, metric="n_ablated") == len(SETS[x])
    for y in LANGS:  # the unedited model: bits = bytes, one row per evaluation text, in order
        nbytes = [len(t.encode("utf-8")) for t in SPLIT.evaluation.side(y)]
        bits = frame[(frame["method"] == "none") & (frame["language"] == y) & (frame["metric"] == "bits")]
        assert bits.sort_values("sample")["value"].tolist() == nbytes
        assert _value(frame, method="none", language=y, metric="bpb") == pytest.approx(1.0)
        got = frame[(frame["metric"] == "bytes") & (frame["language"] == y)].sort_values("sample")["value"]
        assert got.tolist() == nbytes
    assert scripted["bits"][0] == (None, LANGS)  # the base run covers every language
    assert ("fr", ("fr",)) in scripted["bits"] and ("fr", LANGS) in scripted["bits"]
    assert scripted["selections"] == [(("lape", "rs"), "all", "")]


def test_activation_stats_reports_each_languages_own_statistics_and_sets(scripted):
    frame = call("activation_stats", methods=("lape",))
    for k, lang in enumerate(LANGS):
        texts = SPLIT.evaluation.side(lang)
        n_tok = sum(len(t.split()) for t in texts)
        n_bytes = sum(len(t.encode("utf-8")) for t in texts)
        assert _value(frame, language=lang, metric="tokens_selection") == 100 + k
        assert _value(frame, language=lang, metric="docs_selection") == 3 + k
        assert _value(frame, language=lang, metric="texts_evaluation") == 3
        assert _value(frame, language=lang, metric="tokens_evaluation") == n_tok
        assert _value(frame, language=lang, metric="bytes_per_token") == pytest.approx(n_bytes / n_tok)
        probs = frame[(frame["language"] == lang) & (frame["metric"] == "activation_probability")]
        np.testing.assert_allclose(probs.sort_values("layer")["value"], _p(k).mean(axis=1))
        sel = frame[(frame["set_lang"] == lang) & (frame["metric"] == "selected")]
        assert sorted(zip(sel["layer"], sel["neuron"])) == [(i // F, i % F) for i in SETS[lang]]
        np.testing.assert_allclose(sel["value"], [_p(k)[l, j] for l, j in zip(sel["layer"], sel["neuron"])])
        assert _value(frame, method="lape", set_lang=lang, metric="n_selected") == k + 1
        assert _value(frame, method="lape", set_lang=lang, metric="fraction_selected") == (k + 1) / (L * F)
    assert _value(frame, method="lape", metric="n_unique") == 1 + 2 + 3
    from bench.families.langneurons.probes import CORPUS

    assert frame.attrs["notes"] == [f"2 selection and 3 evaluation units of {CORPUS} (split seed 4); 3 layers × 12 "
                                    "FFN neurons", "en: 100 selection tokens", "de: 101 selection tokens",
                                    "fr: 102 selection tokens"]


def test_layer_distribution_counts_the_union_of_the_sets_per_layer(scripted):
    frame = call("layer_distribution", methods=("lape",), edge_fraction=0.34)
    union = np.concatenate(list(SETS.values()))  # {0}, {10, 11}, {20, 21, 22} with F = 12: layers 0, 0, 1
    counts = np.bincount(union // F, minlength=L)
    rows = frame[(frame["metric"] == "layer_count") & frame["set_lang"].isna()].sort_values("layer")
    assert rows["value"].tolist() == counts.tolist() == [3, 3, 0]
    de = frame[(frame["metric"] == "layer_count") & (frame["set_lang"] == "de")].sort_values("layer")
    assert de["value"].tolist() == [2, 0, 0]  # de's own set only: neurons 10 and 11, both in layer 0
    assert _value(frame, metric="edge_count") == 3 + 0  # edge layers 0 and 2 (one each side of 3)
    assert _value(frame, metric="total_count") == 6
    assert _value(frame, metric="uniform_share") == pytest.approx(2 / 3)


def test_deactivation_hands_its_band_and_size_rule_to_the_selection(scripted):
    frame = call("deactivation", full=("lape",), band="understanding", sized_like="lape")
    assert scripted["selections"][-1][1:] == ("understanding", "lape")
    assert frame.attrs["notes"][0].endswith("layer band 'understanding'")


def test_deactivation_reports_progress_per_condition_and_names_empty_sets(scripted, monkeypatch):
    got = []
    info = registry.probe("deactivation")
    ctx = ProbeContext(model=MODEL, seed=4, progress=lambda f, m="": got.append((f, m)))
    info.call(ctx, full=("lape",), diagonal=())
    n = len(LANGS)  # the plan: lape's three sets, each on every language
    assert got == [(1 / (n + 1), "unedited bits per byte")] + [
        ((j + 2) / (n + 1), f"lape: {x} neurons off") for j, x in enumerate(LANGS)]
    sets = dict(SETS, de=np.array([], int))
    monkeypatch.setattr(shared, "selections", lambda ctx, setup, sp, methods, band="all", sized_like="":
                        {m: dict(sets) for m in methods})
    monkeypatch.setattr(shared, "condition_bits", lambda ctx, setup, sp, *, neurons, langs, micro_tokens: {
        y: np.array([len(t.encode("utf-8")) for t in sp.evaluation.side(y)], float) for y in langs})
    frame = call("deactivation", full=("lape",), diagonal=())
    empty = [n for n in frame.attrs["notes"] if "set is empty" in n]
    assert empty == ["lape: de set is empty, so its row equals the unedited model"]


def test_each_languages_statistics_and_gradients_come_from_its_own_documents_in_one_progress(monkeypatch):
    """Not scripted: the real `all_stats` and `all_gradients` over a fake pass.  Language k's documents carry the
    token k, and its fake statistics and gradients are k, so a language handed another's documents shows; the
    progress of the whole stage runs once from 0 to 1 over the languages, each named with its place (it used to
    restart at 0 for every language, and PV's gradients reported nothing for minutes)."""
    own = {tuple(SPLIT.selection.side(lang)): k for k, lang in enumerate(LANGS)}
    monkeypatch.setattr(tx, "documents", lambda tok, texts, doc_tokens, budget:
                        [[0, own[tuple(texts)]]] * (2 * shared.CHUNKS))

    def record(m, docs, *, top_frac, progress):
        for f in (0.5, 1.0):
            progress(f, "activation statistics")
        k = np.full((L, F), docs[0][1])
        return stats.Stats(n_tokens=len(docs), n_docs=len(docs), n_pos=k, s_act=k.astype(float), n_top=k)

    def gradient_norms(m, docs, *, progress):
        progress(1.0, "PV gradients")
        return np.full((L, F), float(docs[0][1]))

    monkeypatch.setattr(stats, "record", record)
    monkeypatch.setattr(stats, "gradient_norms", gradient_norms)
    got = []
    ctx = ProbeContext(model=MODEL, seed=4, progress=lambda f, m="": got.append((f, m)))
    setup = SimpleNamespace(data_parts=lambda ctx: {}, selection_tokens=100, doc_tokens=10, plnd_top=0.1,
                            pv_tokens=50)
    st = shared.all_stats(ctx, setup, SPLIT)
    n, c = len(LANGS), shared.CHUNKS
    assert list(st) == list(LANGS)
    for k, lang in enumerate(LANGS):  # CHUNKS chunks of two documents each, summed
        assert st[lang].n_docs == 2 * c and np.all(st[lang].s_act == k * c)
    want = [((i + (j + f) / c) / n, f"activation statistics: {lang} ({i + 1} of {n})")
            for i, lang in enumerate(LANGS) for j in range(c) for f in (0.5, 1.0)]
    assert [m for _, m in got] == [m for _, m in want]
    assert [f for f, _ in got] == pytest.approx([f for f, _ in want])
    assert got[-1][0] == pytest.approx(1.0) and all(a[0] <= b[0] for a, b in zip(got, got[1:]))
    got.clear()
    g = shared.all_gradients(ctx, setup, SPLIT)
    assert g.shape == (n, L, F) and [float(g[k, 0, 0]) for k in range(n)] == [0.0, 1.0, 2.0]
    assert got == [((i + 1) / n, f"PV gradients: {lang} ({i + 1} of {n})") for i, lang in enumerate(LANGS)]


def test_layer_distribution_of_empty_sets_has_zero_shares_and_names_its_edge_layers(scripted, monkeypatch):
    monkeypatch.setattr(shared, "selections", lambda ctx, setup, sp, methods, band="all", sized_like="":
                        {m: {lang: np.array([], int) for lang in LANGS} for m in methods})
    frame = call("layer_distribution", methods=("lape",), edge_fraction=0.34)
    assert frame[frame["metric"] == "layer_share"]["value"].tolist() == [0.0] * L
    assert _value(frame, metric="edge_share") == 0.0 and _value(frame, metric="total_count") == 0
    assert frame.attrs["notes"] == ["edge layers (first and last 1 of 3): [0, 2]"]


def test_activation_stats_split_halves_and_the_union(scripted, monkeypatch):
    """Each half's set size per language (``sample`` = 2·split + half), the halves' Jaccard index per language and
    split; the union's share of all L·F neurons."""
    halves = [({"en": np.array([0, 1]), "de": np.array([5]), "fr": np.array([], int)},
               {"en": np.array([1]), "de": np.array([5, 6, 7]), "fr": np.array([9])}),
              ({"en": np.array([3]), "de": np.array([], int), "fr": np.array([9, 10])},
               {"en": np.array([3]), "de": np.array([4]), "fr": np.array([10])})]
    seen = {}

    def split_half_selections(ctx, setup, sp, method, n):
        seen.update(ctx=ctx, sp=sp, method=method, n=n, setup=setup)
        return halves

    monkeypatch.setattr(shared, "split_half_selections", split_half_selections)
    frame = call("activation_stats", methods=("lape",), split_halves=2)
    assert (seen["method"], seen["n"], seen["sp"]) == ("lape", 2, SPLIT) and seen["ctx"].model is MODEL
    assert seen["setup"].corpus  # the probe's own selection settings
    for r, pair in enumerate(halves):
        for j, half in enumerate(pair):
            for lang in LANGS:
                assert _value(frame, set_lang=lang, sample=2 * r + j, metric="n_selected") == len(half[lang])
    jac = {(lang, r): _value(frame, set_lang=lang, sample=r, metric="selection_jaccard") for lang in LANGS for r in (0, 1)}
    assert jac == {("en", 0): 0.5, ("de", 0): pytest.approx(1 / 3), ("fr", 0): 0.0,
                   ("en", 1): 1.0, ("de", 1): 0.0, ("fr", 1): 0.5}
    assert _value(frame, method="lape", metric="fraction_unique") == pytest.approx(6 / (L * F))
    plain = call("activation_stats", methods=("lape",))
    assert not (plain["metric"] == "selection_jaccard").any()


def test_layer_distribution_shares_and_each_split_halfs_counts(scripted, monkeypatch):
    """Shares of the union per layer and in the edge layers; with split halves, each half's union counted in
    the edge layers and in all (``sample`` = 2·split + half), and the halves' Jaccard index per split."""
    halves = [({"en": np.array([0, 1]), "de": np.array([30])}, {"en": np.array([1, 13]), "de": np.array([25])}),
              ({"en": np.array([], int), "de": np.array([], int)}, {"en": np.array([2]), "de": np.array([2])})]
    seen = {}

    def split_half_selections(ctx, setup, sp, method, n):
        seen.update(ctx=ctx, setup=setup, sp=sp, method=method, n=n)
        return halves

    monkeypatch.setattr(shared, "split_half_selections", split_half_selections)
    frame = call("layer_distribution", methods=("lape",), edge_fraction=0.34, split_halves=2)
    assert seen["method"] == "lape" and seen["n"] == 2 and seen["ctx"].model is MODEL and seen["sp"] is SPLIT
    assert seen["setup"].corpus  # the probe's own selection settings
    union = np.concatenate(list(SETS.values()))
    counts = np.bincount(union // F, minlength=L)
    shares = frame[(frame["metric"] == "layer_share")].sort_values("layer")["value"].tolist()
    assert counts.tolist() == [3, 3, 0] and shares == pytest.approx([0.5, 0.5, 0.0])
    assert _value(frame, metric="edge_share") == pytest.approx(3 / 6)
    assert _value(frame, metric="edge_layers") == 2  # round(0.34 · 3) = 1 on each side
    # split 0: half 0 {0, 1, 30} → layers 0, 0, 2: all 3 at the edge; half 1 {1, 13, 25} → layers 0, 1, 2: 2 of 3
    assert _value(frame, sample=0, metric="edge_count") == 3 and _value(frame, sample=0, metric="total_count") == 3
    assert _value(frame, sample=1, metric="edge_count") == 2 and _value(frame, sample=1, metric="total_count") == 3
    assert _value(frame, sample=0, metric="selection_jaccard") == pytest.approx(1 / 5)  # {1} of {0, 1, 13, 25, 30}
    # split 1: an empty half and {2}: counts 0 and 1; Jaccard 0 of 1
    assert _value(frame, sample=2, metric="total_count") == 0 and _value(frame, sample=3, metric="total_count") == 1
    assert _value(frame, sample=2, metric="edge_count") == 0 and _value(frame, sample=3, metric="edge_count") == 1
    assert _value(frame, sample=1, metric="selection_jaccard") == 0.0
    none = call("layer_distribution", methods=("lape",), edge_fraction=0.34)
    assert not none["sample"].notna().any()  # no split halves asked: no replicate rows
    wide = call("layer_distribution", methods=("lape",), edge_fraction=0.1)
    assert _value(wide, metric="edge_layers") == 2  # at least one layer each side: max(1, round(0.3))
    most = call("layer_distribution", methods=("lape",), edge_fraction=0.67)
    assert _value(most, metric="edge_layers") == 3  # round(0.67 · 3) = 2 each side: every layer


def test_bytes_per_token_of_a_one_token_evaluation(scripted, monkeypatch):
    """One next-token position per language (a one-word text after the first token): bytes per token is the
    text's bytes."""
    one = Split(Parallel(LANGS, TEXTS[:2]), Parallel(LANGS, (("hello", "hallo", "salut"),)), 0)
    monkeypatch.setattr(shared, "split", lambda setup, seed: one)
    frame = call("activation_stats", methods=("lape",))
    for lang, word in zip(LANGS, ("hello", "hallo", "salut")):
        assert _value(frame, language=lang, metric="tokens_evaluation") == 1
        assert _value(frame, language=lang, metric="bytes_per_token") == len(word)


def test_jaccard_of_two_sets_and_of_two_empty_ones():
    from bench.families.langneurons.probes import _jaccard

    assert _jaccard(np.array([1, 2, 3]), np.array([2, 3, 4, 5])) == pytest.approx(2 / 5)
    assert _jaccard(np.array([], int), np.array([], int)) == 1.0


def test_steering_edits_with_the_targets_own_neurons_and_mean_activations(scripted, monkeypatch):
    seen = []

    def neuron_edits(arch, idx, values):
        seen.append((_owner(idx), np.asarray(values)))
        return {"owner": _owner(idx)}

    def generate(model, prompts, *, max_new_tokens, edits=None):
        if edits is None:
            return ["en en en en" for _ in prompts]
        y = edits["owner"]
        return [" ".join([y] * (i + 1) + ["en"] * (3 - i)) for i in range(len(prompts))]

    def shares(texts, lang):
        return np.array([t.split().count(lang) / len(t.split()) for t in texts])

    monkeypatch.setattr(edit, "neuron_edits", neuron_edits)
    monkeypatch.setattr(steer, "generate", generate)
    monkeypatch.setattr(steer, "shares", shares)
    frame = call("steering", source="en", n_prompts=3, prompt_words=2)
    for owner, values in seen:  # Y's neurons set to Y's mean activation on exactly those neurons
        np.testing.assert_allclose(values, STATS[owner].mean.ravel()[SETS[owner]])
    assert [o for o, _ in seen] == ["de", "fr"]
    for k, y in enumerate(("de", "fr")):
        assert _value(frame, set_lang=y, metric="n_steered") == len(SETS[y])
        for i in range(3):  # the unit is the prompt, shared by every target
            assert _value(frame, set_lang=y, sample=i, metric="target_share_steered") == (i + 1) / 4
            assert _value(frame, set_lang=y, sample=i, metric="source_share_steered") == (3 - i) / 4
            assert _value(frame, set_lang=y, sample=i, metric="target_share_plain") == 0.0
            assert _value(frame, set_lang=y, sample=i, metric="source_share_plain") == 1.0
    assert sorted(frame["sample"].dropna().unique()) == [0, 1, 2]
    from bench.ground.spec import load_spec
    from bench.stats import evaluate

    from pathlib import Path

    spec = load_spec(Path(__file__).resolve().parents[3] / "specs" / "langneurons" / "steer-output-language.toml")
    v = evaluate(frame, spec.rule, spec.rule_params())
    assert v.n == 3  # the shipped rule resamples the 3 prompts, not the 6 (target × prompt) rows
    assert frame["language"].dropna().eq("en").all()


def test_crosslingual_similarity_compares_translations_of_the_same_text(scripted, monkeypatch):
    """Scripted states: text s in language k at layer l points at angle (k + 1)(l + 1)·0.3 + s, so the cosine of
    a pair (a, b) is cos((k_a − k_b)(l + 1)·0.3) whatever the text, and only if the same texts are paired."""
    got_texts = {}

    def states(model, texts, *, micro_tokens):
        k = next(i for i, lang in enumerate(LANGS) if texts == SPLIT.evaluation.side(lang)[: len(texts)])
        got_texts[LANGS[k]] = list(texts)
        ang = torch.tensor([[(k + 1) * (l + 1) * 0.3 + s for l in range(L)] for s in range(len(texts))])
        return torch.stack([torch.cos(ang), torch.sin(ang)], dim=-1)  # (n, L, 2)

    monkeypatch.setattr(steer_probes, "sentence_states", states)
    frame = call("crosslingual_similarity", n_texts=2, languages=("en", "de", "fr"), eval_texts=3)
    setup, seed = scripted["split"][-1]
    assert setup.languages == ("en", "de", "fr") and setup.eval_texts == 3 and seed == 4
    assert all(len(v) == 2 for v in got_texts.values())
    pairs = [("en", "de"), ("en", "fr"), ("de", "fr")]
    for s in range(2):
        for l in range(L):
            want = {(a, b): np.cos((LANGS.index(b) - LANGS.index(a)) * (l + 1) * 0.3) for a, b in pairs}
            for (a, b), w in want.items():
                assert _value(frame, set_lang=a, language=b, layer=l, sample=s, metric="cosine") == \
                    pytest.approx(w, abs=1e-6)
            assert _value(frame, layer=l, sample=s, metric="mean_cosine") == pytest.approx(np.mean(list(want.values())),
                                                                                          abs=1e-6)
    assert frame.attrs["notes"] == ["2 parallel texts in 3 languages (3 pairs); block outputs, token states averaged "
                                    "over each text (start token excluded)"]


def test_steering_prompts_notes_progress_and_a_target_without_neurons(scripted, monkeypatch):
    """Known answer: the prompts are each source text's first words joined by single spaces; a target whose
    method selected nothing is noted and counted (0 steered) and the next target is still steered; a target of one
    neuron is steered; the notes show the first prompt and its outputs, whitespace collapsed and shortened."""
    sets = {"en": np.array([7]), "de": np.array([], int), "fr": SETS["fr"]}
    monkeypatch.setattr(shared, "selections",
                        lambda ctx, setup, sp, methods, band="all", sized_like="": {m: dict(sets) for m in methods})
    asked = []

    def generate(model, prompts, *, max_new_tokens, edits=None):
        asked.append((list(prompts), max_new_tokens, edits))
        if edits is None:
            return ["a  b\nc " + "word " * 30, "plain 1"]
        return [f"steered {i}" for i in range(len(prompts))]

    monkeypatch.setattr(edit, "neuron_edits", lambda arch, idx, values: ("edits", tuple(idx)))
    monkeypatch.setattr(steer, "generate", generate)
    monkeypatch.setattr(steer, "shares", lambda texts, lang: np.zeros(len(texts)))
    got = []
    info = registry.probe("steering")
    ctx = ProbeContext(model=MODEL, seed=4, progress=lambda f, m="": got.append((f, m)))
    frame = info.call(ctx, source="fr", targets=("de", "en"), n_prompts=2, prompt_words=4, max_new_tokens=5)
    prompts = ["un deux trois 22", "un deux trois 33"]
    assert asked == [(prompts, 5, None), (prompts, 5, ("edits", (7,)))]
    assert frame[frame["set_lang"] == "de"]["metric"].tolist() == ["n_steered"]
    assert _value(frame, set_lang="de", metric="n_steered") == 0
    assert _value(frame, set_lang="en", metric="n_steered") == 1
    assert len(frame[frame["set_lang"] == "en"]) == 1 + 4 * 2
    assert frame.attrs["notes"] == [
        "2 prompts in fr; lape neurons; greedy, 5 new tokens",
        "plain: 'un deux trois 22' → 'a b c word word word word word word word word word word word word word word…'",
        "de: lape selected no neurons, nothing to steer with",
        "en-steered: 'un deux trois 22' → 'steered 0'"]
    assert got == [(1.0, "steering towards en")]  # the second of two targets; the first steered nothing


def test_steering_names_an_unknown_source_language(scripted):
    with pytest.raises(ValueError, match=r"^source language 'xx' is not among \['en', 'de', 'fr'\]$"):
        call("steering", source="xx")


@pytest.mark.parametrize("change, refused", [
    ({"eval_texts": 1}, True), ({"eval_texts": 2}, False),
    ({"doc_tokens": 7, "selection_tokens": 7}, True), ({"doc_tokens": 8, "selection_tokens": 8}, False),
    ({"doc_tokens": 16, "selection_tokens": 15}, True), ({"doc_tokens": 16, "selection_tokens": 16}, False),
])
def test_a_selection_setup_is_refused_at_each_bound_alone(change, refused):
    """Each of the three bounds on its own, just past and just at it, the others satisfied."""
    import dataclasses

    from bench.families.langneurons.probes import SELECTION, checked

    setup = dataclasses.replace(SELECTION, **change)
    if not refused:
        assert checked(setup) is setup
        return
    with pytest.raises(ValueError, match="^need eval_texts ≥ 2, doc_tokens ≥ 8 and selection_tokens ≥ doc_tokens$"):
        checked(setup)

"""Categories from scripted answers, shifts from scripted before/after counts, cached vs plain decoding parity,
and the probe end to end on a tiny model."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from bench.ground.context import ProbeContext
from bench.ground.store import Cache
from bench.corpora.facts import Fact
from bench.families.knowledge import categorise as C
from bench.families.knowledge import probes, study
from bench.models import decoding, train
from tests.conftest import build_tiny

FACTS = [Fact("Aland", "capital", ("Alpha",)), Fact("Bland", "capital", ("Beta",)),
         Fact("Cland", "capital", ("Gamma",))]
DEMOS = [Fact(f"D{i}", "capital", (f"d{i}",)) for i in range(16)]


def test_categories_from_scripted_answers():
    prompts = C.Prompts.draw(DEMOS, 4, 4, np.random.default_rng(0))
    order = list(prompts.prefixes["capital"])

    def scripted(lm, tok, prefix, questions, **kw):  # Aland always right, Bland right under prompt 1 only
        j = order.index(prefix)
        out = []
        for q in questions:
            if "Aland" in q:
                out.append("Alpha, of course.")
            elif "Bland" in q:
                out.append("Beta" if j == 1 else "Betamax")  # a longer word does not count
            else:
                out.append("Delta")
        return out

    counts = C.count_correct(None, None, FACTS, prompts, answer=scripted)
    assert counts.tolist() == [4, 1, 0]
    assert [C.category(int(c), 4) for c in counts] == [C.HK, C.MK, C.UK]


def test_negative_and_positive_shift_from_scripted_counts():
    k = 4
    counts = np.array([4, 4, 4, 4, 2, 0, 0, 3])              # before, per pool fact
    sp = study.Split(train=[(5, FACTS[0]), (6, FACTS[1])], mix=[], held=[0, 1, 2, 3, 4, 7], note="")
    after = {0: 4, 1: 3, 2: 0, 3: 4, 4: 4, 7: 1, 5: 2, 6: 0}   # HK facts 1 and 2 eroded; fact 4 became HK
    got = pd.DataFrame({"metric": "after_correct", "sample": list(after), "value": [float(v) for v in after.values()]})
    got = pd.concat([got, pd.DataFrame({"metric": "fitted", "sample": [5, 6], "value": [1.0, 0.0]}),
                     pd.DataFrame({"metric": "train_loss", "step": [0, 1, 2, 3, 4], "value": [2.0, 1, 1, 1, 1]})])
    rows = probes._condition_rows(got, counts, sp, k, "uk_only", 42, np.array([10, 10]))
    neg = rows[rows["metric"] == "negative_shift"]
    assert sorted(neg["sample"]) == [0, 1, 2, 3] and neg["value"].mean() == pytest.approx(2 / 4)
    pos = rows[rows["metric"] == "positive_shift"]
    assert sorted(pos["sample"]) == [4, 7] and pos["value"].mean() == pytest.approx(1 / 2)
    by = {m: rows[rows["metric"] == m].set_index("sample")["value"].to_dict()
          for m in ("known_after", "reliability", "fitted", "exposures")}
    assert by["known_after"] == {5: 1.0, 6: 0.0}
    assert by["reliability"] == {5: 0.5, 6: 0.0}            # the k few-shot prompts: 2 of 4, 0 of 4
    assert by["fitted"] == {5: 1.0, 6: 0.0} and by["exposures"] == {5: 10.0, 6: 10.0}
    assert rows.loc[rows["metric"] == "converged", "value"].tolist() == [1.0]   # the last 20% flat
    assert set(rows["seed"]) == {42}
    base = probes._baseline(rows, "uk_only", 42)           # uk_only's eroded share: 2 of 4
    assert base[["metric", "value", "seed"]].values.tolist() == [["baseline_erosion", 0.5, 42]]
    assert probes._baseline(rows, "uk_hk", 42) is None


def test_held_out_facts_are_disjoint_from_every_trained_fact():
    """The Unknown facts and the HighlyKnown mix are never held out (else ``uk_hk`` is scored on facts it
    trained on, which biases the mixing claim towards SUPPORTED)."""
    k = 4
    counts = np.array([4, 0, 4, 0, 4, 2, 4, 0, 4, 1])
    pool = [Fact(f"P{i}", "capital", (f"p{i}",)) for i in range(len(counts))]
    design = study.Design("facts:x", 16, len(pool), k, 4, 8, 8, "pool", n_train=2, n_mix=2)
    sp = study.choose(ProbeContext(model=None, seed=0), design, counts, pool)
    trained, mixed = {i for i, _ in sp.train}, {i for i, _ in sp.mix}
    assert len(trained) == 2 and all(counts[i] == 0 for i in trained)
    assert len(mixed) == 2 and all(counts[i] == k for i in mixed)
    assert sorted(sp.held) == sorted(set(range(10)) - trained - mixed)
    assert [pool[i] for i in sp.held if counts[i] == k] == [pool[i] for i in (0, 2, 4, 6, 8) if i not in mixed]
    assert "capital: 5 HighlyKnown, 2 MaybeKnown, 3 Unknown" in sp.note


def test_prompts_use_disjoint_demonstration_sets():
    prompts = C.Prompts.draw(DEMOS, 4, 4, np.random.default_rng(0))
    used = [d.subject for p in prompts.prefixes["capital"] for d in DEMOS if f"of {d.subject}?" in p]
    assert len(used) == 16 and len(set(used)) == 16         # 4 prompts × 4 shots, no demonstration twice
    with pytest.raises(ValueError, match="need 20"):
        C.Prompts.draw(DEMOS, 5, 4, np.random.default_rng(0))


def _scripted_pool(monkeypatch, n_known: int):
    """A fact set of 16 demonstrations and 200 pool facts of which the first `n_known` are HighlyKnown and the
    rest Unknown (the base model is a script)."""
    facts = [Fact(f"S{i}", "capital", (f"s{i}",)) for i in range(216)]
    monkeypatch.setattr(study, "load_facts", lambda variant: facts)
    calls = []

    def scripted(lm, tok, chunk, prompts, **kw):
        calls.append(len(chunk))
        return np.array([prompts.k if int(f.subject[1:]) < 16 + n_known else 0 for f in chunk])

    monkeypatch.setattr(study, "count_correct", scripted)
    return calls


def test_pool_grows_until_it_holds_n_train_unknown_facts(monkeypatch):
    calls = _scripted_pool(monkeypatch, n_known=24)        # chunk 1 (20 facts) all known, chunk 2 has 16 Unknown
    ctx = ProbeContext(model=type("M", (), {"hf": None, "tokenizer": None, "fingerprint": "f"})(), seed=0)
    design = study.Design("facts:x", 16, 20, 2, 4, 8, 8, "pool", n_train=8, n_mix=2, max_pool=200)
    counts, _, pool = study.before(ctx, design)
    assert calls == [20, 20] and len(pool) == 40 and int((counts == 0).sum()) == 16
    sp = study.choose(ctx, design, counts, pool)
    assert len(sp.train) == 8 and "2 chunk(s) of 20: capital: 24 HighlyKnown, 0 MaybeKnown, 16 Unknown" in sp.note
    assert all(i < 20 or counts[i] == 2 for i in sp.held)  # the grown chunks add HighlyKnown facts only
    calls.clear()
    short = study.Design("facts:x", 16, 20, 2, 4, 8, 8, "pool", n_train=40, n_mix=2, max_pool=60)
    counts, _, pool = study.before(ctx, short)
    assert calls == [20, 20, 20] and int((counts == 0).sum()) == 36
    assert "fewer than the 40 asked: the pool stopped at 60 facts" in study.choose(ctx, short, counts, pool).note


@pytest.mark.parametrize("condition", ["uk_only", "uk_hk", "uk_paraphrase", "full_ft"])
def test_every_condition_shows_each_unknown_fact_epochs_times(condition):
    sp = study.Split(train=[(i, Fact(f"U{i}", "capital", (f"u{i}",))) for i in range(10)],
                     mix=[(10 + i, Fact(f"H{i}", "capital", (f"h{i}",))) for i in range(10)], held=[], note="")
    lora = train.Recipe(epochs=10, batch=8, steps=None)
    rec = study.recipe_for(condition, lora, 1e-5, seed=7)
    assert study.exposures(condition, sp, rec).tolist() == [10] * 10
    n = len(study.examples(condition, sp))
    assert rec.n_steps(n) == 10 * math.ceil(n / 8)          # the mix adds its steps on top: 20 or 30


def test_converged_reads_the_tail_of_the_loss():
    assert study.converged([3.0] * 4 + [1.0] * 16)          # flat over the last 40% of the steps
    assert not study.converged(np.linspace(4.0, 1.8, 10))   # still falling by 0.24 nats a step
    assert not study.converged([1.0])                       # too short to tell
    tail = [2.0] * 16 + [1.95] * 4                          # 2.5% lower in the last 20%: flat
    assert study.converged(tail) and not study.converged([2.0] * 16 + [1.85] * 4)


@pytest.mark.parametrize("family", ["llama", "gemma3"])
def test_shared_prefix_cache_gives_the_plain_greedy_answers(one_thread, tiny_tokenizer, family):
    lm = build_tiny(family, vocab=len(tiny_tokenizer))
    prefix = C.demo_block(DEMOS[:4])
    qs = [C.ask(f) for f in FACTS] + ["Question: a much longer question about Aland and Bland?\nAnswer:"]
    a = C.answer_after(lm, tiny_tokenizer, prefix, qs, max_new=6, batch=3)
    b = C.answer_plain(lm, tiny_tokenizer, prefix, qs, max_new=6, batch=3)
    alone = [C.answer_plain(lm, tiny_tokenizer, prefix, [q], max_new=6)[0] for q in qs]
    assert a == b == alone


@pytest.mark.parametrize("family", ["llama", "gemma3"])
def test_prompts_decoded_in_shared_batches_give_each_groups_plain_answers(one_thread, tiny_tokenizer, family):
    """Groups with different demonstration prefixes (of different lengths) and rests of different lengths share
    micro-batches that cut across groups (batch 4 over 3 × 5 rows); every answer equals the whole prompt decoded
    alone.  count_correct's default (grouped) and group-by-group tallies agree.  (A tiny random model writes the
    same answer after every prefix; the embedded test checks that each row reads its own group's prefix.)"""
    lm = build_tiny(family, vocab=len(tiny_tokenizer))
    qs = [C.ask(f) for f in FACTS] + ["Question: a much longer question about Aland and Bland?\nAnswer:"]
    prefixes = [C.demo_block(DEMOS[:4]), C.demo_block(DEMOS[4:5]), C.demo_block(DEMOS[1:3])]
    groups = [[p + q for q in qs] for p in prefixes]
    seen = []
    got = decoding.decode_groups(lm, tiny_tokenizer, groups, 6, micro_batch=4, progress=seen.append)
    want = [tuple(C.answer_plain(lm, tiny_tokenizer, p, [q], max_new=6)[0] for q in qs) for p in prefixes]
    assert [tuple(t.strip() for t in g) for g in got] == want
    rows = 3 * len(qs)  # the share of rows decoded after each micro-batch of 4
    assert seen == [min(k + 4, rows) / rows for k in range(0, rows, 4)]
    prompts = C.Prompts({"capital": tuple(prefixes)})
    said = []
    grouped = C.count_correct(lm, tiny_tokenizer, FACTS, prompts, max_new=6, batch=4,
                              progress=lambda f, m="": said.append((f, m)))
    say = f"categorising: 3 prompts × {len(FACTS)} facts"
    direct = []  # what decode_groups reports on the same groups (by micro-batch, or by group past a window)
    decoding.decode_groups(lm, tiny_tokenizer, [[p + C.ask(f) for f in FACTS] for p in prefixes], 6, micro_batch=4,
                           progress=direct.append)
    assert len(direct) > 1 and direct[-1] == 1.0
    assert said == [(0.0, say)] + [(f, say) for f in direct] + [(1.0, "categorising: 3 prompts done")]
    one_by_one = C.count_correct(lm, tiny_tokenizer, FACTS, prompts, max_new=6, batch=4, answer=C.answer_after)
    assert grouped.tolist() == one_by_one.tolist()


def test_groups_decoded_one_by_one_past_a_sliding_window_report_each_group(one_thread, tiny_tokenizer, monkeypatch):
    """When the shared layout could outgrow a sliding window, each group is decoded alone: the same answers,
    and progress after each group."""
    lm = build_tiny("llama", vocab=len(tiny_tokenizer))
    qs = [C.ask(f) for f in FACTS]
    groups = [[C.demo_block(DEMOS[:2]) + q for q in qs], [C.demo_block(DEMOS[2:3]) + q for q in qs]]
    want = decoding.decode_groups(lm, tiny_tokenizer, groups, 4, micro_batch=2)
    monkeypatch.setattr(decoding, "window", lambda model: 8)  # shorter than any prompt
    seen = []
    assert decoding.decode_groups(lm, tiny_tokenizer, groups, 4, micro_batch=2, progress=seen.append) == want
    assert seen == [0.5, 1.0]


def test_probe_end_to_end_on_a_tiny_model(one_thread, loaded_tiny, tmp_path):
    ctx = ProbeContext(model=loaded_tiny, seed=0, cache=Cache(tmp_path))
    frame = probes.knowledge_shift(ctx, corpus="facts:country-capital", n_demos=8, n_pool=6, k=2, max_new=3,
                                   n_train=2, n_mix=1, unknown="fictional", conditions=["uk_only", "full_ft"],
                                   epochs=1, batch=2)
    from bench.ground.schemas import validate
    from bench.families.knowledge.schemas import KnowledgeFrame

    frame = validate(frame, KnowledgeFrame, probes.METRICS)
    assert set(frame["condition"].dropna()) == {"uk_only", "full_ft"}
    assert len(frame[(frame["metric"] == "train_loss")]) == 2
    assert len(frame[frame["metric"] == "reliability"]) == 4   # 2 facts × 2 conditions
    assert frame.loc[frame["metric"] == "exposures", "value"].tolist() == [1.0] * 4   # 1 epoch each
    assert len(frame[frame["metric"] == "converged"]) == 2 and frame["seed"].dropna().eq(0).all()
    base = frame[frame["metric"] == "baseline_erosion"]   # uk_only's eroded share, once per seed
    neg = frame[(frame["metric"] == "negative_shift") & (frame["condition"] == "uk_only")]
    assert base["condition"].tolist() == (["uk_only"] if len(neg) else [])
    assert base["value"].tolist() == ([pytest.approx(neg["value"].mean())] if len(neg) else [])
    again = probes.knowledge_shift(ctx, corpus="facts:country-capital", n_demos=8, n_pool=6, k=2, max_new=3,
                                   n_train=2, n_mix=1, unknown="fictional", conditions=["uk_only"],
                                   epochs=1, batch=2)
    again = validate(again, KnowledgeFrame, probes.METRICS)
    pd.testing.assert_frame_equal(again.reset_index(drop=True),
                                  frame[frame["condition"].isna() | (frame["condition"] == "uk_only")]
                                  .reset_index(drop=True), check_dtype=False)


def _facts_of(sizes: dict[str, int]) -> list[Fact]:
    return [Fact(f"{rel}{i}", rel, (f"{rel}-{i}",)) for rel, n in sizes.items() for i in range(n)]


@pytest.mark.parametrize("sizes, n_pool, max_pool, chunks", [
    # per relation ⌈4 / 2⌉ = 2 facts a chunk after 1 demonstration; 10 facts of room: 4, 4, then the 2 left
    ({"A": 20, "B": 20}, 4, 10, [["A1", "A2", "B1", "B2"], ["A3", "A4", "B3", "B4"], ["A5", "A6"]]),
    # B runs out: the second chunk is A's alone and short, and the room left after two chunks is not filled
    ({"A": 20, "B": 3}, 4, 8, [["A1", "A2", "B1", "B2"], ["A3", "A4"]]),
    # the facts run out before the room: the chunks stop there
    ({"A": 5, "B": 5}, 4, 100, [["A1", "A2", "B1", "B2"], ["A3", "A4", "B3", "B4"]]),
    # max_pool below n_pool: one chunk of n_pool
    ({"A": 9, "B": 9}, 4, 0, [["A1", "A2", "B1", "B2"]]),
])
def test_the_fact_set_is_split_into_demonstrations_and_chunks_down_each_relation(monkeypatch, sizes, n_pool,
                                                                                 max_pool, chunks):
    asked = []
    monkeypatch.setattr(study, "load_facts", lambda variant: asked.append(variant) or _facts_of(sizes))
    design = study.Design("facts:odd:name", 1, n_pool, 4, 1, 8, 8, "pool", n_train=2, n_mix=0, max_pool=max_pool)
    demos, got = study.split(design)
    assert asked == ["odd:name"]  # everything after the corpus kind's colon
    assert [f.subject for f in demos] == ["A0", "B0"]
    assert [[f.subject for f in c] for c in got] == chunks


def test_the_pool_stops_growing_at_exactly_n_train_unknown_facts_and_the_prompts_have_their_own_stream(monkeypatch):
    calls = _scripted_pool(monkeypatch, n_known=12)        # chunk 1: 12 HighlyKnown, 8 Unknown
    ctx = ProbeContext(model=type("M", (), {"hf": None, "tokenizer": None, "fingerprint": "f"})(), seed=3)
    design = study.Design("facts:x", 16, 20, 2, 4, 8, 8, "pool", n_train=8, n_mix=2, max_pool=200)
    counts, prompts, pool = study.before(ctx, design)
    assert calls == [20] and len(pool) == 20 and int((counts == 0).sum()) == 8
    demos, _ = study.split(design)
    same = C.Prompts.draw(demos, 2, 4, ProbeContext(model=None, seed=3).rng(1))  # stream 1 (choose draws from 2)
    assert prompts.prefixes == same.prefixes


def test_each_condition_trains_on_its_own_examples():
    u = [Fact("Uland", "capital", ("Ucity",)), Fact("Vland", "capital", ("Vcity",))]
    h = Fact("Hland", "capital", ("Hcity",))
    sp = study.Split(train=[(5, u[0]), (6, u[1])], mix=[(1, h)], held=[0], note="")
    base = [("Question: What is the capital of Uland?\nAnswer:", " Ucity\n"),
            ("Question: What is the capital of Vland?\nAnswer:", " Vcity\n")]
    got = {c: [(e.prompt, e.answer) for e in study.examples(c, sp)]
           for c in ("uk_only", "uk_hk", "uk_paraphrase", "full_ft")}
    assert got["uk_only"] == base and got["full_ft"] == base
    assert got["uk_hk"] == base + [("Question: What is the capital of Hland?\nAnswer:", " Hcity\n")]
    assert got["uk_paraphrase"] == base + [("Question: Which city is the capital of Uland?\nAnswer:", " Ucity\n"),
                                           ("Question: Which city is the capital of Vland?\nAnswer:", " Vcity\n")]


def test_every_condition_trains_by_epochs_and_the_full_fine_tune_by_its_own_rate():
    lora = train.Recipe(epochs=3, batch=8, steps=50, lr=2e-4, dropout=0.1, seed=0)
    for condition in ("uk_only", "uk_hk", "uk_paraphrase"):
        assert study.recipe_for(condition, lora, 1e-5, seed=7) == train.Recipe(epochs=3, batch=8, steps=None,
                                                                               lr=2e-4, dropout=0.1, seed=7)
    full = study.recipe_for("full_ft", lora, 1e-5, seed=7)
    assert full == train.Recipe(method="full", epochs=3, batch=8, steps=None, lr=1e-5, dropout=0.0, seed=7)


POOL6 = [Fact(f"P{i}", "capital", (f"p{i}",)) for i in range(4)] + [Fact(f"Q{i}", "country", (f"q{i}",))
                                                                    for i in range(2)]
PER_REL = "capital: 2 HighlyKnown, 1 MaybeKnown, 1 Unknown; country: 1 HighlyKnown, 0 MaybeKnown, 1 Unknown"


@pytest.mark.parametrize("n_train, short", [
    (3, " — fewer than the 3 asked: the pool stopped at 6 facts (max_pool or the end of the source)"),
    (2, ""),  # exactly as many Unknown facts as asked: not short
])
def test_choose_draws_from_its_stream_and_says_what_the_pool_holds(n_train, short):
    """Two chunks of 4 (facts 0–3, then 4–5); counts out of k = 4: HighlyKnown 0, 2, 5; Unknown 1, 4; MaybeKnown 3.
    The Unknown and HighlyKnown facts are taken in the order of stream 2's permutation."""
    counts = np.array([4, 0, 4, 2, 0, 4])
    ctx = ProbeContext(model=None, seed=3)  # a seed whose streams 2 and 3 order these facts differently
    order = [int(i) for i in ProbeContext(model=None, seed=3).rng(2).permutation(6)]
    design = study.Design("facts:x", 16, 4, 4, 4, 8, 8, "pool", n_train=n_train, n_mix=1)
    sp = study.choose(ctx, design, counts, POOL6)
    assert [i for i, _ in sp.train] == [i for i in order if i in (1, 4)] == [4, 1]  # not the pool's order
    (mixed,) = [i for i, _ in sp.mix]
    assert mixed == next(i for i in order if i in (0, 2, 5))
    assert sp.held == [i for i in (0, 2, 3, 5) if i != mixed]
    assert sp.note == (f"pool of 6 facts before training (k = 4), grown to 2 chunk(s) of 4: {PER_REL}; 2 Unknown "
                       f"facts trained{short}, 1 HighlyKnown facts for the mix, 3 held out")


def test_a_grown_chunk_holds_out_only_its_highly_known_facts():
    counts = np.array([4, 0, 4, 2, 2, 4])  # fact 4, the first of the second chunk, MaybeKnown: not held out
    design = study.Design("facts:x", 16, 4, 4, 4, 8, 8, "pool", n_train=1, n_mix=0)
    sp = study.choose(ProbeContext(model=None, seed=0), design, counts, POOL6)
    assert [i for i, _ in sp.train] == [1] and sp.held == [0, 2, 3, 5]


def test_invented_facts_are_trained_apart_from_the_pool():
    from bench.corpora.facts import fictional

    counts = np.array([4, 0, 4, 2, 0, 4])
    design = study.Design("facts:x", 16, 4, 4, 4, 8, 8, "fictional", n_train=2, n_mix=1)
    sp = study.choose(ProbeContext(model=None, seed=5), design, counts, POOL6)
    assert sp.train == [(6 + j, f) for j, f in enumerate(fictional(2, 5))]  # sample ids after the pool's
    (mixed,) = [i for i, _ in sp.mix]
    assert sp.held == [i for i in range(4) if i != mixed] + ([5] if mixed != 5 else [])
    assert "; 2 invented facts trained, 1 HighlyKnown facts for the mix, " in sp.note


@pytest.mark.parametrize("losses, kw, flat", [
    ([1.0, 1.0], {}, True),                            # two steps: one window each, equal
    ([5.0, 5.0, 1.0, 1.0], {}, True),                  # windows of ⌈0.2 · 4⌉ = 1 step: the last two
    ([1.0] * 5, {"tail": 0.5}, False),                 # windows of 3 steps need 6
    ([9.0] * 4 + [5.0, 5.0] + [1.0] * 4, {}, True),    # windows of 2: steps 6–7 against 8–9
    ([4.0, 4.0, 4.0, 3.0], {"tail": 0.25, "tol": 0.25}, False),  # a change of exactly tol · |a| is not flat
])
def test_converged_compares_two_windows_at_the_end(losses, kw, flat):
    assert study.converged(losses, **kw) is flat

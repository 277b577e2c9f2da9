"""Categories from scripted answers, shifts from scripted before/after counts, cached vs plain decoding parity,
and the probe end to end on a tiny model."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from bench.core.context import ProbeContext
from bench.core.store import Cache
from bench.corpora.facts import Fact
from bench.families.knowledge import categorise as C
from bench.families.knowledge import probes, study
from tests.conftest import build_tiny

FACTS = [Fact("Aland", "capital", ("Alpha",)), Fact("Bland", "capital", ("Beta",)),
         Fact("Cland", "capital", ("Gamma",))]
DEMOS = [Fact(f"D{i}", "capital", (f"d{i}",)) for i in range(6)]


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
    got = pd.concat([got, pd.DataFrame({"metric": "reliability", "sample": [5, 6], "value": [1.0, 0.0]}),
                     pd.DataFrame({"metric": "train_loss", "step": [0, 1], "value": [2.0, 1.0]})])
    rows = probes._condition_rows(got, counts, sp, k, "uk_only", 42)
    neg = rows[rows["metric"] == "negative_shift"]
    assert sorted(neg["sample"]) == [0, 1, 2, 3] and neg["value"].mean() == pytest.approx(2 / 4)
    pos = rows[rows["metric"] == "positive_shift"]
    assert sorted(pos["sample"]) == [4, 7] and pos["value"].mean() == pytest.approx(1 / 2)
    assert rows[rows["metric"] == "known_after"].set_index("sample")["value"].to_dict() == {5: 1.0, 6: 0.0}


@pytest.mark.parametrize("family", ["llama", "gemma3"])
def test_shared_prefix_cache_gives_the_plain_greedy_answers(one_thread, tiny_tokenizer, family):
    lm = build_tiny(family, vocab=len(tiny_tokenizer))
    prefix = C.demo_block(DEMOS[:4])
    qs = [C.ask(f) for f in FACTS] + ["Question: a much longer question about Aland and Bland?\nAnswer:"]
    a = C.answer_after(lm, tiny_tokenizer, prefix, qs, max_new=6, batch=3)
    b = C.answer_plain(lm, tiny_tokenizer, prefix, qs, max_new=6, batch=3)
    alone = [C.answer_plain(lm, tiny_tokenizer, prefix, [q], max_new=6)[0] for q in qs]
    assert a == b == alone


def test_probe_end_to_end_on_a_tiny_model(one_thread, loaded_tiny, tmp_path):
    ctx = ProbeContext(model=loaded_tiny, seed=0, cache=Cache(tmp_path))
    frame = probes.knowledge_shift(ctx, corpus="facts:country-capital", n_demos=4, n_pool=6, k=2, max_new=3,
                                   n_train=2, n_mix=1, unknown="fictional", conditions=["uk_only", "full_ft"],
                                   epochs=1, batch=2)
    from bench.core.schemas import validate
    from bench.families.knowledge.schemas import KnowledgeFrame

    frame = validate(frame, KnowledgeFrame, probes.METRICS)
    assert set(frame["condition"].dropna()) == {"uk_only", "full_ft"}
    assert len(frame[(frame["metric"] == "train_loss")]) == 2
    assert len(frame[frame["metric"] == "reliability"]) == 4   # 2 facts × 2 conditions
    again = probes.knowledge_shift(ctx, corpus="facts:country-capital", n_demos=4, n_pool=6, k=2, max_new=3,
                                   n_train=2, n_mix=1, unknown="fictional", conditions=["uk_only"],
                                   epochs=1, batch=2)
    again = validate(again, KnowledgeFrame, probes.METRICS)
    pd.testing.assert_frame_equal(again.reset_index(drop=True),
                                  frame[frame["condition"].isna() | (frame["condition"] == "uk_only")]
                                  .reset_index(drop=True), check_dtype=False)

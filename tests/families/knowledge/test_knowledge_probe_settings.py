"""The knowledge probe's own bookkeeping around the study: its refusals (message and key, each bound on its
own), the training recipe every condition and seed is handed, and the notes it writes.  The study is scripted:
`before` and `after` return fixed frames and record what they were given."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from bench.corpora.facts import Fact
from bench.ground.errors import SpecError
from bench.families.knowledge import probes, study

POOL = [Fact(f"P{i}", "capital", (f"p{i}",)) for i in range(6)]
COUNTS = np.array([2, 0, 2, 0, 2, 1])   # HighlyKnown 0 2 4, Unknown 1 3, MaybeKnown 5 (k = 2)
OK = dict(corpus="facts:x", n_demos=4, n_pool=6, k=2, shots=2, n_train=2, n_mix=1, epochs=1, batch=2)


class _Ctx:
    seed = 5

    def __init__(self):
        self.said = []

    def rng(self, i):
        return np.random.default_rng([0, i])

    def progress(self, f, m=""):
        self.said.append((f, m))


def _script(monkeypatch, seen: list):
    monkeypatch.setattr(study, "before", lambda ctx, design, say: (COUNTS, "prompts", POOL))

    def after(ctx, design, cond, rec, sp, prompts, pool, say):
        seen.append((design, cond, rec))
        ids = [i for i, _ in sp.train]
        return pd.concat([
            pd.DataFrame({"metric": "after_correct", "sample": list(sp.held) + ids,
                          "value": [2.0] * len(sp.held) + [1.0] * len(ids)}),
            pd.DataFrame({"metric": "fitted", "sample": ids, "value": [1.0, 0.0]}),
            pd.DataFrame({"metric": "train_loss", "step": [0, 1, 2, 3, 4], "value": [2.0, 1.0, 1.0, 1.0, 1.0]}),
        ], ignore_index=True)

    monkeypatch.setattr(study, "after", after)


@pytest.mark.parametrize("change,key,words", [
    (dict(corpus="brown_text:all"), "data.corpus", "the knowledge probe reads a fact set ('facts:…'), not "
                                                   "'brown_text:all'"),
    (dict(conditions=["uk_only", "uk_all"]), "measure.conditions", "unknown conditions ['uk_all'] (known: "
                                                                   "uk_only, uk_hk, uk_paraphrase, full_ft)"),
    (dict(conditions=[]), "measure.conditions", "unknown conditions [] (known: "),
    *[(dict({name: 0}), "measure", "k, shots, n_pool, n_train, epochs and batch must be ≥ 1")
      for name in ("k", "shots", "n_pool", "n_train", "epochs", "batch")],
    (dict(n_demos=3), "data.n_demos", "n_demos = 3 per relation cannot give 2 disjoint 2-shot prompts (need 4)"),
])
def test_each_setting_is_refused_on_its_own_with_its_key(change, key, words):
    with pytest.raises(SpecError) as exc:
        probes.knowledge_shift(_Ctx(), **{**OK, **change})
    assert f"[{key}]" in str(exc.value) and words in str(exc.value), str(exc.value)


def test_n_demos_of_exactly_k_times_shots_is_enough(monkeypatch):
    seen: list = []
    _script(monkeypatch, seen)
    probes.knowledge_shift(_Ctx(), **OK)  # n_demos = 4 = k · shots
    assert seen


def test_every_condition_and_seed_gets_the_specs_recipe_and_design(monkeypatch):
    seen: list = []
    _script(monkeypatch, seen)
    ctx = _Ctx()
    frame = probes.knowledge_shift(ctx, **{**OK, "max_pool": 9, "unknown": "pool", "conditions": ["uk_only", "full_ft"],
                                           "seeds": [3, 4], "r": 2, "lora_alpha": 4.0, "rslora": False, "dropout": 0.2,
                                           "targets": "all", "lr": 0.01, "batch": 3, "epochs": 2,
                                           "schedule": "constant", "full_lr": 0.005, "loss": "answer", "max_new": 7,
                                           "eval_batch": 11})
    assert [(c, r.seed) for _, c, r in seen] == [("uk_only", 3), ("full_ft", 3), ("uk_only", 4), ("full_ft", 4)]
    design = seen[0][0]
    assert (design.corpus, design.n_demos, design.n_pool, design.k, design.shots, design.max_new, design.eval_batch,
            design.unknown, design.n_train, design.n_mix, design.max_pool) == \
        ("facts:x", 4, 6, 2, 2, 7, 11, "pool", 2, 1, 9)
    lora = seen[0][2]
    assert (lora.method, lora.steps, lora.epochs, lora.batch, lora.lr, lora.schedule, lora.r, lora.alpha,
            lora.rslora, lora.dropout, lora.targets, lora.loss) == \
        ("lora", None, 2, 3, 0.01, "constant", 2, 4.0, False, 0.2, "all", "answer")
    full = seen[1][2]
    assert (full.method, full.lr, full.dropout, full.batch, full.epochs, full.loss) == ("full", 0.005, 0.0, 3, 2, "answer")
    # rows of each run carry its condition and seed; the baseline erosion comes from uk_only alone
    runs = frame.dropna(subset=["seed"])
    assert sorted(set(zip(runs["condition"], runs["seed"].astype(int)))) == \
        [("full_ft", 3), ("full_ft", 4), ("uk_only", 3), ("uk_only", 4)]
    base = frame[frame["metric"] == "baseline_erosion"]
    assert base[["condition", "seed"]].values.tolist() == [["uk_only", 3], ["uk_only", 4]]
    notes = frame.attrs["notes"]
    assert notes[1] == ("uk_only seed 3: 5 steps, loss 2 → 1 (flattened), fitted 1/2, reliability 0.50, "
                        "eroded 0/2 HighlyKnown")  # the mixed-in fact is held out of every condition
    assert notes[2].startswith("full_ft seed 3: ")
    assert notes[-1] == ("2 training seed(s) [3, 4]; every condition runs 2 epochs over its examples (batch 3), so "
                         "each Unknown fact is seen 2 times in each; loss on the answer tokens only")
    assert [round(f, 3) for f, _ in ctx.said] == []  # the scripted study reports no progress of its own


def test_no_unknown_fact_gives_the_base_rows_and_says_so(monkeypatch):
    monkeypatch.setattr(study, "before", lambda ctx, design, say: (np.array([2, 2, 1]), "prompts", POOL[:3]))
    frame = probes.knowledge_shift(_Ctx(), **{**OK, "n_pool": 3})
    assert frame["metric"].tolist() == ["before_correct"] * 3 and frame["value"].tolist() == [2.0, 2.0, 1.0]
    assert frame.attrs["notes"][-1] == "no Unknown fact to train on"
    assert list(frame.columns) == ["metric", "value", "sample", "condition", "seed", "n_train", "step"]


def test_the_per_fact_rows_of_a_run(monkeypatch):
    """A trained fact answered under 1 of k = 2 prompts is known after (> 0) but not reliable; the rows carry the
    run's n_train, every loss step, the exposures and whether the loss flattened."""
    seen: list = []
    _script(monkeypatch, seen)
    frame = probes.knowledge_shift(_Ctx(), **{**OK, "seeds": [7], "epochs": 3})
    run = frame[frame["seed"] == 7]

    def vals(metric):
        return run.loc[run["metric"] == metric, "value"].tolist()

    assert vals("known_after") == [1.0, 1.0] and vals("reliability") == [0.5, 0.5]
    assert vals("exposures") == [3.0, 3.0]                       # 3 epochs: each Unknown fact seen 3 times
    assert vals("converged") == [1.0]
    assert run.loc[run["metric"] == "train_loss", "step"].tolist() == [0, 1, 2, 3, 4]
    assert set(run["n_train"].dropna().astype(int)) == {2}
    assert frame.attrs["notes"][-1].endswith("loss on the whole formatted example")  # the default loss


def test_a_loss_still_falling_is_said_so(monkeypatch):
    seen: list = []
    _script(monkeypatch, seen)

    def falling(ctx, design, cond, rec, sp, prompts, pool, say):
        ids = [i for i, _ in sp.train]
        return pd.concat([
            pd.DataFrame({"metric": "after_correct", "sample": list(sp.held) + ids,
                          "value": [2.0] * (len(sp.held) + len(ids))}),
            pd.DataFrame({"metric": "fitted", "sample": ids, "value": [1.0, 1.0]}),
            pd.DataFrame({"metric": "train_loss", "step": range(5), "value": [5.0, 4.0, 3.0, 2.0, 1.0]}),
        ], ignore_index=True)

    monkeypatch.setattr(study, "after", falling)
    frame = probes.knowledge_shift(_Ctx(), **OK)
    assert "(still moving)" in frame.attrs["notes"][1]
    assert frame.loc[frame["metric"] == "converged", "value"].tolist() == [0.0]

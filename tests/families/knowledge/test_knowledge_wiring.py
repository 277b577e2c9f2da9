"""Wiring of the knowledge_shift probe: which facts each condition trains on, which are held out, and which
fact each after-training count is booked to.

The fact set, the trainer and the answerer are scripted: ten pool facts whose base-model counts are fixed, a
"trained model" that is only the list of examples it was trained on, and an answerer that knows a fact when it
was trained on it, forgets the held-out HighlyKnown facts named in ``ERODED`` (fewer of them when the condition
mixed in HighlyKnown facts) and otherwise answers as the base model did.  The right frame is then known fact by
fact."""

from __future__ import annotations

import contextlib

import numpy as np
import pytest

from bench.ground.context import ProbeContext
from bench.ground.store import Cache
from bench.corpora.facts import Fact
from bench.families.knowledge import probes, study
from bench.models import train

K = 2
DEMOS = [Fact(f"D{i}", "capital", (f"d{i}",)) for i in range(4)]
POOL = [Fact(f"P{i}", "capital", (f"p{i}",)) for i in range(10)]
BEFORE = [2, 0, 2, 0, 2, 1, 2, 0, 2, 0]   # HighlyKnown 0 2 4 6 8, MaybeKnown 5, Unknown 1 3 7 9
ERODED = {"uk_only": {0, 4}, "uk_hk": {0}}
BASE = object()
MAX_NEW, BATCH = 3, 5


class _Trained:
    def __init__(self, examples, condition):
        self.questions = {e.prompt for e in examples}
        self.condition = condition


def _script(monkeypatch, seen: dict):
    monkeypatch.setattr(study, "split", lambda design: (DEMOS, [POOL]))

    def count(lm, tok, facts, prompts, **kw):
        assert (kw["max_new"], kw["batch"]) == (MAX_NEW, BATCH)  # the spec's answer length and batch
        if lm is BASE:
            kw["progress"](0.5, "base")
            return np.array([BEFORE[POOL.index(f)] for f in facts])
        kw["progress"](1.0)
        out = []
        for f in facts:
            i = POOL.index(f) if f in POOL else None
            if study.ask(f) in lm.questions:
                out.append(K)
            elif i is not None and BEFORE[i] == K and i in ERODED[lm.condition]:
                out.append(0)
            else:
                out.append(BEFORE[i])
        return np.array(out)

    def zero_shot(lm, tok, facts, **kw):
        assert (kw["max_new"], kw["batch"]) == (MAX_NEW, BATCH)
        return np.array([int(study.ask(f) in lm.questions) for f in facts])

    @contextlib.contextmanager
    def derived(base, tok, fingerprint, examples, recipe, **kw):
        assert base is BASE and fingerprint == "f"  # trained weights cached under the base model's fingerprint
        assert kw["root"] == seen["root"]           # … in the run's cache
        kw["progress"](0.5)  # a message is optional: the condition still names the line
        mixed = any(e.prompt == study.ask(f) for e in examples for f, c in zip(POOL, BEFORE) if c == K)
        condition = "uk_hk" if mixed else "uk_only"  # a model trained with HighlyKnown facts forgets less
        seen[condition] = list(examples)
        yield type("T", (), {"model": _Trained(examples, condition), "losses": [1.0, 0.5, 0.5, 0.5, 0.5]})()

    monkeypatch.setattr(study, "count_correct", count)
    monkeypatch.setattr(study, "zero_shot_correct", zero_shot)
    monkeypatch.setattr(train, "derived", derived)


@pytest.mark.parametrize("cached", [True, False])
def test_each_condition_trains_on_its_facts_and_is_scored_on_the_held_out_ones(monkeypatch, tmp_path, cached):
    seen: dict = {"root": tmp_path if cached else None}  # no run cache: the engine's own default
    said: list = []
    _script(monkeypatch, seen)
    ctx = ProbeContext(model=type("M", (), {"hf": BASE, "tokenizer": None, "fingerprint": "f"})(), seed=0,
                       cache=Cache(tmp_path) if cached else None, progress=lambda f, m="": said.append((f, m)))
    frame = probes.knowledge_shift(ctx, corpus="facts:x", n_demos=4, n_pool=10, k=K, shots=2, n_train=2, n_mix=2,
                                   conditions=["uk_only", "uk_hk"], epochs=1, batch=2,
                                   max_new=MAX_NEW, eval_batch=BATCH)

    def rows(metric, cond=None):
        f = frame[(frame["metric"] == metric) & ((frame["condition"] == cond) if cond else True)]
        return dict(zip(f["sample"].astype(int), f["value"]))

    assert rows("before_correct") == {i: float(c) for i, c in enumerate(BEFORE)}
    trained = set(rows("reliability", "uk_only"))
    assert len(trained) == 2 and all(BEFORE[i] == 0 for i in trained)          # two Unknown facts
    asked = {e.prompt for e in seen["uk_only"]}
    assert asked == {study.ask(POOL[i]) for i in trained}
    mixed = {i for i, f in enumerate(POOL) if study.ask(f) in {e.prompt for e in seen["uk_hk"]}} - trained
    assert len(mixed) == 2 and all(BEFORE[i] == K for i in mixed)              # two HighlyKnown facts mixed in
    assert len(seen["uk_hk"]) == 4
    held_hk = {0, 2, 4, 6, 8} - mixed                                           # never a fact either condition trains on
    for cond in ("uk_only", "uk_hk"):
        assert rows("reliability", cond) == {i: 1.0 for i in trained}
        assert rows("fitted", cond) == {i: 1.0 for i in trained}
        assert rows("known_after", cond) == {i: 1.0 for i in trained}
        assert rows("negative_shift", cond) == {i: float(i in ERODED[cond]) for i in held_hk}
        assert rows("positive_shift", cond) == {i: 0.0 for i in {1, 3, 5, 7, 9} - trained}  # the rest of the chunk
    erosion = frame[frame["metric"] == "baseline_erosion"]
    assert erosion["value"].tolist() == [pytest.approx(len(ERODED["uk_only"] & held_hk) / len(held_hk))]
    # progress: three stages (the base model, then each condition: training 60%, answering 40%), in order
    assert said == [(pytest.approx(0.5 / 3), "base model, pool chunk 1: base"),
                    (pytest.approx(1.3 / 3), "uk_only: "), (pytest.approx(2 / 3), "uk_only: "),
                    (pytest.approx(2.3 / 3), "uk_hk: "), (pytest.approx(1.0), "uk_hk: ")]

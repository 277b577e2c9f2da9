"""Wiring of the ecm probes: which prompt, which demonstrations and which token budget each cell gets.

The decoder is replaced by a scripted answerer (``greedy`` in the probe module, the one seam the probes call),
so the right frame is known exactly: the answerer counts the demonstration lines it was given and answers
correctly only from a known number of them on.  A probe that gives every count the same prefix, pairs a prompt
with another item's answer, or swaps the two chain-of-thought conditions yields different values here.
"""

from __future__ import annotations

import re

import pytest

from bench.ground import registry, schemas
from bench.ground.context import ProbeContext
from bench.families.ecm import probes as ecm_probes
from bench.families.ecm import tasks as gen

DEMO_LINE = re.compile(r"^.+ -> .+$")


MODEL = object()  # the scripted decoder checks that it is handed the context's model


def _progress(fraction, message=""):
    pass


def _scripted(calls: list, answer_of, rule):
    """A stand-in for ``greedy``: records each call and answers each row with ``rule(prompt, prefix, budget)``."""

    def greedy(model, prompts, prefix, max_new_tokens, batch, progress=None):
        assert model is MODEL and progress is _progress
        budgets = max_new_tokens if isinstance(max_new_tokens, list) else [max_new_tokens] * len(prompts)
        assert len(prefix) == len(prompts) == len(budgets)
        calls.append((list(prompts), list(prefix), budgets, batch))
        return [rule(p, pre, b, answer_of) for p, pre, b in zip(prompts, prefix, budgets)]

    return greedy


def _call(name: str, seed: int, **params):
    info = registry.probe(name)
    ctx = ProbeContext(model=MODEL, seed=seed, progress=_progress)
    return schemas.validate(info.call(ctx, **params), info.schema, info.metrics)


def _demo_count(prefix: str) -> int:
    return sum(bool(DEMO_LINE.match(line)) for line in prefix.splitlines())


@pytest.fixture
def icl_answers():
    """query → answer over every item the tasks can draw (queries are unique within a task)."""
    return {t: {it.query: it.answer for it in gen._pool(t)} for t in ("successor", "uppercase")}


def _icl_rule(prompt, prefix, budget, answer_of):
    """Right answer once the prompt has 2 demonstrations or more (uppercase: 1 or more), a wrong one before; the
    count is echoed."""
    n = _demo_count(prefix)
    task = "uppercase" if prefix.startswith(gen.HEADERS["uppercase"]) else "successor"
    query = prompt.removesuffix(" ->")
    assert prompt.endswith(" ->") and query in answer_of[task], prompt
    said = answer_of[task][query] if n >= (1 if task == "uppercase" else 2) else "wrong"
    return f" {said} [{n}]"


def test_icl_each_count_gets_its_own_number_of_demonstrations(monkeypatch, icl_answers):
    calls: list = []
    monkeypatch.setattr(ecm_probes, "greedy", _scripted(calls, icl_answers, _icl_rule))
    demos = [0, 1, 2, 4]
    frame = _call("icl_demonstrations", 3, tasks=["successor", "uppercase"], n_items=5, demos=demos,
                  max_new_tokens=6, batch=7)
    assert len(calls) == 1 and set(calls[0][2]) == {6} and calls[0][3] == 7
    echoed = frame["output"].str.extract(r"\[(\d+)\]$")[0].astype(int)
    assert echoed.tolist() == frame["n_demos"].astype(int).tolist()  # each row saw exactly its k demonstrations
    assert (frame["condition"] == "k=" + frame["n_demos"].astype(str)).all()
    acc = frame.groupby(["task", "n_demos"])["value"].mean()
    assert [acc[("successor", k)] for k in demos] == [0.0, 0.0, 1.0, 1.0]
    assert [acc[("uppercase", k)] for k in demos] == [0.0, 1.0, 1.0, 1.0]
    # the demonstrations shown are the task's own, never one of its queries, and nested across counts
    prompts, prefixes, _, _ = calls[0]
    for prompt, prefix in zip(prompts, prefixes):
        shown = {line.split(" -> ")[0] for line in prefix.splitlines() if DEMO_LINE.match(line)}
        assert prompt.removesuffix(" ->") not in shown
    # one item id per (task, item), the same under every count, with the item's own answer
    for (task, item), group in frame.groupby(["task", "item"]):
        assert len(group) == len(demos) and group["answer"].nunique() == 1
    assert sorted(set(frame[frame["task"] == "successor"]["item"])) == list(range(5))  # task t: t · n_items + i
    assert sorted(set(frame[frame["task"] == "uppercase"]["item"])) == list(range(5, 10))
    assert frame.attrs["notes"] == ["successor: accuracy 0.00@0, 0.00@1, 1.00@2, 1.00@4",
                                    "uppercase: accuracy 0.00@0, 1.00@1, 1.00@2, 1.00@4"]


@pytest.mark.parametrize("bad", [dict(tasks=[]), dict(n_items=0), dict(demos=[]), dict(demos=[0, -1])])
def test_icl_refuses_empty_or_negative_settings(monkeypatch, icl_answers, bad):
    monkeypatch.setattr(ecm_probes, "greedy", _scripted([], icl_answers, _icl_rule))
    with pytest.raises(ValueError, match="^need at least one task, one item and demonstration counts ≥ 0$"):
        _call("icl_demonstrations", 0, **{"tasks": ["successor"], "n_items": 1, "demos": [0], **bad})


@pytest.mark.parametrize("bad", [dict(n_items=0), dict(n_demos=-1), dict(step_counts=[]), dict(step_counts=[0, 2])])
def test_cot_refuses_empty_or_negative_settings(monkeypatch, problems, bad):
    monkeypatch.setattr(ecm_probes, "greedy", _scripted([], problems, _cot_rule))
    with pytest.raises(ValueError, match="^need n_items ≥ 1, n_demos ≥ 0 and step counts ≥ 1$"):
        _call("cot_multistep", 5, **{"n_items": 1, "n_demos": 0, **bad})


def test_one_item_and_one_demonstration_are_enough(monkeypatch, icl_answers, problems):
    monkeypatch.setattr(ecm_probes, "greedy", _scripted([], icl_answers, _icl_rule))
    assert len(_call("icl_demonstrations", 0, tasks=["successor"], n_items=1, demos=[0])) == 1
    calls: list = []
    monkeypatch.setattr(ecm_probes, "greedy", _scripted(calls, problems, _cot_rule))
    assert len(_call("cot_multistep", 5, n_items=1, n_demos=0, step_counts=[2])) == 2  # no demonstration at all
    assert calls[-1][1] == ["", ""]
    one = _call("cot_multistep", 5, n_items=1, n_demos=1, step_counts=[1])
    assert len(one) == 2 and one["steps"].eq(1).all()  # the step counts asked for, not the default ones
    assert one["task"].eq("word_problems").all()
    worked = calls[-1][1][0]
    assert worked.count(" = ") == 1  # the demonstration has one step too: one equation


def test_icl_prefix_is_a_function_of_the_count_only(monkeypatch, icl_answers):
    calls: list = []
    monkeypatch.setattr(ecm_probes, "greedy", _scripted(calls, icl_answers, _icl_rule))
    _call("icl_demonstrations", 0, tasks=["successor"], n_items=4, demos=[0, 3, 1])
    _, prefixes, _, _ = calls[0]
    counts = [_demo_count(p) for p in prefixes]
    assert counts == [0] * 4 + [3] * 4 + [1] * 4
    by_k = {k: {p for p, c in zip(prefixes, counts) if c == k} for k in (0, 1, 3)}
    assert all(len(v) == 1 for v in by_k.values())
    assert next(iter(by_k[3])).startswith(next(iter(by_k[1])))  # k demonstrations are the first k of one list


@pytest.fixture
def problems():
    return {p.question: p for s in (0, 1) for steps in ((2, 3), (1,))
            for p in gen.word_problems(30, 5, stream=s, steps=steps)}


def _cot_rule(prompt, prefix, budget, answer_of):
    """Right when the demonstrations are worked (they hold equations), off by one after direct answers."""
    question = prompt.removeprefix("Question: ").removesuffix("\nAnswer:")
    p = answer_of[question]
    worked = "=" in prefix
    return f" The answer is {p.answer if worked else p.answer + 1}. <{budget}>"


def test_cot_conditions_get_their_own_demonstrations_and_budgets(monkeypatch, problems):
    calls: list = []
    monkeypatch.setattr(ecm_probes, "greedy", _scripted(calls, problems, _cot_rule))
    frame = _call("cot_multistep", 5, n_items=6, n_demos=3, max_new_tokens_cot=40, max_new_tokens_direct=7,
                  batch=9)
    assert frame.groupby("condition")["value"].mean().to_dict() == {"cot": 1.0, "direct": 0.0}
    budget = frame["output"].str.extract(r"<(\d+)>$")[0].astype(int)
    assert budget[frame["condition"] == "cot"].eq(40).all() and budget[frame["condition"] == "direct"].eq(7).all()
    prompts, prefixes, _, batch = calls[0]
    assert batch == 9
    assert frame.attrs["notes"] == ["cot: accuracy 1.00 on 6 problems", "direct: accuracy 0.00 on 6 problems"]
    items = gen.word_problems(6, 5, stream=1, steps=(2, 3))
    demos = gen.word_problems(3, 5, stream=0, steps=(2, 3))
    assert prompts == [gen.cot_query(p) for p in items] * 2
    assert set(prefixes) == {gen.cot_prefix(demos, True), gen.cot_prefix(demos, False)}
    assert prefixes[0].count("Question:") == 3
    assert not {p.question for p in items} & {d.question for d in demos}  # test items never among demonstrations
    # rows are paired by item: the same item id carries the same problem (steps, answer) under both conditions
    for i, group in frame.groupby("item"):
        assert len(group) == 2 and group["answer"].tolist() == [str(items[i].answer)] * 2
        assert group["steps"].tolist() == [items[i].steps] * 2
    assert frame["n_demos"].eq(3).all()

"""Task generators (deterministic, answers right), answer extraction and scoring, on hand-written cases."""

from __future__ import annotations

import re

import numpy as np
import pytest

from bench.families.ecm import tasks as gen


@pytest.mark.parametrize("text, expected", [
    (" 7 + 5 = 12. 12 - 3 = 9. The answer is 9.", 9),
    (" The answer is 14.", 14),
    (" The answer is: 6", 6),
    (" 4 + 6 = 10. 10 - 6 = 4.", 4),          # no closing sentence: the last number
    (" 3 + 4 = 7. The answer is 7. 7 + 1 = 8", 7),  # the stated answer wins over later numbers
    (" The answer is 5.\nQuestion: Tom has 9", 5),  # only the first line counts
    (" I do not know.", None),
    ("", None),
    (" The answer is -2.", -2),
])
def test_extract_answer_on_hand_written_outputs(text, expected):
    assert gen.extract_answer(text) == expected


def _replay(question: str) -> int:
    """Recompute a problem's answer from its wording alone."""
    value = int(re.search(r"has (\d+)", question).group(1))
    for verb, n in re.findall(r"(buys|finds|gets|is given|gives away|loses|sells|eats) (\d+)", question):
        value += int(n) if verb in ("buys", "finds", "gets", "is given") else -int(n)
    return value


def test_word_problems_are_deterministic_and_correct():
    a = gen.word_problems(30, seed=3, stream=1)
    assert a == gen.word_problems(30, seed=3, stream=1)
    assert a != gen.word_problems(30, seed=4, stream=1) and a != gen.word_problems(30, seed=3, stream=0)
    assert [p.steps for p in a[:4]] == [2, 3, 2, 3]
    for p in a:
        assert _replay(p.question) == p.answer >= 1
        eqs = re.findall(r"(\d+) ([+-]) (\d+) = (\d+)", p.worked)
        assert len(eqs) == p.steps
        for x, op, y, z in eqs:
            assert (int(x) + int(y) if op == "+" else int(x) - int(y)) == int(z)
        assert gen.extract_answer(" " + p.worked) == p.answer == gen.extract_answer(" " + p.direct)


def test_cot_prompts_share_problems_and_differ_in_answers():
    demos = gen.word_problems(2, seed=0, stream=0)
    worked, direct = gen.cot_prefix(demos, True), gen.cot_prefix(demos, False)
    for d in demos:
        assert d.question in worked and d.question in direct
        assert d.worked in worked and d.worked not in direct
    assert gen.cot_query(demos[0]).endswith("\nAnswer:")


@pytest.mark.parametrize("task", ["uppercase", "successor", "plus_ten"])
def test_icl_tasks_are_deterministic_disjoint_and_right(task):
    t = gen.icl_task(task, 20, 8, seed=1)
    assert t == gen.icl_task(task, 20, 8, seed=1) and t != gen.icl_task(task, 20, 8, seed=2)
    assert not {d.query for d in t.demos} & {i.query for i in t.items}
    for it in t.demos + t.items:
        want = {"uppercase": it.query.upper(), "successor": str(int(it.query) + 1) if task == "successor" else None,
                "plus_ten": str(int(it.query) + 10) if task == "plus_ten" else None}[task]
        assert it.answer == want
    assert t.prefix(0) == t.header + "\n"
    assert t.prefix(2) == f"{t.header}\n{t.demos[0].query} -> {t.demos[0].answer}\n" \
                          f"{t.demos[1].query} -> {t.demos[1].answer}\n"


def test_capital_task_and_scoring():
    t = gen.icl_task("capital", 10, 4, seed=0)
    it = next(i for i in t.demos + t.items if i.query == "France") if any(
        i.query == "France" for i in t.demos + t.items) else t.items[0]
    assert gen.icl_correct(it, f" {it.answer}")
    assert gen.icl_correct(it, f" {it.answer.upper()}.")           # case and punctuation ignored for cities
    assert not gen.icl_correct(it, " Atlantis")
    up = gen.Item("uppercase", "house", "HOUSE", ("HOUSE",))
    assert gen.icl_correct(up, " HOUSE") and gen.icl_correct(up, " HOUSE.")
    assert not gen.icl_correct(up, " House") and not gen.icl_correct(up, " HOUSES") and not gen.icl_correct(up, "")
    num = gen.Item("successor", "41", "42", ("42",))
    assert gen.icl_correct(num, " 42") and not gen.icl_correct(num, " 420") and not gen.icl_correct(num, " 41")


def test_too_many_items_is_a_clear_error():
    with pytest.raises(ValueError, match="has .* items"):
        gen.icl_task("successor", 200, 8, seed=0)
    assert np.all(np.diff([int(i.query) for i in gen.icl_task("successor", 5, 0, 0).items]) != 0)

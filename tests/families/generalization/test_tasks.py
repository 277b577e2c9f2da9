"""GeneralPoints verifier and generator, on hands whose solutions are listed by hand."""

from __future__ import annotations

from fractions import Fraction

import pytest

from bench.families.generalization import tasks

# A, 2, 3, 4 (no face card): every listed expression reaches 24 using each card once
SOLUTIONS_1234 = ["1*2*3*4", "(1+2+3)*4", "4*(1+2+3)", "(1+3)*(2+4)", "2*3*4*1", "(2*4)*(1*3)", "4*3*2/1",
                  "(4+2)*(3+1)", "(1+3)*(4+2)", "1*2*3*4 = 24", " 1 * 2 * 3 * 4."]


def test_accepts_every_listed_solution():
    for expr in SOLUTIONS_1234:
        assert tasks.score(expr, (1, 2, 3, 4), 24), expr


def test_face_rule_decides_the_values():
    ranks = (13, 2, 1, 1)  # K 2 A A
    id_vals, ood_vals = tasks.card_values(ranks, "id"), tasks.card_values(ranks, "ood")
    assert id_vals == (10, 2, 1, 1) and ood_vals == (13, 2, 1, 1)
    for expr in ("(10+1+1)*2", "2*(10+1+1)", "(10+2)*(1+1)"):
        assert tasks.score(expr, id_vals, 24)
        assert not tasks.score(expr, ood_vals, 24)  # the in-distribution rule under the OOD rule: wrong
    for expr in ("13*2-1-1", "13*2-(1+1)", "(13-1)*2*1"):
        assert tasks.score(expr, ood_vals, 24)
        assert not tasks.score(expr, id_vals, 24)  # K counted 13 where the rule says 10: wrong


@pytest.mark.parametrize("expr", [
    "1*2*3*4*1",        # a card used twice
    "2*3*4",            # a card left out
    "4*6",              # numbers that are not the cards
    "1*2*3*4 = 25",     # names the wrong target
    "(1+2+3)*4+0",      # an extra number
    "10/(1-1)*2",       # division by zero (not the cards either, but must not raise)
    "(1+2+3)*4)",       # unbalanced
    "1*2*3*4 = 24 = 24",
    "__import__('os')",  # not arithmetic: rejected by the parser, never evaluated
    "", "24",
])
def test_rejects_near_misses(expr):
    assert not tasks.score(expr, (1, 2, 3, 4), 24)


def test_division_by_zero_with_exactly_the_cards_is_rejected():
    assert not tasks.score("10/(1-1)*2", (10, 2, 1, 1), 24)
    with pytest.raises(ZeroDivisionError):
        tasks.evaluate("10/(1-1)*2")


def test_exact_rational_arithmetic():
    assert tasks.score("8/(3-8/3)", (3, 3, 8, 8), 24)  # 23.999999999999996 in floats
    assert tasks.score("5*(5-1/5)", (1, 5, 5, 5), 24)
    assert tasks.evaluate("2*(3+4)-1") == (Fraction(13), (2, 3, 4, 1))
    with pytest.raises(tasks.ParseError):
        tasks.evaluate("2**3")


def test_solver_finds_known_solutions_and_rejects_impossible_hands():
    assert Fraction(24) in tasks.reachable((3, 3, 8, 8))
    assert tasks.score(tasks.reachable((3, 3, 8, 8))[Fraction(24)], (3, 3, 8, 8), 24)
    assert Fraction(24) not in tasks.reachable((1, 1, 1, 1))
    assert set(tasks.reachable((2, 5), "+-*")) == {Fraction(v) for v in (7, 3, -3, 10)}


def test_generator_is_deterministic_and_its_items_verify():
    cfg = tasks.TaskConfig(n_cards=4, target=24)
    a = tasks.generate(cfg, "ood", 12, seed=3, need_face=True)
    assert a == tasks.generate(cfg, "ood", 12, seed=3, need_face=True)
    assert a != tasks.generate(cfg, "ood", 12, seed=4, need_face=True)
    for it in a:
        assert any(r > 10 for r in it.ranks) and it.target == 24
        assert tasks.score(it.solution, it.values, 24)
    small = tasks.TaskConfig(n_cards=2, target=None, ops="+")
    for it in tasks.generate(small, "id", 20, seed=0):
        assert it.target == sum(it.values) and tasks.score(it.solution, it.values, it.target)


def test_prompt_states_the_rule_and_demos_follow_it():
    cfg = tasks.TaskConfig(n_cards=2, target=None, ops="+")
    item = tasks.generate(cfg, "ood", 1, seed=0, need_face=True)[0]
    demos = tasks.demo_items(cfg, "ood", 3, seed=0, faces=True)
    text = tasks.prompt(item, demos)
    assert tasks.RULE_TEXT["ood"] in text and tasks.RULE_TEXT["id"] not in text
    assert text.endswith("Answer:") and all(any(r > 10 for r in d.ranks) for d in demos)
    assert all(not any(r > 10 for r in d.ranks) for d in tasks.demo_items(cfg, "id", 3, seed=0))

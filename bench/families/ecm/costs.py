"""Cost models of the ecm probes (:mod:`bench.ground.costs`): the same prompts the probes build, decoded as
:func:`bench.models.decoding.greedy` decodes them, each answer counted at its full token budget."""

from __future__ import annotations

from bench.ground.costs import Cost, Planned, cost_def
from bench.families.ecm import tasks as gen
from bench.models import costs as decoding_cost

WORST = "each answer counted at its whole token budget (a newline or end-of-sequence ends it sooner)"


@cost_def("icl_demonstrations")
def icl_cost(m: Planned, *, tasks: list[str], n_items: int, demos: list[int], max_new_tokens: int,
             batch: int) -> Cost:
    specs = [gen.icl_task(name, n_items, max(demos), m.seed) for name in tasks]
    cells = [(task, k, it) for task in specs for k in demos for it in task.items]
    w = decoding_cost.greedy(m.tokenizer, [f"{it.query} ->" for *_, it in cells],
                             prefix=[task.prefix(k) for task, k, _ in cells], max_new_tokens=max_new_tokens,
                             batch=batch)
    return Cost(((None, w),), units=n_items * len(tasks), unit="items", notes=(WORST,))


@cost_def("cot_multistep")
def cot_cost(m: Planned, *, n_items: int, n_demos: int, step_counts: list[int], max_new_tokens_cot: int,
             max_new_tokens_direct: int, batch: int) -> Cost:
    demos = gen.word_problems(n_demos, m.seed, stream=0, steps=tuple(step_counts))
    items = gen.word_problems(n_items, m.seed, stream=1, steps=tuple(step_counts))
    conds = (("cot", True, max_new_tokens_cot), ("direct", False, max_new_tokens_direct))
    cells = [(c, worked, budget, p) for c, worked, budget in conds for p in items]
    prefixes = {c: gen.cot_prefix(demos, worked) for c, worked, _ in conds}
    w = decoding_cost.greedy(m.tokenizer, [gen.cot_query(p) for *_, p in cells],
                             prefix=[prefixes[c] for c, *_ in cells], max_new_tokens=[b for _, _, b, _ in cells],
                             batch=batch)
    return Cost(((None, w),), units=n_items, unit="problems", notes=(WORST,))

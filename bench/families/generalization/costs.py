"""Cost model of ``sft_vs_rl`` (:mod:`bench.ground.costs`), stage by stage as :class:`.probes._Run` computes
them: held-out evaluation (both splits decoded greedily), the SFT-initialised checkpoint, and per arm and seed
the training run, its checkpoint evaluations and the final one (a checkpoint trained on the task's format
answers at the length of its solution in that format; the base model and its RL arm, which rarely follow the
format, at the whole budget).  An RL step samples `group` answers per prompt
(each counted at the whole budget: sampling keeps finished rows in the batch, which runs until its last answer
ends, and when that is the plan cannot know) and runs forward and backward passes
over prompts and answers, `micro_batch` answers at a time; an SFT step one forward and backward pass over
prompts and targets.  RL from the base model also has a floor (:attr:`bench.ground.costs.Cost.floors`): the
shaped reward scores an empty answer above an illegal one, so a model that cannot follow the format may learn
to end at once, after which its batches sample one token and its updates are skipped."""

from __future__ import annotations

from dataclasses import asdict

from bench.ground.costs import Cost, Planned, Work, cost_def
from bench.families.generalization import tasks
from bench.families.generalization.train_loop import TrainConfig, config, flops_of, step_tokens, steps_for_flops
from bench.models import costs as mc
from bench.models import train as engine


def _decode_rl(tok, prompts: list[str], cfg: TrainConfig, micro_batch: int, collapsed: bool = False) -> Work:
    """One RL step: sampling `group` answers per prompt in one batch, then the policy-gradient pass over
    `micro_batch` answers at a time (each part runs the shared prefix again).  `collapsed`: the step of a run
    whose every answer is the end token at once — one token sampled, every group scored alike, no update."""
    expanded = [p for p in prompts for _ in range(cfg.sampling.group)]
    rows = [tok(p)["input_ids"] for p in expanded]
    from bench.models import decoding

    P = decoding.shared_length(rows)
    S = max(len(r) for r in rows) - P
    n = len(expanded)
    C = 1 if collapsed else cfg.sampling.max_new_tokens
    sample = Work(forward=P + n * S, head=1 + n, generated=n * (C - 1), calls=1 + C, decoded_calls=C - 1,
                  context=P + S + C, batch_tokens=n * S, logit_rows=n, kv_tokens=n * (P + S + C))
    if collapsed:
        return sample
    size = max(1, min(micro_batch, n))
    parts = -(-n // size)
    update = Work(backward=parts * P + n * (S + C), backward_head=n * (C + 1) + (parts if P else 0),
                  calls=parts * (2 if P else 1), steps=1, grad_tokens=P + size * (S + C), logit_rows=size * (C + 1))
    return sample + update


@cost_def("sft_vs_rl")
def sft_vs_rl_cost(m: Planned, *, arms: list[str], n_cards: int, target: int, ops: str, max_target: int,
                   show_target: bool, demos: int, demo_faces: bool, n_init: int, init_steps: int, init_faces: bool,
                   n_train: int, n_eval: int, steps: int, batch: int, group: int, sft_batch: int, lr: float,
                   adapter: str, lora_rank: int, max_new_tokens: int, temperature: float, micro_batch: int,
                   reward: str, seeds: int, curve_points: int) -> Cost:
    tok, seed = m.tokenizer, m.seed
    task = tasks.TaskConfig(n_cards, target or None, ops, max_target, show_target=show_target)
    train_items = tasks.generate(task, "id", n_train, seed, stream=1)
    init_task = tasks.TaskConfig(**{**asdict(task), "face_share": 0.5 if init_faces else 0.0})
    init_items = tasks.generate(init_task, "id", n_init, seed, stream=4)
    eval_items = {"id": tasks.generate(task, "id", n_eval, seed, stream=2, need_face=True),
                  "ood": tasks.generate(task, "ood", n_eval, seed, stream=3, need_face=True)}
    demo = {r: tasks.demo_items(task, r, demos, seed, faces=demo_faces) for r in ("id", "ood")}

    def prompts(items):
        return [tasks.prompt(it, demo[it.rule]) for it in items]

    def targets(items):
        return [f" {it.solution}\n" for it in items]

    common = dict(batch=batch, group=group, lr=lr, adapter=adapter, lora_rank=lora_rank, lora_alpha=2 * lora_rank,
                  max_new_tokens=max_new_tokens, temperature=temperature, seed=seed)
    trainable = m.shape.n_params if adapter == "full" else mc.lora_params(m.shape, "all", lora_rank)
    extra = Work(trainable=trainable, full_copy=adapter == "full")

    def evaluation(formatted: bool, collapsed: bool = False) -> Work:
        """Both held-out splits decoded greedily: every answer at its whole budget, or (`formatted`: a checkpoint
        trained on the task's format, which writes " <solution>" and the newline that stops it) at that length,
        or (`collapsed`: a checkpoint that answers with the end token at once) one token."""
        def budgets(items):
            if collapsed:
                return 1
            if not formatted:
                return max_new_tokens
            return [min(max_new_tokens, len(tok(t, add_special_tokens=False)["input_ids"])) for t in targets(items)]

        return sum((mc.decode(tok, prompts(items), budgets(items), micro_batch=micro_batch, window=m.shape.window)
                    for items in eval_items.values()), Work())

    untrained, evaluate = evaluation(False), evaluation(True)

    def fit(cfg: TrainConfig, items, collapsed: bool = False) -> Work:
        ps, ts = prompts(items), targets(items)
        if cfg.method == "sft":  # the engine's fit on (prompt, verified solution) examples
            examples = [engine.Example(p, t) for p, t in zip(ps, ts)]
            return extra + mc.fit(tok, examples, cfg.recipe, trainable, window=m.shape.window)
        w = extra
        for k, idx in enumerate(engine.batch_order(len(ps), cfg.recipe)):  # the first step samples the start
            w = w + _decode_rl(tok, [ps[i] for i in idx], cfg, micro_batch, collapsed and k > 0)
        return w

    init_cfg = config("sft", steps=init_steps, **{**common, "batch": sft_batch})
    rl_cfg = config("rl", steps=steps, **common)
    parts, floors = [], {}
    if "base_rl" in arms:
        parts.append(("sft_vs_rl|base", untrained))
    init = fit(init_cfg, init_items) + evaluate
    if {"sft", "rl"} & set(arms):
        parts.append(("sft_vs_rl|initial", init))
    for s in range(seeds):
        order = tasks.training_order(train_items, seed, s)
        for arm in ("sft", "rl", "base_rl"):
            if arm not in arms:
                continue
            if arm == "sft":
                budget = sum(flops_of(m.shape.n_params, rl_cfg, *t) for t in step_tokens(tok, rl_cfg, prompts(order)))
                probe = config("sft", steps=1, **{**common, "batch": sft_batch})
                n = steps_for_flops(tok, m.shape.n_params, probe, prompts(order), targets(order), budget)
                cfg = config("sft", steps=n, **{**common, "batch": sft_batch})
            else:
                cfg = rl_cfg
            every = cfg.steps // (curve_points + 1)
            checks = len([k for k in range(1, cfg.steps) if every and k % every == 0])
            w = fit(cfg, order) + (untrained if arm == "base_rl" else evaluate).times(1 + checks)
            parts.append((f"sft_vs_rl|{arm}|{s}", w))
            if arm == "base_rl":  # its floor: every answer the end token from the first update on
                floors[f"sft_vs_rl|{arm}|{s}"] = fit(cfg, order, True) + evaluation(False, True).times(1 + checks)
    return Cost(tuple(parts), units=seeds * n_eval, unit="seeds × held-out hands", floors=floors,
                notes=("sampled answers counted at their whole token budget; greedy held-out answers of a checkpoint "
                       "trained on the task's format at the length of their solution in it, of the base model and "
                       "its RL arm (which rarely follow it) at the whole budget",
                       "every RL step counted with its update's passes, which are skipped when every group scores "
                       "alike (as an untrained model's malformed answers do)",
                       "RL from the base model between two bounds: its most, every step at the budget with its "
                       "update; its least, every answer the end token from its first update on (the shaped reward "
                       "scores an empty answer above an illegal one, and a base model that cannot follow the "
                       "format learns it): batches of one token, no more updates, one-token evaluations; "
                       "predicted at the geometric middle"))

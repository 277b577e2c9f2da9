"""Cost of one RL step of the generalization family, measured in one run.

    python benchmarks/rl_step.py [--model smollm2-135m] [--steps 3] [--batch 2] [--group 4] [--threads 2]

On the smoke task (two cards summed, the target hidden, no demonstrations, the shaped reward), with LoRA as
the specs use it, prints:
* seconds per RL step and the share of it spent sampling completions vs in the policy update;
* seconds per SFT step on the same prompts, RL ÷ SFT step time, and the SFT steps (of 4 hands, as the smoke
  profile's sft_batch) that reach one RL step's estimated FLOPs — the equal-compute exchange rate;
* greedy decoding of the same prompts with the KV cache vs recomputing the whole prefix every token;
* the shared prompt prefix (task statement and demonstrations run once, their cache copied along the batch) vs
  whole prompts, for greedy decoding of an evaluation batch and for one training pass with gradients.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _no_cache_decode(model, tok, prompts, max_new_tokens):
    """Greedy decoding that re-runs the growing sequence every token (the baseline for the KV cache)."""
    import torch

    from bench.models import decoding

    ids, mask = decoding.encode_prompts(tok, prompts, "cpu")
    with torch.no_grad():
        for _ in range(max_new_tokens):
            res = model(input_ids=ids, attention_mask=mask, position_ids=(mask.cumsum(-1) - 1).clamp(min=0),
                        use_cache=False, logits_to_keep=1)
            nxt = res.logits[:, -1].argmax(-1, keepdim=True)
            ids, mask = torch.cat([ids, nxt], 1), torch.cat([mask, torch.ones_like(nxt)], 1)
    return ids


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--group", type=int, default=4)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    import torch

    from bench import models
    from bench.families.generalization import tasks, train_loop
    from bench.models import decoding
    from bench.families.generalization.train_loop import TrainConfig

    torch.set_num_threads(args.threads)
    m = models.load(models.resolve(args.model), "cpu")
    task = tasks.TaskConfig(n_cards=2, target=None, ops="+", show_target=False)
    items = tasks.generate(task, "id", args.batch * args.steps, seed=0)
    demos = ()
    prompts = [tasks.prompt(it, demos) for it in items]
    reward = lambda i, text: tasks.shaped_reward(text, items[i])
    rl = TrainConfig(method="rl", steps=args.steps, batch=args.batch, group=args.group, lr=3e-4, max_new_tokens=10)
    sft = TrainConfig(method="sft", steps=args.steps, batch=args.batch, lr=3e-4, max_new_tokens=10)
    n_params = sum(p.numel() for p in m.hf.parameters())
    targets_all = [f" {it.solution}\n" for it in items]
    rl_flops = sum(train_loop.flops_of(n_params, rl, *t) for t in train_loop.step_tokens(m.tokenizer, rl, prompts))
    sft4 = TrainConfig(method="sft", steps=1, batch=4, lr=3e-4, max_new_tokens=10)
    sft_per_rl = train_loop.steps_for_flops(m.tokenizer, n_params, sft4, prompts, targets_all, rl_flops) / args.steps
    with train_loop.adapted(m.hf, m.arch, rl) as model:
        t = time.perf_counter()
        curve = train_loop.train(model, m.tokenizer, rl, prompts, reward=reward, generator=torch.Generator())
        rl_s = (time.perf_counter() - t) / args.steps
    with train_loop.adapted(m.hf, m.arch, sft) as model:
        t = time.perf_counter()
        train_loop.train(model, m.tokenizer, sft, prompts, targets=[f" {it.solution}\n" for it in items],
                         generator=torch.Generator())
        sft_s = (time.perf_counter() - t) / args.steps
    expanded = [p for p in prompts[: args.batch] for _ in range(args.group)]
    t = time.perf_counter()
    decoding.decode(m.hf, m.tokenizer, expanded, 8, micro_batch=len(expanded))
    cached = time.perf_counter() - t
    t = time.perf_counter()
    _no_cache_decode(m.hf, m.tokenizer, expanded, 8)
    uncached = time.perf_counter() - t
    evals = [tasks.prompt(it, demos) for it in tasks.generate(task, "id", 20, seed=1)]
    targets = [f" {items[i // args.group].solution}\n" for i in range(len(expanded))]
    c_ids, c_mask = decoding.encode_completions(m.tokenizer, targets, "cpu")
    dec_s: dict[bool, list[float]] = {True: [], False: []}
    pass_s: dict[bool, list[float]] = {True: [], False: []}
    with train_loop.adapted(m.hf, m.arch, sft) as model:
        for _ in range(3):  # alternating, medians: the machine's speed drifts
            for share in (True, False):
                t = time.perf_counter()
                decoding.decode(model, m.tokenizer, evals, 8, micro_batch=len(evals), share=share)
                dec_s[share].append(time.perf_counter() - t)
                enc = decoding.encode(m.tokenizer, expanded, "cpu", share=share)
                t = time.perf_counter()
                (-decoding.token_logprobs(model, enc, c_ids, c_mask).sum()).backward()
                pass_s[share].append(time.perf_counter() - t)
    dec_shared, dec_whole = statistics.median(dec_s[True]), statistics.median(dec_s[False])
    pass_shared, pass_whole = statistics.median(pass_s[True]), statistics.median(pass_s[False])
    gen, upd = curve.gen_seconds, curve.update_seconds
    print(f"model {args.model}, {args.threads} threads, {args.batch} prompts × {args.group} samples, "
          f"{args.steps} steps")
    print(f"RL step: {rl_s:.2f} s; sampling {gen / (gen + upd):.0%}, update {upd / (gen + upd):.0%}")
    print(f"SFT step: {sft_s:.2f} s; RL ÷ SFT step time = {rl_s / sft_s:.2f}×; equal FLOPs: {sft_per_rl:.2f} SFT steps "
          f"of 4 hands per RL step")
    print(f"greedy decoding, 8 tokens × {len(expanded)} prompts: KV cache {cached:.2f} s, without {uncached:.2f} s "
          f"(speed-up {uncached / cached:.2f}×)")
    print(f"shared prefix vs whole prompts: greedy decoding of {len(evals)} prompts {dec_shared:.2f} s vs "
          f"{dec_whole:.2f} s ({dec_whole / dec_shared:.2f}×); forward + backward of {len(expanded)} sequences "
          f"{pass_shared:.2f} s vs {pass_whole:.2f} s ({pass_whole / pass_shared:.2f}×)")


if __name__ == "__main__":
    main()

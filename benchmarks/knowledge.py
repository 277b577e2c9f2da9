"""Knowledge family speed ratios, measured in one run on each model named (default: the embedded ones).

    python benchmarks/knowledge.py [MODEL …] [--facts N] [--steps N]

1. training step time, LoRA (r = 1, FFN) vs full fine-tuning;
2. categorisation throughput with the shared-prefix KV cache vs whole prompts (target ≥ 3×);
3. answer-only loss: the LM head on answer positions only vs on every position, loss + backward, under LoRA
   (frozen base) and under full fine-tuning (target ≥ 2× on Gemma);
4. what the paper's whole-example loss (``Recipe.loss = "example"``) costs per LoRA step against answer-only.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from bench import models
from bench.corpora.facts import load_facts
from bench.families.knowledge import categorise as C
from bench.models import train


def _time(fn, repeat: int = 1) -> float:
    fn()  # warm-up
    t = time.perf_counter()
    for _ in range(repeat):
        fn()
    return (time.perf_counter() - t) / repeat


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("models", nargs="*", default=["smollm2-135m", "gemma3-270m"])
    ap.add_argument("--facts", type=int, default=32)
    ap.add_argument("--steps", type=int, default=3)
    args = ap.parse_args()
    facts = load_facts("country-capital")
    demos, pool = facts[:16], facts[16:16 + args.facts]
    prompts = C.Prompts.draw(demos, 2, 4, np.random.default_rng(0))
    for name in args.models:
        m = models.load(models.resolve(name))
        lm, tok = m.hf, m.tokenizer
        exs = [train.Example(prompts.prefixes["capital"][0] + C.ask(f), f" {f.answer}\n") for f in pool[:8]]
        rec = train.Recipe(steps=args.steps, batch=8)

        def lora_steps():
            with train.recipe_adapters(lm, rec) as wrapper:
                train.fit(wrapper.get_base_model(), tok, exs, rec)

        def full_steps():
            train.fit(train.full_copy(lm), tok, exs, train.Recipe(method="full", steps=args.steps, batch=8, lr=1e-5))

        t_lora, t_full = _time(lora_steps), _time(full_steps)
        t_cached = _time(lambda: C.count_correct(lm, tok, pool, prompts, max_new=8))
        t_plain = _time(lambda: C.count_correct(lm, tok, pool, prompts, max_new=8, answer=C.answer_plain))
        ids, att, tgt = train.collate(train.encode(tok, exs), tok.pad_token_id or 0, m.device)
        _, _, every = train.collate([(r, 1) for r, _ in train.encode(tok, exs)], tok.pad_token_id or 0, m.device)

        def loss_step(model, only: bool):
            model.zero_grad(set_to_none=True)
            train.answer_loss(model, ids, att, tgt, only).backward()

        # full fine-tuning: every weight (the tied head too) takes a gradient
        t_sel = _time(lambda: loss_step(lm, True), 2)
        t_all = _time(lambda: loss_step(lm, False), 2)
        lm.zero_grad(set_to_none=True)
        # LoRA: frozen base, the gradient flows to the FFN adapters only
        with train.recipe_adapters(lm, rec) as wrapper:
            base = wrapper.get_base_model()
            t_sel_lora = _time(lambda: loss_step(base, True), 2)
            t_all_lora = _time(lambda: loss_step(base, False), 2)
            t_whole = _time(lambda: (base.zero_grad(set_to_none=True),
                                     train.answer_loss(base, ids, att, every, True).backward()), 2)
        print(f"{name}: full FT / LoRA step time {t_full / t_lora:.2f}× "
              f"({t_full / args.steps:.2f} s vs {t_lora / args.steps:.2f} s per step of 8); "
              f"categorisation cached prefix {t_plain / t_cached:.2f}× faster ({t_cached:.1f} s vs {t_plain:.1f} s, "
              f"{len(pool)} facts × {prompts.k} prompts); "
              f"answer-position head, loss + backward {t_all_lora / t_sel_lora:.2f}× faster under LoRA "
              f"({t_sel_lora:.2f} s vs {t_all_lora:.2f} s), {t_all / t_sel:.2f}× under full fine-tuning "
              f"({t_sel:.2f} s vs {t_all:.2f} s; {int(att.sum())} tokens, {int(tgt.sum())} answer tokens); "
              f"whole-example loss step {t_whole / t_sel_lora:.2f}× the answer-only one under LoRA "
              f"({t_whole:.2f} s vs {t_sel_lora:.2f} s)",
              flush=True)


if __name__ == "__main__":
    torch.manual_seed(0)
    main()

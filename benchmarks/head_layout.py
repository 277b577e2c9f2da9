"""What the contiguous output head and the shared prompt prefix in fine-tuning save, measured in one run.

    python benchmarks/head_layout.py [--model gemma3-270m] [--threads 1] [--rows 8 20 128] [--repeat 3]

Prints, for a loaded model (weights read):
* its output head on the last position of `rows` sequences, as transformers hands it with ``logits_to_keep = 1``
  (a strided slice) and made contiguous (what :func:`bench.models.logits.contiguous_head` does), and the ratio,
  with the head's weight frozen (as LoRA leaves it: torch then runs a strided 3-D input as one product per row)
  and with it requiring grad (torch folds the input into one product either way);
* one supervised fine-tuning step (forward and backward, LoRA on every projection) of the generalization
  family's smoke prompts, whole rows against the batch's common prompt prefix run once, and the ratio.
Each timing is the best of `repeat`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="gemma3-270m")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rows", type=int, nargs="+", default=[8, 20, 128])
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()

    import torch

    from bench import models
    from bench.families.generalization import tasks
    from bench.families.generalization.train_loop import adapted, config
    from bench.models import decoding, train
    from bench.spine.calibrate import best_time

    torch.set_num_threads(args.threads)
    m = models.load(models.resolve(args.model))
    head = m.hf.get_output_embeddings()
    d = head.weight.shape[1]
    print(f"{args.model}, {args.threads} thread(s), head {tuple(head.weight.shape)}")
    weights = {"frozen (as under LoRA)": head.weight.detach(), "requiring grad": head.weight.detach().requires_grad_()}
    with torch.no_grad():
        for what, w in weights.items():
            for rows in args.rows:
                states = torch.randn(rows, 24, d)
                sliced = best_time(lambda: torch.nn.functional.linear(states[:, -1:, :], w), args.repeat, warmup=True)
                whole = best_time(lambda: torch.nn.functional.linear(states[:, -1:, :].contiguous(), w), args.repeat,
                                  warmup=True)
                print(f"head weight {what:22s} {rows:4d} rows: strided slice {sliced * 1e3:8.1f} ms   contiguous "
                      f"{whole * 1e3:8.1f} ms   ratio {sliced / whole:5.2f}")

    task = tasks.TaskConfig(2, None, "+", 100, show_target=False)
    items = tasks.generate(task, "id", 4, 0, stream=1)
    examples = [train.Example(tasks.prompt(it, []), f" {it.solution}\n") for it in items]
    rows = train.encode(m.tokenizer, examples)
    ids, att, tgt = train.collate(rows, decoding.pad_id(m.tokenizer), m.device)
    share = train.prefix_sharing(m.hf)(rows)
    with adapted(m.hf, config("sft", lora_rank=8)) as model:
        def step(n):
            model.zero_grad(set_to_none=True)
            train.answer_loss(model, ids, att, tgt, True, n).backward()

        full = best_time(lambda: step(0), args.repeat, warmup=True)
        shared = best_time(lambda: step(share), args.repeat, warmup=True)
    print(f"SFT step, {len(rows)} rows of up to {ids.shape[1]} tokens, {share} shared: whole rows {full:.3f} s   "
          f"prefix once {shared:.3f} s   ratio {full / shared:5.2f}")


if __name__ == "__main__":
    main()

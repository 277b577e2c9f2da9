"""What a saved training state costs at the full profile's sizes: its bytes, the seconds to save and to restore
it, and the share of a training hour the timed saves take at the default interval.

    python benchmarks/resume_cost.py [--model smollm2-135m] [--repeat 3]

Two states of the full profile, on the model given (its config, with random weights: only shapes matter here):
the generalization arms' (LoRA of rank 16 on every attention and FFN projection, AdamW moments after one
step, the sampling generator) and the microscope decoder's (the model's copy with LoRA of rank 16 on every
projection of every block, and the encoder: pooling weights and an MLP of the model's width).  Each is saved and
restored `--repeat` times through ``bench.ground.resume``; the best times are printed, with the save's share of
the default 600 s interval (a save waits at least 20 times its own duration, so it is never above 5%).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import models  # noqa: E402
from bench.ground import resume as rs  # noqa: E402
from bench.models import train as engine  # noqa: E402


def _state(hf, extra: list[torch.nn.Parameter]) -> tuple[list, torch.optim.Optimizer]:
    params = [(n, p) for n, p in hf.named_parameters() if p.requires_grad] + [(f"x{i}", p) for i, p in enumerate(extra)]
    opt = torch.optim.AdamW([p for _, p in params])
    for _, p in params:
        p.grad = torch.zeros_like(p)
    opt.step()  # the moments exist after a step
    return params, opt


def _time(params, opt, repeat: int) -> tuple[int, float, float]:
    gen = torch.Generator().manual_seed(0)
    best_save = best_load = float("inf")
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "s.pt"
        for _ in range(repeat):
            r = rs.Resume(path, every_s=0)
            t = time.perf_counter()
            r.save(rs.snapshot(params, opt, generators=[gen], step=1, values=[0.0] * 200))
            best_save = min(best_save, time.perf_counter() - t)
            t = time.perf_counter()
            assert rs.restore(rs.Resume(path, every_s=0), params, opt, generators=[gen]) is not None
            best_load = min(best_load, time.perf_counter() - t)
        size = path.stat().st_size
    return size, best_save, best_load


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    torch.set_num_threads(1)
    m = models.load(models.resolve(args.model + "+random-init"), torch.device("cpu"))
    hf, d = m.hf, m.arch.d_model
    for p in hf.parameters():
        p.requires_grad_(False)
    print(f"{args.model} (shapes only: random weights), one thread; default interval {rs.DEFAULT_EVERY_S:.0f} s")
    print(f"{'state':<40} {'trained':>12} {'bytes':>10} {'save s':>8} {'restore s':>10} {'share of 600 s':>15}")
    arms = engine.Recipe(method="lora", r=16, alpha=32, rslora=False, dropout=0.0, targets="all")
    with engine.recipe_adapters(hf, arms) as wrapper:
        params, opt = _state(wrapper.get_base_model(), [])
        rows = [("generalization arm (LoRA r 16, all)", params, opt)]
        size, save, load = _time(params, opt, args.repeat)
        n = sum(p.numel() for _, p in params)
        print(f"{rows[0][0]:<40} {n:>12,} {size / 2**20:>8.1f}Mi {save:>8.3f} {load:>10.3f} {save / 600:>14.3%}")
        encoder = [torch.nn.Parameter(torch.zeros(m.arch.n_layers + 1)), torch.nn.Parameter(torch.zeros(d, d)),
                   torch.nn.Parameter(torch.zeros(d)), torch.nn.Parameter(torch.zeros(d, d)),
                   torch.nn.Parameter(torch.zeros(d))]
        params, opt = _state(wrapper.get_base_model(), encoder)
        size, save, load = _time(params, opt, args.repeat)
        n = sum(p.numel() for _, p in params)
        label = "microscope decoder (LoRA r 16 + encoder)"
        print(f"{label:<40} {n:>12,} {size / 2**20:>8.1f}Mi {save:>8.3f} {load:>10.3f} {save / 600:>14.3%}")


if __name__ == "__main__":
    main()

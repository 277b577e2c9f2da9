"""Benchmark of the streamed layer-linearity computation (the `nonlinearity` probe's linear algebra).

Prints two ratios measured in this run:

* peak memory (resident set) of the streamed computation at 4N tokens ÷ at N tokens — target ≤ 1.2: the
  Gram sums do not grow with the number of tokens;
* wall time of a stack-everything-then-SVD implementation of the same formula ÷ the streamed one, at the
  largest N of the run — target ≥ 1 (streaming costs no speed).

States are synthetic but shaped like the embedded SmolLM2 (30 blocks, d = 576) and come in micro-batches as
they would from a model: each layer is a fixed random residual update with a pointwise non-linearity.  Each
memory measurement runs in a fresh process.  Usage: python benchmarks/nonlinearity_memory.py [--n 1500]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.families.microscope.linearity import GramStats, solve, stacked_reference, token_errors  # noqa: E402

BATCH = 256


def batches(n: int, layers: int, d: int, seed: int = 0):
    """Yield (L+1, b, d) float32 state batches, generated on the fly."""
    g = torch.Generator().manual_seed(seed)
    weights = [torch.randn(d, d, generator=g) / d**0.5 for _ in range(layers)]
    done = 0
    while done < n:
        b = min(BATCH, n - done)
        h = [torch.randn(b, d, generator=g) + 2.0]
        for W in weights:
            h.append(h[-1] + 0.5 * torch.nn.functional.gelu(h[-1] @ W))
        yield torch.stack(h)
        done += b


def streamed(n: int, layers: int, d: int) -> float:
    """The probe's path: pass 1 accumulates, solve, pass 2 computes per-token errors (discarded here)."""
    t = time.perf_counter()
    stats = GramStats.empty(layers, d)
    for h in batches(n, layers, d):
        stats.update(h)
    maps = solve(stats)
    total = 0.0
    for h in batches(n, layers, d):
        total += float(token_errors(maps, h).sum())
    return time.perf_counter() - t


def child(n: int, layers: int, d: int) -> None:
    seconds = streamed(n, layers, d)
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"n": n, "seconds": seconds, "peak_mb": peak_kb / 1024}))


def measure_in_child(n: int, layers: int, d: int) -> dict:
    out = subprocess.run([sys.executable, __file__, "--child", str(n), "--layers", str(layers), "--d", str(d)],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def speed(n: int, layers: int, d: int) -> tuple[float, float]:
    """(streamed seconds, stacked-SVD seconds) on the same pre-generated batches."""
    data = list(batches(n, layers, d))
    t = time.perf_counter()
    stats = GramStats.empty(layers, d)
    for h in data:
        stats.update(h)
    maps = solve(stats)
    for h in data:
        token_errors(maps, h)
    t_stream = time.perf_counter() - t
    t = time.perf_counter()
    stacked_reference(torch.cat(data, dim=1))
    t_stack = time.perf_counter() - t
    return t_stream, t_stack


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1500, help="N tokens (the run also measures 4N)")
    ap.add_argument("--layers", type=int, default=30)
    ap.add_argument("--d", type=int, default=576)
    ap.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child is not None:
        child(args.child, args.layers, args.d)
        return
    torch.set_num_threads(torch.get_num_threads())
    small = measure_in_child(args.n, args.layers, args.d)
    large = measure_in_child(4 * args.n, args.layers, args.d)
    print(f"peak memory, streamed: N = {args.n}: {small['peak_mb']:.0f} MB; 4N = {4 * args.n}: "
          f"{large['peak_mb']:.0f} MB")
    print(f"memory ratio 4N / N = {large['peak_mb'] / small['peak_mb']:.3f}   (target ≤ 1.2)")
    t_stream, t_stack = speed(4 * args.n, args.layers, args.d)
    print(f"time at N = {4 * args.n}: streamed {t_stream:.1f} s, stack-then-SVD {t_stack:.1f} s")
    print(f"speed ratio stacked / streamed = {t_stack / t_stream:.2f}   (target ≥ 1)")


if __name__ == "__main__":
    main()

"""The pairs an exact McNemar test needs for 80% power: the incremental search ÷ a fresh pmf at every n.

    python benchmarks/mcnemar_power.py [--repeat 3]

`bench.stats.comparisons.mcnemar_power` names the fewest pairs whose exact power reaches a target.  Power is not
monotone in n, so every n up to the answer is looked at.  The reference below evaluates each n's binomial pmf
afresh with scipy (the search as it was first written: O(n²) pmf terms in all); the search in bench builds each
n's distribution from the last one's and confirms a candidate exactly.  Per case: both answers (they must be
equal), the best of `--repeat` timings of each, and their ratio, all measured in one run.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from scipy import stats

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.stats import comparisons  # noqa: E402

CASES = (  # (drop, discordant share): a few pairs needed … more than the search's range
    (0.2, 0.25), (0.05, 0.2), (0.02, 0.1), (0.006, 0.05), (0.003, 0.02), (0.001, 0.02))


def fresh_scan(effect: float, discordant: float, n: int, alpha: float, power: float) -> tuple[float, int]:
    """The reference: every n's pmf evaluated afresh, n = 1, 2, … until the power is reached."""
    top = comparisons.MAX_PAIRS
    psi = min(1.0, max(float(discordant), abs(effect) + 1e-9))
    q = (psi + effect) / (2 * psi)
    d = np.arange(max(int(n), top) + 1)
    k = np.floor(stats.binom.isf(alpha, d, 0.5)) + 1
    k = np.where(stats.binom.sf(k - 1, d, 0.5) < alpha, k, k + 1)
    reject = stats.binom.sf(k - 1, d, q)

    def at(m: int) -> float:
        return float(np.dot(stats.binom.pmf(d[: m + 1], m, psi), reject[: m + 1]))

    if at(top) < power:
        return at(int(n)), top + 1
    return at(int(n)), next(m for m in range(1, top + 1) if at(m) >= power)


def best_of(fn, args, repeat: int) -> tuple[float, tuple[float, int]]:
    times, out = [], None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn(*args)
        times.append(time.perf_counter() - t)
    return min(times), out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    print("| drop | discordant share | pairs needed | fresh pmf per n, s | incremental, s | ratio |")
    print("|---|---|---|---|---|---|")
    worst = None
    for effect, psi in CASES:
        args = (effect, psi, 1000, 0.05, 0.8)
        t_ref, ref = best_of(fresh_scan, args, a.repeat)
        t_new, new = best_of(comparisons.mcnemar_power, args, a.repeat)
        if new != ref:
            print(f"MISMATCH at drop {effect}, ψ {psi}: {new} against the reference's {ref}")
            return 1
        need = f"> {comparisons.MAX_PAIRS}" if new[1] > comparisons.MAX_PAIRS else f"{new[1]:,}"
        print(f"| {effect:g} | {psi:g} | {need} | {t_ref:.3f} | {t_new:.3f} | {t_ref / t_new:.1f}× |")
        worst = t_new if worst is None else max(worst, t_new)
    print(f"\nEqual answers (power and pairs) in every case; the slowest incremental search took {worst:.3f} s.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

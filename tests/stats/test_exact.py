"""bench.stats.exact on counts whose answers are known by hand: binomial tail sums, Clopper–Pearson from its
beta quantiles (closed forms at 0 and n), and the paired interval as the range of ψ(2π − 1) over its box."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from bench.stats.exact import clopper_pearson, is_binary, one_sample, paired


def _cp(k: int, n: int, level: float) -> tuple[float, float]:
    """Clopper–Pearson written out: the beta quantiles, 0 and 1 at the edges."""
    a = 1 - level
    lo = 0.0 if k == 0 else float(stats.beta.ppf(a / 2, k, n - k + 1))
    hi = 1.0 if k == n else float(stats.beta.ppf(1 - a / 2, k + 1, n - k))
    return lo, hi


def test_is_binary_only_for_non_empty_0_1_values():
    assert is_binary([0, 1, 1]) and is_binary([1.0, 1.0]) and is_binary([0])
    assert not is_binary([]) and not is_binary([0, 0.5, 1]) and not is_binary([2])


def test_clopper_pearson_closed_forms_and_no_units():
    assert clopper_pearson(0, 0, 0.95) == (0.0, 1.0)  # nothing measured: the whole range
    lo, hi = clopper_pearson(5, 5, 0.95)
    assert lo == pytest.approx(0.025 ** (1 / 5), rel=1e-9) and hi == 1.0  # [0.478, 1], never [1, 1]
    lo, hi = clopper_pearson(0, 10, 0.9)
    assert lo == 0.0 and hi == pytest.approx(1 - 0.05 ** (1 / 10), rel=1e-9)
    assert clopper_pearson(7, 20, 0.8) == (pytest.approx(_cp(7, 20, 0.8)[0]), pytest.approx(_cp(7, 20, 0.8)[1]))


def test_one_sample_tail_sums_by_hand():
    """8 of 10 against 0.5: P(X ≥ 8) = (45 + 10 + 1) / 1024; 2 of 10 on the low side: P(X ≤ 2), the same."""
    p, lo, hi = one_sample(8, 10, 0.5, +1, 0.95)
    assert p == pytest.approx(56 / 1024, rel=1e-12)
    assert (lo, hi) == (pytest.approx(_cp(8, 10, 0.95)[0]), pytest.approx(_cp(8, 10, 0.95)[1]))
    p, lo, hi = one_sample(2, 10, 0.5, -1, 0.9)
    assert p == pytest.approx(56 / 1024, rel=1e-12)
    assert (lo, hi) == (pytest.approx(_cp(2, 10, 0.9)[0]), pytest.approx(_cp(2, 10, 0.9)[1]))
    p, _, _ = one_sample(3, 4, 0.2, +1, 0.95)  # P(X ≥ 3 | 4, 0.2) = 4·0.2³·0.8 + 0.2⁴
    assert p == pytest.approx(4 * 0.2 ** 3 * 0.8 + 0.2 ** 4, rel=1e-12)


def test_one_sample_clamps_a_bound_outside_0_1():
    """A bound above 1 is tested as 1 (X ≥ k is certain), one below 0 as 0 (X ≤ k is certain); near the edges
    the tails are q^n."""
    assert one_sample(8, 10, 1.2, +1, 0.95)[0] == pytest.approx(1.0)
    assert one_sample(2, 10, -0.1, -1, 0.95)[0] == pytest.approx(1.0)
    assert one_sample(0, 10, 1.5, -1, 0.95)[0] == pytest.approx(0.0, abs=1e-12)  # P(X ≤ 0 | p = 1) = 0
    assert one_sample(10, 10, -0.5, +1, 0.95)[0] == pytest.approx(0.0, abs=1e-12)  # P(X ≥ 10 | p = 0) = 0
    assert one_sample(10, 10, 0.9, +1, 0.95)[0] == pytest.approx(0.9 ** 10, rel=1e-12)


def test_paired_p_is_the_one_sided_binomial_of_the_discordant_pairs():
    assert paired(8, 0, 20, 0.95)[0] == pytest.approx(0.5 ** 8, rel=1e-12)
    assert paired(5, 1, 20, 0.95)[0] == pytest.approx(7 / 64, rel=1e-12)  # P(X ≥ 5 | 6, ½) = (6 + 1) / 64
    assert paired(1, 5, 20, 0.95)[0] == pytest.approx(63 / 64, rel=1e-12)  # P(X ≥ 1 | 6, ½)
    assert paired(0, 0, 20, 0.95)[0] == 1.0


@pytest.mark.parametrize(("n10", "n01", "n", "conf"), [(6, 2, 20, 0.95), (1, 4, 30, 0.9), (3, 3, 10, 0.95),
                                                        # π's interval wholly above ½, then wholly below: every
                                                        # corner of the box is then the extreme on its side
                                                        (20, 0, 40, 0.95), (0, 20, 40, 0.95), (15, 1, 30, 0.9)])
def test_paired_interval_is_the_range_of_the_difference_over_the_bonferroni_box(n10, n01, n, conf):
    level = 1 - (1 - conf) / 2
    psi_lo, psi_hi = _cp(n10 + n01, n, level)
    pi_lo, pi_hi = _cp(n10, n10 + n01, level)
    corners = [psi * (2 * pi - 1) for psi in (psi_lo, psi_hi) for pi in (pi_lo, pi_hi)]
    _, lo, hi = paired(n10, n01, n, conf)
    assert lo == pytest.approx(min(corners), rel=1e-9, abs=1e-12)
    assert hi == pytest.approx(max(corners), rel=1e-9, abs=1e-12)
    assert lo <= (n10 - n01) / n <= hi


def test_paired_without_discordant_pairs_is_symmetric_about_zero():
    """No discordant pair of 20: ψ ∈ [0, 1 − 0.0125^(1/20)] and π unknown (0 to 1), so Δ ∈ [−u, u]."""
    p, lo, hi = paired(0, 0, 20, 0.95)
    u = 1 - 0.0125 ** (1 / 20)
    assert p == 1.0 and lo == pytest.approx(-u, rel=1e-9) and hi == pytest.approx(u, rel=1e-9)
    assert math.isclose(-lo, hi)


def _edges_by_scan(n: int, p: float, alpha: float) -> tuple[int, int]:
    """The rejection edges counted one k at a time from exact tail sums (math.comb): the smallest k with
    P(X ≥ k) < α (n + 1: none) and the largest k with P(X ≤ k) < α (−1: none)."""
    pmf = [math.comb(n, j) * p ** j * (1 - p) ** (n - j) for j in range(n + 1)]
    up = next((k for k in range(n + 1) if sum(pmf[k:]) < alpha), n + 1)
    down = max((k for k in range(n + 1) if sum(pmf[: k + 1]) < alpha), default=-1)
    return up, down


EDGE_CASES = ((0.5, 0.05), (0.5, 1 / 16), (0.5, 1 / 32), (0.3, 0.01), (0.9, 0.05), (0.02, 0.05))


@pytest.mark.parametrize("off", [0, -3, 3])
def test_critical_counts_are_the_rejection_edges_whatever_the_quantile_guessed(monkeypatch, off):
    """Known answer: for n = 0 … 60 the edges a one-by-one count of exact tails finds, at α where ½-binomial
    tails equal α exactly (1/16, 1/32: p < α must not reject there) and near the ends (p = 0.02, 0.9); with every
    quantile guess `off` counts, the same edges (a one-way correction, as the McNemar power once had, is left a
    count short or long)."""
    from bench.stats import exact

    want = {(p, a): [_edges_by_scan(n, p, a) for n in range(61)] for p, a in EDGE_CASES}
    isf, ppf = stats.binom.isf, stats.binom.ppf
    monkeypatch.setattr(stats.binom, "isf", lambda q, n, p: isf(q, n, p) + off)
    monkeypatch.setattr(stats.binom, "ppf", lambda q, n, p: ppf(q, n, p) + off)
    n = np.arange(61)
    for (p, a), edges in want.items():
        assert exact.upper_critical(n, p, a).tolist() == [e[0] for e in edges], (p, a)
        assert exact.lower_critical(n, p, a).tolist() == [e[1] for e in edges], (p, a)

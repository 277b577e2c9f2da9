"""Decision rules of the LLM-Microscope family (and the reading notes' claims that go with it).

* ``group_comparison`` — one class of tokens against another: one-sided Mann–Whitney U, Cliff's δ with a
  bootstrap interval over texts; optionally per layer, deciding on the share of layers where δ holds;
* ``correlation`` — Pearson (or Spearman) r between two per-token metrics, interval by bootstrap over texts;
* ``correlation_difference`` — |r(subject a) − r(subject b)| for two variants of a model on the same texts;
* ``trend`` — Spearman ρ between layer index and the per-layer mean of a metric;
* ``layer_majority`` — the share of layers whose mean lies on the claimed side of a bound (> ½ to hold);
* ``layer_summary`` — a median / min / max over per-layer values, optionally without the first and last layers;
* ``accuracy_drop`` — paired accuracy difference between two input conditions, exact McNemar test;
* ``gated`` — preconditions first (e.g. "the decoder learned"): if any fails the claim is INCONCLUSIVE.

Tokens of one text are not independent, so every interval resamples whole texts (the `unit` column).
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
import pandas as pd
from scipy import stats

from bench.core.registry import rule_def
from bench.stats import (
    Outcome,
    Verdict,
    _boot_p,
    _bootstrap,
    _bound,
    _decide,
    _label,
    _matrix,
    _missing,
    _select,
    evaluate_parts,
)

SEED = 12345


def _unit_boot(units: np.ndarray, stat, n_resamples: int, confidence: float):
    """Percentile bootstrap over distinct units (whole texts): (low, high, distribution)."""
    uniq = np.unique(units)
    groups = [np.flatnonzero(units == u) for u in uniq]

    def on(idx):
        rows = np.concatenate([groups[int(i)] for i in idx])
        return stat(rows)

    res = stats.bootstrap((np.arange(len(uniq)),), on, vectorized=False, n_resamples=n_resamples,
                          confidence_level=confidence, method="percentile",
                          random_state=np.random.default_rng(SEED))
    dist = np.asarray(res.bootstrap_distribution, float)
    return float(res.confidence_interval.low), float(res.confidence_interval.high), dist


def cliffs_delta(a: np.ndarray, b: np.ndarray) -> float:
    """P(a > b) − P(a < b) over all pairs, from the Mann–Whitney U of `a`."""
    if len(a) == 0 or len(b) == 0:
        return float("nan")
    u = stats.mannwhitneyu(a, b, alternative="two-sided", method="asymptotic").statistic
    return float(2 * u / (len(a) * len(b)) - 1)


def _pair_sums(vals: np.ndarray, is_a: np.ndarray, unit_idx: np.ndarray, n_units: int, chunk: int = 2048):
    """Cliff's δ by unit pairs: S[u, v] = Σ sign(a_i − b_j) over a-values of unit u and b-values of unit v,
    and the counts of a- and b-values per unit.  δ of any reweighting w of units is wᵀSw / ((w·n_a)(w·n_b))."""
    ia, ib = np.flatnonzero(is_a), np.flatnonzero(~is_a)
    mb = np.zeros((len(ib), n_units))
    mb[np.arange(len(ib)), unit_idx[ib]] = 1.0
    S = np.zeros((n_units, n_units))
    for start in range(0, len(ia), chunk):  # bounded memory: chunk × n_b signs at a time
        rows = ia[start : start + chunk]
        sign = np.sign(vals[rows][:, None] - vals[ib][None, :]) @ mb  # (chunk, U)
        np.add.at(S, unit_idx[rows], sign)
    na = np.bincount(unit_idx[ia], minlength=n_units).astype(float)
    nb = np.bincount(unit_idx[ib], minlength=n_units).astype(float)
    return S, na, nb


def _weights(idx: np.ndarray, n_units: int) -> np.ndarray:
    """Resampled unit indices (..., U) → counts per unit (..., U)."""
    idx = np.asarray(idx, int)
    return (idx[..., :, None] == np.arange(n_units)).sum(axis=-2).astype(float)


def _delta_of(W: np.ndarray, S: np.ndarray, na: np.ndarray, nb: np.ndarray) -> np.ndarray:
    """δ for unit weights W (..., U) and pair sums S (G, U, U) → (..., G)."""
    num = np.einsum("...u,guv,...v->...g", W, S, W)
    den = np.einsum("...u,gu->...g", W, na) * np.einsum("...u,gu->...g", W, nb)
    with np.errstate(invalid="ignore", divide="ignore"):
        return num / den


@rule_def("group_comparison")
def group_comparison(
    frame: pd.DataFrame, *, metric: str, a: list[str], b: list[str], column: str = "cls",
    side: Literal["less", "greater"] = "less", delta: float = 0.0, over: str | None = None,
    where: dict[str, Any] = {}, unit: str = "sample", min_n: int = 20,  # noqa: B006
    alpha: float = 0.05, confidence: float = 0.95, n_resamples: int = 2000,
) -> Verdict:
    """Values of group `a` lie below (``side = "less"``) or above group `b`: Cliff's δ beyond `delta`, one-sided
    Mann–Whitney p < α, and the bootstrap interval of δ (over units) excludes 0.  With `over` (e.g.
    ``"layer"``), the comparison is made per value of that column and the estimate is the share of them where
    δ is beyond `delta`; the claim holds when that share exceeds ½ (bootstrap test over units)."""
    name = f"{metric}: {'+'.join(a)} vs {'+'.join(b)}"
    rows = _select(frame, {"metric": metric, **where})
    rows = rows[rows[column].isin(list(a) + list(b))] if column in rows.columns else rows.iloc[0:0]
    if rows.empty:
        return _missing(frame, "group_comparison", metric, {"metric": metric, column: a + b})
    is_a = rows[column].isin(list(a)).to_numpy()
    vals = rows["value"].to_numpy(float)
    uniq, unit_idx = np.unique(rows[unit].to_numpy(), return_inverse=True)
    U = len(uniq)
    n_a, n_b = int(is_a.sum()), int((~is_a).sum())
    sign = -1 if side == "less" else +1
    if min(n_a, n_b) < min_n or U < 3:
        return Verdict(Outcome.INCONCLUSIVE, f"only {n_a} tokens in group a and {n_b} in group b (< {min_n}) "
                       f"from {U} {unit}s", "group_comparison", name, n=n_a + n_b, alpha=alpha)
    levels = [None] if over is None else list(np.sort(rows[over].dropna().unique()))
    lev = None if over is None else rows[over].to_numpy()
    parts = [_pair_sums(vals[m], is_a[m], unit_idx[m], U)
             for m in ([np.ones(len(vals), bool)] if over is None else [lev == g for g in levels])]
    S = np.stack([p[0] for p in parts])  # (G, U, U)
    na, nb = np.stack([p[1] for p in parts]), np.stack([p[2] for p in parts])  # (G, U)
    ones = np.ones(U)
    per = _delta_of(ones, S, na, nb)  # (G,)

    def boot(stat):
        res = stats.bootstrap((np.arange(U),), lambda i, axis=-1: stat(_weights(i, U)), vectorized=True,
                              n_resamples=n_resamples, confidence_level=confidence, method="percentile",
                              random_state=np.random.default_rng(SEED))
        return (float(res.confidence_interval.low), float(res.confidence_interval.high),
                np.asarray(res.bootstrap_distribution, float))

    if over is None:
        est = float(per[0])
        p = float(stats.mannwhitneyu(vals[is_a], vals[~is_a], alternative=side).pvalue)
        lo, hi, _ = boot(lambda W: _delta_of(W, S, na, nb)[..., 0])
        label = f"δ {'≤' if sign < 0 else '≥'} {delta:g}"
        v = _decide("group_comparison", name, est, lo, hi, p, n_a + n_b, delta, sign, label, alpha,
                    effect=est, effect_name="Cliff's δ")
        excludes_zero = hi < 0 if sign < 0 else lo > 0
        if v.outcome is Outcome.SUPPORTED and not excludes_zero:
            return Verdict(**{**v.__dict__, "outcome": Outcome.INCONCLUSIVE,
                              "reason": v.reason + ", but the interval of δ includes 0"})
        return Verdict(**{**v.__dict__, "reason": v.reason + f" (Mann–Whitney, {n_a} vs {n_b} tokens)"})

    def share(W):
        d = _delta_of(W, S, na, nb)  # (..., G)
        return np.nanmean(np.where(np.isfinite(d), (sign * (d - delta) >= 0).astype(float), np.nan), axis=-1)

    est = float(share(ones))
    lo, hi, dist = boot(share)
    p = float((1 + np.sum(dist <= 0.5)) / (1 + len(dist)))
    finite = per[np.isfinite(per)]
    return _majority("group_comparison", name, est, lo, hi, p, len(levels), alpha, over,
                     f"δ per {over} from {finite.min():.3g} to {finite.max():.3g} (bound {delta:g})")


def _majority(rule, name, est, lo, hi, p, n_levels, alpha, over, detail) -> Verdict:
    label = f"> 0.5 of {over}s"
    ci = f"95% CI [{lo:.3g}, {hi:.3g}]"
    if est > 0.5 and p < alpha:
        outcome, why = Outcome.SUPPORTED, f"holds in {est:.0%} of {n_levels} {over}s, {ci}, p = {p:.3g}; {detail}"
    elif hi <= 0.5:
        outcome, why = Outcome.REFUTED, f"holds in {est:.0%} of {n_levels} {over}s, {ci} ≤ 0.5; {detail}"
    else:
        outcome, why = Outcome.INCONCLUSIVE, f"holds in {est:.0%} of {n_levels} {over}s, {ci}, p = {p:.3g}; {detail}"
    return Verdict(outcome, why, rule, name, est, lo, hi, p, None, n_levels, est, f"share of {over}s", label, alpha)


def _paired(frame: pd.DataFrame, x: dict, y: dict, key: list[str]) -> pd.DataFrame:
    rx, ry = _select(frame, x), _select(frame, y)
    cols = [c for c in key if c in frame.columns]
    return rx[cols + ["value"]].merge(ry[cols + ["value"]], on=cols, suffixes=("_x", "_y")).dropna()


def _corr(method: str):
    f = stats.pearsonr if method == "pearson" else stats.spearmanr
    return lambda x, y: float(f(x, y)[0]) if len(x) > 2 and np.ptp(x) > 0 and np.ptp(y) > 0 else float("nan")


def weighted_pearson(Wt: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Pearson r of (x, y) with each row counted Wt[..., i] times: (..., N) weights → (...)."""
    tot = Wt.sum(axis=-1, keepdims=True)
    mx, my = (Wt @ x)[..., None] / tot, (Wt @ y)[..., None] / tot
    dx, dy = x - mx, y - my
    cov = (Wt * dx * dy).sum(axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return cov / np.sqrt((Wt * dx * dx).sum(axis=-1) * (Wt * dy * dy).sum(axis=-1))


def _weighted_boot(units: np.ndarray, stat, n_resamples: int, confidence: float):
    """Bootstrap over whole units, vectorised: `stat` gets per-row weights (..., N) = resampled unit counts."""
    uniq, idx = np.unique(units, return_inverse=True)
    res = stats.bootstrap((np.arange(len(uniq)),), lambda i, axis=-1: stat(_weights(i, len(uniq))[..., idx]),
                          vectorized=True, n_resamples=n_resamples, confidence_level=confidence,
                          method="percentile", random_state=np.random.default_rng(SEED))
    return (float(res.confidence_interval.low), float(res.confidence_interval.high),
            np.asarray(res.bootstrap_distribution, float))


@rule_def("correlation")
def correlation(
    frame: pd.DataFrame, *, x: dict[str, Any], y: dict[str, Any], key: list[str] = ["sample", "position"],  # noqa: B006
    method: Literal["pearson", "spearman"] = "pearson", min: float = 0.0, unit: str = "sample",
    min_n: int = 20, alpha: float = 0.05, confidence: float = 0.95, n_resamples: int = 1000,
) -> Verdict:
    """Correlation between the rows selected by `x` and by `y`, matched on `key`, exceeds `min` (its interval
    too).  p: the one-sided test of `method` (scipy); effect: the other coefficient."""
    name = f"r({_label(x)}, {_label(y)})"
    pairs = _paired(frame, x, y, key)
    if pairs.empty:
        return _missing(frame, "correlation", name, x)
    xs, ys, units = pairs["value_x"].to_numpy(float), pairs["value_y"].to_numpy(float), pairs[unit].to_numpy()
    n = len(pairs)
    if n < min_n:
        return Verdict(Outcome.INCONCLUSIVE, f"only {n} matched tokens (< {min_n})", "correlation", name, n=n,
                       alpha=alpha)
    r = _corr(method)(xs, ys)
    other = _corr("spearman" if method == "pearson" else "pearson")(xs, ys)
    test = stats.pearsonr if method == "pearson" else stats.spearmanr
    p = float(test(xs, ys, alternative="greater").pvalue)
    if method == "pearson":
        lo, hi, _ = _weighted_boot(units, lambda Wt: weighted_pearson(Wt, xs, ys), n_resamples, confidence)
    else:
        lo, hi, _ = _unit_boot(units, lambda rows: _corr(method)(xs[rows], ys[rows]), n_resamples, confidence)
    v = _decide("correlation", name, r, lo, hi, p, n, min, +1, f"{method} r > {min:g}", alpha, effect=other,
                effect_name="Spearman ρ" if method == "pearson" else "Pearson r")
    if v.outcome is Outcome.SUPPORTED and lo <= min:
        return Verdict(**{**v.__dict__, "outcome": Outcome.INCONCLUSIVE,
                          "reason": v.reason + f", but the interval does not exclude {min:g}"})
    return v


@rule_def("correlation_difference")
def correlation_difference(
    frame: pd.DataFrame, *, x: dict[str, Any], y: dict[str, Any], subjects: list[str] = ["base", "instruct"],  # noqa: B006
    key: list[str] = ["sample", "position"], min_abs: float = 0.2, unit: str = "sample",  # noqa: B006
    min_n: int = 20, alpha: float = 0.05, confidence: float = 0.95, n_resamples: int = 1000,
) -> Verdict:
    """|r_a − r_b| ≥ `min_abs` for the Pearson r of `x` and `y` in two subjects measured on the same texts."""
    name = f"|r({subjects[0]}) − r({subjects[1]})|"
    if "subject" not in frame.columns or not set(subjects) <= set(frame["subject"].dropna()):
        notes = "; ".join(frame.attrs.get("notes", [])) or "the frame has no rows for both subjects"
        return Verdict(Outcome.INCONCLUSIVE, notes, "correlation_difference", name, alpha=alpha)
    pa_, pb_ = (_paired(frame, {**x, "subject": s}, {**y, "subject": s}, key) for s in subjects)
    if min(len(pa_), len(pb_)) < min_n:
        return Verdict(Outcome.INCONCLUSIVE, f"too few matched tokens ({len(pa_)}, {len(pb_)})",
                       "correlation_difference", name, alpha=alpha)
    both = pd.concat([pa_.assign(_s=0), pb_.assign(_s=1)], ignore_index=True)
    xs, ys = both["value_x"].to_numpy(float), both["value_y"].to_numpy(float)
    first, units = both["_s"].to_numpy() == 0, both[unit].to_numpy()

    def diff(Wt):  # the same texts resampled for both subjects (paired)
        return np.abs(weighted_pearson(Wt * first, xs, ys) - weighted_pearson(Wt * ~first, xs, ys))

    est = float(diff(np.ones(len(both))))
    lo, hi, dist = _weighted_boot(units, diff, n_resamples, confidence)
    p = _boot_p(dist, min_abs, +1)
    return _decide("correlation_difference", name, est, lo, hi, p, len(both), min_abs, +1, f"≥ {min_abs:g}",
                   alpha, effect=est, effect_name="|Δr|")


def _spearman_rows(m: np.ndarray, levels: np.ndarray) -> np.ndarray:
    """Spearman ρ between `levels` (G,) and the column means of resampled matrices (..., n, G)."""
    means = np.asarray(m, float).mean(axis=-2)  # (..., G)
    rm = stats.rankdata(means, axis=-1)
    rl = stats.rankdata(levels)
    rm = rm - rm.mean(axis=-1, keepdims=True)
    rl = rl - rl.mean()
    return (rm @ rl) / np.sqrt((rm * rm).sum(axis=-1) * (rl @ rl))


@rule_def("trend")
def trend(
    frame: pd.DataFrame, *, metric: str, min: float | None = None, max: float | None = None, over: str = "layer",
    where: dict[str, Any] = {}, unit: str = "sample", min_n: int = 5,  # noqa: B006
    alpha: float = 0.05, confidence: float = 0.95, n_resamples: int = 2000,
) -> Verdict:
    """Spearman ρ between `over` (layer index) and the mean of `metric` per layer lies above `min` / below
    `max`; interval and p-value by bootstrap over units."""
    bound, side = _bound(min, max)
    rows = _select(frame, {"metric": metric, **where})
    if rows.empty:
        return _missing(frame, "trend", metric, where)
    mat = _matrix(rows, unit, [over])
    levels = np.asarray(mat.columns, float)
    m = mat.to_numpy(float)
    est = float(_spearman_rows(m, levels))
    label = f"ρ({over}, {metric}) {'≥' if side > 0 else '≤'} {bound:g}"
    if m.shape[0] < min_n or len(levels) < 3:
        return Verdict(Outcome.INCONCLUSIVE, f"only {m.shape[0]} {unit}s and {len(levels)} {over}s", "trend",
                       metric, est, n=m.shape[0], threshold=label, alpha=alpha)
    lo, hi, boot = _bootstrap(lambda x: _spearman_rows(x, levels), m, confidence, n_resamples, bca=False)
    p = _boot_p(boot, bound, side)
    return _decide("trend", metric, est, lo, hi, p, m.shape[0], bound, side, label, alpha, effect=est,
                   effect_name="Spearman ρ")


@rule_def("layer_majority")
def layer_majority(
    frame: pd.DataFrame, *, metric: str, min: float | None = None, max: float | None = None, over: str = "layer",
    where: dict[str, Any] = {}, unit: str = "sample", min_n: int = 5,  # noqa: B006
    alpha: float = 0.05, confidence: float = 0.95, n_resamples: int = 2000,
) -> Verdict:
    """In more than half of the layers, the mean of `metric` over units lies above `min` (below `max`)."""
    bound, side = _bound(min, max)
    rows = _select(frame, {"metric": metric, **where})
    if rows.empty:
        return _missing(frame, "layer_majority", metric, where)
    m = _matrix(rows, unit, [over]).to_numpy(float)
    if m.shape[0] < min_n:
        return Verdict(Outcome.INCONCLUSIVE, f"only {m.shape[0]} {unit}s (< {min_n})", "layer_majority", metric,
                       n=m.shape[0], alpha=alpha)

    def share(x):
        means = np.asarray(x, float).mean(axis=-2)
        return (side * (means - bound) >= 0).mean(axis=-1)

    est = float(share(m))
    lo, hi, boot = _bootstrap(share, m, confidence, n_resamples, bca=False)
    p = float((1 + np.sum(boot <= 0.5)) / (1 + len(boot)))
    means = m.mean(axis=0)
    return _majority("layer_majority", metric, est, lo, hi, p, m.shape[1], alpha, over,
                     f"per-{over} means from {means.min():.3g} to {means.max():.3g} vs "
                     f"{'≥' if side > 0 else '≤'} {bound:g}")


@rule_def("layer_summary")
def layer_summary(
    frame: pd.DataFrame, *, metric: str, reduce: Literal["median", "min", "max", "mean"] = "median",
    min: float | None = None, max: float | None = None, over: str = "layer", skip_first: int = 0,
    skip_last: int = 0, where: dict[str, Any] = {}, alpha: float = 0.05,  # noqa: B006
) -> Verdict:
    """`reduce` over per-layer values (rows averaged per layer), after dropping the first `skip_first` and
    last `skip_last` layers, lies above `min` / below `max`.  Exact: the values are not a sample."""
    bound, side = _bound(min, max)
    rows = _select(frame, {"metric": metric, **where})
    if rows.empty:
        return _missing(frame, "layer_summary", metric, where)
    per = rows.groupby(over)["value"].mean().sort_index()
    per = per.iloc[skip_first : len(per) - skip_last]
    if per.empty:
        return Verdict(Outcome.INCONCLUSIVE, "no layers left after skipping", "layer_summary", metric, alpha=alpha)
    est = float(getattr(np, reduce)(per.to_numpy(float)))
    label = f"{reduce} {'≥' if side > 0 else '≤'} {bound:g}"
    ok = side * (est - bound) >= 0
    why = (f"{reduce} over {len(per)} {over}s ({per.index[0]}–{per.index[-1]}) = {est:.4g} "
           f"{'meets' if ok else 'misses'} {label}; range {per.min():.4g}–{per.max():.4g} (exact)")
    return Verdict(Outcome.SUPPORTED if ok else Outcome.REFUTED, why, "layer_summary", metric, est, n=len(per),
                   effect=est - bound, effect_name="margin", threshold=label, alpha=alpha)


@rule_def("accuracy_drop")
def accuracy_drop(
    frame: pd.DataFrame, *, a: dict[str, Any], b: dict[str, Any], min: float = 0.0, unit: str = "sample",
    min_n: int = 10, alpha: float = 0.05, confidence: float = 0.95, n_resamples: int = 2000,
) -> Verdict:
    """Accuracy (0/1 rows) under `a` minus under `b`, paired by question, is above `min`: exact McNemar test
    (binomial on the discordant pairs), paired bootstrap interval."""
    name = f"accuracy {_label(a)} − {_label(b)}"
    ra, rb = _select(frame, a), _select(frame, b)
    if ra.empty or rb.empty:
        return _missing(frame, "accuracy_drop", name, a if ra.empty else b)
    m = pd.concat([ra.groupby(unit)["value"].mean().rename("a"), rb.groupby(unit)["value"].mean().rename("b")],
                  axis=1).dropna()
    n = len(m)
    est = float(m["a"].mean() - m["b"].mean())
    if n < min_n:
        return Verdict(Outcome.INCONCLUSIVE, f"only {n} paired questions (< {min_n})", "accuracy_drop", name, est,
                       n=n, alpha=alpha)
    n10 = int(((m["a"] > 0.5) & (m["b"] <= 0.5)).sum())
    n01 = int(((m["a"] <= 0.5) & (m["b"] > 0.5)).sum())
    p = float(stats.binomtest(n10, n10 + n01, 0.5, alternative="greater").pvalue) if n10 + n01 else 1.0
    mat = m[["a", "b"]].to_numpy(float)
    lo, hi, _ = _bootstrap(lambda x: x[..., 0].mean(axis=-1) - x[..., 1].mean(axis=-1), mat, confidence,
                           n_resamples, bca=False)
    v = _decide("accuracy_drop", name, est, lo, hi, p, n, min, +1, f"drop > {min:g}", alpha, effect=est,
                effect_name="accuracy drop")
    detail = f" (accuracy {m['a'].mean():.3f} → {m['b'].mean():.3f}; McNemar {n10} lost vs {n01} gained)"
    return Verdict(**{**v.__dict__, "reason": v.reason + detail})


@rule_def("gated", nested="of")
def gated(frame: pd.DataFrame, *, of: list[dict[str, Any]], alpha: float = 0.05) -> Verdict:
    """Every rule of `of` but the last is a precondition; the last one decides the claim.  A precondition
    that is not SUPPORTED makes the verdict INCONCLUSIVE with its reason (no p-value: nothing was tested)."""
    if not of:
        raise ValueError("gated needs at least the claim's rule in 'of'")
    *gates, claim = evaluate_parts(frame, of, alpha)
    failed = [g for g in gates if g.outcome is not Outcome.SUPPORTED]
    if failed:
        why = "precondition not met: " + "; ".join(f"{g.metric}: {g.reason}" for g in failed)
        return Verdict(Outcome.INCONCLUSIVE, why, "gated", claim.metric, claim.estimate, claim.ci_low, claim.ci_high,
                       None, None, claim.n, claim.effect, claim.effect_name, claim.threshold, alpha)
    return claim

"""Rules of the language-neuron families: ΔBPB matrices from the ``deactivation`` probe, layer shares, extremes.

A ΔBPB matrix cell (neuron set of language x zeroed, language y evaluated) is Σ_i Δbits_i / Σ_i bytes_i over
the evaluation texts i of y.  The evaluation texts are translations of one another, so every bootstrap here
resamples text indices jointly for all cells of a matrix (percentile intervals from ``scipy.stats.bootstrap``).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Literal

import numpy as np
import pandas as pd

from bench.families.langneurons import words
from bench.ground.registry import rule_def
from bench.stats import (
    CALIBRATED_MIN_N,
    Outcome,
    Verdict,
    _boot_p,
    _bootstrap,
    _decide,
    ci_name,
    _missing,
    _select,
    combine,
    sensitivity,
)

Entries = Literal["diagonal", "off_diagonal", "all"]


class _Cells:
    """Per-text Δbits of every (method, set, language) cell and per-text bytes, as one units × columns matrix."""

    def __init__(self, frame: pd.DataFrame):
        bits = _select(frame, {"metric": "bits"})
        nbytes = _select(frame, {"metric": "bytes"})
        base = bits[bits["method"] == "none"].pivot_table(index="sample", columns="language", values="value")
        self.bytes = nbytes.pivot_table(index="sample", columns="language", values="value")
        edited = bits[bits["method"] != "none"]
        self.keys: list[tuple[str, str, str]] = []
        cols = []
        for (meth, x, y), g in edited.groupby(["method", "set_lang", "language"], sort=True):
            if y not in base.columns:
                continue
            self.keys.append((meth, x, y))
            cols.append(g.set_index("sample")["value"] - base[y])
        self.langs = sorted(self.bytes.columns)
        table = pd.concat(cols + [self.bytes[y] for y in self.langs], axis=1) if cols else pd.DataFrame()
        table = table.dropna(axis=0, how="any")
        self.units = table.index  # the evaluation texts every column has
        self.mat = table.to_numpy(float)  # (n_units, n_cells + n_langs)
        self.n = self.mat.shape[0]
        self.col = {k: i for i, k in enumerate(self.keys)}
        self.byte_col = {y: len(self.keys) + i for i, y in enumerate(self.langs)}

    def cell(self, m: np.ndarray, meth: str, x: str, y: str) -> np.ndarray:
        """ΔBPB of one cell from resampled units m (..., n, G) → (...)."""
        return m[..., self.col[(meth, x, y)]].sum(axis=-1) / m[..., self.byte_col[y]].sum(axis=-1)

    def pick(self, method: str, entries: str, languages=(), exclude=()) -> list[tuple[str, str]]:
        out = []
        for meth, x, y in self.keys:
            if meth != method:
                continue
            if (entries == "diagonal" and x != y) or (entries == "off_diagonal" and x == y):
                continue
            if (languages and x not in languages) or x in exclude:
                continue
            out.append((x, y))
        return out

    def mean_of(self, m: np.ndarray, method: str, cells: list[tuple[str, str]]) -> np.ndarray:
        return np.mean([self.cell(m, method, x, y) for x, y in cells], axis=0)


def _none(frame, rule, metric, why) -> Verdict:
    notes = "; ".join(frame.attrs.get("notes", []))
    return Verdict(Outcome.INCONCLUSIVE, why + (f" ({notes})" if notes else ""), rule, metric)


@rule_def("diagonal_dominance", sentence=words.diagonal_dominance)
def diagonal_dominance(frame: pd.DataFrame, *, method: str = "lape", min_share: float = 0.8, min_n: int = 5,
                       alpha: float = 0.05, confidence: float = 0.95, n_resamples: int = 2000) -> Verdict:
    """The share of rows x whose diagonal ΔBPB exceeds every off-diagonal entry of the row is ≥ `min_share`,
    and the diagonal exceeds the row's off-diagonal mean (mean over rows of the margin, CI excluding 0)."""
    c = _Cells(frame)
    rows = sorted({x for meth, x, _ in c.keys if meth == method})
    full = [x for x in rows if all((method, x, y) in c.col for y in c.langs)]
    if len(full) < 2:
        return _none(frame, "diagonal_dominance", "dominant_share", f"no full ΔBPB matrix for method '{method}'")
    if c.n < min_n:
        return _none(frame, "diagonal_dominance", "dominant_share", f"only {c.n} evaluation texts (< {min_n})")

    def matrix(m):  # (..., n, G) -> (..., X, Y)
        return np.stack([np.stack([c.cell(m, method, x, y) for y in full], axis=-1) for x in full], axis=-2)

    def share(m):
        M = matrix(m)
        diag = np.diagonal(M, axis1=-2, axis2=-1)
        off = np.where(np.eye(len(full), dtype=bool), -np.inf, M).max(axis=-1)
        return (diag > off).mean(axis=-1)

    def margin(m):
        M = matrix(m)
        k = len(full)
        diag = np.diagonal(M, axis1=-2, axis2=-1)
        off_mean = (M.sum(axis=-1) - diag) / (k - 1)
        return (diag - off_mean).mean(axis=-1)

    parts = []
    for name, stat, bound in (("dominant_share", share, min_share), ("diagonal_margin", margin, 0.0)):
        est = float(stat(c.mat))
        lo, hi, boot = _bootstrap(stat, c.mat, confidence, n_resamples, bca=False)
        p = _boot_p(boot, bound, +1, c.n)
        label = f"≥ {bound:g}" if name == "dominant_share" else "> 0"
        parts.append(_decide("diagonal_dominance", name, est, lo, hi, p, c.n, bound, +1, label, alpha,
                             effect=est - bound, effect_name="margin", confidence=confidence))
    return replace(combine(parts, alpha), rule="diagonal_dominance")


SELECTION_KEYS = ("method", "entries", "languages", "exclude")


@rule_def("baseline_ratio", table_keys={"numerator": SELECTION_KEYS, "denominator": SELECTION_KEYS}, sentence=words.baseline_ratio)
def baseline_ratio(frame: pd.DataFrame, *, numerator: dict[str, Any], denominator: dict[str, Any],
                   min: float | None = None, max: float | None = None, min_n: int = 5, alpha: float = 0.05,
                   confidence: float = 0.95, n_resamples: int = 2000) -> Verdict:
    """mean ΔBPB of the `numerator` cells ≥ `min` × (or ≤ `max` ×) mean ΔBPB of the `denominator` cells.

    A selector is ``{method, entries = "diagonal" | "off_diagonal" | "all", languages = [...], exclude = [...]}``
    (languages/exclude filter the row, i.e. the language whose neurons are zeroed).  The test works on
    d = num − bound · den (so a denominator near 0 does no harm): p is the bootstrap share of d on the wrong
    side; REFUTED when d's interval lies entirely on the wrong side.
    """
    if (min is None) == (max is None):
        raise ValueError("baseline_ratio needs exactly one of 'min' and 'max'")
    bound, side = (float(min), +1) if min is not None else (float(max), -1)
    c = _Cells(frame)
    sel = {}
    for name, s in (("numerator", numerator), ("denominator", denominator)):
        cells = c.pick(s.get("method", ""), s.get("entries", "diagonal"), s.get("languages", ()), s.get("exclude", ()))
        if not cells:
            return _none(frame, "baseline_ratio", "ratio", f"no ΔBPB cells for the {name} {dict(s)}")
        sel[name] = (s["method"], cells)
    if c.n < min_n:
        return _none(frame, "baseline_ratio", "ratio", f"only {c.n} evaluation texts (< {min_n})")

    def num(m):
        return c.mean_of(m, *sel["numerator"])

    def den(m):
        return c.mean_of(m, *sel["denominator"])

    def diff(m):
        return num(m) - bound * den(m)

    a, b = float(num(c.mat)), float(den(c.mat))
    ratio = a / b if b != 0 else float("inf") * np.sign(a)
    d = float(diff(c.mat))
    lo, hi, boot = _bootstrap(diff, c.mat, confidence, n_resamples, bca=False)
    p = _boot_p(boot, 0.0, side, c.n)
    label = f"{'≥' if side > 0 else '≤'} {bound:g} × baseline"
    txt = (f"ratio {ratio:.3g} ({a:.4g} vs {b:.4g} ΔBPB); num − {bound:g}·den = {d:.4g}, "
           f"{ci_name(confidence)} [{lo:.4g}, {hi:.4g}]")
    v = _decide("baseline_ratio", "ratio", d, lo, hi, p, c.n, 0.0, side, label, alpha, effect=d,
                effect_name=f"num − {bound:g}·den", detail=txt, confidence=confidence)
    return replace(v, estimate=float(ratio) if np.isfinite(ratio) else None, ci_low=None, ci_high=None)


@rule_def("largest_of", sentence=words.largest_of)
def largest_of(frame: pd.DataFrame, *, target: str = "lape", methods: list[str] = [],  # noqa: B006
               entries: Entries = "diagonal", min_n: int = 5, alpha: float = 0.05, confidence: float = 0.95,
               n_resamples: int = 2000) -> Verdict:
    """`target`'s mean ΔBPB over `entries` is the largest of `methods`, its CI not overlapping the runner-up's."""
    c = _Cells(frame)
    names = list(dict.fromkeys([target, *methods]))
    cells = {m: c.pick(m, entries) for m in names}
    missing = [m for m, v in cells.items() if not v]
    if missing:
        return _none(frame, "largest_of", "mean_delta_bpb", f"no ΔBPB cells for {missing}")
    if c.n < min_n:
        return _none(frame, "largest_of", "mean_delta_bpb", f"only {c.n} evaluation texts (< {min_n})")
    means = {m: float(c.mean_of(c.mat, m, cells[m])) for m in names}
    runner = max((m for m in names if m != target), key=means.get)
    cis = {m: _bootstrap(lambda x, m=m: c.mean_of(x, m, cells[m]), c.mat, confidence, n_resamples, bca=False)[:2]
           for m in (target, runner)}
    diff = lambda x: c.mean_of(x, target, cells[target]) - c.mean_of(x, runner, cells[runner])  # noqa: E731
    lo, hi, boot = _bootstrap(diff, c.mat, confidence, n_resamples, bca=False)
    est = means[target] - means[runner]
    p = _boot_p(boot, 0.0, +1, c.n)
    apart = cis[target][0] > cis[runner][1]
    table = ", ".join(f"{m} {v:.4g}" for m, v in sorted(means.items(), key=lambda kv: -kv[1]))
    ci_txt = (f"{target} CI [{cis[target][0]:.4g}, {cis[target][1]:.4g}] vs runner-up {runner} "
              f"[{cis[runner][0]:.4g}, {cis[runner][1]:.4g}]")
    if est > 0 and apart and p < alpha:
        outcome, why = Outcome.SUPPORTED, f"mean ΔBPB: {table}; {ci_txt} do not overlap"
    elif hi < 0:
        outcome, why = Outcome.REFUTED, f"mean ΔBPB: {table}; {runner} beats {target} (difference CI [{lo:.4g}, {hi:.4g}])"
    else:
        outcome, why = Outcome.INCONCLUSIVE, f"mean ΔBPB: {table}; {ci_txt}; p = {p:.3g}"
    if c.n < CALIBRATED_MIN_N:
        outcome, why = Outcome.INCONCLUSIVE, f"{why}: only {c.n} texts, and the bootstrap is calibrated from {CALIBRATED_MIN_N}"
    lo, hi, widened = sensitivity.holding(est, lo, hi)
    v = Verdict(outcome, why + (f"; {widened}" if widened else ""), "largest_of", "mean_delta_bpb", est, lo, hi, p,
                None, c.n, est, f"{target} − {runner}", f"{target} largest, CIs apart", alpha)
    return sensitivity.judge(v, 0.0, +1, calibrated=c.n >= CALIBRATED_MIN_N)


@rule_def("related_exceeds_unrelated", sentence=words.related_exceeds_unrelated)
def related_exceeds_unrelated(frame: pd.DataFrame, *, method: str = "lape",
                              groups: list[list[str]] = [],  # noqa: B006
                              min_n: int = 5, alpha: float = 0.05, confidence: float = 0.95,
                              n_resamples: int = 2000) -> Verdict:
    """For each row x in a group of related languages: mean ΔBPB on x's relatives − mean ΔBPB on languages of no
    group of x; the mean over such rows is > 0 (bootstrap CI)."""
    c = _Cells(frame)
    terms = []
    for g in groups:
        for x in g:
            rel = [y for y in g if y != x and (method, x, y) in c.col]
            unrel = [y for y in c.langs if y not in g and (method, x, y) in c.col]
            if rel and unrel:
                terms.append((x, rel, unrel))
    if not terms:
        return _none(frame, "related_exceeds_unrelated", "related_minus_unrelated",
                     f"no row of method '{method}' has both related and unrelated languages evaluated")
    if c.n < min_n:
        return _none(frame, "related_exceeds_unrelated", "related_minus_unrelated", f"only {c.n} texts (< {min_n})")

    def stat(m):
        return np.mean([np.mean([c.cell(m, method, x, y) for y in rel], axis=0)
                        - np.mean([c.cell(m, method, x, y) for y in unrel], axis=0) for x, rel, unrel in terms], axis=0)

    est = float(stat(c.mat))
    lo, hi, boot = _bootstrap(stat, c.mat, confidence, n_resamples, bca=False)
    p = _boot_p(boot, 0.0, +1, c.n)
    return _decide("related_exceeds_unrelated", "related_minus_unrelated", est, lo, hi, p, c.n, 0.0, +1, "> 0",
                   alpha, effect=est, effect_name="ΔBPB difference", confidence=confidence)


def replicate_table(frame: pd.DataFrame, method: str):
    """(edge count, total count, uniform share, replicates × [edge_count, total_count]) of `method`'s selection,
    or None when the frame has no full-selection counts.  Replicates with no selected neuron are left out."""
    sel = _select(frame, {"method": method})
    full = {r.metric: r.value for r in sel.itertuples()
            if pd.isna(r.layer) and pd.isna(r.set_lang) and pd.isna(r.sample)}
    if "edge_count" not in full or "total_count" not in full:
        return None
    reps = sel[sel["sample"].notna() & sel["metric"].isin(["edge_count", "total_count"])]
    table = reps.pivot_table(index="sample", columns="metric", values="value", aggfunc="sum")
    has = len(table) and {"edge_count", "total_count"} <= set(table.columns)
    table = table[table["total_count"] > 0] if has else table.iloc[0:0]  # replicates without both counts: none
    return int(full["edge_count"]), int(full["total_count"]), float(full.get("uniform_share", float("nan"))), table


@rule_def("binomial_share", sentence=words.binomial_share)
def binomial_share(frame: pd.DataFrame, *, method: str = "lape", min_share: float = 0.6, min_n: int = 10,
                   min_replicates: int = 10, alpha: float = 0.05, confidence: float = 0.95) -> Verdict:
    """edge_count / total_count ≥ `min_share`, with the uncertainty of the selection itself as the unit.

    The neurons of one selection are not independent trials (they are picked together, by one ranking), so
    no binomial test over neurons: the share is recomputed on split-half replicates of the selection documents
    (``sample`` = replicate, from ``split_halves``).  A half has half the text, so its share varies about
    √2 times as much as the full selection's: the replicates are centred on the full selection's share and
    their spread divided by √2 (estimate + (share_r − mean share) / √2), so the interval is about the full
    selection and always holds its estimate.  Interval: those values' percentiles; p = (1 + #{value <
    min_share}) / (1 + R).  The uniform share and the halves' Jaccard index are reported beside."""
    found = replicate_table(frame, method)
    if found is None:
        return _missing(frame, "binomial_share", "edge_share", {"method": method})
    k, n, uniform, table = found
    if n < min_n:
        return Verdict(Outcome.INCONCLUSIVE, f"only {n} selected neurons (< {min_n})", "binomial_share", "edge_share",
                       k / n if n else None, n=n, alpha=alpha)
    R = len(table)
    if R < min_replicates:
        return Verdict(Outcome.INCONCLUSIVE, f"share {k / n:.3g} ({k} of {n} neurons) but only {R} split-half "
                       f"replicates (< {min_replicates}; set split_halves): the selection's uncertainty is unknown",
                       "binomial_share", "edge_share", k / n, n=R, alpha=alpha)
    raw = (table["edge_count"] / table["total_count"]).to_numpy(float)
    shares = k / n + (raw - raw.mean()) / np.sqrt(2)
    q = (1 - confidence) / 2
    lo, hi = float(np.quantile(shares, q)), float(np.quantile(shares, 1 - q))
    p = float((1 + np.sum(shares < min_share)) / (1 + R))
    jac = _select(frame, {"method": method, "metric": "selection_jaccard"})["value"]
    v = _decide("binomial_share", "edge_share", k / n, lo, hi, p, R, min_share, +1, f"≥ {min_share:g}", alpha,
                effect=k / n - uniform, effect_name="share − uniform share", unit="split-half replicate",
                resampled=False, confidence=confidence)
    extra = (f"; {k} of {n} neurons; replicate shares {raw.min():.3g}–{raw.max():.3g} (halves, before "
             f"centring and ÷√2); uniform spread would give {uniform:.3g}; replicate totals "
             f"{int(table['total_count'].min())}–{int(table['total_count'].max())} neurons"
             + (f"; Jaccard of the halves' sets {jac.mean():.2f} ({jac.min():.2f}–{jac.max():.2f})" if len(jac) else ""))
    return replace(v, reason=v.reason + extra)


@rule_def("arg_extreme", sentence=words.arg_extreme)
def arg_extreme(frame: pd.DataFrame, *, metric: str, over: str, extreme: Literal["min", "max"] = "max",
                where: dict[str, Any] = {},  # noqa: B006
                expect: list[str] = [],  # noqa: B006
                band: list[float] = [],  # noqa: B006
                unit: str = "", replicates: bool = False, alpha: float = 0.05, confidence: float = 0.95,
                n_resamples: int = 2000) -> Verdict:
    """The value of column `over` where the metric is smallest/largest is one of `expect`, or lies in `band`
    (relative position [lo, hi] within the range of `over`, for layers).  Without `unit` the check is exact (one
    row per value, rows without a unit); with a unit the metric is averaged per value and the argmax is
    bootstrapped over units.  With ``replicates = true`` each unit already is a replicate of the whole
    measurement (split-half selections): the argmax is taken per replicate, p = (1 + #{outside}) / (1 + R)."""
    rows = _select(frame, {"metric": metric, **where})
    if not unit and "sample" in rows.columns:
        rows = rows[rows["sample"].isna()]
    elif unit:
        rows = rows[rows[unit].notna()]
    if rows.empty:
        return _missing(frame, "arg_extreme", metric, where)
    pick = np.argmin if extreme == "min" else np.argmax

    def ok(value) -> bool:
        if expect:
            return str(value) in expect
        lo_v, hi_v = float(values.min()), float(values.max())
        rel = (float(value) - lo_v) / (hi_v - lo_v) if hi_v > lo_v else 0.0
        return band[0] <= rel <= band[1]

    label = f"arg{extreme} of {metric} over {over} in {expect or band}"
    if not unit:
        table = rows.groupby(over)["value"].mean()
        values = table.index.to_numpy()
        best = table.min() if extreme == "min" else table.max()
        winners = table.index[table == best].tolist()
        where_txt = ", ".join(f"{k}: {v:g}" for k, v in table.items())
        if len(winners) > 1 and any(ok(w) for w in winners):
            return Verdict(Outcome.INCONCLUSIVE, f"tie at {best:g} between {winners} ({where_txt})", "arg_extreme",
                           metric, float(best), n=len(table), threshold=label, alpha=alpha)
        good = ok(winners[0])
        return Verdict(Outcome.SUPPORTED if good else Outcome.REFUTED,
                       f"arg{extreme} = {winners[0]} ({where_txt}; exact)", "arg_extreme", metric, float(best),
                       n=len(table), threshold=label, alpha=alpha,
                       sensitivity=None if good else f"exact: all {len(table)} values of {over} measured")
    mat_df = rows.pivot_table(index=unit, columns=over, values="value", aggfunc="mean").dropna()
    values = mat_df.columns.to_numpy()
    mat = mat_df.to_numpy(float)
    if replicates:
        return _replicate_argmax(frame, rows, mat, values, pick, ok, metric, over, extreme, label, alpha)
    est_i = int(pick(mat.mean(axis=0)))
    at = lambda m: pick(np.asarray(m, float).mean(axis=-2), axis=-1).astype(float)  # noqa: E731
    lo, hi, boot = _bootstrap(at, mat, confidence, n_resamples, bca=False)
    inside = np.array([ok(values[int(i)]) for i in boot])
    p = float((1 + np.sum(~inside)) / (1 + len(boot)))
    est = values[est_i]
    txt = (f"arg{extreme} {over} = {est} (bootstrap {inside.mean():.0%} inside; positions "
           f"[{values[int(lo)]}, {values[int(hi)]}])")
    sens = None
    if mat.shape[0] < CALIBRATED_MIN_N:
        outcome = Outcome.INCONCLUSIVE
        txt += f": only {mat.shape[0]} units, and the bootstrap is calibrated from {CALIBRATED_MIN_N}"
    elif ok(est) and p < alpha:
        outcome = Outcome.SUPPORTED
    elif not ok(values[int(lo)]) and not ok(values[int(hi)]) and inside.mean() <= alpha:
        outcome = Outcome.REFUTED
        sens = f"the {over} falls outside {expect or band} in {1 - inside.mean():.0%} of {len(boot)} resamples"
    else:
        outcome = Outcome.INCONCLUSIVE
    ci_lo, ci_hi, widened = sensitivity.holding(float(est), float(values[int(lo)]), float(values[int(hi)]))
    return Verdict(outcome, txt + f", p = {p:.3g}" + (f"; {widened}" if widened else ""), "arg_extreme", metric,
                   float(est), ci_lo, ci_hi, p, None, mat.shape[0], float(inside.mean()), "bootstrap share inside",
                   label, alpha, sensitivity=sens)


def _replicate_argmax(frame, rows, mat, values, pick, ok, metric, over, extreme, label, alpha) -> Verdict:
    """arg_extreme over replicates (R, values): the full-data winner decides, the replicates give its stability."""
    R = mat.shape[0]
    if R < 5:
        return Verdict(Outcome.INCONCLUSIVE, f"only {R} replicates", "arg_extreme", metric, n=R, threshold=label,
                       alpha=alpha)
    full = _select(frame, {"metric": metric})
    full = full[full["sample"].isna()].groupby(over)["value"].mean() if "sample" in full.columns else full.iloc[0:0]
    winners = [values[int(i)] for i in pick(mat, axis=1)]
    inside = np.array([ok(w) for w in winners])
    p = float((1 + np.sum(~inside)) / (1 + R))
    est = full.idxmin() if extreme == "min" and len(full) else (full.idxmax() if len(full) else None)
    est_ok = ok(est) if est is not None else bool(inside.mean() > 0.5)
    counts = pd.Series(winners).value_counts()
    txt = (f"arg{extreme} {over} = {est} on all selection text; per split-half replicate: "
           + ", ".join(f"{k} {v}×" for k, v in counts.items()) + f" of {R} ({inside.mean():.0%} inside)")
    sens = None
    if est_ok and p < alpha:
        outcome = Outcome.SUPPORTED
    elif not est_ok and inside.mean() <= alpha:
        outcome = Outcome.REFUTED
        sens = f"{int((~inside).sum())} of {R} split-half replicates put it outside"
    else:
        outcome = Outcome.INCONCLUSIVE
    return Verdict(outcome, txt + f", p = {p:.3g} (over {R} split-half replicates)", "arg_extreme", metric,
                   float(full.min() if extreme == "min" else full.max()) if len(full) else None, None, None, p,
                   None, R, float(inside.mean()), "replicate share inside", label, alpha,
                   sensitivity=sens if outcome is Outcome.REFUTED else None)

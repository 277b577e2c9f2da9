"""Compare two run records cell by cell (matched on spec id, model and seed).

By default a cell differs when its outcome or estimate changed.  ``exact`` asks more, for checking that a change
of code kept every result: the whole verdict (outcome, estimate, interval, p-values, n, effect, reason, parts)
must be equal, and so must the measured frame (values, columns and dtypes), read from each run's folder.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any


def _key(cell: dict[str, Any]) -> tuple[str, str, int]:
    return cell["spec"]["id"], cell["model"], cell.get("seed", 0)


def diff_runs(a: dict[str, Any], b: dict[str, Any], rel_tol: float = 1e-6,
              exact_dirs: tuple[Path, Path] | None = None) -> list[dict[str, Any]]:
    """Rows for cells whose outcome or estimate differ, or that exist in only one run; with `exact_dirs` (the
    two run folders), also cells whose verdict differs in any field or whose frames are not equal."""
    cells_a = {_key(c): c for c in a["cells"]}
    cells_b = {_key(c): c for c in b["cells"]}
    rows = []
    for key in sorted(set(cells_a) | set(cells_b)):
        ca, cb = cells_a.get(key), cells_b.get(key)
        va = (ca or {}).get("verdict") or {}
        vb = (cb or {}).get("verdict") or {}
        ea, eb = va.get("estimate"), vb.get("estimate")
        changed_outcome = va.get("outcome") != vb.get("outcome")
        changed_estimate = not _close(ea, eb, rel_tol)
        exact = None
        if exact_dirs is not None and ca is not None and cb is not None and not (changed_outcome or changed_estimate):
            exact = "verdict" if va != vb else "frame" if not _same_frame(key, exact_dirs) else None
        if ca is None or cb is None or changed_outcome or changed_estimate or exact:
            rows.append({
                "spec": key[0], "model": key[1], "seed": key[2],
                "outcome_a": va.get("outcome", "—"), "outcome_b": vb.get("outcome", "—"),
                "estimate_a": ea, "estimate_b": eb,
                "change": "only in A" if cb is None else "only in B" if ca is None
                else "outcome" if changed_outcome else "estimate" if changed_estimate else exact,
            })
    return rows


def _close(x: float | None, y: float | None, rel_tol: float) -> bool:
    if x is None or y is None:
        return x is y
    return math.isclose(x, y, rel_tol=rel_tol, abs_tol=1e-12)


def _same_frame(key: tuple[str, str, int], dirs: tuple[Path, Path]) -> bool:
    """True when both runs hold the same frame for the cell (or neither holds one)."""
    import pandas as pd

    from bench.ground.store import slug

    paths = [d / "frames" / key[0] / f"{slug(key[1])}.parquet" for d in dirs]
    if not any(p.exists() for p in paths):
        return True
    if not all(p.exists() for p in paths):
        return False
    fa, fb = (pd.read_parquet(p) for p in paths)
    return list(fa.columns) == list(fb.columns) and fa.dtypes.equals(fb.dtypes) and fa.equals(fb)

"""Compare two run records cell by cell (matched on spec id, model and seed)."""

from __future__ import annotations

import math
from typing import Any


def _key(cell: dict[str, Any]) -> tuple[str, str, int]:
    return cell["spec"]["id"], cell["model"], cell.get("seed", 0)


def diff_runs(a: dict[str, Any], b: dict[str, Any], rel_tol: float = 1e-6) -> list[dict[str, Any]]:
    """Rows for cells whose outcome or estimate differ, or that exist in only one run."""
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
        if ca is None or cb is None or changed_outcome or changed_estimate:
            rows.append({
                "spec": key[0], "model": key[1], "seed": key[2],
                "outcome_a": va.get("outcome", "—"), "outcome_b": vb.get("outcome", "—"),
                "estimate_a": ea, "estimate_b": eb,
                "change": "only in A" if cb is None else "only in B" if ca is None
                else "outcome" if changed_outcome else "estimate",
            })
    return rows


def _close(x: float | None, y: float | None, rel_tol: float) -> bool:
    if x is None or y is None:
        return x is y
    return math.isclose(x, y, rel_tol=rel_tol, abs_tol=1e-12)

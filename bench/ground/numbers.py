"""How the terminal and the baseline's tables write a number: three significant digits, scientific notation
outside [1e-3, 1e5), a dash for a missing value."""

from __future__ import annotations


def fmt(x: float | None, digits: int = 3) -> str:
    if x is None:
        return "—"
    if x != 0 and (abs(x) < 10 ** -(digits) or abs(x) >= 10 ** 5):
        return f"{x:.{digits - 1}e}"
    return f"{x:.{digits}g}" if abs(x) < 1 else f"{x:.{digits + 1}g}"

"""Side-by-side tables for the benchmarks against peers (B2-B5): Stalwart, each peer, the ratio."""

from __future__ import annotations

import math
from collections.abc import Sequence

__all__ = ["format_table", "ratio", "ratio_text"]


def ratio(value: float | None, base: float | None) -> float | None:
    """``value / base``; None when either is missing, not finite, or ``base`` is 0."""
    if value is None or base is None or not math.isfinite(value) or not math.isfinite(base):
        return None
    if base == 0:
        return None
    return value / base


def ratio_text(value: float | None, base: float | None) -> str:
    """:func:`ratio` as ``"2.50x"``, or ``"n/a"``."""
    r = ratio(value, base)
    return "n/a" if r is None else f"{r:.2f}x"


def format_table(title: str, header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A plain-text table: ``== title``, the header, a rule, one line per row, columns aligned.

    Every row must have as many cells as the header (ValueError otherwise).
    """
    for row in rows:
        if len(row) != len(header):
            raise ValueError(f"a row has {len(row)} cells, the header {len(header)}: {row!r}")
    table = [list(header), *[list(row) for row in rows]]
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    lines = [f"== {title}"]
    for i, row in enumerate(table):
        lines.append("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
        if i == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)

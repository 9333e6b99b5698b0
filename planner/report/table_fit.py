"""The plan's recommendations table fitted to a terminal: at a width too narrow for every column, whole
columns are left out, least important first (`DROP_ORDER`), instead of rich shrinking all of them (at 80-160
columns the rank and deployment columns shrank to nothing); the caller says which were left out."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

# the columns a narrow terminal drops first (the rest, rank, deployment, GPUs and the figures against the
# SLO, always show): rich otherwise shrinks every column, down to an empty deployment column at 80-160
UNBOUNDED = 100_000  # a measuring width past any table's (rich clamps a measurement to the one given)
WRAP_WIDTHS = (14, 10)  # narrower wrapping columns, tried once every droppable column is gone
DROP_ORDER = ("needs", "bottleneck", "$/Mtok", "precision", "headroom", "MTP", "batch", "figures", "tok/s/user")


def _table(title: str, rows: list[dict[str, Any]], cols: list[str], wrap_width: int = 18) -> Table:
    t = Table(title=title)
    cells = [
        {k: "-" if v is None else f"{v:,}" if isinstance(v, int | float) else str(v) for k, v in row.items()}
        for row in rows
    ]
    for col in cols:
        left = col in ("deployment", "precision", "figures", "headroom", "bottleneck", "SLO", "needs")
        wraps = col in ("deployment", "needs")
        t.add_column(
            col,
            justify="left" if left else "right",
            no_wrap=not wraps,
            # a wrapping column never to a letter per line; the others never cut short
            min_width=wrap_width if wraps else max(len(col), *(len(c[col]) for c in cells)),
        )
    for c in cells:
        t.add_row(*(Text(c[col]) for col in cols))
    return t


def fitted(con: Console, title: str, rows: list[dict[str, Any]]) -> tuple[Table, list[str]]:
    """The recommendations table with the columns `con`'s width holds (dropped in `DROP_ORDER`), and
    those it left out."""
    cols = list(rows[0]) if rows else []
    left_out: list[str] = []

    def fits(t: Table) -> bool:
        return Measurement.get(con, con.options.update(max_width=UNBOUNDED), t).minimum <= con.width

    t = _table(title, rows, cols)
    for col in DROP_ORDER:
        if fits(t):
            return t, left_out
        if col in cols:
            cols.remove(col)
            left_out.append(col)
            t = _table(title, rows, cols)
    for width in WRAP_WIDTHS:  # still too wide (80 columns cut 'meets (simulate)' to 'meets (simulat'): the
        if fits(t):  # wrapping deployment column gives up width before any figure is cut
            break
        t = _table(title, rows, cols, width)
    return t, left_out

"""The summary table of ``make bench``: a row per measure, its baseline, the must-reach and the goal.

Pure formatting and judging, no database: ``tests/unit/test_bench_summary.py`` tests it.

A row carries the measured figure (a ratio, or a count for the instruction rows) and
the bound it is judged against: ``<=`` (a cost: lower is better) or ``>=`` (a share
of the baseline: higher is better). ``met?`` is ``goal`` when the goal is reached,
``yes`` when only the must-reach is, ``no`` when neither is, and ``-`` when the row
was not measured in this run (its figure is None; the note says why).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

HEADER = ("measure", "baseline of the same run", "ratio or figure", "must reach", "goal", "met?")


@dataclass(frozen=True)
class Row:
    """One line of the summary."""

    measure: str
    #: what the figure is measured against, as printed (e.g. "bare copy 12.3 µs/row")
    baseline: str
    #: the measured figure; None when this run did not measure it
    value: float | None
    #: "<=" when lower is better, ">=" when higher is better
    direction: str
    must: float
    goal: float
    #: how the figure prints: "ratio" (2.31×), "share" (0.84) or "k" (instructions, 834k)
    unit: str = "ratio"
    #: printed after the figure (sizes, spread, why it was not measured)
    note: str = ""

    def __post_init__(self) -> None:
        if self.direction not in ("<=", ">="):
            raise ValueError(f"direction must be '<=' or '>=', not {self.direction!r}")
        if self.unit not in ("ratio", "share", "k"):
            raise ValueError(f"unit must be 'ratio', 'share' or 'k', not {self.unit!r}")
        better = self.goal <= self.must if self.direction == "<=" else self.goal >= self.must
        if not better:
            raise ValueError(f"{self.measure}: the goal {self.goal} is easier than the must-reach {self.must}")


def reaches(value: float, direction: str, bound: float) -> bool:
    return value <= bound if direction == "<=" else value >= bound


def met(row: Row) -> str:
    """``goal``, ``yes`` (the must-reach only), ``no``, or ``-`` (not measured)."""
    if row.value is None:
        return "-"
    if reaches(row.value, row.direction, row.goal):
        return "goal"
    if reaches(row.value, row.direction, row.must):
        return "yes"
    return "no"


def figure(value: float, unit: str) -> str:
    if unit == "k":
        return f"{value / 1000:,.0f}k"
    if unit == "share":
        return f"{value:.2f}"
    return f"{value:.2f}×"


def bound(row: Row, value: float) -> str:
    return f"{row.direction} {figure(value, row.unit)}".replace("<=", "≤").replace(">=", "≥")


def cells(row: Row) -> tuple[str, ...]:
    shown = "not measured" if row.value is None else figure(row.value, row.unit)
    if row.note:
        shown += f" ({row.note})"
    return (row.measure, row.baseline, shown, bound(row, row.must), bound(row, row.goal), met(row))


def escape(cell: str) -> str:
    """A cell of a markdown table: a pipe inside it would end the cell."""
    return cell.replace("|", "\\|")


def markdown(rows: list[Row], title: str = "") -> str:
    """The summary as a markdown table (aligned, so that it also reads as plain text)."""
    body = [tuple(escape(c) for c in cells(r)) for r in rows]
    widths = [max(len(line[i]) for line in [HEADER, *body]) for i in range(len(HEADER))]

    def line(values: tuple[str, ...]) -> str:
        return "| " + " | ".join(v.ljust(w) for v, w in zip(values, widths, strict=True)) + " |"

    out = [line(HEADER), "|" + "|".join("-" * (w + 2) for w in widths) + "|", *(line(b) for b in body)]
    if title:
        out = [title, "", *out]
    return "\n".join(out) + "\n"


def tally(rows: list[Row]) -> str:
    """One line: how many rows reached their goal, their must-reach, neither, or were not measured."""
    counts = {k: sum(1 for r in rows if met(r) == k) for k in ("goal", "yes", "no", "-")}
    return (
        f"{len(rows)} row{'' if len(rows) == 1 else 's'}: {counts['goal']} at goal, {counts['yes']} must-reach only,"
        f" {counts['no']} missed, {counts['-']} not measured"
    )


def write(path: str | Path, text: str) -> None:
    Path(path).write_text(text, encoding="utf-8")

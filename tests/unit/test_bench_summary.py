"""The summary table of ``make bench``: how a figure is judged against its must-reach and goal, and printed."""

from __future__ import annotations

from pathlib import Path

import pytest

from memgov_pg.policy import load_policy
from tests.bench.bench_summary import DEFAULT_POLICY, without_detectors
from tests.bench.summary import HEADER, Row, markdown, met, tally, write


def cost(value: float | None, note: str = "") -> Row:
    """A ratio where lower is better: must <= 1.8, goal <= 1.4."""
    return Row("bulk 50k / bare", "bare copy 12.0 µs/row", value, "<=", 1.8, 1.4, note=note)


def share(value: float | None) -> Row:
    """A share of the baseline where higher is better: must >= 0.5, goal >= 0.8."""
    return Row("plain SELECT under read rules / without", "owner 80 ms", value, ">=", 0.5, 0.8, "share")


@pytest.mark.parametrize(
    ("value", "expected"),
    [(1.2, "goal"), (1.4, "goal"), (1.41, "yes"), (1.8, "yes"), (1.81, "no"), (5.0, "no"), (None, "-")],
)
def test_a_cost_is_met_at_or_below_its_bounds(value: float | None, expected: str) -> None:
    assert met(cost(value)) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [(0.95, "goal"), (0.8, "goal"), (0.79, "yes"), (0.5, "yes"), (0.49, "no"), (0.0, "no"), (None, "-")],
)
def test_a_share_is_met_at_or_above_its_bounds(value: float | None, expected: str) -> None:
    assert met(share(value)) == expected


def test_instruction_counts_print_in_thousands() -> None:
    row = Row("instructions, stored single-row write", "bare copy 398k", 834_123, "<=", 650_000, 560_000, "k")
    line = markdown([row]).splitlines()[2]
    assert [c.strip() for c in line.strip("|").split("|")] == [
        "instructions, stored single-row write", "bare copy 398k", "834k", "≤ 650k", "≤ 560k", "no",
    ]  # fmt: skip


def test_the_table_has_the_six_columns_and_a_line_per_row() -> None:
    rows = [cost(2.31, "31.2 µs/row"), share(0.84), cost(None, "needs valgrind")]
    text = markdown(rows, "summary")
    lines = text.splitlines()
    assert lines[0] == "summary" and lines[1] == ""
    assert [c.strip() for c in lines[2].strip("|").split("|")] == list(HEADER)
    assert set(lines[3]) <= {"|", "-"}
    cells = [[c.strip() for c in line.strip("|").split("|")] for line in lines[4:]]
    assert [c[2] for c in cells] == ["2.31× (31.2 µs/row)", "0.84", "not measured (needs valgrind)"]
    assert [c[3:] for c in cells] == [["≤ 1.80×", "≤ 1.40×", "no"], ["≥ 0.50", "≥ 0.80", "goal"],
                                      ["≤ 1.80×", "≤ 1.40×", "-"]]  # fmt: skip
    assert len({len(line) for line in lines[2:]}) == 1, "the columns are aligned"


def test_a_pipe_in_a_cell_does_not_split_it() -> None:
    row = Row("a | b", "x", 1.0, "<=", 2.0, 1.5)
    line = markdown([row]).splitlines()[2]
    assert line.startswith("| a \\| b ")
    assert line.count(" | ") == len(HEADER) - 1


def test_tally_counts_each_outcome() -> None:
    rows = [cost(1.0), cost(1.5), cost(3.0), share(0.6), share(None)]
    assert tally(rows) == "5 rows: 1 at goal, 2 must-reach only, 1 missed, 1 not measured"
    assert tally(rows[:1]) == "1 row: 1 at goal, 0 must-reach only, 0 missed, 0 not measured"


@pytest.mark.parametrize(
    ("direction", "must", "goal", "unit"),
    [("<", 1.8, 1.4, "ratio"), ("<=", 1.4, 1.8, "ratio"), (">=", 0.8, 0.5, "share"), ("<=", 1.8, 1.4, "µs")],
)
def test_a_row_that_cannot_be_judged_is_refused(direction: str, must: float, goal: float, unit: str) -> None:
    with pytest.raises(ValueError):
        Row("m", "b", 1.0, direction, must, goal, unit)


def test_write_puts_the_markdown_in_the_file(tmp_path: Path) -> None:
    path = tmp_path / "bench.md"
    text = markdown([cost(1.3)])
    write(path, text)
    assert path.read_text(encoding="utf-8") == text


def test_the_policy_without_content_detectors_reads_none() -> None:
    default = DEFAULT_POLICY.read_text(encoding="utf-8")
    assert load_policy(default).needs_detectors
    stripped = load_policy(without_detectors(default))
    assert not stripped.needs_detectors
    assert stripped.version == "1.0.0-no-detectors"
    assert {r.id for r in load_policy(default).write_rules} - {r.id for r in stripped.write_rules} == {"block-secrets"}

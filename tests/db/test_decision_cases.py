"""Every decision corpus under tests/cases/decisions/, decided by real PostgreSQL."""

from __future__ import annotations

import pytest

from tests.decision_cases import load_groups, run_group

GROUPS = load_groups()


@pytest.mark.parametrize("group", [g for _, g in GROUPS], ids=[name for name, _ in GROUPS])
def test_decisions(db_conn, group):
    failures = run_group(db_conn, group)
    assert not failures, "\n".join(failures)


def test_corpus_is_not_empty():
    assert len(GROUPS) >= 1
    assert sum(len(g["cases"]) for _, g in GROUPS) >= 20

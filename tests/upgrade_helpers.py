"""One step of memgov's Alembic history on a populated database: seal the log, upgrade, and
check that nothing was lost and the sealed log is intact (tests/db/test_upgrade_*.py)."""

from __future__ import annotations

from typing import Any

import psycopg

from memgov_pg.migrate import current_revision, upgrade

TABLES = ("long_term_memory_items", "decision_log", "approval_requests", "decision_log_seals")


def counts(su: psycopg.Connection[Any]) -> dict[str, int]:
    return {t: su.execute(f"SELECT count(*) FROM memgov.{t}").fetchone()[0] for t in TABLES}


def sealed_upgrade(dsn: str, revision: str) -> None:
    """Seals the log of a database holding one filed request, upgrades it to ``revision``, and
    asserts that every table keeps its rows and verify-log its verdict and sealed rows."""
    with psycopg.connect(dsn, autocommit=True) as su:
        su.execute("CALL memgov.run_maintenance()")  # seals the log
        before = counts(su)
        sealed = su.execute("SELECT memgov.verify_decision_log()").fetchone()[0]
        assert sealed["ok"] and sealed["unsealed_rows"] == 0, sealed
        assert before["decision_log_seals"] > 0 and before["approval_requests"] == 1

        upgrade(dsn, revision)
        assert current_revision(dsn) == revision
        assert counts(su) == before
        report = su.execute("SELECT memgov.verify_decision_log()").fetchone()[0]
        assert report["ok"] and report["rows"] == sealed["rows"], report

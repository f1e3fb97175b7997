"""Migrations: the Alembic history builds exactly what sql/ builds, and round-trips."""

from __future__ import annotations

import difflib
import re
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

from memgov_pg.cluster import find_bindir
from memgov_pg.migrate import apply_sql_files, current_revision, downgrade, head_revision, upgrade
from tests.cli_helpers import assert_one_line_error, run_memgov

REPO = Path(__file__).resolve().parents[2]


def schema_dump(dsn: str) -> str:
    """pg_dump --schema-only of the memgov schema, normalised for comparison."""
    out = subprocess.run(
        [str(find_bindir() / "pg_dump"), "--schema-only", "--schema=memgov", "--dbname", dsn],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    lines = []
    for line in out.splitlines():
        if not line.strip() or line.startswith(
            ("--", "SET ", "SELECT pg_catalog.set_config", "\\restrict", "\\unrestrict")
        ):
            continue
        lines.append(re.sub(r"\s+", " ", line.rstrip()))
    return "\n".join(lines)


def assert_same_schema(left: str, right: str, left_name: str, right_name: str) -> None:
    if left != right:
        diff = "\n".join(
            difflib.unified_diff(left.splitlines(), right.splitlines(), left_name, right_name, lineterm="", n=2)
        )
        pytest.fail(f"schemas differ:\n{diff[:6000]}")


@pytest.mark.slow
def test_migrations_build_the_same_schema_as_sql_files(memgov_server, request):
    from_sql = memgov_server.create_database(f"mig_sql_{id(request)}")
    from_alembic = memgov_server.create_database(f"mig_alembic_{id(request)}")
    try:
        apply_sql_files(from_sql)
        upgrade(from_alembic)
        dumped = schema_dump(from_sql)
        assert "CREATE TABLE memgov.long_term_memory_items" in dumped
        assert_same_schema(dumped, schema_dump(from_alembic), "sql/", "alembic head")
    finally:
        memgov_server.drop_database(f"mig_sql_{id(request)}")
        memgov_server.drop_database(f"mig_alembic_{id(request)}")


@pytest.mark.slow
def test_upgrade_downgrade_upgrade_round_trip(empty_dsn):
    upgrade(empty_dsn)
    first = schema_dump(empty_dsn)
    downgrade(empty_dsn, "base")
    assert current_revision(empty_dsn) is None
    with psycopg.connect(empty_dsn) as conn:
        assert conn.execute("SELECT to_regnamespace('memgov')").fetchone() == (None,)
    upgrade(empty_dsn)
    assert current_revision(empty_dsn) == head_revision()
    assert_same_schema(first, schema_dump(empty_dsn), "first upgrade", "after round trip")


@pytest.mark.slow
def test_alembic_command_from_repository_root(empty_dsn):
    """`alembic upgrade memgov@head` from the repository root does what `memgov migrate` does."""
    result = subprocess.run(
        [sys.executable, "-m", "alembic", "-x", f"dsn={empty_dsn}", "upgrade", "memgov@head"],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    assert current_revision(empty_dsn) == head_revision()


def test_migrate_is_idempotent(empty_dsn):
    assert upgrade(empty_dsn) == (None, head_revision())
    assert upgrade(empty_dsn) == (head_revision(), head_revision())


def test_branch_label_downgrades_to_base(empty_dsn):
    upgrade(empty_dsn, "memgov@head")
    downgrade(empty_dsn, "memgov@base")
    assert current_revision(empty_dsn) is None
    with psycopg.connect(empty_dsn) as conn:
        assert conn.execute("SELECT to_regnamespace('memgov')").fetchone() == (None,)


@pytest.mark.slow
def test_a_revision_the_history_does_not_know_is_one_error_line(empty_dsn):
    """A database stamped with a revision this memgov does not ship (an unreleased one
    squashed away, a newer memgov's) fails with one line and is left as it was."""
    upgrade(empty_dsn)
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        conn.execute("UPDATE public.memgov_alembic_version SET version_num = '0004_feedback_retention'")
    result = run_memgov("migrate", "--dsn", empty_dsn)
    assert_one_line_error(result, "alembic:", "0004_feedback_retention")
    assert current_revision(empty_dsn) == "0004_feedback_retention"


@pytest.mark.slow
def test_each_revision_s_downgrade_restores_the_schema_before_it(empty_dsn):
    from memgov_pg.migrate import shipped_revisions

    revisions = list(reversed(shipped_revisions()))  # oldest first
    dumps = {}
    for revision in revisions:
        upgrade(empty_dsn, revision)
        dumps[revision] = schema_dump(empty_dsn)
    for newer, older in zip(reversed(revisions), list(reversed(revisions))[1:], strict=False):
        downgrade(empty_dsn, older)
        assert current_revision(empty_dsn) == older
        assert_same_schema(dumps[older], schema_dump(empty_dsn), older, f"{newer} downgraded")


def test_downgrade_refuses_seals_that_cover_the_settings_trail(empty_dsn):
    """0001_initial verifies only 'memgov-seal-v1' hashes: the downgrade refuses while a seal
    that covers the settings trail is left, and changes nothing."""
    upgrade(empty_dsn)
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO memgov.decision_log_seals (seal_id, sealed_by, horizon_xact_id, after_xact_id,"
            " after_decision_id, last_xact_id, last_decision_id, row_count, decision_ids, row_digests,"
            " last_decided_at, prev_hash, seal_hash, settings_change_id, settings_hash)"
            " VALUES (1, 'x', 2, 0, 0, 1, 1, 1, '{1}', '\\x00'::bytea, now(), '\\x00'::bytea, '\\x00'::bytea,"
            " 0, '\\x00'::bytea)"
        )
    with pytest.raises(Exception, match="cover the settings trail"):
        downgrade(empty_dsn, "0001_initial")
    assert current_revision(empty_dsn) == head_revision()

"""The exit-code table of docs/operations.md, one test per row, each as a user runs the command:
0 ok, 1 failed or findings, 2 usage, 3 busy or locked, 130 interrupted."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import psycopg
import pytest

from memgov_pg.errors import ExitCode
from tests.clean_slate import fresh
from tests.cli_helpers import assert_one_line_error, run_memgov
from tests.net_helpers import refused_port
from tests.waiting import DEADLINE, blocked_by, wait_for

REPO = Path(__file__).resolve().parents[2]
DEFAULT = str(REPO / "policies" / "default.yaml")


def deployed_versions(conn: psycopg.Connection[Any]) -> list[tuple[str, str]]:
    return conn.execute("SELECT org_id, version FROM memgov.policy_versions ORDER BY 1, 2").fetchall()


def maintenance_runs(conn: psycopg.Connection[Any]) -> int:
    return conn.execute("SELECT count(*) FROM memgov.maintenance_runs").fetchone()[0]


@pytest.fixture
def su(db_conn):
    fresh(db_conn, nothing)
    return db_conn


def nothing(conn):
    """No policy: the slate is the wipe alone."""


def test_the_codes_are_the_documented_ones():
    assert {code.name: int(code) for code in ExitCode} == {
        "OK": 0, "FAILED": 1, "USAGE": 2, "BUSY": 3, "INTERRUPTED": 130,
    }  # fmt: skip
    table = (REPO / "docs" / "operations.md").read_text(encoding="utf-8").split("## Exit codes", 1)[1]
    for code in ExitCode:
        assert f"| {int(code)} |" in table, f"exit code {int(code)} is missing from docs/operations.md's table"


@pytest.mark.slow
def test_ok_is_0(su, memgov_dsn):
    result = run_memgov("validate", DEFAULT)
    assert result.returncode == ExitCode.OK, result.stderr


@pytest.mark.slow
def test_failure_is_1_and_one_line():
    with refused_port() as port:
        result = run_memgov("status", "--dsn", f"host=127.0.0.1 port={port} dbname=x connect_timeout=2")
    assert result.returncode == ExitCode.FAILED
    assert_one_line_error(result)


@pytest.mark.slow
@pytest.mark.parametrize(
    "args",
    [("status", "--no-such-option"), ("deploy",), ("deploy", DEFAULT, "--tenant", "a b"), ("no-such-command",)],
    ids=["unknown-option", "missing-argument", "malformed-tenant", "unknown-command"],
)
def test_usage_is_2(args):
    result = run_memgov(*args)
    assert result.returncode == ExitCode.USAGE, result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.slow
def test_sweep_in_progress_is_3_and_does_nothing(su, memgov_dsn):
    runs = maintenance_runs(su)
    with psycopg.connect(memgov_dsn, autocommit=True) as holder:
        holder.execute("SELECT memgov.claim_maintenance()")  # what a run in progress holds
        result = run_memgov("retention", "run", "--dsn", memgov_dsn)
    assert result.returncode == ExitCode.BUSY, result.stderr
    assert_one_line_error(result, "another maintenance run is in progress")
    assert maintenance_runs(su) == runs


@pytest.mark.slow
def test_lock_not_granted_within_lock_timeout_is_3_and_deploys_nothing(su, memgov_dsn):
    """A DBA's `PGOPTIONS='-c lock_timeout=…'` turns waiting for another deploy into exit 3 (55P03)."""
    before = deployed_versions(su)
    with psycopg.connect(memgov_dsn) as holder:  # a deploy in progress holds this row
        holder.execute("SELECT FROM memgov.engine_locks WHERE name = 'deploy' FOR UPDATE")
        result = run_memgov("deploy", DEFAULT, "--dsn", memgov_dsn, env={"PGOPTIONS": "-c lock_timeout=300ms"})
        holder.rollback()
    assert result.returncode == ExitCode.BUSY, result.stderr
    assert_one_line_error(result, "[55P03]")
    assert deployed_versions(su) == before


@pytest.mark.slow
def test_interrupt_is_130_and_rolls_back(su, memgov_dsn):
    """Ctrl-C while `memgov deploy` waits for another deploy: exit 130, nothing deployed, and its
    backend waits no more (the query was cancelled, not left waiting for the lock)."""
    before = deployed_versions(su)
    env = {k: v for k, v in os.environ.items() if k not in ("MEMGOV_DSN", "MEMGOV_HOME")}
    with psycopg.connect(memgov_dsn) as holder:
        holder.execute("SELECT FROM memgov.engine_locks WHERE name = 'deploy' FOR UPDATE")
        holder_pid = holder.info.backend_pid
        proc = subprocess.Popen(
            [sys.executable, "-m", "memgov_pg.cli", "deploy", DEFAULT, "--dsn", memgov_dsn],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
            # Ctrl-C reaches a command run in the foreground of a terminal; a test run started in
            # the background (`make test &`) ignores SIGINT, and its children would inherit that
            preexec_fn=_default_sigint,
        )  # fmt: skip
        try:
            deploying = wait_for(lambda: _waiting_for(su, holder_pid), "memgov deploy to wait for the deploy lock")
            proc.send_signal(signal.SIGINT)
            _, stderr = proc.communicate(timeout=DEADLINE)
            # the lock is still held: a backend that waits no more had its query cancelled
            wait_for(lambda: not blocked_by(su, deploying, holder_pid), "the interrupted deploy to stop waiting")
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
        holder.rollback()
    assert proc.returncode == ExitCode.INTERRUPTED, stderr
    assert stderr.strip().splitlines() == ["memgov: interrupted"], stderr
    assert deployed_versions(su) == before


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _waiting_for(conn: psycopg.Connection[Any], holder_pid: int) -> int | None:
    """The backend waiting for a lock that ``holder_pid`` holds, if one does."""
    row = conn.execute(
        "SELECT pid FROM pg_stat_activity WHERE %s = ANY(pg_blocking_pids(pid)) LIMIT 1", (holder_pid,)
    ).fetchone()
    return None if row is None else int(row[0])

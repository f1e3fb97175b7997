"""Retention runs side by side (docs/retention.md): the advisory lock, a killed and a failed
run, yielding to busy sessions, pg_cron's history, and the static check of the code.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg import errors

from tests import retention_helpers
from tests.attack_helpers import connect_as_role
from tests.retention_helpers import alive, deploy, logged_ids, remember, seed_expired, sweep
from tests.waiting import DEADLINE, blocked_by, join, wait_for

#: the fixtures this module shares with its topic's other modules, and those they ask for
#: (pytest looks for fixtures by name in the test module)
su = retention_helpers.su
writer = retention_helpers.writer


# -- one run at a time; killed and failed runs -------------------------------------------------


class Sweeper:
    """CALL memgov.run_maintenance() on its own connection, in a thread."""

    def __init__(self, dsn: str, **settings: str) -> None:
        options = " ".join(f"-c {name}={value}" for name, value in settings.items())
        self.conn = psycopg.connect(dsn, autocommit=True, options=options)
        self.pid = self.conn.info.backend_pid
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        try:
            self.conn.execute("CALL memgov.run_maintenance()")
        except BaseException as exc:
            self.error = exc

    def start(self) -> Sweeper:
        self.thread.start()
        return self

    def join(self) -> None:
        join(self.thread, "the sweep")

    def close(self) -> None:
        self.conn.close()


@contextmanager
def stalled_mid_run(su: psycopg.Connection[Any], dsn: str) -> Iterator[tuple[Sweeper, int, psycopg.Connection[Any]]]:
    """A sweep (in a thread) that has committed its first batch and waits inside its second,
    its deletions there uncommitted, for as long as the stall (yielded, with the run's id)
    holds the deletion log: whatever the machine's speed, the sweep cannot run ahead.

    A gate holds the deletion log (SHARE) when the sweep starts, so the first batch waits at
    its log INSERT; the stall queues for the same lock behind it; when the gate lets go, the
    first batch commits and its release grants the stall the lock before the second batch
    asks for it. The sweep is yours to end (join, cancel, terminate) and close."""
    with psycopg.connect(dsn, autocommit=True) as gate, psycopg.connect(dsn, autocommit=True) as stall:
        gate.execute("BEGIN")
        gate.execute("LOCK TABLE memgov.deletion_log IN SHARE MODE")
        sweeper = Sweeper(dsn).start()
        wait_for(lambda: blocked_by(su, sweeper.pid, gate.info.backend_pid), "the first batch to wait")
        stall.execute("BEGIN")
        queued = threading.Thread(target=stall.execute, args=("LOCK TABLE memgov.deletion_log IN SHARE MODE",))
        queued.start()
        wait_for(lambda: blocked_by(su, stall.info.backend_pid, sweeper.pid), "the stall to queue behind it")
        gate.execute("ROLLBACK")
        join(queued, "the stall's lock")
        wait_for(lambda: blocked_by(su, sweeper.pid, stall.info.backend_pid), "the second batch to wait")
        (run_id,) = su.execute("SELECT run_id FROM memgov.maintenance_runs WHERE status = 'running'").fetchone()
        try:
            yield sweeper, int(run_id), stall
        finally:
            if stall.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
                stall.execute("ROLLBACK")


def test_a_second_run_while_one_holds_the_lock_returns_at_once(su, memgov_dsn):
    deploy(su, "2.0.0", batch_size=20)
    seed_expired(su, 1000)
    with stalled_mid_run(su, memgov_dsn) as (first, run_id, stall):
        try:
            # a second run waiting for the lease would wait for the stalled first: a bound
            # far beyond a quick return turns that into a failure instead of a hang
            with psycopg.connect(memgov_dsn, autocommit=True, options="-c statement_timeout=120s") as second:
                notices: list[str | None] = []
                second.add_notice_handler(lambda diag: notices.append(diag.sqlstate))
                second.execute("CALL memgov.run_maintenance()")
            assert notices == ["MG409"]
            assert blocked_by(su, first.pid, stall.info.backend_pid)  # returned while the first still waits
            assert su.execute("SELECT count(*) FROM memgov.maintenance_runs").fetchone()[0] == 1
            stall.execute("ROLLBACK")
            first.join()
            assert first.error is None
        finally:
            first.close()
    assert su.execute("SELECT run_id, status FROM memgov.maintenance_runs").fetchall() == [(run_id, "finished")]
    assert su.execute("SELECT count(*) FROM memgov.long_term_memory_items").fetchone()[0] == 0


def test_a_killed_run_loses_nothing_and_the_next_run_finishes(writer, su, memgov_dsn):
    deploy(su, "2.0.0", batch_size=25)
    seed_expired(su, 2000)
    fresh = [remember(writer, f"fresh {i}", retention="ttl_7d") for i in range(5)]
    expired_ids = {r[0] for r in su.execute(
        "SELECT memory_id FROM memgov.long_term_memory_items WHERE expires_at <= now()")}  # fmt: skip
    with stalled_mid_run(su, memgov_dsn) as (killed, run_id, stall):
        try:
            assert su.execute("SELECT pg_terminate_backend(%s)", (killed.pid,)).fetchone()[0]
            stall.execute("ROLLBACK")
            killed.join()
            assert isinstance(killed.error, psycopg.OperationalError)
        finally:
            killed.close()

    # what the killed run committed is deleted and logged, its last batch rolled back whole
    status, logged_by_summary = su.execute(
        "SELECT status, (summary #>> '{deleted,ttl}')::int FROM memgov.maintenance_runs WHERE run_id = %s", (run_id,)
    ).fetchone()
    assert status == "running"  # nobody has marked it yet
    remaining = {r[0] for r in su.execute("SELECT memory_id FROM memgov.long_term_memory_items")}
    logged = logged_ids(su, "run_id = %s", (run_id,))
    assert 0 < len(logged) == logged_by_summary < len(expired_ids)
    assert set(logged) | (remaining & expired_ids) == expired_ids
    assert not set(logged) & remaining

    # the next run finishes the work and marks the killed one
    summary = sweep(su)
    assert summary["deleted"]["ttl"] == len(expired_ids) - len(logged)
    assert su.execute(
        "SELECT status, finished_at IS NOT NULL FROM memgov.maintenance_runs WHERE run_id = %s", (run_id,)
    ).fetchone() == ("interrupted", True)
    assert alive(su, *expired_ids) == set()
    assert alive(su, *fresh) == set(fresh)
    all_logged = logged_ids(su)
    assert sorted(all_logged, key=str) == sorted(expired_ids, key=str)  # each exactly once


def test_a_failed_run_releases_the_lock_of_its_session(su, memgov_dsn):
    deploy(su, "2.0.0", batch_size=20)
    seed_expired(su, 1000)
    with stalled_mid_run(su, memgov_dsn) as (failed, _, stall):
        try:
            su.execute("SELECT pg_cancel_backend(%s)", (failed.pid,))
            failed.join()
            stall.execute("ROLLBACK")
            assert isinstance(failed.error, errors.QueryCanceled)
            # its session lives on, and the next run (from another session) is not locked out
            assert failed.conn.execute("SELECT 1").fetchone() == (1,)
            summary = sweep(su)
            assert summary["deleted"]["ttl"] > 0
            assert su.execute("SELECT count(*) FROM memgov.long_term_memory_items").fetchone()[0] == 0
            assert su.execute("SELECT array_agg(status ORDER BY run_id) FROM memgov.maintenance_runs"
                                 ).fetchone()[0] == ["interrupted", "finished"]  # fmt: skip
        finally:
            failed.close()


def pauses(watcher: psycopg.Connection[Any], sweeper: Sweeper) -> int:
    """Watch the sweep until it ends: how often it was seen asleep between batches."""
    slept = 0
    deadline = time.monotonic() + DEADLINE
    while sweeper.thread.is_alive():
        assert time.monotonic() < deadline, "the sweep did not end"
        row = watcher.execute("SELECT wait_event FROM pg_stat_activity WHERE pid = %s", (sweeper.pid,)).fetchone()
        slept += row is not None and row[0] == "PgSleep"
        time.sleep(0.01)
    return slept


def test_the_sweep_yields_while_other_sessions_are_busy(su, memgov_dsn):
    deploy(su, "2.0.0", batch_size=10)
    seed_expired(su, 300)
    with psycopg.connect(memgov_dsn, autocommit=True) as busy:
        busy.execute("BEGIN")
        busy.execute("SELECT 1")  # idle in transaction: a session at work
        # each pause is as long as it may be (1 s): the watcher cannot miss the first
        sweeper = Sweeper(memgov_dsn, **{"memgov.maintenance_yield": "1000"}).start()
        try:
            wait_for(lambda: su.execute(
                "SELECT wait_event = 'PgSleep' FROM pg_stat_activity WHERE pid = %s", (sweeper.pid,)
            ).fetchone()[0], "the sweep to pause between batches")  # fmt: skip
            busy.execute("ROLLBACK")
            sweeper.join()
            assert sweeper.error is None
        finally:
            sweeper.close()
    assert su.execute("SELECT count(*) FROM memgov.long_term_memory_items").fetchone()[0] == 0


def test_the_sweep_runs_at_full_speed_when_nobody_else_is_busy(su, memgov_server, memgov_dsn):
    """Watched from another database, whose sessions the sweep does not count: were it to
    pause at all, it would sleep a full second after each of its ten batches."""
    deploy(su, "2.0.0", batch_size=10)
    seed_expired(su, 100)
    with psycopg.connect(memgov_server.dsn("postgres"), autocommit=True) as watcher:
        sweeper = Sweeper(memgov_dsn, **{"memgov.maintenance_yield": "1000"}).start()
        try:
            slept = pauses(watcher, sweeper)
            sweeper.join()
            assert sweeper.error is None
        finally:
            sweeper.close()
    assert slept == 0
    assert su.execute("SELECT count(*) FROM memgov.long_term_memory_items").fetchone()[0] == 0


# -- pg_cron history ---------------------------------------------------------------------------


def test_prunes_its_own_pg_cron_history_when_it_can_see_it(su, memgov_dsn):
    """pg_cron lives in the cron database only; a stand-in `cron` schema here shows which rows go."""
    database = su.execute("SELECT current_database()").fetchone()[0]
    su.execute("""
        CREATE SCHEMA cron;
        CREATE TABLE cron.job (jobid bigint, jobname text, database text, command text, username text);
        CREATE TABLE cron.job_run_details (runid bigint, jobid bigint, status text, end_time timestamptz);
    """)
    try:
        su.execute(
            "INSERT INTO cron.job VALUES (1, 'memgov-maintenance:' || %(db)s, %(db)s, 'CALL memgov.run_maintenance()',"
            " 'postgres'), (2, 'other-job', %(db)s, 'VACUUM', 'postgres'),"
            " (3, 'memgov-maintenance:elsewhere', 'elsewhere', 'CALL memgov.run_maintenance()', 'postgres')",
            {"db": database},
        )
        su.execute(
            "INSERT INTO cron.job_run_details VALUES (1, 1, 'succeeded', now() - interval '8 days'),"
            " (2, 1, 'succeeded', now() - interval '1 day'), (3, 2, 'succeeded', now() - interval '30 days'),"
            " (4, 3, 'succeeded', now() - interval '30 days')"
        )
        # a memgov_admin that may not read schema cron: nothing pruned, no error
        su.execute("DROP ROLE IF EXISTS cron_blind_admin")
        su.execute("CREATE ROLE cron_blind_admin LOGIN IN ROLE memgov_admin")
        with connect_as_role(memgov_dsn, "cron_blind_admin", None) as blind:
            assert sweep(blind)["cron_history_pruned"] == 0
        assert sweep(su)["cron_history_pruned"] == 1
        assert [r[0] for r in su.execute("SELECT runid FROM cron.job_run_details ORDER BY runid")] == [2, 3, 4]
    finally:
        su.execute("DROP SCHEMA cron CASCADE")
        su.execute("DROP OWNED BY cron_blind_admin")
        su.execute("DROP ROLE IF EXISTS cron_blind_admin")


# -- static check -------------------------------------------------------------------------------


def test_feedback_and_retention_code_passes_plpgsql_check(db_conn, plpgsql_check):
    routines = [
        "memgov.memory_for_feedback(uuid)",
        "memgov.record_feedback(memgov.long_term_memory_items, text, numeric, text)",
        "memgov.confirm(uuid)",
        "memgov.reject(uuid)",
        "memgov.edit(uuid, text)",
        "memgov.forget(uuid)",
        "memgov.forget_filter(jsonb)",
        "memgov.forget_where(jsonb, boolean)",
        "memgov.sweep_batch(bigint, text, integer)",
        "memgov.start_maintenance(boolean)",
        "memgov.finish_maintenance(bigint, jsonb, bigint)",
        "memgov.run_maintenance(boolean)",
        "memgov.apply_retention(uuid)",
    ]
    for routine in routines:
        problems = db_conn.execute(
            "SELECT level, message, lineno FROM plpgsql_check_function_tb(%s::regprocedure) WHERE level = 'error'",
            (routine,),
        ).fetchall()
        assert problems == [], f"{routine}: {problems}"

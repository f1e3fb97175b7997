"""Failover to a streaming standby under load (docs/operations.md, "A primary with standbys").

The primary is a cluster of its own (durable: fsync on), with a synchronous streaming
standby built by ``pg_basebackup -R``. Writer logins write under load (stored, held,
quarantined and denied writes), a reviewer confirms, an admin runs the sweep; the primary
is stopped with ``pg_ctl stop -m immediate`` mid-load and the standby promoted. On the new
primary: every write whose commit the client saw is there with its decision log row,
verify-log is intact, sealing continues, a held request is approved (four eyes), a policy
deploys, and doctor reports no error.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from memgov_pg.cluster import LocalCluster
from tests.attack_helpers import deploy_policy, insert, item
from tests.cli_helpers import run_memgov
from tests.db.test_restore import (
    DB,
    as_login,
    doctor,
    login,
    migrated_with_logins,
    new_cluster,
    remove,
    run_as_server,
    seal,
    verify_log,
    wait_for,
    write,
    write_file,
)

pytestmark = pytest.mark.slow

STANDBY = "memgov_standby"
KINDS = ("allowed", "held", "quarantined", "denied")


@pytest.fixture
def pair() -> Iterator[tuple[LocalCluster, LocalCluster]]:
    """A primary with its synchronous standby, both running."""
    primary = new_cluster("failover-primary")
    primary.durable = True
    standby = new_cluster("failover-standby")
    standby.durable = True
    try:
        primary.init()
        primary.start_on_a_free_port()
        primary.bootstrap()
        dsn = migrated_with_logins(primary)
        # the sweep's pg_cron job, every minute: it lives in pg_cron's database and replicates with it
        scheduled = run_memgov("retention", "schedule", "* * * * *", "--dsn", dsn)
        assert scheduled.returncode == 0, scheduled.stderr
        standby.os_user.own(standby.base)
        run_as_server(primary, "pg_basebackup", "-h", "127.0.0.1", "-p", str(primary.port), "-U", "postgres",
                      "-D", str(standby.datadir), "-X", "stream", "-c", "fast", "-R")  # fmt: skip
        standby.configure()
        auto = standby.datadir / "postgresql.auto.conf"
        write_file(
            standby,
            auto,
            auto.read_text()
            + f"primary_conninfo = 'host=127.0.0.1 port={primary.port} user=postgres application_name={STANDBY}'\n",
        )
        standby.start_on_a_free_port()
        with psycopg.connect(primary.dsn("postgres"), autocommit=True) as su:
            su.execute(f"ALTER SYSTEM SET synchronous_standby_names = '{STANDBY}'")
            su.execute("SELECT pg_reload_conf()")

            def synchronous() -> bool:
                row = su.execute(
                    "SELECT sync_state FROM pg_stat_replication WHERE application_name = %s", (STANDBY,)
                ).fetchone()
                return row == ("sync",)

            wait_for("the standby to stream synchronously", synchronous)
        yield primary, standby
    finally:
        remove(standby)
        remove(primary)


def test_failover_under_load_keeps_every_acknowledged_write(pair: tuple[LocalCluster, LocalCluster]) -> None:
    primary, standby = pair
    dsn = primary.dsn(DB)
    acked: list[tuple[str, Any, str]] = []  # (kind, memory_id, status) the client saw committed
    errors: list[BaseException] = []
    stop = threading.Event()

    def writer(offset: int) -> None:
        try:
            with as_login(dsn, "writer") as conn:
                n = offset
                while not stop.is_set():
                    kind = KINDS[n % len(KINDS)]
                    n += 1
                    try:
                        row = insert(conn, item(kind, fact_text=f"{item(kind)['fact_text']} #{n}")).fetchone()
                    except psycopg.Error as exc:
                        if exc.sqlstate == "MG403":
                            continue
                        raise
                    if row is not None:
                        acked.append((kind, row[0], row[1]))
        except psycopg.OperationalError:
            pass  # the primary went away
        except BaseException as exc:  # handed to the test
            errors.append(exc)

    def sweeper() -> None:
        try:
            with as_login(dsn, "admin") as conn:
                while not stop.is_set():
                    conn.execute("CALL memgov.run_maintenance()")
        except psycopg.OperationalError:
            pass
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(2)]
    threads.append(threading.Thread(target=sweeper))
    for t in threads:
        t.start()
    try:
        wait_for("writes under load", lambda: len(acked) >= 60 or bool(errors))
        run_as_server(primary, "pg_ctl", "-D", str(primary.datadir), "-m", "immediate", "stop")
    finally:
        stop.set()
        for t in threads:
            t.join(120)
    assert not errors, errors
    seen = list(acked)

    run_as_server(standby, "pg_ctl", "-D", str(standby.datadir), "-w", "promote")
    new = standby.dsn(DB)
    with psycopg.connect(new, autocommit=True) as su:
        wait_for("promotion", lambda: su.execute("SELECT NOT pg_is_in_recovery()").fetchone() == (True,))
        missing = [
            (kind, memory_id)
            for kind, memory_id, _ in seen
            if su.execute(
                "SELECT EXISTS (SELECT FROM memgov.long_term_memory_items WHERE memory_id = %s) "
                "AND EXISTS (SELECT FROM memgov.decision_log WHERE memory_id = %s OR memory_ids @> ARRAY[%s]::uuid[])",
                (memory_id, memory_id, memory_id),
            ).fetchone()
            != (True,)
        ]
    assert missing == [], f"{len(missing)} of {len(seen)} acknowledged writes lost"

    # the log is intact, and sealing continues (the sweep interrupted by the crash included)
    code, report, text = verify_log(new)
    assert (code, report["ok"], report["counter_behind"]) == (0, True, None), text
    assert seal(new)["sealed"] >= 0
    with as_login(new, "admin") as admin:
        admin.execute("CALL memgov.run_maintenance()")
        last = admin.execute("SELECT status FROM memgov.maintenance_runs ORDER BY run_id DESC LIMIT 1").fetchone()
        assert last == ("finished",), last
    code, report, text = verify_log(new)
    assert (code, report["ok"], report["unsealed_rows"]) == (0, True, 0), text

    # pg_cron's job runs on the new primary (the standby had the job, and pg_cron waited for
    # the promotion), and its sweep completes
    with psycopg.connect(new, autocommit=True) as su:
        promoted_at = su.execute("SELECT now()").fetchone()[0]  # type: ignore[index]

        def cron_swept() -> bool:
            row = su.execute(
                "SELECT count(*) FROM memgov.maintenance_runs WHERE started_at > %s AND status = 'finished' "
                "AND run_by <> %s",
                (promoted_at, login("admin")),
            ).fetchone()
            return bool(row and row[0])

        wait_for("a sweep of pg_cron's job on the new primary", cron_swept, timeout=240)
        # a sweep the crash cut short is marked interrupted, and none is left running
        runs = dict(su.execute("SELECT status, count(*) FROM memgov.maintenance_runs GROUP BY status").fetchall())
        assert "running" not in runs, runs
        print(f"\nmaintenance runs on the new primary: {runs}")

    # four eyes as before: the writer's held request, approved by a reviewer
    with as_login(new, "reviewer2") as reviewer:
        request = reviewer.execute(
            "SELECT request_id FROM memgov.approval_requests WHERE status = 'pending' ORDER BY requested_at LIMIT 1"
        ).fetchone()
        assert request is not None
        assert reviewer.execute("SELECT memgov.approve(%s)", request).fetchone()[0]["status"] == "approved"  # type: ignore[index]
    # a policy deploys, and decides
    with psycopg.connect(new, autocommit=True) as su:
        deploy_policy(su, "1.1.0")
        active = su.execute("SELECT version FROM memgov.policy_versions WHERE org_id = '*' AND active").fetchone()
        assert active == ("1.1.0",)
    assert write(new, "held")["logged"] == ["require_approval"]
    assert [f for f in doctor(new)["findings"] if f["severity"] == "error"] == []
    print(f"\nfailover: {len(seen)} writes acknowledged before the crash, all {len(seen)} found after")

"""Backup and restore of a populated memgov database, as a DBA does them (docs/operations.md).

The source is a cluster of its own (started like the harness's: pg_cron preloaded, an
unprivileged OS user when run as root, a free port, data under /tmp), with WAL archiving
on and its transaction counter started at epoch 1, as on a server that has run for a
while. It holds stored, held, quarantined and denied writes of a real writer login, an
approval, feedback, a sealed log and rows written after the last seal. Each copy is a new
cluster:

* ``pg_dumpall --roles-only`` + ``pg_dump -Fc`` → ``pg_restore``: a logical copy, whose
  counter starts behind the log. ``memgov verify-log`` and ``memgov doctor`` say so and
  print the command; the test runs exactly that command, and the log is intact again;
* ``pg_basebackup`` + WAL archive replay to a named restore point: a physical copy, which
  keeps the counter.

After each: the row counts are the source's (as of the point, for the second), verify-log
is intact, the writer login's attacks on the write path fail and change nothing, a held
request is approved by another login, the writer's writes are decided by the same policy,
sealing continues, and doctor reports no error.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import conninfo, sql

from memgov_pg.cluster import LocalCluster, free_port
from memgov_pg.migrate import upgrade
from tests.attack_helpers import ORG, OTHER, deploy_policy, insert, item, refused
from tests.cli_helpers import run_memgov

pytestmark = pytest.mark.slow

DB = "memgov"
ROLES = {"writer": "memgov_writer", "reviewer": "memgov_reviewer", "reviewer2": "memgov_reviewer",
         "admin": "memgov_admin"}  # fmt: skip
KINDS = ("allowed", "held", "quarantined", "denied")
# what the attack policy decides for each kind of write (tests/attack_helpers.py)
DECIDED = {
    "allowed": {"status": "active", "error": None, "logged": ["allow"]},
    "held": {"status": "pending_approval", "error": None, "logged": ["require_approval"]},
    "quarantined": {"status": None, "error": None, "logged": ["quarantine"]},
    "denied": {"status": None, "error": "MG403", "logged": []},
}


def login(role: str) -> str:
    return f"restore_{role}"


def as_login(dsn: str, role: str) -> psycopg.Connection[Any]:
    """An autocommit connection as the login of ``role`` (session_user is that login), in tenant acme."""
    conn = psycopg.connect(conninfo.make_conninfo(dsn, user=login(role)), autocommit=True)
    conn.execute("SELECT set_config('memgov.org_id', %s, false)", (ORG,))
    return conn


def new_cluster(prefix: str) -> LocalCluster:
    base = Path(tempfile.mkdtemp(prefix=f"memgov-{prefix}-"))
    return LocalCluster(base, free_port(), durable=False)


def run_as_server(cluster: LocalCluster, *args: str) -> str:
    """A PostgreSQL tool of the cluster's installation, as the server's OS user; its output."""
    out = cluster.os_user.run([str(cluster.bindir / args[0]), *args[1:]])
    assert out.returncode == 0, f"{args[0]} failed: {out.stderr}{out.stdout}"
    return out.stdout


def write_file(cluster: LocalCluster, path: Path, text: str) -> None:
    out = cluster.os_user.run(["tee", str(path)], input=text)
    assert out.returncode == 0, out.stderr


def remove(cluster: LocalCluster) -> None:
    cluster.stop()
    shutil.rmtree(cluster.base, ignore_errors=True)


def wait_for(what: str, condition: Any, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def migrated_with_logins(cluster: LocalCluster) -> str:
    """Database DB of a started cluster, migrated, with a login of each of ROLES and the
    attack policy deployed: its DSN."""
    cluster.create_database(DB)
    dsn = cluster.dsn(DB)
    upgrade(dsn)
    with psycopg.connect(dsn, autocommit=True) as su:
        for role, group in ROLES.items():
            su.execute(sql.SQL("CREATE ROLE {} LOGIN IN ROLE {}").format(
                sql.Identifier(login(role)), sql.Identifier(group)))  # fmt: skip
        deploy_policy(su)
    return dsn


def counts(dsn: str) -> dict[str, int]:
    """The row count of every table of schema memgov (as the superuser)."""
    with psycopg.connect(dsn, autocommit=True) as su:
        tables = [r[0] for r in su.execute(
            "SELECT relname FROM pg_class WHERE relnamespace = 'memgov'::regnamespace AND relkind IN ('r', 'p') "
            "ORDER BY relname")]  # fmt: skip
        return {
            t: su.execute(sql.SQL("SELECT count(*) FROM memgov.{}").format(sql.Identifier(t))).fetchone()[0]  # type: ignore[index]
            for t in tables
        }


def last_decision(dsn: str) -> int:
    with psycopg.connect(dsn, autocommit=True) as su:
        return int(su.execute("SELECT coalesce(max(decision_id), 0) FROM memgov.decision_log").fetchone()[0])  # type: ignore[index]


def write(dsn: str, kind: str, **extra: Any) -> dict[str, Any]:
    """One write of ``kind`` as the writer login: what the client saw and the decision logged for it
    (a denied write's log row goes with its transaction: the client's MG403 is the decision)."""
    after = last_decision(dsn)
    with as_login(dsn, "writer") as writer:
        try:
            row = insert(writer, item(kind, **extra)).fetchone()
            seen = {"status": row[1] if row else None, "error": None}
        except psycopg.Error as exc:
            seen = {"status": None, "error": exc.sqlstate}
    with psycopg.connect(dsn, autocommit=True) as su:
        found = su.execute(
            "SELECT action FROM memgov.decision_log WHERE decision_id > %s AND login = %s", (after, login("writer"))
        )
        logged = [r[0] for r in found]
    return seen | {"logged": logged}


def decisions(dsn: str) -> dict[str, dict[str, Any]]:
    return {kind: write(dsn, kind) for kind in KINDS}


def verify_log(dsn: str) -> tuple[int, dict[str, Any], str]:
    """`memgov verify-log` as the admin login: exit code, its JSON, and its text."""
    dsn = conninfo.make_conninfo(dsn, user=login("admin"))
    as_json = run_memgov("verify-log", "--dsn", dsn, "--json")
    text = run_memgov("verify-log", "--dsn", dsn)
    assert as_json.returncode == text.returncode, (as_json.stderr, text.stderr)
    return as_json.returncode, json.loads(as_json.stdout), text.stdout


def doctor(dsn: str) -> dict[str, Any]:
    return json.loads(run_memgov("doctor", "--dsn", dsn, "--json").stdout)


def seal(dsn: str) -> dict[str, Any]:
    with as_login(dsn, "admin") as admin:
        return admin.execute("SELECT memgov.seal_decision_log()").fetchone()[0]  # type: ignore[index]


WRITE_PATH_INTERNALS = ("govern_write", "govern", "apply_write", "approve_request", "enforce_write", "log_decision",
                        "share_decision", "session_key", "engine_writes", "is_engine_write")  # fmt: skip


def assert_write_path_attacks_fail(dsn: str) -> None:
    """The writer login's attacks on the write path fail on the copy, and change nothing."""
    with psycopg.connect(dsn, autocommit=True) as su, as_login(dsn, "writer") as writer:
        request = su.execute("SELECT request_id FROM memgov.approval_requests WHERE status = 'pending' LIMIT 1")
        attacks = {
            "a write into another tenant": lambda: insert(writer, item("allowed", org=OTHER)),
            "rewriting the decision log": lambda: writer.execute("UPDATE memgov.decision_log SET action = 'allow'"),
            "deleting memories": lambda: writer.execute("DELETE FROM memgov.long_term_memory_items"),
            "approving a held write": lambda: writer.execute("SELECT memgov.approve(%s)", request.fetchone()),
            "switching triggers off": lambda: writer.execute("SET session_replication_role = replica"),
        }
        for attack in attacks.values():
            with refused(su, "42501"):
                attack()
        internals = su.execute(
            "SELECT p.oid::regprocedure::text FROM pg_proc p WHERE p.pronamespace = 'memgov'::regnamespace "
            "AND p.proname = ANY (%s) AND has_function_privilege(%s, p.oid, 'EXECUTE')",
            (list(WRITE_PATH_INTERNALS), login("writer")),
        ).fetchall()
        assert internals == []


def assert_restored_copy_works(dsn: str, expected_counts: dict[str, int], expected: dict[str, Any]) -> None:
    """Counts, an intact log, the same decisions, and sealing that goes on."""
    assert counts(dsn) == expected_counts
    code, report, text = verify_log(dsn)
    assert (code, report["ok"], report["counter_behind"]) == (0, True, None), text
    assert report["seals"] >= 1 and report["unsealed_rows"] >= 1, report
    assert "intact" in text.splitlines()[0]
    assert_write_path_attacks_fail(dsn)
    # a held request of the source is approved on the copy (four eyes: the writer asked)
    with as_login(dsn, "reviewer2") as reviewer:
        request = reviewer.execute(
            "SELECT request_id FROM memgov.approval_requests WHERE status = 'pending' ORDER BY requested_at LIMIT 1"
        ).fetchone()
        assert request is not None
        assert reviewer.execute("SELECT memgov.approve(%s)", request).fetchone()[0]["status"] == "approved"  # type: ignore[index]
    # the same policy decides the writer login's writes
    assert decisions(dsn) == expected
    # sealing continues: the rows written on the copy are sealed, and the chain verifies
    sealed = seal(dsn)
    assert sealed["sealed"] >= len(KINDS), sealed
    code, report, text = verify_log(dsn)
    assert (code, report["ok"], report["counter_behind"]) == (0, True, None), text
    assert report["last_seal_id"] == sealed["last_seal_id"]
    assert [f for f in doctor(dsn)["findings"] if f["severity"] == "error"] == []


# -- the source ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def source() -> Iterator[dict[str, Any]]:
    """The populated source cluster, its WAL archived, its counter at epoch 1."""
    cluster = new_cluster("restore-source")
    try:
        cluster.init()
        archive = cluster.base / "archive"
        assert cluster.os_user.run(["mkdir", str(archive)]).returncode == 0
        # a counter that has run past 2^32 transactions, as a busy server's has
        run_as_server(cluster, "pg_resetwal", "--epoch=1", "-D", str(cluster.datadir))
        write_file(
            cluster,
            cluster.datadir / "postgresql.auto.conf",
            f"archive_mode = on\narchive_command = 'test ! -f {archive}/%f && cp %p {archive}/%f'\n",
        )
        cluster.start_on_a_free_port()
        cluster.bootstrap()
        dsn = migrated_with_logins(cluster)
        expected = decisions(dsn)
        assert expected == DECIDED
        # feedback and an approval, then a seal; then rows after the last seal
        stored = write(dsn, "allowed", fact_text="likes oolong")
        assert stored["logged"] == ["allow"]
        with as_login(dsn, "reviewer") as reviewer:
            memory = reviewer.execute(
                "SELECT memory_id FROM memgov.long_term_memory_items WHERE status = 'active' LIMIT 1"
            ).fetchone()
            reviewer.execute("SELECT memgov.confirm(%s)", memory)
            request = reviewer.execute(
                "SELECT request_id FROM memgov.approval_requests WHERE status = 'pending' LIMIT 1"
            ).fetchone()
            reviewer.execute("SELECT memgov.approve(%s)", request)
        with as_login(dsn, "admin") as admin:
            admin.execute("CALL memgov.run_maintenance()")
        decisions(dsn)  # unsealed rows, one more held request
        yield {"cluster": cluster, "dsn": dsn, "archive": archive, "expected": expected}
    finally:
        remove(cluster)


# -- pg_dump / pg_restore --------------------------------------------------------------------


def test_pg_dump_restore_into_a_fresh_cluster(source: dict[str, Any]) -> None:
    src: LocalCluster = source["cluster"]
    expected_counts = counts(source["dsn"])
    work = src.base / "dump"
    assert src.os_user.run(["mkdir", str(work)]).returncode == 0
    host = ("-h", "127.0.0.1", "-p", str(src.port), "-U", "postgres")
    started = time.monotonic()
    run_as_server(src, "pg_dumpall", *host, "--roles-only", "-f", str(work / "roles.sql"))
    run_as_server(src, "pg_dump", *host, "-Fc", "-d", DB, "-f", str(work / "memgov.dump"))

    copy = new_cluster("restore-dump")
    try:
        copy.init()
        copy.start_on_a_free_port()
        copy.bootstrap()
        to = ("-h", "127.0.0.1", "-p", str(copy.port), "-U", "postgres")
        # the roles (the superuser's own line fails: it exists already)
        run_as_server(copy, "psql", *to, "-X", "-q", "-d", "postgres", "-f", str(work / "roles.sql"))
        copy.create_database(DB)
        run_as_server(copy, "pg_restore", *to, "-d", DB, "--exit-on-error", str(work / "memgov.dump"))
        restore_seconds = time.monotonic() - started
        dsn = copy.dsn(DB)
        assert counts(dsn) == expected_counts

        # the copy's counter is behind the chain: verify-log and doctor say so, and what to do
        code, report, text = verify_log(dsn)
        behind = report["counter_behind"]
        assert code == 1 and behind is not None, text
        assert behind["epoch"] == 2 and behind["next_xact_id"] < behind["needed_xact_id"], behind
        # the admin login may not read data_directory: the line names it DATADIR
        first = text.splitlines()[0]
        assert first.startswith("transaction counter BEHIND: ") and "`pg_resetwal --epoch=2 -D DATADIR`" in first
        # doctor, run as the superuser, names the data directory
        [finding] = [f for f in doctor(dsn)["findings"] if f["check"] == "xid-counter"]
        assert finding["severity"] == "error" and f"`pg_resetwal --epoch=2 -D {copy.datadir}`" in finding["fix"]
        # sealing now seals nothing; the sweep runs (it is not "busy": exit 0) and says why
        assert seal(dsn)["sealed"] == 0
        sweep = run_memgov("retention", "run", "--dsn", conninfo.make_conninfo(dsn, user=login("admin")))
        assert sweep.returncode == 0, sweep.stderr
        assert "ahead of this cluster's next transaction" in sweep.stderr, sweep.stderr
        expected_counts["maintenance_runs"] += 1

        # do what it says: stop the server, run the command as its OS user, start it
        [command] = re.findall(r"`(pg_resetwal [^`]*)`", finding["fix"])
        args = shlex.split(command)
        copy.stop()
        run_as_server(copy, *args)
        copy.start()

        code, report, text = verify_log(dsn)
        assert (code, report["ok"], report["counter_behind"]) == (0, True, None), text
        assert [f for f in doctor(dsn)["findings"] if f["severity"] == "error"] == []
        assert_restored_copy_works(dsn, expected_counts, source["expected"])
        print(f"\npg_dump -> pg_restore: {sum(expected_counts.values())} rows, restored in {restore_seconds:.1f} s")
    finally:
        remove(copy)


# -- pg_basebackup + WAL replay to a point in time ------------------------------------------------


def test_base_backup_and_point_in_time_recovery(source: dict[str, Any]) -> None:
    src: LocalCluster = source["cluster"]
    dsn = source["dsn"]
    copy = new_cluster("restore-pitr")
    try:
        copy.os_user.own(copy.base)
        started = time.monotonic()
        run_as_server(src, "pg_basebackup", "-h", "127.0.0.1", "-p", str(src.port), "-U", "postgres",
                      "-D", str(copy.datadir), "-X", "stream", "-c", "fast")  # fmt: skip
        # after the backup: writes, a seal, the point to recover to, and writes after it
        decisions(dsn)
        seal(dsn)
        write(dsn, "allowed", fact_text="written after the seal, before the point")
        with psycopg.connect(dsn, autocommit=True) as su:
            at_point = counts(dsn)
            su.execute("SELECT pg_create_restore_point('before_the_mistake')")
        decisions(dsn)
        assert counts(dsn) != at_point
        with psycopg.connect(dsn, autocommit=True) as su:
            wal = su.execute("SELECT pg_walfile_name(pg_switch_wal())").fetchone()[0]  # type: ignore[index]

            def archived() -> bool:
                last = su.execute("SELECT last_archived_wal FROM pg_stat_archiver").fetchone()
                return bool(last and last[0] and last[0] >= wal)

            wait_for(f"WAL segment {wal} archived", archived)

        # the copy replays the archive to the restore point, then is promoted
        copy.configure()
        write_file(
            copy,
            copy.datadir / "postgresql.auto.conf",
            f"restore_command = 'cp {source['archive']}/%f %p'\n"
            "recovery_target_name = 'before_the_mistake'\nrecovery_target_action = 'promote'\n",
        )
        write_file(copy, copy.datadir / "recovery.signal", "")
        copy.start()
        copy_dsn = copy.dsn(DB)

        def promoted() -> bool:
            try:
                with psycopg.connect(copy_dsn, autocommit=True) as su:
                    return su.execute("SELECT NOT pg_is_in_recovery()").fetchone() == (True,)
            except psycopg.OperationalError:
                return False

        wait_for("the copy's promotion", promoted)
        restore_seconds = time.monotonic() - started
        assert_restored_copy_works(copy_dsn, at_point, source["expected"])
        print(f"\npg_basebackup + WAL replay: {sum(at_point.values())} rows, restored in {restore_seconds:.1f} s")
    finally:
        remove(copy)

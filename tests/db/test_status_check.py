"""`memgov status --check`: exit 0 healthy, 1 degraded (one line per problem), 2 unreachable.

One test per row of the table in docs/retention.md (Watching it), each made for real
in a fresh migrated database of the session's server: policies deployed with `memgov deploy`,
the job installed with `memgov retention schedule`, sweeps run with `memgov retention run`;
only time is faked, by moving timestamps back as a superuser (requests, quarantined writes,
maintenance runs, and pg_cron's own record of its runs in ``cron.job_run_details``). pg_cron
lives in one database the whole session shares (``cron.database_name``): a test touches only
its own database's job and runs, and removes them. A server without pg_cron is a cluster of
its own. The checks a monitoring login runs are run as real logins too: one in memgov_admin
(with and without the grants pg_cron's database needs), and one with no memgov role.
"""

from __future__ import annotations

import datetime as dt
import itertools
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from memgov_pg.cluster import LocalCluster, free_port
from memgov_pg.migrate import head_revision
from memgov_pg.retention import job_name
from memgov_pg.status import previous_firings
from memgov_pg.testing import Server
from tests.attack_helpers import login_dsn
from tests.cli_helpers import run_memgov
from tests.net_helpers import refused_port

POLICY = """
version: "1.0.0"
defaults: {on_policy_miss: allow}
retention: {approval_ttl: 7 days}
rules:
  - {id: hold-words, priority: 20, when: [{field: fact_text, operator: contains, value: HOLDME}],
     action: require_approval}
  - {id: quarantine-words, priority: 30, when: [{field: fact_text, operator: contains, value: QUARANTINEME}],
     action: quarantine}
"""

NO_POLICY = "no active policy: every write is denied (NO_ACTIVE_POLICY); run `memgov deploy`"
NEVER_SWEPT = (
    "retention has never run and no pg_cron job runs it: `memgov retention schedule` "
    "(a sweep now: `memgov retention run`)"
)
#: what a superuser grants memgov_admin in pg_cron's database (docs/retention.md)
USAGE_GRANT = "GRANT USAGE ON SCHEMA cron TO memgov_admin"
SCHEDULE_GRANT = "GRANT EXECUTE ON FUNCTION cron.schedule_in_database(text,text,text,text,text,boolean) TO memgov_admin"

Run = Callable[..., subprocess.CompletedProcess[str]]


# -- helpers ----------------------------------------------------------------------------------


def assert_check(dsn: str, status: str, problems: list[str], run: Run = run_memgov) -> None:
    """`memgov status --check`, as text and as JSON: its exit code, and exactly these problem lines."""
    code = {"healthy": 0, "degraded": 1, "unreachable": 2}[status]
    text = run("status", "--check", "--dsn", dsn)
    assert text.returncode == code, text.stdout + text.stderr
    database = psycopg.conninfo.conninfo_to_dict(dsn)["dbname"]
    assert text.stdout.splitlines() == (problems or [f"healthy: {database}"])
    as_json = run("status", "--check", "--json", "--dsn", dsn)
    assert as_json.returncode == code, as_json.stdout + as_json.stderr
    assert json.loads(as_json.stdout) == {"status": status, "problems": problems}


def memgov(*args: str) -> subprocess.CompletedProcess[str]:
    """A memgov command that must succeed."""
    result = run_memgov(*args)
    assert result.returncode == 0, result.stdout + result.stderr
    return result


def deploy(dsn: str, tmp_path: Path) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY, encoding="utf-8")
    memgov("deploy", str(policy), "--dsn", dsn)


def daily_schedule_12_hours_away() -> str:
    """A daily schedule (GMT) that fired about 12 and 36 hours ago, and does not fire while the test runs."""
    now = dt.datetime.now(dt.UTC)
    return f"{now.minute} {(now.hour + 12) % 24} * * *"


def schedule(dsn: str) -> tuple[int, str]:
    """`memgov retention schedule`: (job id, schedule)."""
    job = json.loads(memgov("retention", "schedule", daily_schedule_12_hours_away(), "--dsn", dsn, "--json").stdout)
    return int(job["jobid"]), str(job["schedule"])


def never_swept_by(user: str, database: str) -> str:
    """The never-run problem for a login that sees only its own pg_cron jobs."""
    return (
        f"retention has never run and {user} sees no pg_cron job {job_name(database)} (pg_cron shows a role only "
        "the jobs it scheduled): `memgov retention schedule` as this login (a sweep now: `memgov retention run`)"
    )


def sweep(dsn: str, hours_ago: float = 0) -> None:
    """`memgov retention run`, then (as a superuser) moved ``hours_ago`` into the past."""
    run_id = json.loads(memgov("retention", "run", "--dsn", dsn, "--json").stdout)["run_id"]
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            "UPDATE memgov.maintenance_runs SET started_at = started_at - %(ago)s, finished_at = finished_at - %(ago)s"
            " WHERE run_id = %(run_id)s",
            {"ago": dt.timedelta(hours=hours_ago), "run_id": run_id},
        )


def cron_ran(cron: psycopg.Connection[Any], jobid: int, hours_ago: float, status: str = "succeeded",
             message: str = "CALL") -> dt.datetime:  # fmt: skip
    """Record a run of the job in pg_cron's history, as pg_cron does (a superuser); its start time."""
    row = cron.execute(
        "INSERT INTO cron.job_run_details"
        " (jobid, job_pid, database, username, command, status, return_message, start_time, end_time)"
        " SELECT jobid, 4242, database, username, command, %(status)s, %(message)s, t, t + interval '2 seconds'"
        "   FROM cron.job, date_trunc('second', now() - %(ago)s) AS t"
        "  WHERE jobid = %(jobid)s"
        " RETURNING start_time",
        {"jobid": jobid, "status": status, "message": message, "ago": dt.timedelta(hours=hours_ago)},
    ).fetchone()
    assert row is not None
    return row[0]  # type: ignore[no-any-return]


def write(dsn: str, *texts: str) -> None:
    """Agent writes of tenant acme, as memgov_writer (the policy holds HOLDME, quarantines QUARANTINEME)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SET ROLE memgov_writer")
        conn.execute("SET memgov.org_id = 'acme'")
        for text in texts:
            conn.execute(
                "INSERT INTO memgov.long_term_memory_items (org_id, category, fact_text, source, confidence)"
                " VALUES ('acme', 'user_fact', %s, 'agent_extracted', 0.9)",
                (text,),
            )


def backdate(dsn: str, table: str, column: str, days: int, like: str) -> None:
    """As a superuser: move the rows of ``table`` whose payload's fact_text is LIKE ``like`` back in time."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        moved = conn.execute(
            f"UPDATE memgov.{table} SET {column} = {column} - make_interval(days => %s)"
            " WHERE payload->>'fact_text' LIKE %s",
            (days, like),
        ).rowcount
    assert moved == 1


def overdue_line(started: dt.datetime, schedule: str) -> str:
    return f"retention sweep overdue: last run started {started.isoformat()}, schedule '{schedule}' (GMT)"


_databases = itertools.count()


def _cron_database(server: Server) -> str:
    with psycopg.connect(server.admin_dsn, autocommit=True) as conn:
        return str(conn.execute("SHOW cron.database_name").fetchone()[0])  # type: ignore[index]


@pytest.fixture
def fresh(memgov_server: Server, memgov_template: str, requires_pg_cron: None) -> Iterator[str]:
    """DSN of a fresh migrated database for this test, on a server with pg_cron (else every check
    would also say that pg_cron is missing); its pg_cron job and history go with it."""
    name = f"memgov_check_{os.getpid()}_{next(_databases)}"
    dsn = memgov_server.create_database(name, template=memgov_template)
    try:
        yield dsn
    finally:
        with psycopg.connect(memgov_server.dsn(_cron_database(memgov_server)), autocommit=True) as cron:
            found = cron.execute("SELECT jobid FROM cron.job WHERE jobname = %s", (job_name(name),)).fetchall()
            jobids = [jobid for (jobid,) in found]
            cron.execute("DELETE FROM cron.job_run_details WHERE jobid = ANY(%s)", (jobids,))
            cron.execute("SELECT cron.unschedule(jobid) FROM unnest(%s::bigint[]) AS jobid", (jobids,))
        memgov_server.drop_database(name)


@pytest.fixture
def cron(memgov_server: Server, requires_pg_cron: None) -> Iterator[psycopg.Connection[Any]]:
    """A superuser connection to pg_cron's database."""
    with psycopg.connect(memgov_server.dsn(_cron_database(memgov_server)), autocommit=True) as conn:
        yield conn


# -- healthy ----------------------------------------------------------------------------------


@pytest.mark.slow
def test_healthy_is_exit_0_and_one_line(fresh, cron, tmp_path):
    deploy(fresh, tmp_path)
    schedule(fresh)
    sweep(fresh)
    assert_check(fresh, "healthy", [])


@pytest.mark.slow
def test_a_scheduled_job_not_yet_due_is_healthy(fresh, cron, tmp_path):
    deploy(fresh, tmp_path)
    schedule(fresh)
    assert_check(fresh, "healthy", [])  # nothing ever ran
    # a sweep run by hand long before the job was installed does not make the new job overdue
    sweep(fresh, hours_ago=72)
    assert_check(fresh, "healthy", [])


# -- degraded, one rule each ------------------------------------------------------------------


@pytest.mark.slow(reason="runs the memgov command")
def test_unmigrated_database_is_degraded(empty_dsn):
    assert_check(empty_dsn, "degraded", ["schema memgov is not installed: run `memgov migrate`"])


@pytest.mark.slow
def test_no_active_policy_is_degraded(fresh):
    schedule(fresh)
    assert_check(fresh, "degraded", [NO_POLICY])


@pytest.mark.slow
def test_no_job_and_no_sweep_ever_is_degraded(fresh, tmp_path):
    """A fresh database: nothing has expired a memory or an approval yet, and nothing will."""
    deploy(fresh, tmp_path)
    assert_check(fresh, "degraded", [NEVER_SWEPT])
    memgov("retention", "run", "--dry-run", "--dsn", fresh)  # counting is not sweeping
    assert_check(fresh, "degraded", [NEVER_SWEPT])
    sweep(fresh)  # a sweep without a job: another scheduler may run it
    assert_check(fresh, "healthy", [])


@pytest.mark.slow
def test_no_sweep_yet_but_a_job_is_healthy(fresh, tmp_path):
    deploy(fresh, tmp_path)
    assert_check(fresh, "degraded", [NEVER_SWEPT])
    schedule(fresh)
    assert_check(fresh, "healthy", [])


@pytest.mark.slow
def test_an_inactive_job_is_degraded(fresh, cron, tmp_path):
    deploy(fresh, tmp_path)
    jobid, _ = schedule(fresh)
    sweep(fresh)
    cron.execute("SELECT cron.alter_job(%s, active => false)", (jobid,))
    database = psycopg.conninfo.conninfo_to_dict(fresh)["dbname"]
    assert_check(fresh, "degraded", [
        f"pg_cron job {job_name(database)} is inactive: the sweep does not run "
        "(`memgov retention schedule` replaces it with an active one)",
    ])  # fmt: skip
    schedule(fresh)
    assert_check(fresh, "healthy", [])


@pytest.mark.slow
def test_pg_cron_missing_is_degraded(tmp_path):
    base = Path(tempfile.mkdtemp(prefix="memgov-check-nocron-"))  # the server's OS user must reach it
    cluster = LocalCluster(base, free_port(), durable=False)
    try:
        cluster.init()
        cluster.start_on_a_free_port()
        cluster.create_database("governed")
        dsn = cluster.dsn("governed")
        memgov("migrate", "--dsn", dsn)
        deploy(dsn, tmp_path)
        # loaded (shared_preload_libraries), but CREATE EXTENSION pg_cron never ran in its database
        assert_check(dsn, "degraded", [
            "pg_cron unavailable: pg_cron is loaded but not installed in its database postgres: "
            "run CREATE EXTENSION pg_cron there as a superuser",
        ])  # fmt: skip
        # not loaded at all: postgresql.auto.conf wins over the cluster's memgov.conf, which a
        # restart on another port rewrites (ALTER SYSTEM cannot write an empty list: it preloads plpgsql)
        with psycopg.connect(cluster.dsn("postgres"), autocommit=True) as conn:
            conn.execute("ALTER SYSTEM SET shared_preload_libraries = 'plpgsql'")
        cluster.stop()
        cluster.start_on_a_free_port()
        dsn = cluster.dsn("governed")
        not_loaded = [
            "pg_cron unavailable: pg_cron is not loaded by this server: add shared_preload_libraries = 'pg_cron' "
            "and cron.database_name = '<database>' to postgresql.conf, restart PostgreSQL, and run "
            "CREATE EXTENSION pg_cron in that database (Debian/Ubuntu: apt-get install postgresql-15-cron)",
        ]
        assert_check(dsn, "degraded", not_loaded)
        # a memgov_admin login is told the same: not loaded is not "may not read"
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("CREATE ROLE check_admin LOGIN IN ROLE memgov_admin")
        assert_check(login_dsn(dsn, "check_admin"), "degraded", not_loaded)
    finally:
        cluster.stop()
        shutil.rmtree(base, ignore_errors=True)


@pytest.mark.slow
def test_last_cron_run_failed_is_degraded(fresh, cron, tmp_path):
    deploy(fresh, tmp_path)
    jobid, _ = schedule(fresh)
    sweep(fresh)
    cron_ran(cron, jobid, hours_ago=2)
    assert_check(fresh, "healthy", [])  # an earlier run succeeded
    started = cron_ran(cron, jobid, hours_ago=1, status="failed",
                       message="ERROR:  canceling statement due to\n statement timeout")  # fmt: skip
    database = psycopg.conninfo.conninfo_to_dict(fresh)["dbname"]
    assert_check(fresh, "degraded", [
        f"last pg_cron run of {job_name(database)} failed at {started.isoformat()}: "
        "ERROR: canceling statement due to statement timeout",
    ])  # fmt: skip


@pytest.mark.slow
def test_sweep_overdue_by_more_than_one_interval_is_degraded(fresh, cron, tmp_path):
    deploy(fresh, tmp_path)
    jobid, every_day = schedule(fresh)  # it fired about 12 and 36 hours ago
    cron_ran(cron, jobid, hours_ago=30)
    assert_check(fresh, "healthy", [])  # late by one firing: less than one interval
    cron.execute("DELETE FROM cron.job_run_details WHERE jobid = %s", (jobid,))
    started = cron_ran(cron, jobid, hours_ago=40)
    assert_check(fresh, "degraded", [overdue_line(started, every_day)])  # two firings missed
    sweep(fresh, hours_ago=39)  # memgov's own record of a run counts too
    with psycopg.connect(fresh) as conn:
        (memgov_started,) = conn.execute("SELECT max(started_at) FROM memgov.maintenance_runs").fetchone()  # type: ignore[misc]
    assert_check(fresh, "degraded", [overdue_line(memgov_started, every_day)])
    sweep(fresh)  # a run now catches up
    assert_check(fresh, "healthy", [])


@pytest.mark.slow
def test_approval_requests_past_their_expiry_are_degraded(fresh, tmp_path):
    deploy(fresh, tmp_path)
    schedule(fresh)
    write(fresh, "HOLDME old", "HOLDME new")
    assert_check(fresh, "healthy", [])
    backdate(fresh, "approval_requests", "requested_at", days=8, like="HOLDME old")  # approval_ttl: 7 days
    assert_check(fresh, "degraded", [
        "approvals overdue: 1 pending longer than approval_ttl (the sweep expires them: is it running?)",
    ])  # fmt: skip


@pytest.mark.slow
def test_quarantine_growing_is_degraded(fresh, tmp_path):
    deploy(fresh, tmp_path)
    schedule(fresh)
    write(fresh, "QUARANTINEME old", "QUARANTINEME new")
    assert_check(fresh, "healthy", [])
    backdate(fresh, "quarantine", "quarantined_at", days=8, like="QUARANTINEME old")  # approval_ttl: 7 days
    assert_check(fresh, "degraded", [
        "quarantine growing: 1 held longer than approval_ttl (release or purge them)",
    ])  # fmt: skip


# A memgov that ships a revision newer than the database's: this release ships one revision only,
# so the command runs as a memgov whose history has one more on top (the database is untouched).
NEWER_MEMGOV = """
import sys
import memgov_pg.migrate as m
shipped = m.shipped_revisions()
m.shipped_revisions = lambda: ["0002_newer", *shipped]
m.head_revision = lambda: "0002_newer"
from memgov_pg.cli import main
main(sys.argv[1:])
"""


def run_newer_memgov(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("MEMGOV_DSN", "MEMGOV_HOME")}
    return subprocess.run([sys.executable, "-c", NEWER_MEMGOV, *args], capture_output=True, text=True, env=env,
                          timeout=120)  # fmt: skip


@pytest.mark.slow
def test_schema_behind_head_is_degraded(fresh, tmp_path):
    deploy(fresh, tmp_path)
    schedule(fresh)
    assert_check(fresh, "healthy", [])
    assert_check(fresh, "degraded", [f"schema revision {head_revision()} is behind head 0002_newer"],
                 run=run_newer_memgov)  # fmt: skip


@pytest.mark.slow
def test_schema_revision_this_memgov_does_not_ship_is_degraded(fresh, tmp_path):
    """Not "behind": a newer memgov-pg migrated the database (the revision is unknown here)."""
    deploy(fresh, tmp_path)
    schedule(fresh)
    with psycopg.connect(fresh, autocommit=True) as conn:
        conn.execute("UPDATE public.memgov_alembic_version SET version_num = '0099_from_the_future'")
    assert_check(fresh, "degraded", [
        f"schema revision 0099_from_the_future is not one this memgov-pg ships (its head is {head_revision()}): "
        "a newer memgov-pg migrated it; upgrade memgov-pg",
    ])  # fmt: skip


@pytest.mark.slow
def test_every_problem_is_one_line(fresh, cron, tmp_path):
    deploy(fresh, tmp_path)
    jobid, every_day = schedule(fresh)
    write(fresh, "HOLDME", "QUARANTINEME")
    backdate(fresh, "approval_requests", "requested_at", days=8, like="HOLDME")
    backdate(fresh, "quarantine", "quarantined_at", days=8, like="QUARANTINEME")
    started = cron_ran(cron, jobid, hours_ago=40, status="failed", message="ERROR:  out of memory")
    database = psycopg.conninfo.conninfo_to_dict(fresh)["dbname"]
    assert_check(fresh, "degraded", [
        "approvals overdue: 1 pending longer than approval_ttl (the sweep expires them: is it running?)",
        "quarantine growing: 1 held longer than approval_ttl (release or purge them)",
        f"last pg_cron run of {job_name(database)} failed at {started.isoformat()}: ERROR: out of memory",
        overdue_line(started, every_day),
    ])  # fmt: skip


# -- as the logins a monitoring probe runs as ---------------------------------------------------


@pytest.fixture
def cron_grants(cron: psycopg.Connection[Any]) -> Iterator[None]:
    """What docs/retention.md asks a superuser to grant memgov_admin in pg_cron's database."""
    cron.execute(USAGE_GRANT)
    cron.execute(SCHEDULE_GRANT)
    try:
        yield
    finally:
        revoke(cron)


def revoke(cron: psycopg.Connection[Any]) -> None:
    for grant in (SCHEDULE_GRANT, USAGE_GRANT):
        cron.execute(grant.replace("GRANT", "REVOKE", 1).replace(" TO ", " FROM "))


def status_json(dsn: str) -> dict[str, Any]:
    result = run_memgov("status", "--json", "--dsn", dsn)
    assert result.returncode == 0, result.stdout + result.stderr
    return json.loads(result.stdout)  # type: ignore[no-any-return]


@pytest.mark.slow
def test_a_memgov_admin_login_checks_everything_with_pg_cron_s_grants(fresh, cron, cron_grants, logins, tmp_path):
    """The role the docs name for it: deploy, schedule, sweep and check, all as one memgov_admin login."""
    admin, database = login_dsn(fresh, logins.admin), psycopg.conninfo.conninfo_to_dict(fresh)["dbname"]
    deploy(admin, tmp_path)
    assert_check(admin, "degraded", [never_swept_by(logins.admin, database)])
    jobid, every_day = schedule(admin)
    status = status_json(admin)
    assert (status["user"], status["admin"], status["revision_error"]) == (logins.admin, True, None)
    assert status["schema_revision"] == status["head_revision"] == head_revision()
    assert [(p["org_id"], p["version"]) for p in status["policies"]] == [("*", "1.0.0")]
    assert status["pending_approvals"] == {"total": 0, "by_tenant": {}}
    assert status["overdue"] == {"approvals": 0, "quarantine": 0}
    pg_cron = status["pg_cron"]
    assert (pg_cron["error"], pg_cron["denied"], pg_cron["cron_database"]) == (None, False, cron.info.dbname)
    assert (pg_cron["job"]["jobid"], pg_cron["job"]["username"], pg_cron["logs_runs"]) == (jobid, logins.admin, True)
    text = run_memgov("status", "--dsn", admin)
    assert text.returncode == 0, text.stderr
    assert f"'{every_day}' (GMT), active, runs as {logins.admin} from database {cron.info.dbname}" in text.stdout
    assert_check(admin, "healthy", [])  # a job, not due yet
    memgov("retention", "run", "--dsn", admin)
    assert_check(admin, "healthy", [])
    # pg_cron's record of the job's runs is the login's own: it sees a failed one
    started = cron_ran(cron, jobid, hours_ago=1, status="failed", message="ERROR:  out of memory")
    assert_check(admin, "degraded", [
        f"last pg_cron run of {job_name(database)} failed at {started.isoformat()}: ERROR: out of memory",
    ])  # fmt: skip


@pytest.mark.slow
def test_a_memgov_admin_login_without_pg_cron_s_grants_is_told_which(fresh, cron, logins, tmp_path):
    """Everything but pg_cron is read; pg_cron's line names the grant, never "not loaded"."""
    deploy(fresh, tmp_path)
    schedule(fresh)  # as the superuser
    sweep(fresh)
    assert_check(fresh, "healthy", [])
    admin = login_dsn(fresh, logins.admin)
    denied = (
        f"{logins.admin} may not use pg_cron: no USAGE on its schema cron in database {cron.info.dbname}; "
        f"a superuser grants it there: {USAGE_GRANT} (and, to schedule, {SCHEDULE_GRANT})"
    )
    status = status_json(admin)
    assert status["pg_cron"]["error"] == denied and status["pg_cron"]["denied"] is True
    assert status["schema_revision"] == head_revision() and status["last_maintenance_run"]["status"] == "finished"
    assert [p["version"] for p in status["policies"]] == ["1.0.0"] and status["overdue"]["approvals"] == 0
    assert f"pg_cron            not visible: {denied}" in run_memgov("status", "--dsn", admin).stdout
    assert_check(admin, "degraded", [f"cannot check pg_cron: {denied}"])
    cron.execute(USAGE_GRANT)  # enough to look: the job is the superuser's, hidden by pg_cron's row security
    try:
        status = status_json(admin)
        assert (status["pg_cron"]["error"], status["pg_cron"]["job"]) == (None, None)
        assert status["pg_cron"]["sees_all_jobs"] is False
        text = run_memgov("status", "--dsn", admin).stdout
        assert f"of {logins.admin} (pg_cron shows a role only the jobs it scheduled" in text
        assert_check(admin, "healthy", [])  # sweeps run: the superuser's job, or another scheduler
    finally:
        revoke(cron)


@pytest.mark.slow
def test_a_job_another_role_scheduled_is_not_taken_for_none(fresh, cron, cron_grants, logins, tmp_path):
    deploy(fresh, tmp_path)
    schedule(fresh)  # the superuser's job, never run yet
    assert_check(fresh, "healthy", [])
    database = psycopg.conninfo.conninfo_to_dict(fresh)["dbname"]
    assert_check(login_dsn(fresh, logins.admin), "degraded", [never_swept_by(logins.admin, database)])


@pytest.mark.slow
def test_a_login_without_a_memgov_role_is_told_which_role(fresh, cron, logins, tmp_path):
    deploy(fresh, tmp_path)
    schedule(fresh)
    sweep(fresh)
    nobody = login_dsn(fresh, logins.nobody)
    status = status_json(nobody)
    assert status["admin"] is False and "permission denied" in status["revision_error"]
    assert status["pg_cron"]["denied"] is True
    assert status["pg_cron"]["error"] == (
        f"pg_cron is loaded, but {logins.nobody} may not read its setting cron.database_name (superusers and "
        "members of pg_read_all_settings only); connect as a login in memgov_admin, which reads it through "
        f"memgov.cron_settings() (a superuser grants the role: GRANT memgov_admin TO {logins.nobody})"
    )
    assert_check(nobody, "degraded", [
        f"{logins.nobody} is not a member of memgov_admin: it may not read what the check reads; connect as a "
        f"login in memgov_admin (a superuser grants the role: GRANT memgov_admin TO {logins.nobody})",
    ])  # fmt: skip


# -- unreachable ------------------------------------------------------------------------------


@pytest.mark.slow
def test_unreachable_exits_2():
    with refused_port() as port:
        dsn = f"host=127.0.0.1 port={port} dbname=x connect_timeout=2"
        result = run_memgov("status", "--check", "--dsn", dsn)
        as_json = run_memgov("status", "--check", "--json", "--dsn", dsn)
    assert result.returncode == 2, result.stderr
    assert result.stdout.startswith("unreachable: ")
    assert len(result.stdout.splitlines()) == 1
    assert as_json.returncode == 2, as_json.stderr
    data = json.loads(as_json.stdout)
    assert data["status"] == "unreachable" and len(data["problems"]) == 1
    assert data["problems"][0].startswith("cannot connect to 127.0.0.1:")
    # the group's --dsn, as a monitoring plugin writes it
    grouped = run_memgov("--dsn", dsn, "status", "--check", "--json")
    assert (grouped.returncode, json.loads(grouped.stdout)) == (2, data)


@pytest.mark.slow
def test_a_check_that_cannot_finish_still_answers(fresh):
    """Reachable, but the check itself fails: degraded, one line saying why, the JSON printed."""
    result = run_memgov("status", "--check", "--json", "--version-table", "a.b.c", "--dsn", fresh)
    assert result.returncode == 1, result.stderr
    assert json.loads(result.stdout) == {"status": "degraded", "problems": [
        "the check failed: --version-table 'a.b.c': expected [SCHEMA.]TABLE, each a plain SQL name",
    ]}  # fmt: skip


@pytest.mark.slow
def test_no_database_at_all_is_unreachable(tmp_path):
    result = run_memgov("status", "--check", "--json", cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert json.loads(result.stdout) == {"status": "unreachable", "problems": [
        "no database given: pass --dsn, set MEMGOV_DSN or libpq's PGHOST/PGDATABASE/PGSERVICE, "
        "or start the embedded cluster with `memgov up`",
    ]}  # fmt: skip


# -- the schedule reader ----------------------------------------------------------------------


def test_previous_firings():
    now = dt.datetime(2026, 12, 1, 12, 30, 30, tzinfo=dt.UTC)
    assert previous_firings("0 * * * *", now) == [
        now.replace(minute=0, second=0),
        now.replace(hour=11, minute=0, second=0),
    ]
    assert previous_firings("@weird", now) is None

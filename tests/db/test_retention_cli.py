"""`memgov retention run|schedule|unschedule` and `memgov status`, as a user runs them,
against the session's PostgreSQL 15 + pg_cron; and pg_cron itself running the sweep."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

import psycopg
import pytest

from memgov_pg.cluster import LocalCluster, free_port
from memgov_pg.compiler import compile_policy
from memgov_pg.migrate import head_revision
from memgov_pg.policy import load_policy
from memgov_pg.retention import JOB_COMMAND, job_name
from tests.attack_helpers import login_dsn
from tests.clean_slate import fresh
from tests.cli_helpers import assert_one_line_error, run_memgov
from tests.waiting import DEADLINE, join, wait_for

# schedules that never fire while the tests run (1 January, small hours, GMT)
QUIET = "0 4 1 1 *"
#: how long pg_cron may take to start a job due every minute: the next minute, and as long again
CRON_DEADLINE = 60 + DEADLINE
POLICY = f"""
version: "1.0.0"
defaults: {{on_policy_miss: allow}}
retention: {{schedule: "{QUIET}"}}
rules:
  - {{id: hold-words, priority: 20, when: [{{field: fact_text, operator: contains, value: HOLDME}}],
      action: require_approval}}
  - {{id: quarantine-words, priority: 30, when: [{{field: fact_text, operator: contains, value: QUARANTINEME}}],
      action: quarantine}}
"""


def deploy(conn: psycopg.Connection[Any], text: str = POLICY, tenant: str = "*") -> None:
    conn.execute(compile_policy(load_policy(text), tenant).install_sql())


@pytest.fixture
def su(db_conn):
    fresh(db_conn, deploy)
    return db_conn


@pytest.fixture
def cron(memgov_server, requires_pg_cron):
    """A connection to pg_cron's database; removes the jobs a test leaves behind."""
    with psycopg.connect(memgov_server.admin_dsn, autocommit=True) as conn:
        assert conn.execute("SHOW cron.database_name").fetchone()[0] == conn.info.dbname
        yield conn
        conn.execute("SELECT cron.unschedule(jobid) FROM cron.job WHERE jobname LIKE 'memgov-maintenance:%'")


def jobs(cron: psycopg.Connection[Any], database: str) -> list[tuple[Any, ...]]:
    return cron.execute(
        "SELECT jobid, schedule, command, database FROM cron.job WHERE jobname = %s", (job_name(database),)
    ).fetchall()


def seed(su: psycopg.Connection[Any], n: int, text: str = "expired", retention: str = "ttl_7d",
         age: str = "8 days") -> None:  # fmt: skip
    with su.transaction():
        su.execute("SET LOCAL ROLE memgov_owner")
        su.execute(
            "INSERT INTO memgov.long_term_memory_items"
            " (org_id, category, fact_text, source, confidence, retention_policy, created_at)"
            " SELECT 'acme', 'user_fact', %s || ' ' || g, 'agent_extracted', 0.9, %s, now() - %s::interval"
            " FROM generate_series(1, %s) g",
            (text, retention, age, n),
        )


def count(su: psycopg.Connection[Any]) -> int:
    return int(su.execute("SELECT count(*) FROM memgov.long_term_memory_items").fetchone()[0])


# -- retention run ------------------------------------------------------------------------


@pytest.mark.slow
def test_run_json_prints_the_summary(su, memgov_dsn):
    seed(su, 3)
    seed(su, 2, "fresh", age="1 day")
    result = run_memgov("retention", "run", "--dsn", memgov_dsn, "--json")
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["deleted"] == {"ttl": 3, "confidence": 0, "auto_delete": 0}
    assert summary["expired"] == {"approvals": 0}
    assert summary["status"] == "finished" and summary["dry_run"] is False
    assert summary["seconds"] >= 0 and isinstance(summary["run_id"], int)
    assert count(su) == 2


@pytest.mark.slow
def test_run_text_shows_counts_per_reason(su, memgov_dsn):
    seed(su, 4)
    result = run_memgov("retention", "run", "--dsn", memgov_dsn)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("maintenance run ") and " finished in " in lines[0]
    assert lines[1].split() == ["deleted", "ttl", "4"]
    assert lines[2].split() == ["deleted", "confidence", "0"]
    assert lines[4].split() == ["expired", "approvals", "0"]
    assert count(su) == 0


@pytest.mark.slow
def test_run_draws_progress_on_a_terminal_and_nothing_when_piped(su, memgov_dsn):
    """The progress display goes to stderr only when stderr is a terminal; stdout keeps the final lines."""
    seed(su, 3)
    piped = run_memgov("retention", "run", "--dsn", memgov_dsn)
    assert piped.returncode == 0 and piped.stderr == "", piped.stderr
    seed(su, 3)
    primary, secondary = os.openpty()
    chunks: list[bytes] = []
    reader = threading.Thread(target=lambda: chunks.extend(iter(lambda: _read_available(primary), b"")))
    reader.start()  # drains the terminal while the command draws, so it never blocks on a full buffer
    try:
        env = {k: v for k, v in os.environ.items() if k not in ("MEMGOV_DSN", "MEMGOV_HOME", "NO_COLOR")}
        proc = subprocess.run(
            [sys.executable, "-m", "memgov_pg.cli", "retention", "run", "--dsn", memgov_dsn],
            stdout=subprocess.PIPE, stderr=secondary, text=True, env=env | {"TERM": "xterm", "COLUMNS": "100"},
            timeout=120,
        )  # fmt: skip
    finally:
        os.close(secondary)
        join(reader, "the terminal's reader")
        os.close(primary)
    drawn = b"".join(chunks)
    assert proc.returncode == 0
    assert proc.stdout.splitlines()[1].split() == ["deleted", "ttl", "3"]
    screen = drawn.decode(errors="replace")
    for label in ("deleted: ttl", "deleted: confidence", "expired: approvals"):
        assert label in screen, screen


def _read_available(fd: int) -> bytes:
    try:
        return os.read(fd, 65536)
    except OSError:  # EIO: the terminal's other end is closed and drained
        return b""


@pytest.mark.slow
def test_dry_run_reports_what_would_go_and_deletes_nothing(su, memgov_dsn):
    seed(su, 5)
    result = run_memgov("retention", "run", "--dry-run", "--dsn", memgov_dsn, "--json")
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["dry_run"] is True and summary["deleted"]["ttl"] == 5
    assert count(su) == 5
    text = run_memgov("retention", "run", "--dry-run", "--dsn", memgov_dsn)
    assert text.returncode == 0, text.stderr
    assert text.stdout.startswith("dry run ")
    assert ["would", "delete", "ttl", "5"] in [line.split() for line in text.stdout.splitlines()]
    assert count(su) == 5


@pytest.mark.slow
def test_run_while_another_holds_the_lock_is_one_line(su, memgov_dsn):
    seed(su, 2)
    with psycopg.connect(memgov_dsn, autocommit=True) as holder:
        holder.execute("SELECT memgov.claim_maintenance()")  # what a run in progress holds
        result = run_memgov("retention", "run", "--dsn", memgov_dsn)
        assert_one_line_error(result, "another maintenance run is in progress", str(holder.info.backend_pid))
    assert count(su) == 2


@pytest.mark.slow
def test_run_on_a_database_without_memgov_is_one_line(empty_dsn):
    assert_one_line_error(run_memgov("retention", "run", "--dsn", empty_dsn), "memgov migrate")


@pytest.mark.slow
def test_run_needs_memgov_admin(su, memgov_dsn):
    su.execute("DROP ROLE IF EXISTS retention_cli_writer")
    su.execute("CREATE ROLE retention_cli_writer LOGIN IN ROLE memgov_writer")
    try:
        params = psycopg.conninfo.conninfo_to_dict(memgov_dsn) | {"user": "retention_cli_writer"}
        result = run_memgov("retention", "run", "--dsn", psycopg.conninfo.make_conninfo(**params))
        assert_one_line_error(
            result,
            "permission denied",
            "42501",
            "`memgov retention run` needs a login in memgov_admin, and retention_cli_writer is not one",
            "GRANT memgov_admin TO retention_cli_writer",
        )
        assert result.returncode == 1
    finally:
        su.execute("DROP ROLE retention_cli_writer")


# -- retention schedule / unschedule --------------------------------------------------------


@pytest.mark.slow
def test_schedule_twice_leaves_one_job(su, memgov_dsn, cron):
    database = su.info.dbname
    first = run_memgov("retention", "schedule", "--dsn", memgov_dsn, "--json")
    assert first.returncode == 0, first.stderr
    job = json.loads(first.stdout)
    assert job["schedule"] == QUIET  # the policy's retention.schedule
    assert (job["jobname"], job["database"], job["command"]) == (job_name(database), database, JOB_COMMAND)
    assert job["cron_database"] == cron.info.dbname != database
    assert job["replaced"] is False
    second = run_memgov("retention", "schedule", "30 3 1 1 *", "--dsn", memgov_dsn, "--json")
    assert second.returncode == 0, second.stderr
    assert json.loads(second.stdout)["replaced"] is True
    assert jobs(cron, database) == [(job["jobid"], "30 3 1 1 *", JOB_COMMAND, database)]
    text = run_memgov("retention", "schedule", QUIET, "--dsn", memgov_dsn)
    assert text.returncode == 0, text.stderr
    assert "(GMT)" in text.stdout and job_name(database) in text.stdout
    assert len(jobs(cron, database)) == 1


@pytest.mark.slow
def test_schedule_rejects_a_bad_schedule_in_one_line(su, memgov_dsn, cron):
    result = run_memgov("retention", "schedule", "every day", "--dsn", memgov_dsn)
    assert_one_line_error(result, "invalid schedule")
    assert jobs(cron, su.info.dbname) == []


@pytest.mark.slow
def test_unschedule(su, memgov_dsn, cron):
    database = su.info.dbname
    assert run_memgov("retention", "schedule", "--dsn", memgov_dsn).returncode == 0
    result = run_memgov("retention", "unschedule", "--dsn", memgov_dsn, "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["unscheduled"] is True
    assert jobs(cron, database) == []
    again = run_memgov("retention", "unschedule", "--dsn", memgov_dsn)
    assert again.returncode == 0, again.stderr
    assert "no job" in again.stdout


USAGE_GRANT = "GRANT USAGE ON SCHEMA cron TO memgov_admin"
SCHEDULE_GRANT = "GRANT EXECUTE ON FUNCTION cron.schedule_in_database(text,text,text,text,text,boolean) TO memgov_admin"


@pytest.mark.slow
@pytest.mark.parametrize("role", ["writer", "nobody"])
def test_schedule_without_memgov_admin_names_the_role_not_a_missing_pg_cron(su, memgov_dsn, cron, logins, role):
    login = getattr(logins, role)
    for command in ("schedule", "unschedule"):
        result = run_memgov("retention", command, "--dsn", login_dsn(memgov_dsn, login))
        assert_one_line_error(
            result,
            f"pg_cron is loaded, but {login} may not read its setting cron.database_name",
            f"connect as a login in memgov_admin, which reads it through memgov.cron_settings() "
            f"(a superuser grants the role: GRANT memgov_admin TO {login})",
        )
        assert result.returncode == 1 and "not loaded by this server" not in result.stderr
    assert jobs(cron, su.info.dbname) == []


@pytest.mark.slow
def test_schedule_as_a_memgov_admin_login_names_each_grant_pg_cron_needs(su, memgov_dsn, cron, logins):
    """The grants docs/retention.md lists, one at a time: each refusal names the next."""
    database, who = su.info.dbname, login_dsn(memgov_dsn, logins.admin)
    no_usage = run_memgov("retention", "schedule", "--dsn", who)
    assert_one_line_error(
        no_usage,
        f"{logins.admin} may not use pg_cron: no USAGE on its schema cron in database {cron.info.dbname}",
        f"a superuser grants it there: {USAGE_GRANT} (and, to schedule, {SCHEDULE_GRANT})",
    )
    try:
        cron.execute(USAGE_GRANT)
        no_execute = run_memgov("retention", "schedule", "--dsn", who)
        assert_one_line_error(
            no_execute,
            f"{logins.admin} may not schedule with pg_cron: no EXECUTE on cron.schedule_in_database",
            f"a superuser grants it there: {SCHEDULE_GRANT} (or schedules the job as a superuser)",
        )
        assert jobs(cron, database) == []
        cron.execute(SCHEDULE_GRANT)
        scheduled = run_memgov("retention", "schedule", "--dsn", who, "--json")
        assert scheduled.returncode == 0, scheduled.stderr
        job = json.loads(scheduled.stdout)
        assert (job["username"], job["schedule"], job["cron_database"]) == (logins.admin, QUIET, cron.info.dbname)
        assert jobs(cron, database) == [(job["jobid"], QUIET, JOB_COMMAND, database)]
        removed = run_memgov("retention", "unschedule", "--dsn", who, "--json")
        assert removed.returncode == 0, removed.stderr
        assert json.loads(removed.stdout)["jobids"] == [job["jobid"]]
        assert jobs(cron, database) == []
    finally:
        for grant in (SCHEDULE_GRANT, USAGE_GRANT):
            cron.execute(grant.replace("GRANT", "REVOKE", 1).replace(" TO ", " FROM "))


@pytest.mark.slow
def test_schedule_again_makes_an_inactive_job_active(su, memgov_dsn, cron):
    first = json.loads(run_memgov("retention", "schedule", "--dsn", memgov_dsn, "--json").stdout)
    cron.execute("SELECT cron.alter_job(%s, active => false)", (first["jobid"],))
    again = run_memgov("retention", "schedule", "--dsn", memgov_dsn, "--json")
    assert again.returncode == 0, again.stderr
    job = json.loads(again.stdout)
    assert job["active"] is True and job["replaced"] is True
    assert [row[0] for row in jobs(cron, su.info.dbname)] == [job["jobid"]]


# -- memgov status ----------------------------------------------------------------------------


@pytest.mark.slow
def test_status_json_shows_policies_queues_runs_decisions_and_the_job(su, memgov_dsn, cron):
    deploy(su, POLICY.replace('"1.0.0"', '"2.5.0"'), tenant="acme")
    with psycopg.connect(memgov_dsn, autocommit=True) as writer:
        writer.execute("SET ROLE memgov_writer")
        writer.execute("SET memgov.org_id = 'acme'")
        for text in ("likes tea", "HOLDME likes jazz", "QUARANTINEME plans"):
            writer.execute(
                "INSERT INTO memgov.long_term_memory_items (org_id, category, fact_text, source, confidence)"
                " VALUES ('acme', 'user_fact', %s, 'agent_extracted', 0.9)",
                (text,),
            )
    seed(su, 2)
    assert run_memgov("retention", "run", "--dsn", memgov_dsn).returncode == 0
    assert run_memgov("retention", "run", "--dry-run", "--dsn", memgov_dsn).returncode == 0
    assert run_memgov("retention", "schedule", "--dsn", memgov_dsn).returncode == 0

    result = run_memgov("status", "--dsn", memgov_dsn, "--json")
    assert result.returncode == 0, result.stderr
    status = json.loads(result.stdout)
    assert status["schema_revision"] == status["head_revision"] == head_revision()
    assert [(p["org_id"], p["version"], p["mode"]) for p in status["policies"]] == [
        ("*", "1.0.0", "enforce"), ("acme", "2.5.0", "enforce")]  # fmt: skip
    assert status["pending_approvals"] == {"total": 1, "by_tenant": {"acme": 1}}
    assert status["quarantine"] == {"total": 1, "by_tenant": {"acme": 1}}
    assert status["decisions_24h"] == {"allow": 1, "quarantine": 1, "require_approval": 1}
    last = status["last_maintenance_run"]  # the real run, not the dry one after it
    assert last["status"] == "finished" and last["counts"]["ttl"] == 2
    job = status["pg_cron"]["job"]
    assert (job["jobname"], job["schedule"], job["active"]) == (job_name(su.info.dbname), QUIET, True)
    assert status["pg_cron"]["cron_database"] == cron.info.dbname and status["pg_cron"]["error"] is None

    text = run_memgov("status", "--dsn", memgov_dsn)
    assert text.returncode == 0, text.stderr
    for fragment in ("global 1.0.0 (enforce), acme 2.5.0 (enforce)", "pending approvals  1 (acme 1)",
                     "quarantine         1 held (acme 1)", f"'{QUIET}' (GMT)", "finished"):  # fmt: skip
        assert fragment in text.stdout, text.stdout


@pytest.mark.slow
def test_status_reports_a_killed_run_as_interrupted(su, memgov_dsn):
    with su.transaction():
        su.execute("SET LOCAL ROLE memgov_owner")
        su.execute("INSERT INTO memgov.maintenance_runs (status) VALUES ('running')")
    status = json.loads(run_memgov("status", "--dsn", memgov_dsn, "--json").stdout)
    assert status["last_maintenance_run"]["status"] == "interrupted"
    with psycopg.connect(memgov_dsn, autocommit=True) as holder:
        holder.execute("SELECT memgov.claim_maintenance()")  # what a run in progress holds
        status = json.loads(run_memgov("status", "--dsn", memgov_dsn, "--json").stdout)
        assert status["last_maintenance_run"]["status"] == "running"


@pytest.mark.slow
def test_status_of_an_unmigrated_database(empty_dsn):
    result = run_memgov("status", "--dsn", empty_dsn, "--json")
    assert result.returncode == 0, result.stderr
    status = json.loads(result.stdout)
    assert status["schema_revision"] is None and status["policies"] is None
    text = run_memgov("status", "--dsn", empty_dsn)
    assert "run `memgov migrate`" in text.stdout


# -- a server without pg_cron ----------------------------------------------------------------


@pytest.mark.slow
def test_pg_cron_missing_is_one_line_that_says_how_to_fix_it():
    base = Path(tempfile.mkdtemp(prefix="memgov-nocron-"))
    cluster = LocalCluster(base, free_port(), durable=False)
    try:
        cluster.init()
        cluster.start_on_a_free_port()
        dsn = cluster.dsn("postgres")
        # loaded, but CREATE EXTENSION pg_cron never ran in its database
        result = run_memgov("retention", "schedule", "--dsn", dsn)
        assert_one_line_error(result, "pg_cron is loaded but not installed", "CREATE EXTENSION pg_cron")
        # not loaded at all
        cluster.stop()
        conf = (cluster.datadir / "memgov.conf").read_text()
        kept = "".join(line + "\n" for line in conf.splitlines()
                       if not line.startswith(("shared_preload_libraries", "cron.")))  # fmt: skip
        assert cluster.os_user.run(["tee", str(cluster.datadir / "memgov.conf")], input=kept).returncode == 0
        cluster.start_on_a_free_port()
        dsn = cluster.dsn("postgres")
        for command in (("retention", "schedule"), ("retention", "unschedule")):
            result = run_memgov(*command, "--dsn", dsn)
            assert_one_line_error(result, "pg_cron is not loaded", "shared_preload_libraries")
        status = run_memgov("status", "--dsn", dsn, "--json")
        assert status.returncode == 0, status.stderr
        assert "pg_cron is not loaded" in json.loads(status.stdout)["pg_cron"]["error"]
    finally:
        cluster.stop()
        shutil.rmtree(base, ignore_errors=True)


# -- pg_cron runs the sweep itself ---------------------------------------------------------------


@pytest.mark.slow
def test_pg_cron_runs_the_sweep_in_a_database_that_is_not_its_own(memgov_server, memgov_template, cron):
    name = f"memgov_cron_e2e_{free_port()}"
    dsn = memgov_server.create_database(name, template=memgov_template)
    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            deploy(conn)
            seed(conn, 1, "expired")
            seed(conn, 1, "fresh", age="1 day")
        assert cron.execute("SHOW cron.database_name").fetchone()[0] != name
        result = run_memgov("retention", "schedule", "* * * * *", "--dsn", dsn, "--json")
        assert result.returncode == 0, result.stderr
        jobid = json.loads(result.stdout)["jobid"]

        # the next minute boundary (GMT), then the run: however late a loaded machine starts it
        with psycopg.connect(dsn, autocommit=True) as conn:
            wait_for(lambda: [r[0] for r in conn.execute("SELECT fact_text FROM memgov.long_term_memory_items")]
                     == ["fresh 1"], "pg_cron to run the sweep", timeout=CRON_DEADLINE)  # fmt: skip
            run = conn.execute("SELECT status, run_by, summary FROM memgov.maintenance_runs").fetchone()
            assert run[0] in ("running", "finished") and run[1] == "postgres"
            assert conn.execute("SELECT reason FROM memgov.deletion_log").fetchall() == [("ttl",)]
        # no further run while the test reads the record of this one
        cron.execute("SELECT cron.alter_job(%s, schedule => %s)", (jobid, QUIET))
        details = wait_for(lambda: cron.execute(
            "SELECT status, return_message FROM cron.job_run_details"
            " WHERE jobid = %s AND status IN ('succeeded', 'failed') ORDER BY runid LIMIT 1", (jobid,)).fetchone(),
            "pg_cron to record the run's end")  # fmt: skip
        assert details[0] == "succeeded", details
        # a run pg_cron had begun to start as the schedule changed ends too
        wait_for(lambda: not cron.execute(
            "SELECT count(*) FROM cron.job_run_details WHERE jobid = %s AND status NOT IN ('succeeded', 'failed')",
            (jobid,)).fetchone()[0], "pg_cron's runs of the job to end")  # fmt: skip
        status = json.loads(run_memgov("status", "--dsn", dsn, "--json").stdout)
        assert status["pg_cron"]["last_run"]["status"] == "succeeded"
    finally:
        run_memgov("retention", "unschedule", "--dsn", dsn)
        memgov_server.drop_database(name)


# -- one timestamp format ------------------------------------------------------------------

ISO_8601 = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}[+-]\d\d:\d\d")
LOOKS_LIKE_A_TIME = re.compile(r"\d{4}-\d\d-\d\d.\d\d:\d\d")


def _times(value: Any) -> list[str]:
    if isinstance(value, dict):
        return [t for v in value.values() for t in _times(v)]
    if isinstance(value, list):
        return [t for v in value for t in _times(v)]
    return [value] if isinstance(value, str) and LOOKS_LIKE_A_TIME.match(value) else []


@pytest.mark.slow
def test_every_json_timestamp_is_iso_8601_with_t_and_offset(su, memgov_dsn):
    seed(su, 2)
    run_memgov("retention", "run", "--dsn", memgov_dsn)  # a finished run, for status to show
    outputs = [run_memgov("retention", "run", "--dsn", memgov_dsn, "--json"),
               run_memgov("status", "--dsn", memgov_dsn, "--json")]  # fmt: skip
    times = []
    for result in outputs:
        assert result.returncode == 0, result.stderr
        times += _times(json.loads(result.stdout))
    assert len(times) >= 3, times  # started_at and finished_at of the run, the last run's in status
    for value in times:
        assert ISO_8601.fullmatch(value), value


def test_a_runs_timestamps_come_from_its_row_not_from_the_summary_text():
    """PostgreSQL writes 10:00:00.12 in the summary's JSON; the row's timestamptz prints all six digits."""
    import datetime as dt

    from memgov_pg.cli.base import to_json
    from memgov_pg.retention import _summary

    started = dt.datetime(2026, 12, 1, 10, 0, 0, 120000, tzinfo=dt.UTC)
    finished = started + dt.timedelta(seconds=2)
    text = {"started_at": "2026-12-01T10:00:00.12+00:00", "finished_at": "2026-12-01T10:00:02.12+00:00"}
    row = {"run_id": 7, "status": "finished", "dry_run": False, "started_at": started, "finished_at": finished,
           "summary": text}  # fmt: skip
    printed = json.loads(to_json(_summary(row)))
    assert printed["started_at"] == "2026-12-01T10:00:00.120000+00:00"
    assert printed["finished_at"] == "2026-12-01T10:00:02.120000+00:00"

"""Retention operations: run the sweep, schedule it with pg_cron, find its job.

The sweep itself is SQL (``CALL memgov.run_maintenance()``, sql/071_run_maintenance.sql);
this module only starts it, watches it and reads what it recorded.

pg_cron lives in one database of the server (``cron.database_name``). The job of
a governed database is created from there with ``cron.schedule_in_database``
and named ``memgov-maintenance:<database>``, so that every governed database of
a server has exactly one job. pg_cron schedules are in GMT.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

import psycopg
from psycopg import errors

from .db import connect, error_message, first_line
from .errors import BusyError, MemgovError
from .pgcron import SCHEDULE_GRANT, PgCronDenied, cron_connection, require_schedule
from .probes import require_schema
from .resources import query

JOB_PREFIX = "memgov-maintenance:"
JOB_COMMAND = "CALL memgov.run_maintenance()"
REASONS = ("ttl", "confidence", "auto_delete")

Progress = Callable[[dict[str, Any]], None]

log = logging.getLogger("memgov_pg")


class MaintenanceBusy(BusyError):
    """Another maintenance run holds the lease of this database: nothing was done (exit 3)."""


def job_name(database: str) -> str:
    """The pg_cron job name of a governed database."""
    return f"{JOB_PREFIX}{database}"


def _jobs(cron: psycopg.Connection[Any], name: str) -> list[dict[str, Any]]:
    cur = cron.execute(query("cron_find_job"), {"job_name": name})
    columns = [c.name for c in cur.description or ()]
    return [dict(zip(columns, row, strict=True)) for row in cur.fetchall()]


def _cron_error(exc: psycopg.Error, what: str) -> MemgovError:
    message = exc.diag.message_primary or first_line(exc)
    if isinstance(exc, errors.InsufficientPrivilege):
        return PgCronDenied(
            f"{what}: {message}",
            f"a superuser grants what pg_cron needs in its database: {SCHEDULE_GRANT} "
            "(and EXECUTE on cron.unschedule(bigint), which PUBLIC holds by default), or schedules as a superuser",
        )
    return MemgovError(f"{what}: {message}")


def schedule(dsn: str, cron_expression: str | None = None) -> dict[str, Any]:
    """Install or replace the maintenance job of the database ``dsn`` names; returns the job."""
    with connect(dsn, autocommit=True) as conn, cron_connection(dsn, conn) as (cron, site):
        require_schema(conn)
        require_schedule(site)
        cron_db, governed = site.database, site.governed
        if cron_expression is None:
            # the global policy's retention.schedule, else the engine's default (SQL states it)
            row = conn.execute(query("default_schedule")).fetchone()
            assert row is not None
            cron_expression = str(row[0])
        cron_expression = " ".join(cron_expression.split())
        name = job_name(governed)
        existing = _jobs(cron, name)
        user = cron.info.parameter_status("session_authorization") or ""
        try:
            # pg_cron keys jobs by (name, user): drop a same-named job another user made,
            # so that the database keeps one job; and an inactive one, which scheduling again
            # would leave inactive (pg_cron updates its schedule and command only)
            for job in existing:
                if job["username"] != user or not job["active"]:
                    cron.execute(query("cron_unschedule_job"), {"jobid": job["jobid"]})
            row = cron.execute(
                query("cron_schedule_job"),
                {"job_name": name, "schedule": cron_expression, "command": JOB_COMMAND, "database": governed},
            ).fetchone()
        except psycopg.Error as exc:
            raise _cron_error(exc, f"pg_cron refused the schedule {cron_expression!r}") from None
        assert row is not None
        job = next(j for j in _jobs(cron, name) if j["jobid"] == row[0])
    return job | {"cron_database": cron_db, "replaced": bool(existing), "timezone": "GMT"}


def unschedule(dsn: str) -> dict[str, Any]:
    """Remove the maintenance job of the database ``dsn`` names (nothing to do is not an error)."""
    with connect(dsn, autocommit=True) as conn:
        with cron_connection(dsn, conn) as (cron, site):
            cron_db, name = site.database, job_name(site.governed)
            removed = []
            try:
                for job in _jobs(cron, name):
                    cron.execute(query("cron_unschedule_job"), {"jobid": job["jobid"]})
                    removed.append(job["jobid"])
            except psycopg.Error as exc:
                raise _cron_error(exc, f"cannot unschedule {name}") from None
    return {"job_name": name, "cron_database": cron_db, "unscheduled": bool(removed), "jobids": removed}


def find_job(dsn: str, conn: psycopg.Connection[Any]) -> dict[str, Any]:
    """The maintenance job of ``conn``'s database and its last run, for `memgov status`.

    ``sees_all_jobs``: whether pg_cron shows this role every role's jobs (a superuser), or
    only its own; ``denied``: pg_cron is there but this role may not look (``error`` says
    which grant it needs).
    """
    try:
        with cron_connection(dsn, conn) as (cron, site):
            name = job_name(site.governed)
            jobs = _jobs(cron, name)
            job = jobs[0] if jobs else None
            last = None
            if job is not None:
                cur = cron.execute(query("cron_last_run"), {"jobid": job["jobid"]})
                columns = [c.name for c in cur.description or ()]
                found = cur.fetchone()
                last = dict(zip(columns, found, strict=True)) if found else None
            return {"cron_database": site.database, "job_name": name, "job": job, "last_run": last,
                    "logs_runs": site.logs_runs, "user": site.user, "sees_all_jobs": site.sees_all_jobs,
                    "error": None, "denied": False}  # fmt: skip
    except (MemgovError, psycopg.Error) as exc:
        denied = isinstance(exc, PgCronDenied | errors.InsufficientPrivilege)
        return {"cron_database": None, "job_name": None, "job": None, "last_run": None, "logs_runs": None,
                "user": None, "sees_all_jobs": None, "error": error_message(exc), "denied": denied}  # fmt: skip


# -- running the sweep --------------------------------------------------------------


def run(dsn: str, dry_run: bool = False, on_progress: Progress | None = None, interval: float = 0.2) -> dict[str, Any]:
    """``CALL memgov.run_maintenance()`` and return its summary.

    The procedure runs on one autocommit connection (it commits each batch);
    a second connection reads the run's row in memgov.maintenance_runs every
    ``interval`` seconds and hands it to ``on_progress``.
    """
    with connect(dsn, autocommit=True) as watcher, connect(dsn, autocommit=True) as worker:
        require_schema(watcher)
        row = watcher.execute(query("maintenance_last_run_id")).fetchone()
        after = int(row[0]) if row else 0
        due = watcher.execute(query("maintenance_due_ttl")).fetchone()
        log.info("maintenance sweep%s starting after run %s", " (dry run)" if dry_run else "", after)
        busy: list[str] = []

        # the lease's notice (MG409) says another run holds it; the seal's warning (MG409 too: a
        # restored copy's counter behind the chain) is not "busy", and the run went on
        def on_notice(diag: psycopg.errors.Diagnostic) -> None:
            if diag.sqlstate != "MG409":
                return
            if _lease_taken(diag):
                busy.append(diag.sqlstate)
            else:
                log.warning(
                    "%s",
                    diag.message_primary
                    if not diag.message_hint
                    else f"{diag.message_primary} ({diag.message_hint}; `memgov verify-log` says what to do)",
                )

        worker.add_notice_handler(on_notice)
        failure: list[BaseException] = []

        def call() -> None:
            try:
                worker.execute(query("retention_run_dry" if dry_run else "retention_run"))
            except BaseException as exc:  # handed to the main thread
                failure.append(exc)

        thread = threading.Thread(target=call, name="memgov-maintenance", daemon=True)
        thread.start()
        try:
            while thread.is_alive():
                thread.join(interval)
                if on_progress is not None and thread.is_alive():
                    current = _run_after(watcher, after)
                    if current is not None:
                        on_progress(current | {"ttl_due": int(due[0]) if due else None})
        except KeyboardInterrupt:
            worker.cancel()
            thread.join(30)
            raise
        if failure:
            raise failure[0]
        if busy:
            holder = watcher.execute(query("maintenance_lock_holder")).fetchone()
            who = f" (backend pid {holder[0]})" if holder else ""
            raise MaintenanceBusy(
                f"another maintenance run is in progress{who}; nothing was done: wait for it to finish"
            )
        result = _run_after(watcher, after)
    if result is None:  # pragma: no cover - the procedure always records its run
        raise MemgovError("the maintenance run left no record in memgov.maintenance_runs")
    summary = _summary(result)
    log.info("maintenance run %s %s: %s", summary.get("run_id"), summary.get("status"), counts(summary))
    return summary


def _lease_taken(diag: psycopg.errors.Diagnostic) -> bool:
    """Whether a notice is run_maintenance's "another maintenance run is in progress"."""
    return diag.severity_nonlocalized == "NOTICE" and "another maintenance run is in progress" in (
        diag.message_primary or ""
    )


def _run_after(conn: psycopg.Connection[Any], after: int) -> dict[str, Any] | None:
    cur = conn.execute(query("maintenance_run_after"), {"after": after})
    found = cur.fetchone()
    if found is None:
        return None
    columns = [c.name for c in cur.description or ()]
    return dict(zip(columns, found, strict=True))


def _summary(run_row: dict[str, Any]) -> dict[str, Any]:
    summary = dict(run_row["summary"] or {})
    summary.pop("cursor", None)
    summary.setdefault("run_id", run_row["run_id"])
    summary["status"] = run_row["status"]
    summary["dry_run"] = run_row["dry_run"]
    started, finished = run_row.get("started_at"), run_row.get("finished_at")
    # the row's own timestamps, not the summary's JSON text of them (PostgreSQL drops trailing
    # zeros of the fraction there), so that every --json prints one format
    summary.update({key: value for key, value in (("started_at", started), ("finished_at", finished)) if value})
    if started is not None and finished is not None:
        summary["seconds"] = round((finished - started).total_seconds(), 3)
    return summary


def counts(summary: dict[str, Any]) -> dict[str, int]:
    """Deleted per reason, plus expired approvals, from a run's summary."""
    deleted = summary.get("deleted") or {}
    out = {reason: int(deleted.get(reason) or 0) for reason in REASONS}
    out["approvals_expired"] = int((summary.get("expired") or {}).get("approvals") or 0)
    return out


def walked(summary: dict[str, Any]) -> float | None:
    """How far the auto_delete walk has come through the table (0..1): blocks walked / blocks to walk.

    None when no walk is going on: a step that reads its candidates from indexes has no known end.
    """
    cursor, blocks = summary.get("cursor"), summary.get("blocks")
    if cursor is None or not blocks:
        return None
    return min(1.0, int(cursor) / int(blocks))

"""Retention operations: run the sweep, schedule it with pg_cron, report status.

The sweep itself is SQL (``CALL memgov.run_maintenance()``, sql/070_retention.sql);
this module only starts it, watches it and reads what it recorded.

pg_cron lives in one database of the server (``cron.database_name``). The job of
a governed database is created from there with ``cron.schedule_in_database``
and named ``memgov-maintenance:<database>``, so that every governed database of
a server has exactly one job. pg_cron schedules are in GMT.
"""

from __future__ import annotations

import datetime as dt
import logging
import re
import threading
from collections.abc import Callable
from typing import Any

import psycopg
from psycopg import errors

from .db import connect, first_line
from .errors import BusyError, MemgovError
from .pgcron import SCHEDULE_GRANT, PgCronDenied, cron_connection, require_schedule
from .resources import query

JOB_PREFIX = "memgov-maintenance:"
JOB_COMMAND = "CALL memgov.run_maintenance()"
REASONS = ("ttl", "confidence", "auto_delete")

Progress = Callable[[dict[str, Any]], None]

log = logging.getLogger("memgov_pg")


class SchemaMissing(MemgovError):
    """The database has no memgov schema."""


class MaintenanceBusy(BusyError):
    """Another maintenance run holds the lease of this database: nothing was done (exit 3)."""


def job_name(database: str) -> str:
    """The pg_cron job name of a governed database."""
    return f"{JOB_PREFIX}{database}"


def require_schema(conn: psycopg.Connection[Any]) -> None:
    """Raise SchemaMissing unless ``conn``'s database has the memgov schema."""
    row = conn.execute(query("memgov_schema_installed")).fetchone()
    if not (row and row[0]):
        database = conn.info.dbname
        raise SchemaMissing(f"database {database} has no memgov schema: run `memgov migrate` first")


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
                "user": None, "sees_all_jobs": None, "error": _message(exc), "denied": denied}  # fmt: skip


def _message(exc: BaseException) -> str:
    if isinstance(exc, psycopg.Error):
        return exc.diag.message_primary or first_line(exc)
    return str(exc)


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
    """How far the auto_delete walk has come through the table (0..1): blocks walked / blocks to walk."""
    cursor, blocks = summary.get("cursor"), summary.get("blocks")
    if cursor is None or not blocks:
        return None
    return min(1.0, int(cursor) / int(blocks))


# -- memgov status --------------------------------------------------------------------


def _rows(conn: psycopg.Connection[Any], name: str) -> list[dict[str, Any]]:
    cur = conn.execute(query(name))
    columns = [c.name for c in cur.description or ()]
    return [dict(zip(columns, row, strict=True)) for row in cur.fetchall()]


def _section(conn: psycopg.Connection[Any], name: str) -> list[dict[str, Any]] | dict[str, str]:
    """A status section; a role that may not read it gets the reason instead of a failure."""
    try:
        return _rows(conn, name)
    except errors.InsufficientPrivilege as exc:
        return {"error": _message(exc)}


def status(dsn: str, version_table: str | None = None) -> dict[str, Any]:
    """What `memgov status` shows; every key is present, ``None`` where it does not apply.

    The schema revision is memgov's, wherever it is recorded (``version_table``, or
    memgov's own table and a host project's ``public.alembic_version``).
    """
    from .migrate import Located, head_revision, locate

    with connect(dsn, autocommit=True) as conn:
        info = conn.execute(query("server_info")).fetchone()
        assert info is not None
        objects = conn.execute(query("schema_objects")).fetchall()
        revision_error = None
        try:
            where = locate(dsn, version_table)
        except errors.InsufficientPrivilege as exc:  # a version table this role may not read
            revision_error = _message(exc)
            exists = conn.execute(query("memgov_schema_exists")).fetchone()
            where = Located((), (), bool(exists and exists[0]))
        data: dict[str, Any] = {
            "server_version": info[0],
            "database": info[1],
            "user": info[2],
            "admin": bool(info[3]),
            "schema_revision": where.revision,
            "head_revision": head_revision(),
            "revision_error": revision_error,
            "version_table": where.table,
            "revision_records": [{"table": t, "revision": r} for t, r in where.records],
            "implied_by": list(where.implied_by),
            "schema_exists": where.schema_exists,
            "tables": [row[0] for row in objects],
            "policies": None,
            "shadows": None,
            "pending_approvals": None,
            "quarantine": None,
            "last_maintenance_run": None,
            "decisions_24h": None,
            "last_setting_change": None,
            "pg_cron": find_job(dsn, conn),
            "overdue": None,
            "now": None,
        }
        data["now"] = conn.execute("SELECT now()").fetchone()[0]  # type: ignore[index]
        installed = conn.execute(query("memgov_schema_installed")).fetchone()
        if not (installed and installed[0]):
            return data
        data["policies"] = _section(conn, "status_policies")
        data["shadows"] = _section(conn, "status_shadows")
        pending = _section(conn, "status_pending_approvals")
        data["pending_approvals"] = _totals(pending, "pending")
        data["quarantine"] = _totals(_section(conn, "status_quarantine"), "held")
        data["overdue"] = _overdue(conn)
        data["decisions_24h"] = _by_key(_section(conn, "status_decisions_24h"), "action", "decisions")
        data["last_setting_change"] = _last_setting_change(conn)
        last = _section(conn, "status_last_maintenance_run")
        if isinstance(last, dict) or not last:
            data["last_maintenance_run"] = last or None
        else:
            run_row = last[0]
            if run_row["status"] == "running" and conn.execute(query("maintenance_lock_holder")).fetchone() is None:
                # nobody holds the lock: the run was killed; the next run will mark it so
                run_row["status"] = "interrupted"
            data["last_maintenance_run"] = {
                "run_id": run_row["run_id"],
                "status": run_row["status"],
                "started_at": run_row["started_at"],
                "finished_at": run_row["finished_at"],
                "run_by": run_row["run_by"],
                "counts": counts(run_row["summary"] or {}),
            }
    return data


def _last_setting_change(conn: psycopg.Connection[Any]) -> dict[str, Any] | None:
    """The latest change of memgov.settings; None when there was none (or the schema predates the record)."""
    try:
        rows = _section(conn, "status_last_setting_change")
    except errors.UndefinedTable:
        return None
    if isinstance(rows, dict):
        return dict(rows)
    return rows[0] if rows else None


def _totals(rows: list[dict[str, Any]] | dict[str, str], key: str) -> dict[str, Any]:
    if isinstance(rows, dict):
        return rows
    return {"total": sum(int(r[key]) for r in rows), "by_tenant": {r["org_id"]: int(r[key]) for r in rows}}


def _by_key(rows: list[dict[str, Any]] | dict[str, str], key: str, value: str) -> dict[str, Any]:
    if isinstance(rows, dict):
        return rows
    return {r[key]: int(r[value]) for r in rows}


# -- memgov status --check ----------------------------------------------------------


def _overdue(conn: psycopg.Connection[Any]) -> dict[str, Any]:
    try:
        row = conn.execute(query("status_overdue")).fetchone()
    except psycopg.Error as exc:
        return {"error": _message(exc)}
    assert row is not None
    return {"approvals": int(row[0]), "quarantine": int(row[1])}


def _cron_field(text: str, low: int, high: int) -> set[int] | None:
    """The values a cron field matches; None for syntax this simple reader does not know (names)."""
    values: set[int] = set()
    for part in text.split(","):
        step = 1
        if "/" in part:
            part, step_text = part.split("/", 1)
            if not step_text.isdigit() or int(step_text) == 0:
                return None
            step = int(step_text)
        if part == "*":
            start, end = low, high
        elif "-" in part:
            a, b = part.split("-", 1)
            if not (a.isdigit() and b.isdigit()):
                return None
            start, end = int(a), int(b)
        elif part.isdigit():
            start = int(part)
            end = high if step > 1 else start
        else:
            return None
        values.update(range(start, end + 1, step))
    return values


def previous_firings(schedule: str, now: dt.datetime, count: int = 2) -> list[dt.datetime] | None:
    """The last ``count`` times (GMT) a pg_cron schedule fired before ``now``, latest first;
    None for a schedule this reader does not understand, or none within a year."""
    schedule = " ".join(schedule.split())
    seconds = re.fullmatch(r"([1-5]?[0-9]) seconds?", schedule)
    now = now.astimezone(dt.UTC)
    if seconds:
        step = dt.timedelta(seconds=int(seconds.group(1)))
        return [now - step * (i + 1) for i in range(count)] if step else None
    fields = schedule.split()
    if len(fields) != 5:
        return None
    bounds = ((0, 59), (0, 23), (1, 31), (1, 12), (0, 7))
    sets = [_cron_field(f, lo, hi) for f, (lo, hi) in zip(fields, bounds, strict=True)]
    if any(s is None for s in sets):
        return None
    minutes, hours, days, months, weekdays = (s or set() for s in sets)
    weekdays = {d % 7 for d in weekdays}
    dom_any, dow_any = fields[2] == "*", fields[4] == "*"
    found: list[dt.datetime] = []
    t = now.replace(second=0, microsecond=0)
    if t == now:
        t -= dt.timedelta(minutes=1)
    day = t.replace(hour=0, minute=0)
    limit = day - dt.timedelta(days=400)
    while day >= limit and len(found) < count:
        dow = (day.weekday() + 1) % 7  # cron: Sunday 0
        if dom_any or dow_any:
            day_ok = day.day in days and dow in weekdays
        else:  # cron: either matches when both are restricted
            day_ok = day.day in days or dow in weekdays
        if day.month in months and day_ok:
            for hour in sorted(hours, reverse=True):
                for minute in sorted(minutes, reverse=True):
                    fire = day.replace(hour=hour, minute=minute)
                    if fire <= t and len(found) < count:
                        found.append(fire)
        day -= dt.timedelta(days=1)
    return found if len(found) == count else None


def health(data: dict[str, Any]) -> list[str]:
    """The problems ``memgov status --check`` reports, one line each, from :func:`status`'s data."""
    problems: list[str] = []
    if not data["schema_exists"]:
        return ["schema memgov is not installed: run `memgov migrate`"]
    if not data.get("admin", True):
        user = data["user"]
        return [
            f"{user} is not a member of memgov_admin: it may not read what the check reads; connect as a login "
            f"in memgov_admin (a superuser grants the role: GRANT memgov_admin TO {user})"
        ]
    if data.get("revision_error"):
        problems.append(f"cannot read the schema revision: {data['revision_error']}")
    revision, head = data["schema_revision"], data["head_revision"]
    if revision not in (None, head):
        from .migrate import shipped_revisions

        if revision in shipped_revisions():
            problems.append(f"schema revision {revision} is behind head {head}")
        else:  # not an older revision: one this memgov-pg does not know
            problems.append(
                f"schema revision {revision} is not one this memgov-pg ships (its head is {head}): "
                "a newer memgov-pg migrated it; upgrade memgov-pg"
            )
    policies = data["policies"]
    if isinstance(policies, dict):
        problems.append(f"cannot read the policies: {policies['error']}")
    elif policies is not None and not policies:
        problems.append("no active policy: every write is denied (NO_ACTIVE_POLICY); run `memgov deploy`")
    overdue = data.get("overdue")
    if isinstance(overdue, dict) and "error" in overdue:
        problems.append(f"cannot read approvals and quarantine: {overdue['error']}")
    elif overdue:
        if overdue["approvals"]:
            problems.append(
                f"approvals overdue: {overdue['approvals']} pending longer than approval_ttl "
                "(the sweep expires them: is it running?)"
            )
        if overdue["quarantine"]:
            problems.append(
                f"quarantine growing: {overdue['quarantine']} held longer than approval_ttl (release or purge them)"
            )
    cron = data["pg_cron"]
    if cron.get("error"):
        problems.append(f"{'cannot check pg_cron' if cron.get('denied') else 'pg_cron unavailable'}: {cron['error']}")
        return problems
    last = cron.get("last_run")
    if last and last.get("status") == "failed":
        message = " ".join((last.get("return_message") or "").split())
        problems.append(f"last pg_cron run of {cron['job_name']} failed at {last['start_time'].isoformat()}: {message}")
    job = cron.get("job")
    if job is None:
        if data.get("last_maintenance_run") is None:  # no job, and no sweep ever (another scheduler's would show)
            problems.append(_never_swept(cron))
    elif not job.get("active"):
        problems.append(
            f"pg_cron job {cron['job_name']} is inactive: the sweep does not run "
            "(`memgov retention schedule` replaces it with an active one)"
        )
    elif data.get("now") is not None:
        problems.extend(_sweep_overdue(data, job, last))
    return problems


def _never_swept(cron: dict[str, Any]) -> str:
    """The problem of a database no sweep ever ran in, and no job (that this role may see) will run."""
    if cron.get("sees_all_jobs"):
        return (
            "retention has never run and no pg_cron job runs it: `memgov retention schedule` "
            "(a sweep now: `memgov retention run`)"
        )
    return (
        f"retention has never run and {cron['user']} sees no pg_cron job {cron['job_name']} (pg_cron shows "
        "a role only the jobs it scheduled): `memgov retention schedule` as this login "
        "(a sweep now: `memgov retention run`)"
    )


def _sweep_overdue(data: dict[str, Any], job: dict[str, Any], last: dict[str, Any] | None) -> list[str]:
    """A sweep overdue by more than one interval: none since the second-latest firing of its schedule.

    A job pg_cron has never run is not due yet, whatever memgov's own record holds (a sweep run by
    hand before the job was installed): pg_cron does not record when a job was created. When
    pg_cron records no runs at all (``cron.log_run = off``), memgov's record of its runs decides alone.
    """
    if last is None and data["pg_cron"].get("logs_runs"):
        return []
    times = []
    run = data.get("last_maintenance_run")
    if isinstance(run, dict) and run.get("started_at") is not None:
        times.append(run["started_at"])
    if last and last.get("start_time") is not None:
        times.append(last["start_time"])
    if not times:
        return []
    firings = previous_firings(str(job["schedule"]), data["now"])
    if firings is None:
        return []
    latest = max(times)
    if latest >= firings[1]:
        return []
    return [f"retention sweep overdue: last run started {latest.isoformat()}, schedule '{job['schedule']}' (GMT)"]

"""``memgov status``: what a governed database holds, and ``--check``: what is wrong with it.

Everything here only reads: the schema revision, the policies and shadows, pending
approvals and quarantine, the decisions of the last day, the last sweep and the
pg_cron job that runs it (memgov_pg.retention finds it). :func:`health` turns that
into the problems ``memgov status --check`` reports.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

import psycopg
from psycopg import errors

from .db import connect, error_message
from .resources import query
from .retention import counts, find_job


def _rows(conn: psycopg.Connection[Any], name: str) -> list[dict[str, Any]]:
    cur = conn.execute(query(name))
    columns = [c.name for c in cur.description or ()]
    return [dict(zip(columns, row, strict=True)) for row in cur.fetchall()]


def _section(conn: psycopg.Connection[Any], name: str) -> list[dict[str, Any]] | dict[str, str]:
    """A status section; a role that may not read it gets the reason instead of a failure."""
    try:
        return _rows(conn, name)
    except errors.InsufficientPrivilege as exc:
        return {"error": error_message(exc)}


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
            revision_error = error_message(exc)
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
        return {"error": error_message(exc)}
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

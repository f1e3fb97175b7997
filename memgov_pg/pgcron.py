"""Where pg_cron is, from a governed database, and what the connecting role may do with it.

pg_cron lives in one database of the server, ``cron.database_name``. pg_cron makes that
setting (and ``cron.log_run``) superuser-only: superusers and members of
``pg_read_all_settings`` read it in ``pg_settings``; ``memgov_admin`` reads those two
through ``memgov.cron_settings()`` (sql/071_run_maintenance.sql), which runs as
``memgov_settings_reader``; for anyone else the setting is hidden, and hidden is not
"not loaded": ``current_setting('cron.database_name', true)`` raises 42501 for a setting
that exists and returns NULL (or a config file's placeholder) for one no library defined.

In the cron database, pg_cron's schema ``cron`` needs USAGE, which only a superuser grants,
scheduling needs EXECUTE on ``cron.schedule_in_database``, and pg_cron's row security
shows a role that is neither a superuser nor BYPASSRLS only the jobs it scheduled.
Each refusal is a :class:`PgCronDenied` that names the grant and who gives it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import conninfo, errors

from .db import connect
from .errors import MemgovError
from .resources import query

NOT_LOADED = (
    "pg_cron is not loaded by this server: add shared_preload_libraries = 'pg_cron' and "
    "cron.database_name = '<database>' to postgresql.conf, restart PostgreSQL, and run "
    "CREATE EXTENSION pg_cron in that database (Debian/Ubuntu: apt-get install postgresql-15-cron)"
)
#: what memgov_admin needs in pg_cron's database, granted there by a superuser
USAGE_GRANT = "GRANT USAGE ON SCHEMA cron TO memgov_admin"
SCHEDULE_GRANT = "GRANT EXECUTE ON FUNCTION cron.schedule_in_database(text,text,text,text,text,boolean) TO memgov_admin"


class PgCronMissing(MemgovError):
    """pg_cron is not loaded by the server, or not installed in its cron database."""


class PgCronDenied(MemgovError):
    """pg_cron is there, but the connecting role may not see or use it: ``reason``, then ``fix``."""

    def __init__(self, reason: str, fix: str) -> None:
        super().__init__(f"{reason}; {fix}")
        self.reason = reason
        self.fix = fix


@dataclass(frozen=True)
class CronSite:
    """pg_cron as the connecting role finds it."""

    database: str  # cron.database_name: where pg_cron's tables and functions are
    governed: str  # the governed database
    user: str  # the connecting role
    logs_runs: bool  # cron.log_run: pg_cron records its runs in cron.job_run_details
    may_schedule: bool  # EXECUTE on cron.schedule_in_database
    sees_all_jobs: bool  # a superuser or BYPASSRLS: pg_cron's row security hides no job from it


def _dsn_with_dbname(dsn: str, dbname: str) -> str:
    params = conninfo.conninfo_to_dict(dsn)
    params["dbname"] = dbname
    return conninfo.make_conninfo(**params)  # type: ignore[arg-type]


def _row(conn: psycopg.Connection[Any], name: str) -> dict[str, Any]:
    cur = conn.execute(query(name))
    found = cur.fetchone()
    assert found is not None
    return dict(zip([c.name for c in cur.description or ()], found, strict=True))


def _hidden(conn: psycopg.Connection[Any]) -> bool:
    """Whether pg_cron defined cron.database_name but this role may not read it (42501)."""
    try:
        with conn.transaction():
            conn.execute(query("cron_setting_probe"))
    except errors.InsufficientPrivilege:
        return True
    return False


def _denied_settings(seen: dict[str, Any]) -> PgCronDenied:
    user = seen["user"]
    reason = (
        f"pg_cron is loaded, but {user} may not read its setting cron.database_name "
        "(superusers and members of pg_read_all_settings only)"
    )
    if not seen["has_schema"]:
        return PgCronDenied(reason, "run `memgov migrate` as a superuser, then connect as a login in memgov_admin")
    if seen["is_admin"]:  # an older schema, or EXECUTE taken away
        return PgCronDenied(
            reason + ", and may not call memgov.cron_settings(), which reads it for memgov_admin",
            "a superuser runs `memgov migrate` (it creates the function and grants it to memgov_admin)",
        )
    return PgCronDenied(
        reason,
        f"connect as a login in memgov_admin, which reads it through memgov.cron_settings() "
        f"(a superuser grants the role: GRANT memgov_admin TO {user})",
    )


def cron_settings(conn: psycopg.Connection[Any]) -> tuple[str, str, bool]:
    """(cron database, governed database, pg_cron logs its runs) as ``conn``'s role may learn them.

    PgCronMissing when the server has not loaded pg_cron; PgCronDenied when it has, but
    this role may not read where it is.
    """
    seen = _row(conn, "cron_settings_seen")
    if seen["reads_settings"]:
        cron_db, log_run = seen["cron_database"], seen["log_run"]
    elif seen["asks_memgov"]:
        asked = _row(conn, "cron_settings_asked")
        if not asked["readable"]:
            raise PgCronDenied(
                "memgov.cron_settings() may not read pg_cron's settings: its owner memgov_settings_reader "
                "is no longer a member of pg_read_all_settings",
                "a superuser grants it back: GRANT pg_read_all_settings TO memgov_settings_reader",
            )
        cron_db, log_run = asked["cron_database"], asked["log_run"]
    elif _hidden(conn):
        raise _denied_settings(seen)
    else:
        cron_db, log_run = None, None
    if not cron_db:
        raise PgCronMissing(NOT_LOADED)
    return str(cron_db), str(seen["governed_database"]), log_run != "off"


@contextmanager
def cron_connection(dsn: str, conn: psycopg.Connection[Any]) -> Iterator[tuple[psycopg.Connection[Any], CronSite]]:
    """An autocommit connection to the cron database of ``conn``'s server, and what this role may do there.

    PgCronMissing when pg_cron is not loaded or not installed in its database; PgCronDenied
    when this role may not read where it is or may not use its schema there.
    """
    cron_db, governed, logs_runs = cron_settings(conn)
    with connect(_dsn_with_dbname(dsn, cron_db), autocommit=True) as cron:
        cur = cron.execute(query("pg_cron_access"))
        found = cur.fetchone()
        if found is None:
            raise PgCronMissing(
                f"pg_cron is loaded but not installed in its database {cron_db}: "
                f"run CREATE EXTENSION pg_cron there as a superuser"
            )
        access = dict(zip([c.name for c in cur.description or ()], found, strict=True))
        user = str(access["user"])
        if not access["uses_schema"]:
            raise PgCronDenied(
                f"{user} may not use pg_cron: no USAGE on its schema cron in database {cron_db}",
                f"a superuser grants it there: {USAGE_GRANT}"
                + ("" if access["may_schedule"] else f" (and, to schedule, {SCHEDULE_GRANT})"),
            )
        yield (
            cron,
            CronSite(
                database=cron_db,
                governed=governed,
                user=user,
                logs_runs=logs_runs,
                may_schedule=bool(access["may_schedule"]),
                sees_all_jobs=bool(access["sees_all_jobs"]),
            ),
        )


def require_schedule(site: CronSite) -> None:
    """PgCronDenied unless the role may create jobs (EXECUTE on cron.schedule_in_database)."""
    if not site.may_schedule:
        raise PgCronDenied(
            f"{site.user} may not schedule with pg_cron: no EXECUTE on cron.schedule_in_database "
            f"in database {site.database}",
            f"a superuser grants it there: {SCHEDULE_GRANT} (or schedules the job as a superuser)",
        )

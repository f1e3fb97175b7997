"""`memgov doctor`'s checks of how the database is run: the sweep's pg_cron job (and a standby's),
tenant binding, the monitoring views and the exporter's role, the transaction counter behind the
sealed log, and the standby logger."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, Final

import psycopg
from psycopg import sql

from ..errors import MemgovError
from ..probes import counter_behind, counter_problem, counter_remedy
from .findings import ERROR, INFO, WARNING, Finding, fetch_rows, one_line, role_list

MONITORING_UNREADABLE_FIX: Final = (
    "fix what the error names (another finding may say it), or create the view again as sql/090_monitoring.sql does"
)
#: what DBAs monitor memgov with (sql/090_monitoring.sql, docs/monitoring.md), and who reads it
MONITORING_VIEWS: Final = (
    "monitor_decisions",
    "monitor_approvals",
    "monitor_quarantine",
    "monitor_sweep",
    "monitor_seal",
    "monitor_shadows",
    "monitor_policies",
)


def check_pg_cron(dsn: str, conn: psycopg.Connection[Any], database: str, standby: bool = False) -> Iterator[Finding]:
    """The sweep (retention, approval expiry) runs only when something schedules it; on a
    standby pg_cron runs no job (they replicate from the primary and run there)."""
    from ..pgcron import PgCronDenied, cron_connection

    try:
        with cron_connection(dsn, conn) as (cron, site):
            cron_db = site.database
            jobs = fetch_rows(cron, "doctor_cron_jobs", {"database": database})
    except PgCronDenied as exc:
        yield Finding(
            "pg-cron",
            WARNING,
            "pg_cron",
            f"the sweep's pg_cron job was not checked: {exc.reason}",
            f"{exc.fix}; or run memgov doctor as a superuser",
        )
        return
    except (MemgovError, psycopg.Error) as exc:
        message = exc.diag.message_primary if isinstance(exc, psycopg.Error) else str(exc)
        yield Finding(
            "pg-cron",
            WARNING,
            "pg_cron",
            f"pg_cron is not available: {message}; memories are not expired and approvals do not time out "
            "unless something else runs memgov.run_maintenance()",
            "load and install pg_cron (docs/retention.md), then `memgov retention schedule`",
        )
        return
    if not jobs:
        yield Finding(
            "pg-cron",
            WARNING,
            "pg_cron",
            f"no pg_cron job (visible to {conn.info.user}) runs memgov.run_maintenance() in database {database}: "
            "memories are not expired and approvals do not time out",
            "`memgov retention schedule --dsn PRIMARY` on the primary (a standby has its jobs by replication)"
            if standby
            else "`memgov retention schedule` (as a superuser)",
        )
        return
    if standby:
        names = ", ".join(str(job["jobname"] or job["jobid"]) for job in jobs)
        yield Finding(
            "pg-cron",
            INFO,
            "pg_cron",
            f"this server is a standby: pg_cron runs no job here; the job(s) {names} of database {database} "
            f"(in {cron_db}) replicate from the primary and run there, and start here only if it is promoted",
            "schedule and change the sweep on the primary (`memgov retention schedule --dsn PRIMARY`), never "
            "here; configure pg_cron here as on the primary (docs/operations.md)",
        )
    if not any(job["active"] for job in jobs):
        names = ", ".join(str(job["jobname"] or job["jobid"]) for job in jobs)
        yield Finding(
            "pg-cron",
            WARNING,
            "pg_cron",
            f"the pg_cron job(s) {names} of database {database} in {cron_db} are inactive",
            "`memgov retention schedule` (it replaces the job with an active one)",
        )


def check_monitoring(conn: psycopg.Connection[Any]) -> Iterator[Finding]:
    """The monitoring views are there, readable by memgov_admin and pg_monitor, and each one runs."""
    rows = fetch_rows(conn, "doctor_monitoring_views", {"views": list(MONITORING_VIEWS)})
    missing = [f"memgov.{r['name']}" for r in rows if not r["present"]]
    if missing:
        yield Finding(
            "monitoring",
            WARNING,
            ", ".join(missing),
            f"the monitoring view{'s' if len(missing) > 1 else ''} {', '.join(missing)} "
            f"{'are' if len(missing) > 1 else 'is'} missing: dashboards and alerts on them read nothing",
            "memgov migrate (the views come with the schema; docs/monitoring.md)",
        )
    for role, column in (("memgov_admin", "admin_reads"), ("pg_monitor", "monitor_reads")):
        unread = [f"memgov.{r['name']}" for r in rows if r["present"] and not r[column]]
        if unread:
            yield Finding(
                "monitoring",
                WARNING,
                role,
                f"{role} may not read {', '.join(unread)}: monitoring as {role} fails",
                f"GRANT SELECT ON {', '.join(unread)} TO {role}",
            )
    if rows and not rows[0]["monitor_uses_schema"]:
        yield Finding(
            "monitoring",
            WARNING,
            "pg_monitor",
            "pg_monitor has no USAGE on schema memgov: a monitoring login (postgres_exporter's) reads no view",
            "GRANT USAGE ON SCHEMA memgov TO pg_monitor",
        )
    for row in rows:
        if not row["present"]:
            continue
        view = f"memgov.{row['name']}"
        try:
            with conn.transaction():
                conn.execute(sql.SQL("SELECT FROM memgov.{} LIMIT 0").format(sql.Identifier(row["name"])))
        except psycopg.Error as exc:
            yield Finding(
                "monitoring",
                WARNING,
                view,
                f"{view} cannot be read: {one_line(str(exc).splitlines()[0] if str(exc) else type(exc).__name__)}",
                MONITORING_UNREADABLE_FIX,
            )


def check_xid_counter(conn: psycopg.Connection[Any]) -> Iterator[Finding]:
    """A logical copy (pg_restore into another cluster) whose transaction counter is behind the seals."""
    try:
        behind = counter_behind(conn)
    except (psycopg.errors.UndefinedTable, psycopg.errors.UndefinedColumn):
        return  # a schema without the sealed log: `memgov migrate` is reported elsewhere
    except psycopg.errors.InsufficientPrivilege:
        yield Finding(
            "xid-counter",
            WARNING,
            "memgov.decision_log",
            f"{conn.info.user} may not read the decision log and its seals: the transaction counter was not "
            "compared with them",
            "run memgov doctor as a superuser (or a member of memgov_admin)",
        )
        return
    if behind is not None:
        yield Finding("xid-counter", ERROR, "memgov.decision_log", counter_problem(behind), counter_remedy(behind))


def check_tenant_binding(conn: psycopg.Connection[Any], clients: Sequence[dict[str, Any]]) -> Iterator[Finding]:
    """Binding is optional: without it a client acts in whatever tenant its session names."""
    try:
        row = fetch_rows(conn, "doctor_tenant_binding", {"clients": [c["oid"] for c in clients]})[0]
    except (psycopg.errors.UndefinedTable, psycopg.errors.UndefinedFunction):
        yield Finding(
            "tenant-binding",
            INFO,
            "memgov.tenant_grants",
            "this memgov schema predates tenant binding as it is checked now",
            "`memgov migrate`",
        )
        return
    except psycopg.errors.InsufficientPrivilege:
        yield Finding(
            "tenant-binding",
            WARNING,
            "memgov.tenant_grants",
            f"{conn.info.user} may not read memgov.tenant_grants: the tenant binding was not checked",
            "run memgov doctor as a superuser (or a member of memgov_admin)",
        )
        return
    if row["binding_on"] != bool(row["grants"]):
        yield Finding(
            "tenant-binding",
            ERROR,
            "memgov.binding_on()",
            f"row security takes tenant binding to be {'on' if row['binding_on'] else 'off'}, but "
            f"memgov.tenant_grants has {row['grants']} grants: the flag was rewritten outside memgov",
            "as a superuser: UPDATE memgov.tenant_grants SET role_name = role_name (its trigger rewrites the flag)",
        )
    for role in row["missing_roles"]:
        yield Finding(
            "tenant-binding",
            WARNING,
            role,
            f"memgov.tenant_grants binds role {role!r}, which does not exist: a role created with that name "
            "later gets its tenants",
            f"memgov tenant list --role {role}; memgov tenant revoke {role} ORG for each",
        )
    if not row["grants"]:
        yield Finding(
            "tenant-binding",
            INFO,
            "memgov.tenant_grants",
            "tenant binding is not in use: writers and reviewers act in whichever tenant their session sets "
            "(memgov.org_id)",
            "bind each agent's login to its tenants: memgov tenant grant ROLE ORG (docs/security.md)",
        )
    elif row["unbound_logins"]:
        yield Finding(
            "tenant-binding",
            INFO,
            "memgov.tenant_grants",
            f"client logins {role_list(row['unbound_logins'])} are not bound to a tenant: they act in whichever "
            "tenant their session sets",
            "memgov tenant grant ROLE ORG for each (or for a group role they share)",
        )


# -- the report ----------------------------------------------------------------------------


EXPORTER_PATTERN: Final = "exporter, prometheus"


def check_exporter_role(conn: psycopg.Connection[Any], role: str | None) -> Iterator[Finding]:
    """postgres_exporter's login reads the monitoring views through pg_monitor. The catalog cannot
    tell which login the exporter uses: ``role`` names it (--exporter-role, MEMGOV_EXPORTER_ROLE);
    without it, the one login whose name says exporter or prometheus is checked, and with none
    or several the check is skipped with a note."""
    found = fetch_rows(conn, "doctor_exporter_roles", {"role": role})
    guessed = role is None
    if guessed and len(found) != 1:
        why = (
            f"several logins look like an exporter's ({role_list(r['role'] for r in found)})"
            if found
            else "no login looks like an exporter's"
        )
        yield Finding(
            "exporter-role",
            INFO,
            "pg_monitor",
            f"the exporter's role was not checked: {why} (a name with {EXPORTER_PATTERN})",
            "memgov doctor --exporter-role ROLE (or MEMGOV_EXPORTER_ROLE) names the login postgres_exporter uses",
        )
        return
    if not found:
        yield Finding(
            "exporter-role",
            WARNING,
            str(role),
            f"the exporter's role {role} does not exist",
            "check --exporter-role (MEMGOV_EXPORTER_ROLE): the login in postgres_exporter's DATA_SOURCE_NAME",
        )
        return
    row = found[0]
    if row["superuser"] or row["monitors"]:
        return
    how = " (guessed from its name; --exporter-role names it)" if guessed else ""
    yield Finding(
        "exporter-role",
        WARNING,
        row["role"],
        f"the exporter's role {row['role']}{how} is not a member of pg_monitor: postgres_exporter reads none "
        "of memgov's monitoring views (permission denied) and no memgov metric is exported",
        f"GRANT pg_monitor TO {row['role']}",
    )


def check_standby_logger(conn: psycopg.Connection[Any], standby: bool) -> Iterator[Finding]:
    """Governed reads on a standby are logged on the primary through the standby logger
    (sql/065_standby_reads.sql): set up, and the primary answering as its login."""
    try:
        with conn.transaction():
            status = fetch_rows(conn, "doctor_standby_logger")[0]["status"]
    except (psycopg.errors.UndefinedFunction, psycopg.errors.UndefinedTable):
        return  # a schema before standby reads: `memgov migrate` is reported elsewhere
    except psycopg.errors.InsufficientPrivilege:
        yield Finding(
            "standby-logger",
            WARNING,
            "memgov_primary",
            f"{conn.info.user} may not check the standby logger",
            "run memgov doctor as a superuser (or a member of memgov_admin)",
        )
        return
    if status is None:  # no server memgov_primary
        if standby:
            yield Finding(
                "standby-logger",
                INFO,
                "memgov_primary",
                "this standby refuses memgov.search and memgov.get (SQLSTATE 25006): no standby logger is set up "
                "to log their decisions on the primary",
                "memgov standby-logger setup --primary-dsn ... on the primary, or send governed reads to the "
                "primary (docs/operations.md)",
            )
        return
    options = status.get("options") or {}
    where = f"{options.get('host')}:{options.get('port')}/{options.get('dbname')}"
    if status["public_dblink"]:
        yield Finding(
            "standby-logger",
            WARNING,
            str(status["dblink_schema"]),
            f"every role may call dblink (schema {status['dblink_schema']}): a client on a standby could use the "
            "connection memgov keeps to the primary in its session",
            f"REVOKE EXECUTE ON ALL FUNCTIONS IN SCHEMA {status['dblink_schema']} FROM PUBLIC",
        )
    failure = None
    if status["dblink_schema"] is None:
        failure = "dblink is not installed"
    elif not status["user_mapping"]:
        failure = "memgov_owner has no user mapping for server memgov_primary"
    elif not status.get("reachable"):
        failure = f"the primary {where} does not answer: {one_line(str(status.get('error')))}"
    elif not status.get("may_log"):
        failure = f"the primary {where} does not let the logger's login call memgov.log_standby_read"
    if failure is None:
        yield Finding(
            "standby-logger",
            INFO,
            "memgov_primary",
            f"reads on standbys are logged on the primary {where}",
            "nothing; after a failover run memgov standby-logger setup on the new primary",
        )
    elif standby:
        yield Finding(
            "standby-logger",
            ERROR,
            "memgov_primary",
            f"governed reads on this standby fail (MG503): {failure}",
            "start the primary or repair the connection; memgov standby-logger setup on the primary "
            "(docs/operations.md)",
        )
    else:
        yield Finding(
            "standby-logger",
            WARNING if status["dblink_schema"] is None or not status["user_mapping"] else INFO,
            "memgov_primary",
            f"the standby logger is set up, but from this server {failure}: standbys may fail their governed "
            "reads (MG503)",
            "run memgov doctor on a standby to check from there; memgov standby-logger setup again, or "
            "memgov standby-logger remove",
        )

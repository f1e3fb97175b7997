"""`memgov doctor`: what in a database's configuration lets a client get around memgov.

It changes nothing: it reads the catalogs (and ``memgov.tenant_grants``), compares
the policy code with its record (``memgov.policy_drift()``, which creates a recorded
definition only inside a subtransaction it undoes), and reports one finding per
line, each with a severity and the statement or command that fixes it. Run it
as a superuser (or a role that may read ``memgov.tenant_grants`` and pg_cron's
``cron.job``).

The checks live by concern: :mod:`.privileges` (roles, owners, grants, policy code),
:mod:`.operations` (pg_cron, tenant binding, monitoring, the transaction counter, standbys);
:mod:`.findings` holds the finding and the report.

Severities: ``error`` (a client can get around the policy, a tenant or the
log), ``warning`` (memgov's guarantees lean on something missing: a scheduled
sweep, a search_path that is pinned but not tight, objects clients may create),
``info`` (a note: nothing to fix). ``memgov doctor`` exits 1 on any error or
warning (``--fail-on error``: on errors only) and never on info.
"""

from __future__ import annotations

from ..db import connect
from ..errors import MemgovError
from ..resources import query
from .findings import ERROR, INFO, SEVERITIES, WARNING, Finding, Report, fetch_rows
from .operations import (
    MONITORING_UNREADABLE_FIX,
    MONITORING_VIEWS,
    check_exporter_role,
    check_monitoring,
    check_pg_cron,
    check_standby_logger,
    check_tenant_binding,
    check_xid_counter,
)
from .privileges import (
    PUBLIC_API,
    REVIEWER_API,
    WRITER_API,
    check_client_attributes,
    check_client_grants,
    check_owner_members,
    check_owners,
    check_policy_drift,
    check_replication_role,
    check_search_path,
)

__all__ = [
    "ERROR",
    "INFO",
    "MONITORING_UNREADABLE_FIX",
    "MONITORING_VIEWS",
    "PUBLIC_API",
    "REVIEWER_API",
    "SEVERITIES",
    "WARNING",
    "WRITER_API",
    "Finding",
    "Report",
    "diagnose",
]


def diagnose(dsn: str, exporter_role: str | None = None) -> Report:
    """Run every check on the database ``dsn`` names (``exporter_role``: postgres_exporter's login)."""
    with connect(dsn, autocommit=True) as conn:
        database, user = conn.info.dbname, conn.info.user
        installed = conn.execute(query("doctor_schema_installed")).fetchone()
        if not (installed and installed[0]):
            raise MemgovError(f"database {database} has no memgov schema: run `memgov migrate` first")
        conn.execute(query("doctor_session"))
        clients = fetch_rows(conn, "doctor_clients")
        standby = bool(fetch_rows(conn, "doctor_recovery")[0]["standby"])
        findings = [
            *check_replication_role(conn),
            *check_owners(conn),
            *check_policy_drift(conn),
            *check_owner_members(conn),
            *check_client_attributes(clients),
            *check_search_path(conn),
            *check_client_grants(conn, clients),
            *check_pg_cron(dsn, conn, database, standby),
            *check_tenant_binding(conn, clients),
            *check_monitoring(conn),
            *check_exporter_role(conn, exporter_role),
            *check_standby_logger(conn, standby),
            *check_xid_counter(conn),
        ]
    order = {s: i for i, s in enumerate(SEVERITIES)}
    findings.sort(key=lambda f: order[f.severity])  # stable: checks keep their order within a severity
    return Report(database, user, tuple(findings))

"""`memgov doctor`: what in a database's configuration lets a client get around memgov.

It changes nothing: it reads the catalogs (and ``memgov.tenant_grants``), compares
the policy code with its record (``memgov.policy_drift()``, which creates a recorded
definition only inside a subtransaction it undoes), and reports one finding per
line, each with a severity and the statement or command that fixes it. Run it
as a superuser (or a role that may read ``memgov.tenant_grants`` and pg_cron's
``cron.job``).

Severities: ``error`` (a client can get around the policy, a tenant or the
log), ``warning`` (memgov's guarantees lean on something missing: a scheduled
sweep, a search_path that is pinned but not tight, objects clients may create),
``info`` (a note: nothing to fix). ``memgov doctor`` exits 1 on any error or
warning (``--fail-on error``: on errors only) and never on info.

The clients are PUBLIC, memgov_writer, memgov_reviewer and the login roles in
them that are neither superusers nor members of memgov_admin / memgov_owner.
What each of them may EXECUTE is the public API below (the detectors, and the client
functions described in memgov_pg/api.py); every other function in schema memgov is
engine-private.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Final

import psycopg
from psycopg import sql

from .api import CLIENT_FUNCTIONS, WRITER, signatures
from .db import connect
from .errors import MemgovError
from .probes import counter_behind, counter_problem, counter_remedy, policy_drift
from .resources import query

ERROR: Final = "error"
WARNING: Final = "warning"
INFO: Final = "info"
SEVERITIES: Final = (ERROR, WARNING, INFO)

#: What every role may call: the detectors, pure functions of their arguments (the
#: compiled policies, which run as memgov_policy, call them).
PUBLIC_API: Final[tuple[str, ...]] = (
    "memgov.pii_candidate_pattern()",
    "memgov.pii_pattern()",
    "memgov.card_pattern()",
    "memgov.secret_token_candidate_pattern()",
    "memgov.secret_token_pattern()",
    "memgov.secret_assignment_candidate_pattern()",
    "memgov.secret_assignment_pattern()",
    "memgov.luhn_valid(text)",
    "memgov.contains_card(text)",
    "memgov.contains_pii(text)",
    "memgov.contains_secret(text)",
    "memgov.detect_content(text)",
    "memgov.ip_address_pattern()",
    "memgov.contains_ip_address(text)",
    "memgov.iban_pattern()",
    "memgov.iban_valid(text)",
    "memgov.contains_iban(text)",
    "memgov.risk_level(numeric,jsonb)",
    "memgov.risk_assessment(text,boolean,boolean,text,text,text,jsonb)",
    "memgov.risk_assessment(text,text,text,text,text,jsonb)",
)
#: What a writer calls besides (the write path, the dry runs, governed reads, its own tenant,
#: what row level security calls as it) and what a reviewer calls: the client functions granted
#: to each role (memgov_pg/api.py, the one description of the client API). A reviewer's list
#: holds the writer's too: one login may be in both roles.
WRITER_API: Final[tuple[str, ...]] = (*PUBLIC_API, *signatures(WRITER))
REVIEWER_API: Final[tuple[str, ...]] = (*PUBLIC_API, *(f.signature for f in CLIENT_FUNCTIONS))

ENGINE_OWNERS: Final = ("memgov_owner", "memgov_policy", "memgov_settings_reader")
#: memgov_settings_reader holds pg_read_all_settings for this one function, and owns nothing else
SETTINGS_READER: Final = "memgov_settings_reader"
SETTINGS_FUNCTION: Final = "memgov.cron_settings()"
GOVERNED_TABLE: Final = "memgov.long_term_memory_items"
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
SAFE_SEARCH_PATH: Final = "pg_catalog, pg_temp"
_TRUSTED_PATH_SCHEMAS: Final = frozenset({"pg_catalog", "memgov"})
_TABLE_WRITES: Final = ("INSERT", "UPDATE", "DELETE", "TRUNCATE", "TRIGGER", "REFERENCES")
_SHOWN_ROLES: Final = 5


@dataclass(frozen=True)
class Finding:
    """One thing to fix (or, for info, to know)."""

    check: str  # a stable id: replication-role, owner, private-execute, ...
    severity: str  # error, warning, info
    subject: str  # the role or object it is about
    message: str  # what is wrong, one line
    fix: str  # what to do next

    def __str__(self) -> str:
        return _one_line(f"{self.severity}: [{self.check}] {self.message}; fix: {self.fix}")


@dataclass(frozen=True)
class Report:
    """What ``memgov doctor`` found in one database (as ``user``): every finding, in order."""

    database: str
    user: str
    findings: tuple[Finding, ...]

    def count(self, severity: str) -> int:
        """How many findings have ``severity`` (``error``, ``warning`` or ``info``)."""
        return sum(1 for f in self.findings if f.severity == severity)

    def failed(self, fail_on: str = WARNING) -> bool:
        """Whether the exit status is 1: any error, or (default) any error or warning."""
        failing = {ERROR} if fail_on == ERROR else {ERROR, WARNING}
        return any(f.severity in failing for f in self.findings)

    def summary(self) -> str:
        """The closing line of ``memgov doctor``: clean, or how many errors, warnings and notes."""
        counts = {s: self.count(s) for s in SEVERITIES}
        if not counts[ERROR] and not counts[WARNING]:
            notes = f" ({_plural(counts[INFO], 'note')})" if counts[INFO] else ""
            return f"memgov doctor: database {self.database} is clean{notes}"
        parts = [_plural(counts[ERROR], "error"), _plural(counts[WARNING], "warning")]
        if counts[INFO]:
            parts.append(_plural(counts[INFO], "note"))
        return f"memgov doctor: database {self.database}: {', '.join(parts)}"

    def to_json(self, fail_on: str = WARNING) -> dict[str, Any]:
        """The report as ``memgov doctor --json`` prints it; ``ok`` is the opposite of :meth:`failed`."""
        return {
            "database": self.database,
            "user": self.user,
            "ok": not self.failed(fail_on),
            "errors": self.count(ERROR),
            "warnings": self.count(WARNING),
            "notes": self.count(INFO),
            "findings": [asdict(f) for f in self.findings],
        }


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _one_line(text: str) -> str:
    """Role and object names may hold anything; a finding stays one printable line."""
    return "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in text)


def _roles(names: Iterable[str]) -> str:
    names = list(names)
    shown = ", ".join(names[:_SHOWN_ROLES])
    return shown + (f" and {len(names) - _SHOWN_ROLES} more" if len(names) > _SHOWN_ROLES else "")


def _rows(conn: psycopg.Connection[Any], name: str, params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    cur = conn.execute(query(name), params)
    columns = [c.name for c in cur.description or ()]
    return [dict(zip(columns, row, strict=True)) for row in cur.fetchall()]


# -- the checks --------------------------------------------------------------------------


def check_replication_role(conn: psycopg.Connection[Any]) -> Iterator[Finding]:
    """session_replication_role = replica switches every trigger off: the write path skips the policy."""
    for row in _rows(conn, "doctor_replication_role"):
        grantee, privilege = row["grantee"], row["privilege"]
        how = "SET" if privilege == "SET" else "ALTER SYSTEM SET"
        logins = f" (logins: {_roles(row['logins'])})" if row["logins"] and row["logins"] != [grantee] else ""
        yield Finding(
            "replication-role",
            ERROR,
            grantee,
            f"{grantee} may {how} session_replication_role{logins}: 'replica' switches memgov's triggers off, "
            "so writes skip the policy, the log and the tenant check",
            f"REVOKE {privilege} ON PARAMETER session_replication_role FROM {grantee}",
        )


def check_owners(conn: psycopg.Connection[Any]) -> Iterator[Finding]:
    """memgov objects belong to memgov_owner (compiled policies to memgov_policy), never to a login."""
    engine_roles = {r["role"]: r for r in _rows(conn, "doctor_engine_roles")}
    for name in ENGINE_OWNERS:
        role = engine_roles.get(name)
        if role is not None and role["can_login"]:
            yield Finding(
                "owner",
                ERROR,
                name,
                f"role {name} can log in: whoever logs in as it owns memgov and can rewrite the engine",
                f"ALTER ROLE {name} NOLOGIN",
            )
    for row in _rows(conn, "doctor_owners"):
        owner = row["owner"]
        if owner == SETTINGS_READER and row["object"] != SETTINGS_FUNCTION:
            kind, obj = row["kind"], row["object"]
            yield Finding(
                "owner",
                ERROR,
                obj,
                f"{kind} {obj} is owned by {SETTINGS_READER}, which holds pg_read_all_settings for "
                f"{SETTINGS_FUNCTION} alone: it can read every setting"
                + (" and it runs with that right" if kind in ("function", "procedure") else ""),
                f"ALTER {kind.upper()} {obj} OWNER TO memgov_owner",
            )
            continue
        if owner in ENGINE_OWNERS:
            continue  # a memgov role that can log in is reported once, above
        kind, obj = row["kind"], row["object"]
        target = (
            "memgov_policy"
            if kind == "function" and _is_compiled_policy(obj)
            else SETTINGS_READER
            if obj == SETTINGS_FUNCTION
            else "memgov_owner"
        )
        who = (
            f"the login role {owner}"
            if row["owner_can_login"]
            else (f"the superuser {owner}" if row["owner_is_superuser"] else f"{owner}")
        )
        yield Finding(
            "owner",
            ERROR,
            obj,
            f"{kind} {obj} is owned by {who}, not {target}: its owner can change or replace it"
            + (" and it runs as that owner" if kind in ("function", "procedure") else ""),
            f"ALTER {kind.upper()} {obj} OWNER TO {target}",
        )


def _is_compiled_policy(signature: str) -> bool:
    name = signature.split("(", 1)[0].removeprefix("memgov.")
    base = name.removesuffix("_explain").removesuffix("_retention")
    digest = base.removeprefix("policy_")
    return base.startswith("policy_") and len(digest) == 16 and all(c in "0123456789abcdef" for c in digest)


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _scope(org_id: str) -> str:
    return "the global policy" if org_id == "*" else f"tenant {org_id}"


def check_policy_drift(conn: psycopg.Connection[Any]) -> Iterator[Finding]:
    """A compiled policy function runs as memgov_policy for its tenant's decisions: its code
    must be the code its deploy recorded (policy_versions.compiled_sql)."""
    try:
        drifted = policy_drift(conn)
    except psycopg.errors.InsufficientPrivilege:
        yield Finding(
            "policy-drift",
            WARNING,
            "memgov.policy_drift()",
            f"{conn.info.user} may not run memgov.policy_drift(): the policy code was not compared with its record",
            "run memgov doctor as a superuser (or a member of memgov_admin)",
        )
        return
    if drifted is None:
        yield Finding(
            "policy-drift",
            INFO,
            "memgov.policy_drift()",
            "this memgov schema predates the comparison of policy code with its record",
            "`memgov migrate`",
        )
        return
    for row in drifted:
        function, version = row["function_name"], row["version"]
        deployed = f"policy version {version} of {_scope(row['org_id'])}" if version else "no active global policy"
        fix = "find out who replaced it (only a superuser or memgov_owner can), then, as a superuser, "
        if function == "memgov.decide":
            fix += "SELECT memgov.rebuild_dispatch() (it regenerates it from the records)"
        else:
            fix += (
                "run the recorded definition: SELECT (memgov.recorded_function(compiled_sql, "
                f"{_literal(function.removeprefix('memgov.'))})).definition FROM memgov.policy_versions "
                f"WHERE org_id = {_literal(row['org_id'])} AND version = {_literal(version)}"
            )
        yield Finding(
            "policy-drift",
            ERROR,
            function,
            f"{function} ({deployed}) is not the code its deploy recorded: {row['problem']}; "
            "it decides with code no deploy, activation or policy_versions row shows",
            fix,
        )


def check_owner_members(conn: psycopg.Connection[Any]) -> Iterator[Finding]:
    """A login in memgov_owner or memgov_policy acts as the engine itself; one in
    memgov_settings_reader reads every setting."""
    for row in _rows(conn, "doctor_owner_members"):
        login, role, via = row["login"], row["engine_role"], row["via"] or [row["login"]]
        through = "" if via == [login] else f" through {_roles(via)}"
        yield Finding(
            "owner-member",
            ERROR,
            login,
            f"login role {login} is a member of {role}{through}: "
            + (
                "it reads every setting of the server (pg_read_all_settings)"
                if role == SETTINGS_READER
                else f"it can SET ROLE {role} and write past the policy"
            ),
            f"REVOKE {role} FROM {', '.join(via)}",
        )


def check_client_attributes(clients: Sequence[dict[str, Any]]) -> Iterator[Finding]:
    """CREATEROLE lets a PostgreSQL 15 role grant itself memgov_owner; BYPASSRLS reads every tenant."""
    for c in clients:
        if c["createrole"]:
            yield Finding(
                "client-attributes",
                ERROR,
                c["role"],
                f"client role {c['role']} has CREATEROLE: it can grant itself memgov_owner",
                f"ALTER ROLE {c['role']} NOCREATEROLE",
            )
        if c["bypassrls"]:
            yield Finding(
                "client-attributes",
                ERROR,
                c["role"],
                f"client role {c['role']} has BYPASSRLS: it reads and writes every tenant's rows",
                f"ALTER ROLE {c['role']} NOBYPASSRLS",
            )


def check_search_path(conn: psycopg.Connection[Any]) -> Iterator[Finding]:
    """A SECURITY DEFINER function resolves names through a search_path its caller must not choose."""
    for row in _rows(conn, "doctor_definer_search_path"):
        function, kind, path = row["function"], row["kind"], row["search_path"]
        fix = f"ALTER {kind.upper()} {function} SET search_path = {SAFE_SEARCH_PATH}"
        if path is None:
            yield Finding(
                "search-path",
                ERROR,
                function,
                f"SECURITY DEFINER {kind} {function} has no pinned search_path: "
                "the caller's objects can stand in for the ones it means",
                fix,
            )
            continue
        schemas = [s.strip().strip('"') for s in path.split(",") if s.strip()]
        loose = [s for s in schemas if s not in _TRUSTED_PATH_SCHEMAS and s != "pg_temp"]
        if loose or not schemas or schemas[-1] != "pg_temp":
            why = (
                f"it searches {', '.join(loose)}, where others may create objects"
                if loose
                else "pg_temp is not last, so a caller's temporary tables are searched first"
            )
            yield Finding(
                "search-path",
                WARNING,
                function,
                f"SECURITY DEFINER {kind} {function} pins search_path '{path}': {why}",
                fix,
            )


def check_client_grants(conn: psycopg.Connection[Any], clients: Sequence[dict[str, Any]]) -> Iterator[Finding]:
    """Grants that reach a client: engine-private functions, table writes, unscoped reads, TEMP / CREATE."""
    rows = _rows(conn, "doctor_client_grants", {"clients": [c["oid"] for c in clients]})
    # one finding per grant (object, column, grantee): the clients it reaches, the privileges
    grants: dict[tuple[str, str, str | None, str], dict[str, Any]] = {}
    for row in rows:
        key = (row["kind"], row["object"], row["column_name"], row["grantee"])
        grant = grants.setdefault(key, {"row": row, "privileges": defaultdict(list)})
        if _is_finding(row):
            clients_of = grant["privileges"][row["privilege"]]
            if row["client"] not in clients_of:
                clients_of.append(row["client"])
    for (kind, obj, column, grantee), grant in grants.items():
        privileges: dict[str, list[str]] = {p: c for p, c in grant["privileges"].items() if c}
        if privileges:
            yield from _grant_findings(kind, obj, column, grantee, privileges, grant["row"])


def _api(row: dict[str, Any]) -> tuple[str, ...]:
    if row["client"] == "PUBLIC":
        return PUBLIC_API
    return REVIEWER_API if row["reviewer"] else WRITER_API


def _is_finding(row: dict[str, Any]) -> bool:
    kind: str = row["kind"]
    privilege: str = row["privilege"]
    if kind in ("function", "procedure"):
        return row["object"] not in _api(row)
    if kind in ("table", "view"):
        if privilege == "SELECT":
            return not row["row_security"]
        return privilege in _TABLE_WRITES
    if kind == "column":
        # column INSERT / UPDATE on the governed table is how agents write (the trigger decides)
        return privilege == "REFERENCES" or (privilege in ("INSERT", "UPDATE") and row["object"] != GOVERNED_TABLE)
    if kind == "sequence":
        return privilege == "UPDATE"
    if kind in ("database", "schema"):
        return bool(row["login"])  # TEMPORARY / CREATE: it matters for the logins that can use it
    return False


def _reach(grantee: str, clients: Iterable[str]) -> str:
    others = [c for c in dict.fromkeys(clients) if c != grantee]
    return f" (reaches {_roles(others)})" if others else ""


def _grant_findings(
    kind: str, obj: str, column: str | None, grantee: str, privileges: dict[str, list[str]], row: dict[str, Any]
) -> Iterator[Finding]:
    reached = [c for cs in privileges.values() for c in cs]
    reach = _reach(grantee, reached)
    if kind in ("function", "procedure"):
        fix = f"REVOKE EXECUTE ON {kind.upper()} {obj} FROM {grantee}"
        if grantee == "PUBLIC":
            private = "" if obj in REVIEWER_API else "engine-private "
            message = f"PUBLIC may EXECUTE {private}{kind} {obj}: so may every role with USAGE on schema memgov"
            if not private:  # a writer's or a reviewer's function, not everyone's
                fix += " and GRANT it to the memgov roles that call it"
        else:
            message = f"{grantee} may EXECUTE engine-private {kind} {obj}{reach}"
        yield Finding("private-execute", ERROR, obj, message, fix)
        return
    if kind in ("database", "schema"):
        names = ", ".join(privileges)
        uses = {
            "TEMPORARY": "create temporary tables and functions",
            "CREATE": "create schemas" if kind == "database" else "create objects there",
        }
        yield Finding(
            "client-create",
            ERROR if kind == "schema" and obj == "memgov" else WARNING,
            f"{kind} {obj}",
            f"client logins {_roles(dict.fromkeys(reached))} have {names} on {kind} {obj} through {grantee}: "
            + "; ".join(f"{p} lets them {uses[p]}" for p in privileges),
            f"REVOKE {names} ON {kind.upper()} {obj} FROM {grantee}"
            + (" (and GRANT it to the roles that need it)" if grantee == "PUBLIC" else ""),
        )
        return
    on = f"{obj} ({column})" if column else obj
    if "SELECT" in privileges:  # only reported where the table has no row level security
        scoped = bool(row["has_org_id"])
        readers = _reach(grantee, privileges["SELECT"])
        yield Finding(
            "client-read",
            ERROR if scoped else WARNING,
            on,
            f"{grantee} may SELECT {kind} {on}{readers}, which has no row level security: "
            + ("it reads every tenant's rows" if scoped else "every client sees all of it"),
            f"REVOKE SELECT ON {obj} FROM {grantee}"
            + (" (or ENABLE ROW LEVEL SECURITY with a tenant policy)" if scoped else ""),
        )
    writes = [p for p in privileges if p != "SELECT"]
    if writes:
        why = {
            "table": "writes past the trigger's column rules or the engine's functions, "
            "or LOCKs the table against every tenant",
            "view": "writes through the view as the view's owner",
            "column": "writes an engine column, or references it (and so blocks deletes)",
            "sequence": "moves the sequence (setval)",
        }[kind]
        writers = _reach(grantee, [c for p in writes for c in privileges[p]])
        yield Finding(
            "table-write",
            ERROR,
            on,
            f"{grantee} has {', '.join(writes)} on {kind} {on}{writers}: it {why}",
            f"REVOKE {', '.join(writes)}" + (f" ({column})" if column else "") + f" ON {obj} FROM {grantee}",
        )


def check_pg_cron(dsn: str, conn: psycopg.Connection[Any], database: str) -> Iterator[Finding]:
    """The sweep (retention, approval expiry) runs only when something schedules it."""
    from .pgcron import PgCronDenied, cron_connection

    try:
        with cron_connection(dsn, conn) as (cron, site):
            cron_db = site.database
            jobs = _rows(cron, "doctor_cron_jobs", {"database": database})
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
            "`memgov retention schedule` (as a superuser)",
        )
        return
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
    rows = _rows(conn, "doctor_monitoring_views", {"views": list(MONITORING_VIEWS)})
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
                f"{view} cannot be read: {_one_line(str(exc).splitlines()[0] if str(exc) else type(exc).__name__)}",
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
        row = _rows(conn, "doctor_tenant_binding", {"clients": [c["oid"] for c in clients]})[0]
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
            f"client logins {_roles(row['unbound_logins'])} are not bound to a tenant: they act in whichever "
            "tenant their session sets",
            "memgov tenant grant ROLE ORG for each (or for a group role they share)",
        )


# -- the report ----------------------------------------------------------------------------


def diagnose(dsn: str) -> Report:
    """Run every check on the database ``dsn`` names."""
    with connect(dsn, autocommit=True) as conn:
        database, user = conn.info.dbname, conn.info.user
        installed = conn.execute(query("doctor_schema_installed")).fetchone()
        if not (installed and installed[0]):
            raise MemgovError(f"database {database} has no memgov schema: run `memgov migrate` first")
        conn.execute(query("doctor_session"))
        clients = _rows(conn, "doctor_clients")
        findings = [
            *check_replication_role(conn),
            *check_owners(conn),
            *check_policy_drift(conn),
            *check_owner_members(conn),
            *check_client_attributes(clients),
            *check_search_path(conn),
            *check_client_grants(conn, clients),
            *check_pg_cron(dsn, conn, database),
            *check_tenant_binding(conn, clients),
            *check_monitoring(conn),
            *check_xid_counter(conn),
        ]
    order = {s: i for i, s in enumerate(SEVERITIES)}
    findings.sort(key=lambda f: order[f.severity])  # stable: checks keep their order within a severity
    return Report(database, user, tuple(findings))

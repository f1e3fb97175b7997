"""`memgov doctor`'s checks of roles and privileges: who may switch the triggers off, own memgov's
objects, run changed policy code, reach memgov's private functions or write its tables.

The clients are PUBLIC, memgov_writer, memgov_reviewer and the login roles in
them that are neither superusers nor members of memgov_admin / memgov_owner.
What each of them may EXECUTE is the public API below (the detectors, and the client
functions described in memgov_pg/api.py); every other function in schema memgov is
engine-private.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, Final

import psycopg

from ..api import CLIENT_FUNCTIONS, WRITER, signatures
from ..probes import policy_drift
from .findings import ERROR, INFO, WARNING, Finding, fetch_rows, role_list

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
SAFE_SEARCH_PATH: Final = "pg_catalog, pg_temp"
_TRUSTED_PATH_SCHEMAS: Final = frozenset({"pg_catalog", "memgov"})
_TABLE_WRITES: Final = ("INSERT", "UPDATE", "DELETE", "TRUNCATE", "TRIGGER", "REFERENCES")


def check_replication_role(conn: psycopg.Connection[Any]) -> Iterator[Finding]:
    """session_replication_role = replica switches every trigger off: the write path skips the policy."""
    for row in fetch_rows(conn, "doctor_replication_role"):
        grantee, privilege = row["grantee"], row["privilege"]
        how = "SET" if privilege == "SET" else "ALTER SYSTEM SET"
        logins = f" (logins: {role_list(row['logins'])})" if row["logins"] and row["logins"] != [grantee] else ""
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
    engine_roles = {r["role"]: r for r in fetch_rows(conn, "doctor_engine_roles")}
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
    for row in fetch_rows(conn, "doctor_owners"):
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
    for row in fetch_rows(conn, "doctor_owner_members"):
        login, role, via = row["login"], row["engine_role"], row["via"] or [row["login"]]
        through = "" if via == [login] else f" through {role_list(via)}"
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
    for row in fetch_rows(conn, "doctor_definer_search_path"):
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
    rows = fetch_rows(conn, "doctor_client_grants", {"clients": [c["oid"] for c in clients]})
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
    return f" (reaches {role_list(others)})" if others else ""


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
            f"client logins {role_list(dict.fromkeys(reached))} have {names} on {kind} {obj} through {grantee}: "
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

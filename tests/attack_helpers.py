"""Helpers of the attack tests (tests/db/test_attacks.py, tests/db/test_recall.py): login roles, a policy with
every kind of rule, and snapshots of everything memgov stores.

The attacks run as real login roles (``user=<login>`` on the test cluster, which
trusts 127.0.0.1), never as a superuser that merely ``SET ROLE``s. Each attack is
followed by a comparison of two snapshots taken as the superuser: the full content
of every table of schema memgov (enumerated from pg_class, so tables added later
are included), the relations, functions and privileges of every non-system schema,
and the memberships of the memgov roles. "The attack failed" means: the expected
SQLSTATE, and the two snapshots are equal.
"""

from __future__ import annotations

import datetime as dt
import os
import secrets
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, fields
from decimal import Decimal
from typing import Any

import psycopg
import pytest
from psycopg import conninfo, sql
from psycopg.types.json import Jsonb

from memgov_pg.compiler import compile_policy
from memgov_pg.deploy import pg_regex_checker
from memgov_pg.policy import load_policy

ORG = "acme"
OTHER = "globex"

# The policy every attack test runs under (global), and a tenant override for globex.
#   legal-hold-no-forget        category legal_hold may never be forgotten
#   block-secrets               secrets are denied
#   quarantine-untrusted-pii    PII from any context but trusted_app is quarantined
#   hold-uncertain-preferences  a preference at 0.7 or less waits for a reviewer
#   purge-flagged               the sweep deletes memories flagged metadata.purge = yes
# Everything else is allowed. Rejected memories below 0.2 are deleted.
POLICY = """
version: "{version}"
description: attack tests
mode: enforce
defaults: {{on_policy_miss: allow}}
sources:
  user_confirmed: [memgov_reviewer, memgov_admin]
  system_rule: [memgov_admin]
  agent_extracted: ["*"]
feedback: {{reject_delete_below: 0.2}}
rules:
  - id: legal-hold-no-forget
    description: {description}
    priority: 5
    category: legal_hold
    when: [{{field: operation_type, operator: eq, value: forget}}]
    action: deny
    reason_codes: [LEGAL_HOLD]
  - id: block-secrets
    priority: 10
    when: [{{field: content.contains_secret, operator: eq, value: true}}]
    action: deny
    reason_codes: [SECRET_DETECTED]
  - id: quarantine-untrusted-pii
    priority: 20
    when:
      - {{field: content.contains_pii, operator: eq, value: true}}
      - {{field: context.source, operator: nin, value: [trusted_app]}}
    action: quarantine
    reason_codes: [PII_UNTRUSTED]
  - id: hold-uncertain-preferences
    priority: 30
    category: preference
    condition: {{confidence: {{lte: 0.7}}}}
    action: require_approval
    reason_codes: [LOW_CONFIDENCE_PREFERENCE]
  - id: purge-flagged
    priority: 100
    condition: {{metadata.purge: "yes"}}
    action: auto_delete
"""
# The attack policy with read rules on top (the write rules are unscoped: they decide reads too).
READ_RULES = """
  - id: deny-untrusted-recall
    priority: 1
    when:
      - {{field: operation_type, operator: eq, value: search}}
      - {{field: context.source, operator: eq, value: untrusted}}
    action: deny
    reason_codes: [UNTRUSTED_RECALL]
  - id: hold-secret-searches
    priority: 2
    when:
      - {{field: operation_type, operator: eq, value: search}}
      - {{field: content.contains_secret, operator: eq, value: true}}
    action: require_approval
    reason_codes: [SECRET_SEARCH]
  - id: withhold-sensitive
    priority: 3
    when:
      - {{field: operation_type, operator: eq, value: get}}
      - {{field: is_sensitive, operator: eq, value: true}}
    action: deny
    reason_codes: [SENSITIVE_RECALL]
"""
READ_POLICY = POLICY + READ_RULES
GLOBAL_VERSION = "1.0.0"
OTHER_VERSION = "7.0.0-globex"
OTHER_SECRET = "GLOBEX-CONFIDENTIAL-RULE-TEXT"

# A creation time ten days ago: past the seven days of ttl_7d.
DAYS_AGO_10 = dt.datetime.now(dt.UTC) - dt.timedelta(days=10)

TEXTS = {
    "allowed": ("user_fact", "likes green tea", "0.9"),
    "held": ("preference", "likes tea", "0.6"),
    "quarantined": ("user_fact", "Reach me at olena@example.com", "0.9"),
    "denied": ("user_fact", "password: hunter2hunter2", "0.9"),
    "legal": ("legal_hold", "signed the retention agreement", "0.9"),
}


def item(kind: str = "allowed", org: str = ORG, **extra: Any) -> dict[str, Any]:
    """A memory of one kind (see TEXTS) as the columns an agent sets."""
    category, text, confidence = TEXTS[kind]
    row: dict[str, Any] = {"org_id": org, "category": category, "fact_text": text,
                           "source": "agent_extracted", "confidence": Decimal(confidence)}  # fmt: skip
    if kind == "quarantined":
        row["context_source"] = "custom"
    return row | extra


def as_json(row: dict[str, Any]) -> Jsonb:
    return Jsonb({k: (str(v) if isinstance(v, Decimal | uuid.UUID) else v) for k, v in row.items()})


def insert(conn: psycopg.Connection[Any], row: dict[str, Any]) -> psycopg.Cursor[Any]:
    """A plain INSERT of ``row`` (any columns), RETURNING memory_id, status."""
    stmt = sql.SQL("INSERT INTO memgov.long_term_memory_items ({}) VALUES ({}) RETURNING memory_id, status").format(
        sql.SQL(", ").join(map(sql.Identifier, row)), sql.SQL(", ").join(map(sql.Placeholder, row))
    )
    return conn.execute(stmt, row)


def seed(su: psycopg.Connection[Any], kind: str = "allowed", org: str = ORG, **extra: Any) -> uuid.UUID:
    """A stored memory put there on the engine's own path (as memgov_owner: no decision, no log)."""
    with su.transaction():
        su.execute("SET LOCAL ROLE memgov_owner")
        row = insert(su, item(kind, org, **extra)).fetchone()
    assert row is not None
    return row[0]


def deploy_policy(
    su: psycopg.Connection[Any],
    version: str = GLOBAL_VERSION,
    text: str | None = None,
    tenant: str = "*",
    description: str = "legal hold",
) -> None:
    """The attack policy (or ``text``, a format string like POLICY) for ``tenant``, as the superuser."""
    source = (text or POLICY).format(version=version, description=description)
    policy = load_policy(source, regex_checker=pg_regex_checker(su))
    with su.transaction():
        su.execute(compile_policy(policy, tenant).install_sql())


def deploy_policies(su: psycopg.Connection[Any]) -> None:
    """The attack policy, globally, and its globex override (whose description is OTHER_SECRET)."""
    deploy_policy(su)
    deploy_policy(su, OTHER_VERSION, tenant=OTHER, description=OTHER_SECRET)


# -- login roles ---------------------------------------------------------------------


@dataclass(frozen=True)
class Logins:
    """The login (and group) roles of one test session; names are unique per session."""

    writer: str  # memgov_writer
    gwriter: str  # memgov_writer, acts in globex
    reviewer: str  # memgov_reviewer
    reviewer2: str  # memgov_reviewer
    greviewer: str  # memgov_reviewer, acts in globex
    both: str  # memgov_writer + memgov_reviewer
    puppet: str  # member of `writer` + memgov_reviewer
    admin: str  # memgov_admin
    bound: str  # memgov_writer, bound to acme by the tests that need it
    team: str  # NOLOGIN group in memgov_writer, bound by the tests that need it
    member: str  # member of `team`
    mid: str  # NOLOGIN group in memgov_writer
    chain: str  # member of `mid`
    creator: str  # memgov_writer that owns a schema (search_path attacks)
    nobody: str  # a login with no memgov role
    mixed: str  # memgov_writer whose name needs quoting ("AtkMixed_...")
    mixed_puppet: str  # member of `mixed` + memgov_reviewer

    def all(self) -> list[str]:
        return [getattr(self, f.name) for f in fields(self)]


def create_logins(su: psycopg.Connection[Any]) -> Logins:
    tag = f"{os.getpid()}_{secrets.token_hex(3)}"
    names = {f.name: f"atk_{tag}_{f.name}" for f in fields(Logins)}
    names["mixed"] = f"AtkMixed_{tag}"
    logins = Logins(**names)
    ident = {k: sql.Identifier(v) for k, v in names.items()}

    def create(name: str, *groups: str, login: bool = True) -> None:
        stmt = sql.SQL("CREATE ROLE {} {}").format(ident[name], sql.SQL("LOGIN" if login else "NOLOGIN"))
        if groups:
            stmt = sql.SQL("{} IN ROLE {}").format(
                stmt, sql.SQL(", ").join(ident[g] if g in ident else sql.Identifier(g) for g in groups)
            )
        su.execute(stmt)

    create("writer", "memgov_writer")
    create("gwriter", "memgov_writer")
    create("reviewer", "memgov_reviewer")
    create("reviewer2", "memgov_reviewer")
    create("greviewer", "memgov_reviewer")
    create("both", "memgov_writer", "memgov_reviewer")
    create("puppet", "writer", "memgov_reviewer")
    create("admin", "memgov_admin")
    create("bound", "memgov_writer")
    create("team", "memgov_writer", login=False)
    create("member", "team")
    create("mid", "memgov_writer", login=False)
    create("chain", "mid")
    create("creator", "memgov_writer")
    create("nobody")
    create("mixed", "memgov_writer")
    create("mixed_puppet", "mixed", "memgov_reviewer")
    return logins


def drop_logins(su: psycopg.Connection[Any], logins: Logins) -> None:
    for name in reversed(logins.all()):
        su.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s", (name,))
    for name in reversed(logins.all()):
        role = sql.Identifier(name)
        su.execute(sql.SQL("DROP OWNED BY {}").format(role))
        su.execute(sql.SQL("DROP ROLE {}").format(role))


#: A pytest fixture (registered by tests/conftest.py): real login roles for a test module.
@pytest.fixture(scope="module")
def logins(memgov_dsn: str) -> Iterator[Logins]:
    """The login roles of this module, created in the cluster and dropped at the end."""
    with psycopg.connect(memgov_dsn, autocommit=True) as su:
        made = create_logins(su)
    try:
        yield made
    finally:
        with psycopg.connect(memgov_dsn, autocommit=True) as su:
            drop_logins(su, made)


def login_dsn(dsn: str, role: str) -> str:
    return conninfo.make_conninfo(dsn, user=role)


def connect_login(dsn: str, role: str, org: str | None = ORG) -> psycopg.Connection[Any]:
    """An autocommit connection as the login ``role``, with ``SET memgov.org_id = org`` as agents do."""
    conn = psycopg.connect(login_dsn(dsn, role), autocommit=True)
    assert conn.execute("SELECT session_user::text").fetchone() == (role,)
    if org is not None:
        conn.execute("SELECT set_config('memgov.org_id', %s, false)", (org,))
    return conn


def connect_as_role(dsn: str, role: str | None, org: str | None = ORG) -> psycopg.Connection[Any]:
    """An autocommit superuser connection that has done ``SET ROLE role`` (none if ``role`` is None),
    with ``memgov.org_id = org``: a role's privileges without a login of its own."""
    conn = psycopg.connect(dsn, autocommit=True)
    if role:
        conn.execute(sql.SQL("SET ROLE {}").format(sql.Identifier(role)))
    if org is not None:
        conn.execute("SELECT set_config('memgov.org_id', %s, false)", (org,))
    return conn


#: ``login(role, org='acme')``: the fixture below
Login = Callable[..., psycopg.Connection[Any]]
#: ``as_role(role, org='acme')``: tests/db/conftest.py's fixture
AsRole = Callable[..., psycopg.Connection[Any]]


@pytest.fixture
def login(memgov_dsn: str, su: psycopg.Connection[Any]) -> Iterator[Login]:
    """``login(role, org='acme')``: a connection as that login role, closed after the test.

    It asks for the module's own ``su`` fixture: the clean database the module attacks."""
    opened: list[psycopg.Connection[Any]] = []

    def open_(role: str, org: str | None = ORG) -> psycopg.Connection[Any]:
        conn = connect_login(memgov_dsn, role, org)
        opened.append(conn)
        return conn

    yield open_
    for conn in opened:
        conn.close()


@pytest.fixture
def writer(login: Login, logins: Logins) -> psycopg.Connection[Any]:
    """The writer login, in tenant acme."""
    return login(logins.writer)


@pytest.fixture
def reviewer(login: Login, logins: Logins) -> psycopg.Connection[Any]:
    """The reviewer login, in tenant acme."""
    return login(logins.reviewer)


# -- snapshots -----------------------------------------------------------------------

Snapshot = dict[str, list[str]]

_OBJECTS = """
SELECT format('%s %s.%s owner=%s acl=%s rls=%s/%s', c.relkind, n.nspname, c.relname,
              pg_get_userbyid(c.relowner), c.relacl, c.relrowsecurity, c.relforcerowsecurity)
  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
 WHERE n.nspname NOT IN ('pg_catalog', 'information_schema', 'pg_toast')
   AND n.nspname NOT LIKE 'pg\\_temp\\_%' AND n.nspname NOT LIKE 'pg\\_toast\\_temp\\_%'
 ORDER BY 1
"""
_FUNCTIONS = """
SELECT format('%s owner=%s secdef=%s config=%s acl=%s src=%s', p.oid::regprocedure,
              pg_get_userbyid(p.proowner), p.prosecdef, p.proconfig, p.proacl, md5(p.prosrc))
  FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
 WHERE n.nspname NOT IN ('pg_catalog', 'information_schema')
   AND n.nspname NOT LIKE 'pg\\_temp\\_%'
 ORDER BY 1
"""
_TRIGGERS_AND_POLICIES = """
SELECT format('trigger %s on %s enabled=%s %s', t.tgname, t.tgrelid::regclass, t.tgenabled,
              md5(pg_get_triggerdef(t.oid)))
  FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
 WHERE c.relnamespace = 'memgov'::regnamespace AND NOT t.tgisinternal
UNION ALL
SELECT format('policy %s on %s.%s roles=%s %s %s', p.policyname, p.schemaname, p.tablename, p.roles,
              p.qual, p.with_check)
  FROM pg_policies p WHERE p.schemaname = 'memgov'
ORDER BY 1
"""
_MEMBERSHIPS = """
SELECT format('%s in %s admin=%s', m.member::regrole, m.roleid::regrole, m.admin_option)
  FROM pg_auth_members m
 WHERE m.roleid::regrole::text LIKE 'memgov\\_%' OR m.member::regrole::text LIKE 'memgov\\_%'
    OR m.roleid::regrole::text LIKE 'atk\\_%' OR m.member::regrole::text LIKE 'atk\\_%'
UNION ALL
SELECT format('role %s super=%s createrole=%s bypassrls=%s config=%s', r.rolname, r.rolsuper, r.rolcreaterole,
              r.rolbypassrls, r.rolconfig)
  FROM pg_roles r WHERE r.rolname LIKE 'memgov\\_%' OR r.rolname LIKE 'atk\\_%'
ORDER BY 1
"""


def memgov_tables(su: psycopg.Connection[Any]) -> list[str]:
    """Every table of schema memgov, as pg_class knows them (new tables included)."""
    rows = su.execute(
        "SELECT c.relname::text FROM pg_class c WHERE c.relnamespace = 'memgov'::regnamespace"
        " AND c.relkind IN ('r', 'p') ORDER BY 1"
    ).fetchall()
    return [r[0] for r in rows]


def snapshot(su: psycopg.Connection[Any]) -> Snapshot:
    """Everything memgov stores, as the superuser sees it (row level security does not apply).

    One statement reads it all (a round trip per table made the check cost more than the attack)."""
    parts = [
        sql.SQL("SELECT {}, ARRAY(SELECT to_jsonb(t)::text FROM memgov.{} t ORDER BY 1)").format(
            sql.Literal(f"memgov.{table}"), sql.Identifier(table)
        )
        for table in memgov_tables(su)
    ]
    catalog = {"<relations>": _OBJECTS, "<functions>": _FUNCTIONS,
               "<triggers+policies>": _TRIGGERS_AND_POLICIES, "<roles>": _MEMBERSHIPS}  # fmt: skip
    parts += [
        sql.SQL("SELECT {}, ARRAY({})").format(sql.Literal(name), sql.SQL(query.strip()))  # type: ignore[arg-type]
        for name, query in catalog.items()
    ]
    return {name: list(rows) for name, rows in su.execute(sql.SQL("\nUNION ALL\n").join(parts)).fetchall()}


def _cut(text: str, width: int = 400) -> str:
    return text if len(text) <= width else text[:width] + f"... ({len(text)} chars)"


def snapshot_diff(before: Snapshot, after: Snapshot) -> str:
    """What changed, table by table ('' when nothing did)."""
    out = []
    for key in sorted(set(before) | set(after)):
        old, new = before.get(key), after.get(key)
        if old == new:
            continue
        if old is None or new is None:
            out.append(f"{key}: {'appeared' if old is None else 'disappeared'}")
            continue
        removed = [r for r in old if r not in new]
        added = [r for r in new if r not in old]
        out.append(f"{key}: {len(removed)} row(s) gone, {len(added)} row(s) new")
        out += [f"  - {_cut(r)}" for r in removed[:5]] + [f"  + {_cut(r)}" for r in added[:5]]
    return "\n".join(out)


def assert_same(before: Snapshot, after: Snapshot, what: str = "the attack") -> None:
    diff = snapshot_diff(before, after)
    assert not diff, f"{what} changed what memgov stores:\n{diff}"


@contextmanager
def unchanged(su: psycopg.Connection[Any], what: str = "the attack") -> Iterator[None]:
    """The block may do anything but must leave every table, log and queue as it found them."""
    before = snapshot(su)
    yield
    assert_same(before, snapshot(su), what)


@contextmanager
def refused(su: psycopg.Connection[Any], *sqlstates: str) -> Iterator[pytest.ExceptionInfo[psycopg.Error]]:
    """The block must raise a database error with one of ``sqlstates`` and change nothing."""
    before = snapshot(su)
    with pytest.raises(psycopg.Error) as info:
        yield info
    got = info.value.sqlstate
    assert got in sqlstates, f"SQLSTATE {got}, not {' or '.join(sqlstates)}: {info.value}"
    assert_same(before, snapshot(su))


def request_of(su: psycopg.Connection[Any], memory_id: uuid.UUID) -> uuid.UUID:
    row = su.execute(
        "SELECT request_id FROM memgov.approval_requests WHERE memory_id = %s AND status = 'pending'", (memory_id,)
    ).fetchone()
    assert row is not None, f"no pending request for {memory_id}"
    return row[0]


def quarantine_of(su: psycopg.Connection[Any], memory_id: uuid.UUID) -> uuid.UUID:
    row = su.execute(
        "SELECT quarantine_id FROM memgov.quarantine WHERE memory_id = %s AND status = 'held'", (memory_id,)
    ).fetchone()
    assert row is not None, f"no held quarantine entry for {memory_id}"
    return row[0]


def memory(su: psycopg.Connection[Any], memory_id: uuid.UUID, org: str = ORG) -> dict[str, Any] | None:
    cur = su.execute(
        "SELECT * FROM memgov.long_term_memory_items WHERE memory_id = %s AND org_id = %s", (memory_id, org)
    )
    row = cur.fetchone()
    return None if row is None else dict(zip([c.name for c in cur.description or ()], row, strict=True))


def held(writer: psycopg.Connection[Any], su: psycopg.Connection[Any], **extra: Any) -> tuple[uuid.UUID, uuid.UUID]:
    """A held INSERT by ``writer``: (memory_id, request_id)."""
    row = insert(writer, item("held", **extra)).fetchone()
    assert row is not None and row[1] == "pending_approval", row
    return row[0], request_of(su, row[0])


def quarantined(
    writer: psycopg.Connection[Any], su: psycopg.Connection[Any], **extra: Any
) -> tuple[uuid.UUID, uuid.UUID]:
    """A quarantined INSERT by ``writer``: (memory_id, quarantine_id)."""
    memory_id = extra.pop("memory_id", None) or uuid.uuid4()
    cur = insert(writer, item("quarantined", memory_id=memory_id, **extra))
    assert cur.rowcount == 0
    return memory_id, quarantine_of(su, memory_id)


def bind(su: psycopg.Connection[Any], role: str, org: str) -> None:
    su.execute("SELECT memgov.grant_tenant(%s, %s)", (role, org))


def policy_text(version: str = "2.0.0", description: str = "attack tests") -> str:
    return POLICY.format(version=version, description=description)


def install_call(compiled: Any, org: str = "*", bodies: tuple[str, str, str] | None = None) -> sql.Composed:
    """memgov.install_policy(...) with named arguments; ``bodies`` replace the compiled ones."""
    p = compiled.policy
    decide, explain, retention = bodies or compiled.bodies
    args = {
        "p_org_id": org, "p_version": p.version, "p_sha256": p.sha256, "p_mode": p.mode,
        "p_function_name": compiled.function_name, "p_source_yaml": p.source_text,
        "p_decide_body": decide, "p_explain_body": explain, "p_retention_body": retention,
    }  # fmt: skip
    parts = [sql.SQL("{} => {}").format(sql.Identifier(k), sql.Literal(v)) for k, v in args.items()]
    parts.append(sql.SQL("p_settings => {}").format(sql.Literal(Jsonb(compiled.settings()))))
    parts.append(sql.SQL("p_rules => {}").format(sql.Literal(Jsonb(compiled.rule_rows()))))
    return sql.SQL("SELECT memgov.install_policy({})").format(sql.SQL(", ").join(parts))

"""Validate, compile and install policies; roll back; evaluate items."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
from psycopg import errors
from psycopg.pq import TransactionStatus
from psycopg.types.json import Jsonb

from .compiler import CompiledPolicy, compile_policy
from .db import connect, first_line
from .errors import MemgovError
from .policy import MAX_REGEX_COMPILE_MS, Policy, PolicyError, RegexChecker, load_policy, regex_compile_problem
from .resources import query, shipped_policy, shipped_policy_names
from .tenants import GLOBAL, check_tenant_id

log = logging.getLogger("memgov_pg")


def scope_of(tenant: str | None) -> str:
    """The org_id a deploy or rollback works on: ``'*'`` without a tenant, else the checked tenant id."""
    return GLOBAL if tenant is None else check_tenant_id(tenant)


def _regex_verdict(exc: psycopg.Error) -> str | None:
    """What a failed compile of a pattern says about it (None: an error about something else)."""
    if isinstance(exc, errors.InvalidRegularExpression | errors.ProgramLimitExceeded):
        return first_line(exc)
    if isinstance(exc, errors.QueryCanceled) and "statement timeout" in (exc.diag.message_primary or ""):
        return regex_compile_problem()
    return None


def pg_regex_checker(conn: psycopg.Connection[Any]) -> RegexChecker:
    """Ask PostgreSQL whether it can compile a pattern (its regex flavour, not Python's), within
    :data:`~memgov_pg.policy.MAX_REGEX_COMPILE_MS` (a transaction of its own, always undone)."""

    def check(pattern: str) -> str | None:
        try:
            with conn.transaction():
                conn.execute(query("regex_check_timeout"), {"timeout": f"{MAX_REGEX_COMPILE_MS}ms"})
                conn.execute(query("check_regex"), {"pattern": pattern})
                raise psycopg.Rollback()  # the timeout goes with it
        except psycopg.Error as exc:
            verdict = _regex_verdict(exc)
            if verdict is None:
                raise
            return verdict
        return None

    return check


def policy_file(path: str | Path) -> Path:
    """The file of a policy: ``path`` when it exists; else a name such as ``default`` or
    ``examples/memproof`` names a policy shipped with memgov-pg (its tests are beside it)."""
    given = Path(path)
    if given.exists():
        return given
    shipped = shipped_policy(str(path))
    if shipped is None:
        names = ", ".join(shipped_policy_names()) or "none"
        raise MemgovError(f"cannot read policy {path}: no such file, nor a shipped policy ({names})")
    return shipped


def read_policy(path: str | Path) -> bytes:
    """A policy file's bytes, found by :func:`policy_file`."""
    try:
        return policy_file(path).read_bytes()
    except OSError as exc:
        raise MemgovError(f"cannot read policy {path}: {exc.strerror or exc}") from None


def load(path: str | Path, conn: psycopg.Connection[Any] | None = None) -> Policy:
    """Load and validate a policy file; regexes are checked by PostgreSQL when ``conn`` is given."""
    checker = pg_regex_checker(conn) if conn is not None else None
    return load_policy(read_policy(path), filename=str(path), regex_checker=checker)


def compile_file(
    path: str | Path, tenant: str | None = None, conn: psycopg.Connection[Any] | None = None
) -> CompiledPolicy:
    """Load, validate and compile a policy file for ``tenant`` (the global scope without one).

    Regexes are checked by PostgreSQL when ``conn`` is given, otherwise offline.
    """
    org_id = scope_of(tenant)
    return compile_policy(load(path, conn), org_id)


@dataclass(frozen=True)
class Deployed:
    """What a deploy did: the version, the scope, the compiled function's name, the number of rules, the warnings."""

    version: str
    org_id: str
    function_name: str
    rules: int
    warnings: tuple[PolicyError, ...]


def deployed(policy: Policy, compiled: CompiledPolicy) -> Deployed:
    """The :class:`Deployed` summary of ``policy`` compiled as ``compiled``."""
    rules = len(policy.write_rules) + len(policy.retention_rules)
    return Deployed(policy.version, compiled.org_id, compiled.function_name, rules, policy.warnings)


def savepoint_regex_checker(conn: psycopg.Connection[Any]) -> RegexChecker:
    """Like :func:`pg_regex_checker`, inside the caller's transaction (a savepoint per
    pattern, always rolled back): it never begins or commits a transaction of its own."""

    def check(pattern: str) -> str | None:
        with conn.cursor() as cur:
            cur.execute("SAVEPOINT memgov_regex_check")
            try:
                cur.execute(query("regex_check_timeout"), {"timeout": f"{MAX_REGEX_COMPILE_MS}ms"})
                cur.execute(query("check_regex"), {"pattern": pattern})
            except psycopg.Error as exc:
                verdict = _regex_verdict(exc)
                if verdict is None:
                    raise
                return verdict
            finally:
                if conn.info.transaction_status in (TransactionStatus.INTRANS, TransactionStatus.INERROR):
                    # undoes the timeout too, which SET LOCAL would otherwise keep to the transaction's end
                    cur.execute("ROLLBACK TO SAVEPOINT memgov_regex_check")
                    cur.execute("RELEASE SAVEPOINT memgov_regex_check")
        return None

    return check


def deploy_on(
    conn: psycopg.Connection[Any],
    source: str | bytes | Path,
    tenant: str | None = None,
    filename: str | None = None,
) -> Deployed:
    """Validate, compile, install and activate a policy on ``conn``, in its current
    transaction: no connection of its own, no commit (an Alembic revision's deploy, recorded
    as a deploy of its own even of the version active already: :meth:`CompiledPolicy.revision_sql`).

    ``source`` is what :func:`memgov_pg.policy.load_policy` takes: a path, YAML text, bytes.
    """
    org_id = scope_of(tenant)
    checker = pg_regex_checker(conn) if conn.autocommit else savepoint_regex_checker(conn)
    policy = load_policy(source, filename=filename, regex_checker=checker)
    compiled = compile_policy(policy, org_id)
    with conn.cursor() as cur:
        cur.execute(compiled.revision_sql())
    return deployed(policy, compiled)


def deploy(dsn: str, path: str | Path, tenant: str | None = None, shadow: bool = False) -> Deployed:
    """Validate, compile, install and activate a policy in one transaction; with ``shadow``,
    install it inactive and shadow it instead (docs/changing-policies.md)."""
    org_id = scope_of(tenant)
    with connect(dsn) as conn:
        policy = load(path, conn)
        compiled = compile_policy(policy, org_id)
        if shadow:
            conn.execute(compiled.stage_sql())
            conn.execute(query("start_shadow"), {"org_id": org_id, "version": policy.version})
        else:
            conn.execute(compiled.install_sql())
        conn.commit()
    log.info("%s policy %s for %s (%s)", "shadowing" if shadow else "deployed", policy.version, org_id,
             compiled.function_name)  # fmt: skip
    return deployed(policy, compiled)


def undeploy_on(conn: psycopg.Connection[Any], version: str, tenant: str | None = None) -> str | None:
    """Undo the latest activation of ``version`` on ``conn`` (no commit): the version active
    before it is active again, or none (memgov.undeploy_policy). Returns the version now active."""
    org_id = scope_of(tenant)
    row = conn.execute(query("undeploy_policy"), {"org_id": org_id, "version": version}).fetchone()
    assert row is not None
    return None if row[0] is None else str(row[0])


def rollback(dsn: str, tenant: str | None = None, to: str | None = None) -> str:
    """Re-activate an earlier version; returns the version now active."""
    org_id = scope_of(tenant)
    with connect(dsn) as conn:
        row = conn.execute(query("rollback_policy"), {"org_id": org_id, "to": to}).fetchone()
        conn.commit()
    assert row is not None
    log.info("rolled back %s to policy %s", org_id, row[0])
    return str(row[0])


def parse_item(text: str) -> dict[str, Any]:
    """The JSON object of ``--item``; MemgovError when it is not valid JSON or not an object."""
    try:
        item = json.loads(text)
    except ValueError as exc:
        raise MemgovError(f"--item is not valid JSON: {exc}") from None
    if not isinstance(item, dict):
        raise MemgovError("--item must be a JSON object with the columns of memgov.long_term_memory_items")
    return item


def evaluate(dsn: str, item: dict[str, Any], operation: str = "remember", explain: bool = False) -> dict[str, Any]:
    """The decision of the active policy on ``item`` (dry run: nothing is written)."""
    with connect(dsn, autocommit=True) as conn:
        row = conn.execute(
            query("explain" if explain else "evaluate"),
            {"item": Jsonb(item), "operation": operation},
        ).fetchone()
    assert row is not None
    return dict(row[0])

"""Tenant binding: ``memgov tenant grant|revoke|list``.

A role bound to tenants reads and writes only their rows (row-level security reads
memgov.tenant_grants, sql/005_tenants.sql). The binding is SQL
(``memgov.grant_tenant``, ``memgov.revoke_tenant``); this module calls it and turns
its errors into one line that says what to do. Tenant ids are checked by
memgov_pg.tenants before they reach SQL.
"""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg import errors

from .db import connect
from .errors import MemgovError
from .resources import query
from .tenants import check_tenant_id


def _binding_error(exc: psycopg.Error, what: str) -> MemgovError:
    message = (exc.diag.message_primary or str(exc)).replace("\n", " ")
    if isinstance(exc, errors.InsufficientPrivilege):
        return MemgovError(f"{what}: {message} (binding tenants takes a member of memgov_admin)")
    if isinstance(exc, errors.UndefinedObject):
        return MemgovError(f"{what}: {message} (create the role first, or check its name)")
    if isinstance(exc, errors.UndefinedFunction | errors.UndefinedTable):
        return MemgovError(f"{what}: this database's memgov schema has no tenant binding: run `memgov migrate`")
    return MemgovError(f"{what}: {message} [{exc.sqlstate}]")


def _call(dsn: str, name: str, role: str, org_id: str, what: str) -> dict[str, Any]:
    org_id = check_tenant_id(org_id)
    with connect(dsn) as conn:
        try:
            row = conn.execute(query(name), {"role": role, "org_id": org_id}).fetchone()
            conn.commit()
        except psycopg.Error as exc:
            raise _binding_error(exc, what) from None
    assert row is not None
    result = row[0]
    return dict(result) if isinstance(result, dict) else {"role": role, "org_id": org_id, "result": result}


def grant(dsn: str, role: str, org_id: str) -> dict[str, Any]:
    """Bind ``role`` (and the logins in it) to tenant ``org_id``: memgov.grant_tenant."""
    return _call(dsn, "tenant_grant", role, org_id, f"cannot bind {role} to tenant {org_id}")


def revoke(dsn: str, role: str, org_id: str) -> dict[str, Any]:
    """Remove one tenant from ``role``'s binding: memgov.revoke_tenant."""
    return _call(dsn, "tenant_revoke", role, org_id, f"cannot unbind {role} from tenant {org_id}")


def list_grants(dsn: str, role: str | None = None) -> list[dict[str, Any]]:
    """The rows of memgov.tenant_grants (one role's with ``role``), with whether the role exists."""
    with connect(dsn, autocommit=True) as conn:
        try:
            cur = conn.execute(query("tenant_list"), {"role": role})
        except psycopg.Error as exc:
            raise _binding_error(exc, "cannot list tenant grants") from None
        columns = [c.name for c in cur.description or ()]
        return [dict(zip(columns, r, strict=True)) for r in cur.fetchall()]

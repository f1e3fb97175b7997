"""Tenant ids: the one rule every tenant id follows, and the global scope ``'*'``.

A tenant id (``org_id``) is what one rule says, here and in SQL
(``memgov.is_tenant_id``): 1 to 63 ASCII letters, digits, ``.``, ``_``, ``:``
and ``-``, the first a letter or a digit. ``'*'`` is not a tenant: it is the
global scope of the policy tables, and only code that means the global policy
passes ``allow_global=True``.

Every Python path that takes a tenant id from outside (the CLI, the compiler,
deploy and rollback, policy YAML) goes through :func:`check_tenant_id`, so no
tenant id reaches SQL text, an SQL comment or a function name unchecked.

This module needs no database (the policy reader imports it); binding roles to
tenants (``memgov tenant grant|revoke|list``) is memgov_pg.tenant_grants.
"""

from __future__ import annotations

import re
from typing import Final

from .errors import ExitCode, MemgovError

#: The rule as one pattern. The SQL function memgov.is_tenant_id tests the same rule as
#: ``^[A-Za-z0-9][A-Za-z0-9._:-]*$`` and a length of at most 63, which PostgreSQL's regex
#: engine matches several times faster than the counted ``{0,62}``.
TENANT_ID_PATTERN: Final = r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,62}$"
#: The same rule for Python; always used with fullmatch (``$`` would accept a trailing newline).
TENANT_ID: Final = re.compile(TENANT_ID_PATTERN.removeprefix("^").removesuffix("$"))
TENANT_ID_RULE: Final = (
    "1 to 63 characters: ASCII letters, digits, '.', '_', ':' and '-', the first a letter or a digit"
)
#: The global scope of the policy tables; never a tenant.
GLOBAL: Final = "*"

_SHOWN_MAX = 80


class InvalidTenantId(MemgovError):
    """A tenant id that breaks the rule: a usage error (exit 2, like click's)."""

    exit_code = ExitCode.USAGE


def is_tenant_id(value: object) -> bool:
    """Whether ``value`` is a string that is a valid tenant id."""
    return isinstance(value, str) and TENANT_ID.fullmatch(value) is not None


def show(value: str) -> str:
    """A value as one printable line: control characters escaped, long values cut."""
    shown = repr(value[:_SHOWN_MAX])
    return shown + ("..." if len(value) > _SHOWN_MAX else "")


def check_tenant_id(value: object, *, allow_global: bool = False) -> str:
    """``value`` if it is a tenant id (or ``'*'`` with ``allow_global``); else InvalidTenantId.

    The message is one line whatever the value holds.
    """
    if allow_global and value == GLOBAL:
        return GLOBAL
    if not isinstance(value, str):
        raise InvalidTenantId(f"a tenant id must be a string, not {type(value).__name__}")
    if is_tenant_id(value):
        return value
    if value == GLOBAL:
        raise InvalidTenantId("'*' is the global scope, not a tenant id: omit the tenant for the global policy")
    what = "an empty tenant id" if value == "" else f"invalid tenant id {show(value)}"
    raise InvalidTenantId(f"{what}: a tenant id is {TENANT_ID_RULE}")


def scope_text(org_id: str) -> str:
    """'the global policy' or 'tenant <id>', for messages and SQL comments (the id checked)."""
    checked = check_tenant_id(org_id, allow_global=True)
    return "the global policy" if checked == GLOBAL else f"tenant {checked}"

"""The fixtures of the database tests, defined once.

- ``db_conn`` (memgov_pg.testing): an autocommit superuser connection to this module's migrated database.
- ``su``: the superuser on clean tables (no memories, log rows or tenant bindings), with the attack
  policy deployed (global, and an override for tenant globex: tests/attack_helpers.py). A module that
  needs another policy overrides ``su`` and deploys its own, through ``fresh(db_conn, setup)``
  (tests/clean_slate.py) so that the deploy is redone only when a test changed what it set.
- ``logins`` and ``login(role, org)`` (tests/attack_helpers.py): real login roles of the cluster,
  connected as ``user=<login>``; ``writer``, ``reviewer``, ``admin`` and ``greviewer`` are the usual ones.
- ``as_role(role, org)``: the superuser's connection after ``SET ROLE``, for the tests that are about
  SET ROLE itself, or that need a role's privileges without a login.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from tests.attack_helpers import ORG, OTHER, AsRole, Login, Logins, connect_as_role, deploy_policies, memgov_tables
from tests.clean_slate import fresh


def attack_slate(conn: psycopg.Connection[Any]) -> None:
    """What ``su`` sets after the wipe: no tenant bindings, the fact size limit at 64 KiB, the attack policy."""
    tables = memgov_tables(conn)
    with conn.transaction():
        conn.execute("SET LOCAL ROLE memgov_owner")
        if "tenant_grants" in tables:
            conn.execute("DELETE FROM memgov.tenant_grants")
        if "settings" in tables:
            conn.execute("UPDATE memgov.settings SET value = 65536 WHERE name = 'max_fact_text_bytes'")
    deploy_policies(conn)


@pytest.fixture
def su(db_conn: psycopg.Connection[Any], logins: Logins) -> psycopg.Connection[Any]:
    """The superuser: empty tables, no tenant bindings, the attack policy (global + globex).

    Built once per module and then checked (tests/clean_slate.py): a test that changes no policy,
    setting or binding costs the next one only the deletion of its rows."""
    fresh(db_conn, attack_slate)
    return db_conn


@pytest.fixture
def admin(login: Login, logins: Logins) -> psycopg.Connection[Any]:
    """The admin login (memgov_admin), in tenant acme."""
    return login(logins.admin)


@pytest.fixture
def greviewer(login: Login, logins: Logins) -> psycopg.Connection[Any]:
    """A reviewer login of tenant globex."""
    return login(logins.greviewer, OTHER)


@pytest.fixture
def as_role(memgov_dsn: str, su: psycopg.Connection[Any]) -> Iterator[AsRole]:
    """``as_role(role, org='acme')``: a new superuser connection that has done ``SET ROLE role``
    (and set memgov.org_id to ``org`` unless it is None), closed after the test."""
    opened: list[psycopg.Connection[Any]] = []

    def connect(role: str, org: str | None = ORG) -> psycopg.Connection[Any]:
        opened.append(connect_as_role(memgov_dsn, role, org))
        return opened[-1]

    yield connect
    for conn in opened:
        conn.close()

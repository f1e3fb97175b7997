"""The live catalog against the client API's one description (memgov_pg/api.py), in a database
migrated to head: every function of schema memgov that memgov_writer or memgov_reviewer may
execute (the detectors, granted to PUBLIC, aside) is described, with the arguments, result and
roles PostgreSQL has for it. The other surfaces are held to the description by
tests/unit/test_client_api.py."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from memgov_pg.api import ADMIN, BY_NAME, CLIENT_FUNCTIONS, REVIEWER, ROLES, WRITER
from memgov_pg.doctor import PUBLIC_API

CATALOG = """
SELECT p.proname::text AS name, p.oid::regprocedure::text AS signature,
       pg_catalog.pg_get_function_arguments(p.oid) AS arguments,
       pg_catalog.pg_get_function_result(p.oid) AS result,
       ARRAY[pg_catalog.has_function_privilege(%(writer)s, p.oid, 'EXECUTE'),
             pg_catalog.has_function_privilege(%(reviewer)s, p.oid, 'EXECUTE'),
             pg_catalog.has_function_privilege(%(admin)s, p.oid, 'EXECUTE')] AS granted,
       EXISTS (SELECT FROM pg_catalog.aclexplode(p.proacl) a WHERE a.grantee = 0) AS public
  FROM pg_catalog.pg_proc p
 WHERE p.pronamespace = 'memgov'::regnamespace
   AND (pg_catalog.has_function_privilege(%(writer)s, p.oid, 'EXECUTE')
        OR pg_catalog.has_function_privilege(%(reviewer)s, p.oid, 'EXECUTE'))
 ORDER BY 1, 2
"""


@pytest.fixture(scope="module")
def catalog(memgov_dsn: str) -> dict[str, dict[str, Any]]:
    """The client functions the database has, by name (types printed schema-qualified)."""
    with psycopg.connect(memgov_dsn, autocommit=True) as su:
        su.execute("SET search_path = pg_catalog")
        cur = su.cursor(row_factory=psycopg.rows.dict_row)
        rows = cur.execute(CATALOG, {"writer": WRITER, "reviewer": REVIEWER, "admin": ADMIN}).fetchall()
    clients = [r for r in rows if not r["public"]]
    assert {r["signature"] for r in rows if r["public"]} <= set(PUBLIC_API)  # the detectors, doctor's list
    assert len({r["name"] for r in clients}) == len(clients), "an overloaded client function: describe each form"
    return {r["name"]: r for r in clients}


def test_every_client_function_is_described(catalog: dict[str, dict[str, Any]]) -> None:
    undescribed = sorted(set(catalog) - set(BY_NAME))
    assert undescribed == [], f"granted to a writer or reviewer but not in memgov_pg/api.py: {undescribed}"


def test_every_described_function_is_a_client_function(catalog: dict[str, dict[str, Any]]) -> None:
    assert sorted(set(BY_NAME) - set(catalog)) == []


@pytest.mark.parametrize("f", CLIENT_FUNCTIONS, ids=[f.name for f in CLIENT_FUNCTIONS])
def test_the_catalog_is_as_described(catalog: dict[str, dict[str, Any]], f: Any) -> None:
    live = catalog.get(f.name)
    if live is None:
        pytest.fail(f"memgov.{f.name} is described but no writer or reviewer may execute it")
    roles = tuple(role for role, granted in zip(ROLES, live["granted"], strict=True) if granted)
    assert (live["signature"], live["arguments"], live["result"], roles) == (
        f.signature, f.arguments, f.result, f.roles,
    )  # fmt: skip

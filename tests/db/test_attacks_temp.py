"""Attacks with what every login may create for itself, as real logins: objects of its
temporary schema (a login with TEMP, PostgreSQL's default) named like anything memgov's
routines name, and large objects.

memgov's SECURITY DEFINER functions pin ``search_path = pg_catalog, pg_temp``: a relation or
type name that pg_catalog lacks would be looked up in the caller's pg_temp. Code that runs
with the client's own search_path (the statement trigger that ends a write, the row level
security functions) finds the client's pg_temp first, before pg_catalog. Functions and
operators are never looked up in pg_temp. So a client fills its pg_temp with tripwires: a
view for every word of every memgov routine's body (reading it raises), and a domain over
every catalog type those bodies name (checking a value raises); then it uses the whole API.
Nothing may reach a tripwire, and every decision must come out as it does without them.
"""

from __future__ import annotations

import re
import uuid
from typing import Any

import psycopg
import pytest
from psycopg import sql
from psycopg.types.json import Jsonb

from tests.attack_helpers import (
    ORG,
    OTHER,
    READ_POLICY,
    Logins,
    as_json,
    deploy_policies,
    deploy_policy,
    insert,
    item,
    memgov_tables,
    memory,
    quarantine_of,
    refused,
    request_of,
    unchanged,
)
from tests.clean_slate import fresh

TRIPWIRE = "TRIPWIRE"
CATALOG_TYPES = "SELECT typname::text FROM pg_type WHERE typnamespace = 'pg_catalog'::regnamespace"


@pytest.fixture
def su(db_conn: psycopg.Connection[Any], logins: Logins) -> psycopg.Connection[Any]:
    """The superuser: empty tables, no bindings, the attack policy with read rules (global) and globex's."""
    fresh(db_conn, slate)
    return db_conn


def slate(conn: psycopg.Connection[Any]) -> None:
    with conn.transaction():
        conn.execute("SET LOCAL ROLE memgov_owner")
        if "tenant_grants" in memgov_tables(conn):
            conn.execute("DELETE FROM memgov.tenant_grants")
    deploy_policies(conn)
    deploy_policy(conn, "2.0.0", READ_POLICY)


def routine_words(su: psycopg.Connection[Any]) -> set[str]:
    """Every unqualified word in the bodies of memgov's routines (string literals left out)."""
    words: set[str] = set()
    for (body,) in su.execute("SELECT prosrc FROM pg_proc WHERE pronamespace = 'memgov'::regnamespace").fetchall():
        body = re.sub(r"'(?:[^']|'')*'", " ", body.lower())
        words.update(re.findall(r"(?<![\w.\"$])([a-z_][a-z0-9_]*)\b", body))
    return words


def lay_tripwires(conn: psycopg.Connection[Any], su: psycopg.Connection[Any]) -> int:
    """Tripwires in ``conn``'s pg_temp for every word of memgov's routines: a domain for a
    catalog type's name, a view for any other; returns how many were laid."""
    conn.execute(
        "CREATE FUNCTION pg_temp.tripwire(p_what pg_catalog.text) RETURNS pg_catalog.bool LANGUAGE plpgsql"
        f" AS $$ BEGIN RAISE EXCEPTION '{TRIPWIRE} %', p_what; END $$"
    )
    types = {r[0] for r in su.execute(CATALOG_TYPES)}
    reserved = {r[0] for r in su.execute("SELECT word FROM pg_get_keywords() WHERE catcode = 'R'")}
    laid = 0
    for word in sorted(routine_words(su) - reserved):
        name = sql.Identifier(word)
        if word in types:
            statement = sql.SQL("CREATE DOMAIN pg_temp.{} AS pg_catalog.{} CHECK (pg_temp.tripwire({}))").format(
                name, name, sql.Literal(f"type {word}"))  # fmt: skip
        else:
            statement = sql.SQL("CREATE TEMP VIEW {} AS SELECT pg_temp.tripwire({}) AS tripwire").format(
                name, sql.Literal(f"relation {word}"))  # fmt: skip
        try:
            conn.execute(statement)
        except psycopg.errors.DatatypeMismatch:  # a pseudo-type (record, trigger ...) takes no domain
            continue
        laid += 1
    return laid


def ids_named_in_the_log(su: psycopg.Connection[Any], memory_id: uuid.UUID) -> list[int]:
    rows = su.execute(
        "SELECT decision_id FROM memgov.decision_log WHERE operation IN ('remember', 'update')"
        " AND (memory_id = %s OR memory_ids @> ARRAY[%s])",
        (memory_id, memory_id),
    ).fetchall()
    return [r[0] for r in rows]


@pytest.mark.slow(reason="a tripwire for every name memgov uses: 3 s")
def test_tripwires_in_pg_temp_named_like_anything_memgov_names_are_never_reached(su, login, logins):
    writer, reviewer = login(logins.writer), login(logins.reviewer)
    for conn in (writer, reviewer):
        assert lay_tripwires(conn, su) > 300
        assert conn.execute("SELECT (current_schemas(true))[1] LIKE 'pg_temp%'").fetchone() == (True,)
    # writes, each kind of decision, one row and many
    stored = insert(writer, item("allowed")).fetchone()
    assert stored[1] == "active"
    assert insert(writer, item("allowed", is_sensitive=True, fact_text="walrus notes")).fetchone()[1] == "active"
    pending = insert(writer, item("held")).fetchone()
    assert pending[1] == "pending_approval"
    second = insert(writer, item("held", fact_text="likes oolong")).fetchone()[0]
    diverted = uuid.uuid4()
    assert insert(writer, item("quarantined", memory_id=diverted)).rowcount == 0
    quarantine = quarantine_of(su, diverted)
    with refused(su, "MG403"):
        insert(writer, item("denied"))
    bulk = writer.execute(
        "INSERT INTO memgov.long_term_memory_items (org_id, category, fact_text, source, confidence)"
        " SELECT 'acme', 'user_fact', 'bulk fact ' || i, 'agent_extracted', 0.9 FROM generate_series(1, 4) AS i"
        " RETURNING memory_id"
    ).fetchall()
    writer.execute("UPDATE memgov.long_term_memory_items SET confidence = 0.8 WHERE fact_text LIKE 'bulk fact %'")
    for memory_id in [stored[0], *(b[0] for b in bulk)]:
        assert ids_named_in_the_log(su, memory_id), f"{memory_id} is named by no decision"
    assert writer.execute("SELECT memgov.remember(%s)", (as_json(item("allowed", fact_text="via remember")),)
                          ).fetchone()[0]["action"] == "allow"  # fmt: skip
    assert writer.execute("SELECT memgov.evaluate(%s)", (as_json(item("held")),)).fetchone()[0]["action"] == (
        "require_approval")  # fmt: skip
    writer.execute("SELECT memgov.explain(%s)", (as_json(item("denied")),))
    # reads: the sensitive memory stays withheld, the pending ones unread
    seen = {r[0] for r in writer.execute("SELECT fact_text FROM memgov.long_term_memory_items")}
    assert "walrus notes" not in seen and "likes tea" not in seen and "likes green tea" in seen
    found = writer.execute("SELECT fact_text FROM memgov.search(%s)", (Jsonb({"text": "walrus"}),)).fetchall()
    assert found == []
    assert writer.execute("SELECT fact_text FROM memgov.get(%s)", (stored[0],)).fetchall() == [("likes green tea",)]
    assert writer.execute("SELECT memgov.apply_retention(%s)", (stored[0],)).fetchone()[0]["deleted"] is False
    # the reviewer's calls
    assert reviewer.execute("SELECT memgov.approve(%s)", (request_of(su, pending[0]),)).fetchone()[0]["status"] == (
        "approved")  # fmt: skip
    assert reviewer.execute("SELECT memgov.deny(%s)", (request_of(su, second),)).fetchone()[0]["status"] == "denied"
    assert reviewer.execute("SELECT memgov.release_quarantine(%s)", (quarantine,)).fetchone()[0]["status"] == (
        "released")  # fmt: skip
    assert reviewer.execute("SELECT memgov.confirm(%s)", (stored[0],)).fetchone()[0]["outcome"] == "confirmed"
    assert reviewer.execute("SELECT memgov.edit(%s, 'likes oolong tea')", (pending[0],)).fetchone()[0]["action"] == (
        "allow")  # fmt: skip
    assert reviewer.execute("SELECT memgov.reject(%s)", (pending[0],)).fetchone()[0]["kind"] == "reject"
    assert len(reviewer.execute("SELECT * FROM memgov.long_term_memory_items").fetchall()) > 4
    assert writer.execute("SELECT memgov.forget(%s)", (stored[0],)).fetchone()[0]["action"] == "allow"
    assert memory(su, stored[0]) is None and memory(su, pending[0])["fact_text"] == "likes oolong tea"
    assert memory(su, second) is None


def test_a_temp_table_named_written_does_not_stand_in_for_a_statements_rows(su, writer):
    """The end of a bulk statement reads its rows from the transition table ``written``,
    which PostgreSQL finds before any relation of that name, the client's pg_temp included."""
    writer.execute("CREATE TEMP TABLE written AS SELECT * FROM memgov.long_term_memory_items WITH NO DATA")
    rows = writer.execute(
        "INSERT INTO memgov.long_term_memory_items (org_id, category, fact_text, source, confidence)"
        " SELECT 'acme', 'user_fact', 'fact ' || i, 'agent_extracted', 0.9 FROM generate_series(1, 3) AS i"
        " RETURNING memory_id"
    ).fetchall()
    logged = su.execute("SELECT memory_ids FROM memgov.decision_log WHERE memory_ids IS NOT NULL").fetchall()
    assert [sorted(r[0]) for r in logged] == [sorted(r[0] for r in rows)]


# == large objects =============================================================================


def test_a_large_object_is_outside_every_policy_and_private_to_the_login_that_made_it(su, login, logins):
    """PostgreSQL lets every role create large objects: a writer can keep there what the
    policy would deny (docs/security.md, "What memgov cannot stop"), with no quota. Nobody
    else reads it, memgov_owner included, so no memgov function can be made to: unless its
    owner grants it, which hands it to whoever it names, another tenant's login too."""
    writer = login(logins.writer)
    secret = "password: hunter2hunter2"
    with unchanged(su, "a writer's large object"):
        oid = writer.execute("SELECT lo_from_bytea(0, convert_to(%s, 'UTF8'))", (secret,)).fetchone()[0]
        writer.execute("SELECT lo_put(%s, 0, convert_to('PASSWORD', 'UTF8'))", (oid,))
        assert writer.execute("SELECT convert_from(lo_get(%s), 'UTF8')", (oid,)).fetchone() == (
            "PASSWORD: hunter2hunter2",)  # fmt: skip
    try:
        for role, org in (("gwriter", OTHER), ("member", ORG), ("reviewer", ORG), ("admin", ORG)):
            with refused(su, "42501"):
                login(getattr(logins, role), org).execute("SELECT lo_get(%s)", (oid,))
        with refused(su, "42501"), su.transaction():
            su.execute("SET LOCAL ROLE memgov_owner")
            su.execute("SELECT lo_get(%s)", (oid,))
        for attempt in ("SET lo_compat_privileges = on", "SELECT count(*) FROM pg_largeobject",
                        "SELECT lo_import('/etc/hostname')", f"SELECT lo_export({oid}, '/tmp/memgov-lo')"):  # fmt: skip
            with refused(su, "42501"):
                login(logins.gwriter, OTHER).execute(attempt)
        # what another tenant does see: that it exists, and whose it is
        owner = (
            login(logins.gwriter, OTHER)
            .execute("SELECT pg_get_userbyid(lomowner) FROM pg_largeobject_metadata WHERE oid = %s", (oid,))
            .fetchone()
        )
        assert owner == (logins.writer,)
        writer.execute(sql.SQL("GRANT SELECT ON LARGE OBJECT {} TO PUBLIC").format(sql.Literal(oid)))
        assert login(logins.gwriter, OTHER).execute("SELECT length(lo_get(%s))", (oid,)).fetchone() == (len(secret),)
    finally:
        writer.execute("SELECT lo_unlink(%s)", (oid,))


# what a client creates large objects with (libpq's client-side lo_import too); the
# server-side lo_import and lo_export are the superuser's already
LO_CREATORS = "lo_creat(integer), lo_create(oid), lo_from_bytea(oid, bytea)"


def test_the_deployers_revoke_stops_large_objects(su, login, logins):
    su.execute(f"REVOKE EXECUTE ON FUNCTION {LO_CREATORS} FROM PUBLIC")
    try:
        writer = login(logins.writer)
        for attempt in ("SELECT lo_creat(-1)", "SELECT lo_create(0)", "SELECT lo_from_bytea(0, '\\x00')"):
            with refused(su, "42501"):
                writer.execute(attempt)
    finally:
        su.execute(f"GRANT EXECUTE ON FUNCTION {LO_CREATORS} TO PUBLIC")

"""Governed reads on a hot standby, their decisions logged on the primary (docs/operations.md,
"Reads on a standby"): a primary of its own, a streaming standby, and the standby logger set up by
`memgov standby-logger setup` (tests/standby_pair.py).

memgov.search and memgov.get on the standby return rows, and their log rows are on the primary
under the reading login, its tenant and the decision's action; a held read is filed there. Nobody
can write log rows through the logger: a writer calling it on the primary, a writer on the
standby reaching for the connection, and the logger's own login with a forged tenant, login or
seal, or a replayed read, all fail and change nothing. The primary stopped: MG503, nothing
returned. (A standby without the logger keeps the 25006 refusal: tests/db/test_standby.py.)
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg import conninfo

from tests.attack_helpers import refused
from tests.cli_helpers import run_memgov
from tests.db.test_restore import as_login, login, run_as_server
from tests.standby_pair import LOGGER, Pair, as_standby_login, standby_pair

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def pair() -> Iterator[Pair]:
    with standby_pair() as built:
        yield built


@pytest.fixture
def su(pair: Pair) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(pair.primary_dsn, autocommit=True) as conn:
        yield conn


def logged(su: psycopg.Connection[Any], decision_id: int) -> dict[str, Any]:
    row = su.execute(
        "SELECT operation, org_id, login, actor, action, returned, withheld, memory_id"
        "  FROM memgov.decision_log WHERE decision_id = %s",
        (decision_id,),
    ).fetchone()
    assert row is not None, f"decision {decision_id} is not in the primary's log"
    keys = ("operation", "org_id", "login", "actor", "action", "returned", "withheld", "memory_id")
    return dict(zip(keys, row, strict=True))


def recall(conn: psycopg.Connection[Any], call: str, arg: Any) -> tuple[list[Any], dict[str, Any]]:
    """The rows of a search or get, and what memgov.last_recall says of it (one transaction)."""
    with conn.transaction():
        rows = conn.execute(f"SELECT fact_text FROM memgov.{call}(%s)", (arg,)).fetchall()
        outcome = conn.execute("SELECT current_setting('memgov.last_recall')::jsonb").fetchone()[0]  # type: ignore[index]
    return rows, outcome


def test_searches_and_gets_on_the_standby_are_logged_on_the_primary(pair: Pair, su: psycopg.Connection[Any]) -> None:
    writer = login("writer")
    with as_standby_login(pair, "writer") as reader:
        assert reader.execute("SELECT pg_is_in_recovery()").fetchone() == (True,)
        # twice in one session: the second read reuses the session's connection to the primary
        for _ in range(2):
            rows, search = recall(reader, "search", '{"text": "tea"}')
            assert rows == [("likes green tea",)]
            assert logged(su, search["decision_id"]) == {
                "operation": "search", "org_id": "acme", "login": writer, "actor": writer, "action": "allow",
                "returned": 1, "withheld": 0, "memory_id": None,
            }  # fmt: skip
        got, outcome = recall(reader, "get", pair.stored["tea"])
        assert got == [("likes green tea",)]
        assert logged(su, outcome["decision_id"]) == {
            "operation": "get", "org_id": "acme", "login": writer, "actor": writer, "action": "allow",
            "returned": 1, "withheld": 0, "memory_id": pair.stored["tea"],
        }  # fmt: skip
        # the read rules withhold a sensitive memory: the refusal is logged too (MG403 on the standby)
        with pytest.raises(psycopg.Error) as info:
            reader.execute("SELECT * FROM memgov.get(%s)", (pair.stored["sensitive"],))
        assert info.value.sqlstate == "MG403"
        denied = su.execute(
            "SELECT action, login FROM memgov.decision_log WHERE memory_id = %s AND operation = 'get'",
            (pair.stored["sensitive"],),
        ).fetchall()
        assert denied == [("deny", writer)]


def test_a_held_read_on_the_standby_is_filed_on_the_primary(pair: Pair, su: psycopg.Connection[Any]) -> None:
    notices: list[str | None] = []
    with as_standby_login(pair, "writer") as reader:
        reader.add_notice_handler(lambda diag: notices.append(diag.sqlstate))
        query = '{"text": "password: hunter2hunter2"}'
        rows, outcome = recall(reader, "search", query)
        assert rows == []
        request_id = outcome["request_id"]
    assert notices == ["MG203"]
    filed = su.execute(
        "SELECT operation, org_id, requested_login, status FROM memgov.approval_requests WHERE request_id = %s",
        (request_id,),
    ).fetchone()
    assert filed == ("search", "acme", login("writer"), "pending")


def sealed_read(su: psycopg.Connection[Any], **changes: Any) -> dict[str, Any]:
    """A read as memgov on a standby would send it, sealed with the database's secret (which only
    memgov_owner and a superuser read: the test plays the standby's engine)."""
    writer = login("writer")
    read = {
        "operation": "search", "org_id": "acme", "memory_id": None, "actor": writer, "login": writer,
        "decision": {"action": "allow", "reason_codes": ["READS_ALLOWED"], "matched_rule_ids": [],
                     "policy_version": "2.0.0", "mode": "enforce", "enforced": True, "risk_score": None,
                     "risk_level": None},
        "payload": None, "file": True, "fingerprint": "f" * 64, "returned": 3, "withheld": 0,
        "nonce": str(uuid.uuid4()), "sent_at": su.execute("SELECT clock_timestamp()::text").fetchone()[0],  # type: ignore[index]
    }  # fmt: skip
    seal = su.execute("SELECT memgov.standby_read_seal(%s::jsonb)", (json.dumps(read),)).fetchone()[0]  # type: ignore[index]
    request = {"read": read, "seal": seal}
    request["read"].update(changes)  # a change after sealing is a forgery
    return request


def logger_dsn(pair: Pair, su: psycopg.Connection[Any]) -> str:
    """The standby logger's own login on the primary, with its password (as a thief of the user
    mapping's options would hold it)."""
    password = su.execute(
        "SELECT option_value FROM pg_options_to_table((SELECT umoptions FROM pg_user_mappings"
        "  WHERE srvname = 'memgov_primary' AND usename = 'memgov_owner')) WHERE option_name = 'password'"
    ).fetchone()[0]  # type: ignore[index]
    return conninfo.make_conninfo(pair.primary_dsn, host="127.0.0.1", user=LOGGER, password=password)


def call(conn: psycopg.Connection[Any], request: dict[str, Any]) -> Any:
    return conn.execute("SELECT memgov.log_standby_read(%s::jsonb)", (json.dumps(request),)).fetchone()


def test_nobody_can_forge_a_standby_read(pair: Pair, su: psycopg.Connection[Any]) -> None:
    genuine = sealed_read(su)
    # a writer on the primary may not call the logger at all
    with as_login(pair.primary_dsn, "writer") as writer, refused(su, "42501"):
        call(writer, genuine)
    # the logger's own login: another tenant, another login, another action, a made-up seal
    with psycopg.connect(logger_dsn(pair, su), autocommit=True) as logger:
        forgeries = {
            "another tenant": sealed_read(su, org_id="globex"),
            "another login": sealed_read(su, login=login("admin"), actor=login("admin")),
            "another decision": sealed_read(su, decision={"action": "allow", "reason_codes": [], "enforced": False}),
            "a made-up seal": {"read": genuine["read"], "seal": "0" * 64},
            "no seal": {"read": genuine["read"]},
        }
        for what, forged in forgeries.items():
            with refused(su, "42501") as info:
                call(logger, forged)
            assert "seal does not match" in str(info.value), what
        # the genuine read is logged once; sent again, it is refused
        decision_id = call(logger, genuine)[0]["decision_id"]  # type: ignore[index]
        assert logged(su, decision_id)["login"] == login("writer")
        with refused(su, "42501") as info:
            call(logger, genuine)
        assert "logged already" in str(info.value)
        # a stale read (sealed an hour ago) is refused
        stale = sealed_read(su)
        stale_read = dict(stale["read"], sent_at="2000-01-01 00:00:00+00")
        stale = {"read": stale_read, "seal": su.execute(
            "SELECT memgov.standby_read_seal(%s::jsonb)", (json.dumps(stale_read),)).fetchone()[0]}  # type: ignore[index]  # fmt: skip
        with refused(su, "42501") as info:
            call(logger, stale)
        assert "five minutes" in str(info.value)
        # and the login can do nothing else: no table, no other function
        for attack in ("SELECT * FROM memgov.decision_log", "SELECT memgov.approve(gen_random_uuid())",
                       "INSERT INTO memgov.standby_reads VALUES (gen_random_uuid())"):  # fmt: skip
            with refused(su, "42501"):
                logger.execute(attack)


def test_a_writer_on_the_standby_cannot_reach_the_primary(pair: Pair, su: psycopg.Connection[Any]) -> None:
    with as_standby_login(pair, "writer") as reader:
        reader.execute("SELECT * FROM memgov.search(%s)", ('{"text": "tea"}',))  # the session's connection is open
        attacks = (
            "SELECT * FROM memgov_dblink.dblink('memgov_primary', 'SELECT 1') AS t(x int)",
            "SELECT memgov_dblink.dblink_get_connections()",
            "SELECT memgov.log_read_on_primary('search', NULL, 'x', NULL, NULL, true, NULL, 1, 0)",
            "SELECT memgov.standby_read_seal('{}')",
            "SELECT * FROM memgov.channel_secret",
        )
        for attack in attacks:
            with refused(su, "42501"):
                reader.execute(attack)
        # the user mapping's password is not shown to a writer
        options = reader.execute("SELECT umoptions FROM pg_user_mappings WHERE srvname = 'memgov_primary'").fetchall()
        assert options == [(None,)]


def standby_doctor(pair: Pair) -> list[dict[str, Any]]:
    result = run_memgov("doctor", "--dsn", pair.standby_dsn, "--json")
    assert result.stderr == "", result.stderr
    return list(json.loads(result.stdout)["findings"])


def test_doctor_on_the_standby_names_where_pg_cron_runs_and_the_logger(pair: Pair) -> None:
    # no job yet: schedule it on the primary, not here
    [cron] = [f for f in standby_doctor(pair) if f["check"] == "pg-cron"]
    assert cron["severity"] == "warning" and "on the primary" in cron["fix"], cron
    scheduled = run_memgov("retention", "schedule", "--dsn", pair.primary_dsn)
    assert scheduled.returncode == 0, scheduled.stderr
    pair.caught_up()
    findings = standby_doctor(pair)
    assert [f for f in findings if f["severity"] == "error"] == [], findings
    [cron] = [f for f in findings if f["check"] == "pg-cron"]
    assert cron["severity"] == "info" and "this server is a standby" in cron["message"], cron
    assert "on the primary" in cron["fix"]
    [logger] = [f for f in findings if f["check"] == "standby-logger"]
    assert logger["severity"] == "info" and "reads on standbys are logged on the primary" in logger["message"]


def test_the_primary_stopped_refuses_the_read_on_the_standby(pair: Pair, su: psycopg.Connection[Any]) -> None:
    with as_standby_login(pair, "writer") as cached:
        cached.execute("SELECT * FROM memgov.search(%s)", ('{"text": "tea"}',))
        su.close()
        run_as_server(pair.primary, "pg_ctl", "stop", "-D", str(pair.primary.datadir), "-m", "fast")
        for conn in (cached, as_standby_login(pair, "writer")):  # a session that had a connection, and a new one
            with pytest.raises(psycopg.Error) as info:
                conn.execute("SELECT * FROM memgov.search(%s)", ('{"text": "tea"}',)).fetchall()
            diag = info.value.diag
            assert diag.sqlstate == "MG503", info.value
            assert "cannot be reached" in str(diag.message_primary)
            assert "start the primary" in str(diag.message_hint)
            assert "never returned unlogged" in str(diag.message_detail)
    # what a standby serves without the primary: direct SELECTs
    with as_standby_login(pair, "writer") as reader:
        assert reader.execute("SELECT count(*) FROM memgov.long_term_memory_items").fetchone() == (1,)
    # and doctor says why governed reads fail there
    [logger] = [f for f in standby_doctor(pair) if f["check"] == "standby-logger"]
    assert logger["severity"] == "error" and "fail (MG503)" in logger["message"], logger

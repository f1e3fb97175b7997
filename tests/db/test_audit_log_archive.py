"""Archiving the sealed decision log (sql/080_audit.sql), and `memgov verify-log`."""

from __future__ import annotations

import json

import pytest

from tests import audit_log_helpers
from tests.audit_log_helpers import (
    guard_lifted,
    log_state,
    login_dsn,
    seal,
    sealed_ids,
    verify,
    writes,
)
from tests.cli_helpers import assert_one_line_error, raises_sqlstate, run_memgov

#: the fixtures this module shares with its topic's other modules, and those they ask for
#: (pytest looks for fixtures by name in the test module)
admin = audit_log_helpers.admin
logins = audit_log_helpers.logins
su = audit_log_helpers.su
writer = audit_log_helpers.writer


# -- archival ---------------------------------------------------------------------------------


def test_archive_removes_only_sealed_rows_and_records_them(su, admin, writer):
    old = writes(writer, 3)
    seal(admin)
    (cutoff,) = su.execute("SELECT clock_timestamp()").fetchone()
    newer = writes(writer, 2)
    seal(admin)
    unsealed = writes(writer, 2)
    chain = su.execute("SELECT seal_id, seal_hash FROM memgov.decision_log_seals ORDER BY seal_id").fetchall()

    # nothing was decided before the first write
    assert admin.execute("SELECT memgov.archive_decision_log('2000-01-01')").fetchone()[0]["archived_rows"] == 0

    result = admin.execute("SELECT memgov.archive_decision_log(%s)", (cutoff,)).fetchone()[0]
    assert result | {"decided_before": None} == {
        "archive_id": 1, "archived_rows": 3, "archived_seals": 1, "first_seal_id": 1, "last_seal_id": 1,
        "last_hash": chain[0][1].hex(), "decided_before": None,
    }  # fmt: skip
    remaining = [r[0] for r in su.execute("SELECT decision_id FROM memgov.decision_log ORDER BY decision_id")]
    assert remaining == newer + unsealed
    record = su.execute(
        "SELECT first_seal_id, last_seal_id, row_count, last_hash, archived_by, archived_login, decided_before"
        " FROM memgov.decision_log_archives"
    ).fetchone()
    assert record[:4] == (1, 1, 3, chain[0][1])
    assert record[4] == record[5] == admin.info.user and record[6] == cutoff
    assert [r[0] for r in su.execute("SELECT seal_id FROM memgov.decision_log_seals")] == [2]

    report = verify(admin)
    assert report["ok"] is True, report
    assert report["archived"] | {"runs": None} == {"archives": 1, "seals": 1, "rows": 3, "runs": None}
    (run,) = report["archived"]["runs"]
    assert (run["archive_id"], run["rows"], run["login"], run["below_floor"]) == (1, 3, admin.info.user, False)
    assert (run["min_age_seconds"], run["first_seal_id"], run["last_seal_id"]) == (0, 1, 1)
    assert (report["seals"], report["rows"], report["unsealed_rows"]) == (1, 2, 2)

    # the chain goes on from the archived seal
    assert seal(admin)["sealed"] == 2
    prev = su.execute("SELECT prev_hash FROM memgov.decision_log_seals WHERE seal_id = 2").fetchone()[0]
    assert prev == chain[0][1]
    second = admin.execute("SELECT memgov.archive_decision_log(clock_timestamp())").fetchone()[0]
    assert second["archived_rows"] == 4 and second["first_seal_id"] == 2
    assert su.execute("SELECT count(*) FROM memgov.decision_log").fetchone()[0] == 0
    writes(writer, 1)
    seal(admin)
    report = verify(admin)
    assert report["ok"] is True
    assert report["archived"] | {"runs": None} == {"archives": 2, "seals": 3, "rows": 7, "runs": None}
    assert [run["rows"] for run in report["archived"]["runs"]] == [3, 4]
    assert not set(old) & set(sealed_ids(su))


def test_archived_rows_put_back_are_extra(su, admin, writer):
    writes(writer, 2)
    seal(admin)
    kept = su.execute("SELECT to_jsonb(d) FROM memgov.decision_log d ORDER BY decision_id LIMIT 1").fetchone()[0]
    admin.execute("SELECT memgov.archive_decision_log(clock_timestamp())")
    su.execute(
        "INSERT INTO memgov.decision_log OVERRIDING SYSTEM VALUE"
        " SELECT * FROM jsonb_populate_record(NULL::memgov.decision_log, %s::jsonb)", (json.dumps(kept),)
    )  # fmt: skip
    found = verify(admin)["first_break"]
    assert (found["decision_id"], found["problem"]) == (kept["decision_id"], "extra")


def test_archive_refuses_a_log_that_does_not_verify(su, admin, writer):
    ids = writes(writer, 3)
    seal(admin)
    with guard_lifted(su):
        su.execute("UPDATE memgov.decision_log SET action = 'deny' WHERE decision_id = %s", (ids[2],))
    before = log_state(su)
    with raises_sqlstate("MG409") as info:
        admin.execute("SELECT memgov.archive_decision_log(clock_timestamp())")
    assert "does not verify" in str(info.value)
    assert log_state(su) == before


def test_archive_needs_a_time(su, admin):
    with raises_sqlstate("22023"):
        admin.execute("SELECT memgov.archive_decision_log(NULL)")


# -- the command line ---------------------------------------------------------------------------


@pytest.mark.slow
def test_verify_log_reports_an_intact_log(memgov_dsn, logins, su, admin, writer):
    writes(writer, 3)
    seal(admin)
    writes(writer, 2)
    result = run_memgov("verify-log", "--dsn", login_dsn(memgov_dsn, logins["admin"]))
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith("decision log intact: 1 seal over 3 rows verified")
    assert "not yet sealed: 2 rows" in result.stdout
    last_hash = verify(admin)["last_hash"]
    assert f"last seal 1: {last_hash}" in result.stdout

    result = run_memgov("verify-log", "--dsn", memgov_dsn, "--json")
    assert result.returncode == 0
    report = json.loads(result.stdout)
    assert report | {"archived": None, "anchor": None, "settings_changes": None} == {
        "ok": True, "seals": 1, "rows": 3, "first_break": None, "last_seal_id": 1, "last_hash": last_hash,
        "unsealed_rows": 2, "archived": None, "anchor": None, "policy_drift": [], "counter_behind": None,
        "settings_changes": None,
    }  # fmt: skip
    assert report["settings_changes"]["first_break"] is None


@pytest.mark.slow
def test_verify_log_errors_are_one_line(memgov_dsn, logins, su):
    result = run_memgov("verify-log", "--dsn", "postgresql://nobody@127.0.0.1:1/nothing")
    assert_one_line_error(result, "cannot connect")
    assert result.returncode == 1
    result = run_memgov("verify-log", "--dsn", "host=127.0.0.1 port=notaport")
    assert_one_line_error(result)
    result = run_memgov("verify-log", "--dsn", login_dsn(memgov_dsn, logins["writer"]))
    assert_one_line_error(result, "42501")
    result = run_memgov("verify-log", "--dsn", memgov_dsn, "--anchor", "1:nothex")
    assert_one_line_error(result, "SEAL_ID:HASH")
    assert result.returncode == 2


@pytest.mark.slow
def test_verify_log_on_a_database_without_memgov(empty_dsn):
    result = run_memgov("verify-log", "--dsn", empty_dsn)
    assert_one_line_error(result, "memgov migrate")

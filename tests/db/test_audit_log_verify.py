"""Tampering with the sealed decision log (sql/080_audit.sql) is found, the settings trail
included. Tampering is done the only way left: as a superuser who disables the guard trigger.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
import pytest

from tests import audit_log_helpers
from tests.audit_log_helpers import ORG, guard_lifted, log_state, seal, settings_changes, verify, writes
from tests.cli_helpers import run_memgov

#: the fixtures this module shares with its topic's other modules, and those they ask for
#: (pytest looks for fixtures by name in the test module)
admin = audit_log_helpers.admin
logins = audit_log_helpers.logins
su = audit_log_helpers.su
writer = audit_log_helpers.writer


# -- tampering is found -------------------------------------------------------------------------


@pytest.mark.slow
def test_an_altered_row_is_named(memgov_dsn, su, admin, writer):
    ids = writes(writer, 6)
    seal(admin, batch_rows=3)
    target = ids[4]
    with guard_lifted(su):
        su.execute("UPDATE memgov.decision_log SET action = 'deny' WHERE decision_id = %s", (target,))
    report = verify(admin)
    assert report["ok"] is False
    assert report["first_break"] | {"detail": None} == {"seal_id": 2, "decision_id": target, "problem": "altered",
                                                       "detail": None}  # fmt: skip
    assert report["seals"] == 1 and report["rows"] == 3

    result = run_memgov("verify-log", "--dsn", memgov_dsn)
    assert result.returncode == 1, result.stderr
    assert f"seal 2, decision_id {target}: altered" in result.stdout
    result = run_memgov("verify-log", "--dsn", memgov_dsn, "--json")
    assert result.returncode == 1
    assert json.loads(result.stdout)["first_break"]["decision_id"] == target

    # put back as it was: the digest is of the content, and it matches again
    with guard_lifted(su):
        su.execute("UPDATE memgov.decision_log SET action = 'allow' WHERE decision_id = %s", (target,))
    assert verify(admin)["ok"] is True


@pytest.mark.slow
def test_a_deleted_row_is_named(memgov_dsn, su, admin, writer):
    ids = writes(writer, 4)
    seal(admin)
    with guard_lifted(su):
        su.execute("DELETE FROM memgov.decision_log WHERE decision_id = %s", (ids[1],))
    report = verify(admin)
    assert report["ok"] is False
    assert report["first_break"]["problem"] == "missing"
    assert report["first_break"]["decision_id"] == ids[1] and report["first_break"]["seal_id"] == 1
    result = run_memgov("verify-log", "--dsn", memgov_dsn)
    assert result.returncode == 1
    assert f"decision_id {ids[1]}: missing" in result.stdout


def test_a_row_moved_to_another_transaction_is_found(su, admin, writer):
    ids = writes(writer, 3)
    seal(admin)
    with guard_lifted(su):
        su.execute("UPDATE memgov.decision_log SET xact_id = xact_id + 1000000 WHERE decision_id = %s", (ids[0],))
    found = verify(admin)["first_break"]
    assert (found["seal_id"], found["decision_id"], found["problem"]) == (1, ids[0], "missing")


def test_forged_rows_are_extra(su, admin, writer):
    writes(writer, 3)
    seal(admin)
    last_xact = su.execute("SELECT last_xact_id FROM memgov.decision_log_seals").fetchone()[0]
    forged = "INSERT INTO memgov.decision_log (operation, org_id, action, enforced, xact_id)" \
             " VALUES ('remember', %s, 'allow', true, %s) RETURNING decision_id"  # fmt: skip
    # a row that claims an old transaction: the seal would have covered it
    with su.transaction(force_rollback=True):
        (forged_id,) = su.execute(forged, (ORG, last_xact)).fetchone()
        found = verify(su)["first_break"]
        assert (found["decision_id"], found["problem"]) == (forged_id, "extra")
    # a row that claims a transaction that has not begun
    with su.transaction(force_rollback=True):
        (forged_id,) = su.execute(forged, (ORG, 2**62)).fetchone()
        found = verify(su)["first_break"]
        assert (found["decision_id"], found["problem"]) == (forged_id, "extra")
    assert verify(admin)["ok"] is True


def test_an_altered_or_removed_seal_is_found(su, admin, writer):
    writes(writer, 4)
    seal(admin, batch_rows=2)
    writes(writer, 1)
    seal(admin)
    with su.transaction(force_rollback=True):
        with guard_lifted(su):
            su.execute("UPDATE memgov.decision_log_seals SET row_count = 1, decision_ids = decision_ids[1:1],"
                       " row_digests = substring(row_digests FROM 1 FOR 32) WHERE seal_id = 2")  # fmt: skip
        found = verify(su)["first_break"]
        assert (found["seal_id"], found["decision_id"], found["problem"]) == (2, None, "altered")
    with su.transaction(force_rollback=True):
        with guard_lifted(su):
            su.execute("DELETE FROM memgov.decision_log_seals WHERE seal_id = 2")
        found = verify(su)["first_break"]
        assert (found["seal_id"], found["problem"]) == (2, "missing")
    assert verify(admin)["ok"] is True


@pytest.mark.slow
def test_a_rewritten_chain_passes_alone_and_fails_its_anchor(memgov_dsn, su, admin, writer):
    """What verify-log cannot prove by itself: the owner rewrites a row and re-seals from scratch.
    The hash printed before, kept outside the database, shows it."""
    ids = writes(writer, 3)
    seal(admin)
    anchor = verify(admin)
    ok = run_memgov("verify-log", "--dsn", memgov_dsn, "--anchor", f"1:{anchor['last_hash']}")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "anchor: matched" in ok.stdout

    with guard_lifted(su):
        su.execute("UPDATE memgov.decision_log SET action = 'deny' WHERE decision_id = %s", (ids[0],))
        su.execute("DELETE FROM memgov.decision_log_seals")
    seal(admin)
    assert verify(admin)["ok"] is True  # the chain alone cannot tell
    result = run_memgov("verify-log", "--dsn", memgov_dsn, "--anchor", f"1:{anchor['last_hash']}")
    assert result.returncode == 1
    assert "seal 1: altered" in result.stdout and "rewritten" in result.stdout
    # the tail cut off: the anchored seal is gone
    with su.transaction(force_rollback=True):
        with guard_lifted(su):
            su.execute("DELETE FROM memgov.decision_log_seals")
        report = su.execute("SELECT memgov.verify_decision_log(1, %s)", (anchor["last_hash"],)).fetchone()[0]
        assert report["first_break"]["problem"] == "missing" and report["unsealed_rows"] == 3


# -- the seal covers the settings trail (issue 27) ------------------------------------------------


@contextmanager
def settings_guard_lifted(su: psycopg.Connection[Any]) -> Iterator[None]:
    """What only a superuser (or memgov_owner) can do: switch the settings record's guard off."""
    with su.transaction():
        su.execute("ALTER TABLE memgov.settings_changes DISABLE TRIGGER refuse_change")
        yield
        su.execute("ALTER TABLE memgov.settings_changes ENABLE ALWAYS TRIGGER refuse_change")


def set_cap(conn: psycopg.Connection[Any], value: int) -> int:
    """A settings change; returns its change_id."""
    conn.execute("UPDATE memgov.settings SET value = %s WHERE name = 'max_other_bytes'", (value,))
    return conn.execute("SELECT max(change_id) FROM memgov.settings_changes").fetchone()[0]


def test_a_seal_after_a_settings_change_carries_it(su, admin, writer):
    first = set_cap(admin, 4096)
    writes(writer, 2)
    seal(admin)
    second = set_cap(admin, 8192)
    writes(writer, 1)
    seal(admin)
    (head_hash,) = su.execute("SELECT change_hash FROM memgov.settings_changes WHERE change_id = %s",
                              (second,)).fetchone()  # fmt: skip
    seals = su.execute(
        "SELECT seal_id, settings_change_id, settings_hash, prev_hash, after_xact_id, after_decision_id,"
        " last_xact_id, last_decision_id, decision_ids, row_digests, seal_hash"
        " FROM memgov.decision_log_seals ORDER BY seal_id"
    ).fetchall()
    assert [(s[0], s[1]) for s in seals] == [(1, first), (2, second)]
    assert seals[1][2] == head_hash
    # the formula docs/security.md gives
    for s in seals:
        header = (f"memgov-seal-v2 {s[0]} {s[4]}:{s[5]} {s[6]}:{s[7]} {s[1]}:{s[2].hex()} "
                  f"{','.join(map(str, s[8]))}")  # fmt: skip
        assert hashlib.sha256(s[3] + header.encode() + s[9]).digest() == s[10]
    report = verify(admin)
    assert report["ok"] is True and report["first_break"] is None, report
    assert report["settings_changes"]["last_change_id"] == second


@pytest.mark.slow
def test_a_sealed_settings_change_altered_or_removed_breaks_its_seal(memgov_dsn, su, admin, writer):
    covered = [set_cap(admin, v) for v in (2048, 4096, 8192)]
    writes(writer, 2)
    seal(admin)
    later = set_cap(admin, 16384)  # after the seal: no seal covers it yet

    with su.transaction(force_rollback=True):
        su.execute("ALTER TABLE memgov.settings_changes DISABLE TRIGGER refuse_change")
        su.execute("UPDATE memgov.settings_changes SET new_value = 99999 WHERE change_id = %s", (covered[1],))
        report = verify(su)
        assert report["ok"] is False
        assert report["first_break"] | {"detail": None} == {
            "seal_id": 1, "decision_id": None, "change_id": covered[1], "problem": "altered", "detail": None,
        }  # fmt: skip
        assert f"settings change {covered[1]}" in report["first_break"]["detail"]
    with su.transaction(force_rollback=True):
        # a change no seal covers yet breaks only the record's own chain
        su.execute("ALTER TABLE memgov.settings_changes DISABLE TRIGGER refuse_change")
        su.execute("UPDATE memgov.settings_changes SET new_value = 99999 WHERE change_id = %s", (later,))
        report = verify(su)
        assert report["ok"] is False and report["first_break"] is None
        assert report["settings_changes"]["first_break"]["change_id"] == later

    before = log_state(su)
    with settings_guard_lifted(su):
        su.execute("DELETE FROM memgov.settings_changes WHERE change_id = %s", (covered[1],))
    assert log_state(su) == before  # the log and its seals are as they were: only the trail changed
    result = run_memgov("verify-log", "--dsn", memgov_dsn)
    assert result.returncode == 1, result.stdout + result.stderr
    assert f"decision log BROKEN at seal 1, settings change {covered[2]}: missing" in result.stdout
    report = json.loads(run_memgov("verify-log", "--dsn", memgov_dsn, "--json").stdout)
    assert (report["first_break"]["seal_id"], report["first_break"]["change_id"]) == (1, covered[2])


@pytest.mark.slow
def test_an_anchor_pins_the_settings_trail(memgov_dsn, su, admin, writer):
    kept = set_cap(admin, 4096)
    cut = set_cap(admin, 8192)
    writes(writer, 3)
    seal(admin)
    anchor = verify(admin)
    assert anchor["ok"] is True
    pinned = f"{anchor['last_seal_id']}:{anchor['last_hash']}"
    assert run_memgov("verify-log", "--dsn", memgov_dsn, "--anchor", pinned).returncode == 0

    # the trail cut back: the seal names the change that is gone
    with settings_guard_lifted(su):
        su.execute("DELETE FROM memgov.settings_changes WHERE change_id = %s", (cut,))
    assert settings_changes(su)[-1] == kept
    report = verify(admin)
    assert report["first_break"] | {"detail": None} == {
        "seal_id": 1, "decision_id": None, "change_id": cut, "problem": "missing", "detail": None,
    }  # fmt: skip
    assert "cut back" in report["first_break"]["detail"]

    # and sealed again over the shorter trail: the chain alone agrees, the anchor does not
    with guard_lifted(su):
        su.execute("DELETE FROM memgov.decision_log_seals")
    seal(admin)
    assert su.execute("SELECT settings_change_id FROM memgov.decision_log_seals").fetchall() == [(kept,)]
    assert verify(admin)["ok"] is True
    result = run_memgov("verify-log", "--dsn", memgov_dsn, "--anchor", pinned)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "seal 1: altered" in result.stdout and "rewritten" in result.stdout


def test_seals_made_before_the_settings_were_covered_still_verify(su, admin, writer):
    """A v1 seal (no settings head, the v1 hash) followed by v2 seals: the chain verifies; a v2
    seal stripped of its settings head does not."""
    set_cap(admin, 4096)
    writes(writer, 2)
    seal(admin)
    with guard_lifted(su):  # seal 1 as a release before this one made it
        su.execute(
            "UPDATE memgov.decision_log_seals SET settings_change_id = NULL, settings_hash = NULL,"
            " seal_hash = memgov.seal_hash(prev_hash, seal_id, after_xact_id, after_decision_id, last_xact_id,"
            " last_decision_id, decision_ids, row_digests)"
        )
    v1 = su.execute(
        "SELECT seal_hash, prev_hash, seal_id, after_xact_id, after_decision_id, last_xact_id,"
        " last_decision_id, decision_ids, row_digests FROM memgov.decision_log_seals"
    ).fetchone()
    header = f"memgov-seal-v1 {v1[2]} {v1[3]}:{v1[4]} {v1[5]}:{v1[6]} {','.join(map(str, v1[7]))}"
    assert hashlib.sha256(v1[1] + header.encode() + v1[8]).digest() == v1[0]
    writes(writer, 2)
    seal(admin)
    report = verify(admin)
    assert report["ok"] is True and report["seals"] == 2, report
    assert su.execute("SELECT seal_id, settings_change_id IS NOT NULL FROM memgov.decision_log_seals"
                      " ORDER BY seal_id").fetchall() == [(1, False), (2, True)]  # fmt: skip

    # stripping a v2 seal of its settings head (to escape the check) alters it
    with su.transaction(force_rollback=True):
        with guard_lifted(su):
            su.execute("UPDATE memgov.decision_log_seals SET settings_change_id = NULL, settings_hash = NULL"
                       " WHERE seal_id = 2")  # fmt: skip
        report = verify(su)
        assert report["first_break"] | {"detail": None} == {
            "seal_id": 2, "decision_id": None, "problem": "altered", "detail": None,
        }  # fmt: skip


def test_archive_then_verify_with_the_settings_covered(su, admin, writer):
    set_cap(admin, 4096)
    writes(writer, 2)
    seal(admin)
    (cutoff,) = su.execute("SELECT clock_timestamp()").fetchone()
    second = set_cap(admin, 8192)
    writes(writer, 2)
    seal(admin)
    result = admin.execute("SELECT memgov.archive_decision_log(%s)", (cutoff,)).fetchone()[0]
    assert result["archived_seals"] == 1
    report = verify(admin)
    assert report["ok"] is True and report["seals"] == 1 and report["archived"]["seals"] == 1, report
    # the seal left still pins the trail
    with settings_guard_lifted(su):
        su.execute("DELETE FROM memgov.settings_changes WHERE change_id = %s", (second,))
    report = verify(admin)
    assert (report["first_break"]["seal_id"], report["first_break"]["change_id"]) == (2, second)
    assert report["first_break"]["problem"] == "missing"

"""What an admin cannot erase or change without a trace (issue 27), as real logins.

* Archival has a floor: ``memgov.archive_decision_log`` refuses a cut younger than
  ``memgov.settings``' ``archive_min_age`` (default 365 days), so an admin cannot seal and
  then archive the whole log; only a superuser lowers the floor; verify-log lists every
  archive (rows, up to when, who) and flags a cut younger than the floor.
* Four eyes on purge: a writer+reviewer login cannot purge its own quarantined write (nor
  a member of the writing login); another reviewer's purge logs a decision.
* Settings changes leave a trace: every change of ``memgov.settings`` is recorded in
  ``memgov.settings_changes`` (who, when, old and new value), which no role may rewrite,
  delete, truncate or silence (superusers and memgov_owner included, replica mode too); a
  change altered or removed behind the guard breaks its chain (verify-log); ``memgov
  status`` shows the last change.
* MERGE … ON true WHEN MATCHED THEN UPDATE tells a writer that some row it cannot see
  exists (PostgreSQL 15 checks UPDATE policies as errors in MERGE): pinned here as a
  documented limit, existence only, never content, never a change.
"""

from __future__ import annotations

import uuid
from typing import Any

import psycopg
import pytest

from memgov_pg.audit import archive_line, report_lines
from memgov_pg.status import status
from tests.attack_helpers import (
    ORG,
    OTHER,
    Logins,
    deploy_policies,
    insert,
    item,
    login_dsn,
    memgov_tables,
    quarantine_of,
    refused,
    seed,
    snapshot,
    unchanged,
)
from tests.clean_slate import fresh
from tests.cli_helpers import run_memgov

YEAR = 365 * 24 * 3600


@pytest.fixture
def su(db_conn: psycopg.Connection[Any], logins: Logins) -> psycopg.Connection[Any]:
    """The superuser: empty tables, the attack policy, archival's floor at its default."""
    fresh(db_conn, slate)
    return db_conn


def slate(conn: psycopg.Connection[Any]) -> None:
    tables = memgov_tables(conn)
    with conn.transaction():
        conn.execute("SET LOCAL ROLE memgov_owner")
        if "tenant_grants" in tables:
            conn.execute("DELETE FROM memgov.tenant_grants")
        conn.execute("UPDATE memgov.settings SET value = 65536 WHERE name = 'max_fact_text_bytes'")
        conn.execute("UPDATE memgov.settings SET value = 16384 WHERE name = 'max_other_bytes'")
    conn.execute("UPDATE memgov.settings SET value = %s WHERE name = 'archive_min_age'", (YEAR,))
    deploy_policies(conn)


def floor(su: psycopg.Connection[Any]) -> int:
    row = su.execute("SELECT value FROM memgov.settings WHERE name = 'archive_min_age'").fetchone()
    assert row is not None
    return int(row[0])


def sealed_log(su: psycopg.Connection[Any], writer: psycopg.Connection[Any], admin: psycopg.Connection[Any]) -> int:
    """Three decisions, sealed: how many rows the log holds."""
    for _ in range(3):
        insert(writer, item("allowed"))
    admin.execute("SELECT memgov.seal_decision_log()")
    row = su.execute("SELECT count(*) FROM memgov.decision_log").fetchone()
    assert row is not None and row[0] >= 3
    return int(row[0])


# == archival has a floor ==================================================================


def test_setting_defaults_hold_the_floor(su):
    (defaults,) = su.execute("SELECT memgov.setting_defaults()").fetchone()
    assert defaults["limits"]["archive_min_age"] == YEAR


@pytest.mark.parametrize("cut", ["now() + interval '1 day'", "now()", "now() - interval '364 days'"])
def test_admin_cannot_seal_and_archive_recent_decisions(su, writer, admin, cut):
    rows = sealed_log(su, writer, admin)
    with refused(su, "22023") as info:
        admin.execute(f"SELECT memgov.archive_decision_log({cut})")
    assert "younger than archive_min_age" in str(info.value)
    assert su.execute("SELECT count(*) FROM memgov.decision_log").fetchone()[0] == rows


def test_a_cut_older_than_the_floor_archives_and_verify_log_says_what(su, writer, admin):
    sealed_log(su, writer, admin)
    # nothing is that old: refused by nothing, removes nothing
    result = admin.execute("SELECT memgov.archive_decision_log(now() - interval '400 days')").fetchone()[0]
    assert result["archived_rows"] == 0
    # a superuser lowers the floor; the archive records it, and verify-log lists the run
    su.execute("UPDATE memgov.settings SET value = 0 WHERE name = 'archive_min_age'")
    result = admin.execute("SELECT memgov.archive_decision_log(clock_timestamp())").fetchone()[0]
    assert result["archived_rows"] >= 3
    (report,) = admin.execute("SELECT memgov.verify_decision_log()").fetchone()
    assert report["ok"] is True
    (run,) = report["archived"]["runs"]
    assert run["rows"] == result["archived_rows"] and run["login"] == admin.info.user
    assert run["min_age_seconds"] == 0 and run["below_floor"] is False
    assert run["decided_before"] and run["archived_at"]
    text = "\n".join(report_lines(report | {"policy_drift": []}))
    assert f"archive 1 at {run['archived_at']} by {admin.info.user}: {run['rows']} rows decided before" in text


def test_a_cut_younger_than_the_floor_is_flagged():
    run = {"archive_id": 3, "archived_at": "2026-12-04T10:00:00+00:00", "login": "ops", "rows": 12,
           "decided_before": "2026-12-05T10:00:00+00:00", "below_floor": True}  # fmt: skip
    assert archive_line(run) == (
        "archive 3 at 2026-12-04T10:00:00+00:00 by ops: 12 rows decided before 2026-12-05T10:00:00+00:00"
        " -- YOUNGER than the archive_min_age floor: recent decisions were removed"
    )
    assert "YOUNGER" not in archive_line(run | {"below_floor": False})


@pytest.mark.parametrize("value", ["0", "3600", f"{YEAR} - 1"])
def test_admin_cannot_lower_the_floor(su, admin, value):
    with refused(su, "42501") as info:
        admin.execute(f"UPDATE memgov.settings SET value = {value} WHERE name = 'archive_min_age'")
    assert "only a superuser may lower archive_min_age" in str(info.value)
    assert floor(su) == YEAR


@pytest.mark.parametrize(
    "attack",
    [
        "ALTER TABLE memgov.settings DISABLE TRIGGER guard_settings",
        "DROP TRIGGER guard_settings ON memgov.settings",
        "DELETE FROM memgov.settings WHERE name = 'archive_min_age'",
        "UPDATE memgov.settings SET name = 'max_other_bytes' WHERE name = 'archive_min_age'",
        "SET session_replication_role = replica",
    ],
)
def test_admin_cannot_switch_the_floor_off(su, admin, attack):
    with refused(su, "42501"):
        admin.execute(attack)
    assert floor(su) == YEAR


def test_admin_may_raise_the_floor_and_a_superuser_lower_it(su, admin):
    admin.execute("UPDATE memgov.settings SET value = %s WHERE name = 'archive_min_age'", (2 * YEAR,))
    assert floor(su) == 2 * YEAR
    su.execute("UPDATE memgov.settings SET value = 30 * 86400 WHERE name = 'archive_min_age'")
    assert floor(su) == 30 * 86400


def test_the_floor_is_a_snapshot_check_not_a_session_setting(su, writer, admin):
    """No session setting the admin controls moves the floor: only memgov.settings does."""
    rows = sealed_log(su, writer, admin)
    before = snapshot(su)
    with refused(su, "22023"):
        with admin.transaction():
            admin.execute("SET LOCAL TimeZone = 'Pacific/Kiritimati'")
            admin.execute("SET LOCAL memgov.archiving = '1'")
            admin.execute("SELECT memgov.archive_decision_log(now() - interval '1 day')")
    assert snapshot(su) == before
    assert su.execute("SELECT count(*) FROM memgov.decision_log").fetchone()[0] == rows


# == four eyes on purge ====================================================================


def quarantined(conn: psycopg.Connection[Any], su: psycopg.Connection[Any]) -> Any:
    """A quarantined INSERT by ``conn``'s login: its quarantine id."""
    memory_id = uuid.uuid4()
    assert insert(conn, item("quarantined", memory_id=memory_id)).rowcount == 0
    return quarantine_of(su, memory_id)


def test_writer_reviewer_cannot_purge_its_own_quarantined_write(su, login, logins):
    both = login(logins.both)
    quarantine_id = quarantined(both, su)
    with refused(su, "42501") as info:
        both.execute("SELECT memgov.purge_quarantine(%s)", (quarantine_id,))
    assert "cannot decide its own write" in str(info.value)


def test_writer_reviewer_cannot_purge_its_own_quarantined_write_after_set_role(su, login, logins):
    both = login(logins.both)
    quarantine_id = quarantined(both, su)
    both.execute("SET ROLE memgov_reviewer")
    with refused(su, "42501"):
        both.execute("SELECT memgov.purge_quarantine(%s)", (quarantine_id,))


def test_a_member_of_the_writing_login_cannot_purge(su, writer, login, logins):
    quarantine_id = quarantined(writer, su)
    with refused(su, "42501"):
        login(logins.puppet).execute("SELECT memgov.purge_quarantine(%s)", (quarantine_id,))


def test_a_purge_by_another_reviewer_is_logged(su, writer, reviewer, logins):
    quarantine_id = quarantined(writer, su)
    (entry,) = su.execute(
        "SELECT memory_id, decision FROM memgov.quarantine WHERE quarantine_id = %s", (quarantine_id,)
    ).fetchall()
    (result,) = reviewer.execute("SELECT memgov.purge_quarantine(%s)", (quarantine_id,)).fetchone()
    assert result["status"] == "purged" and result["decision_id"] is not None
    logged = su.execute(
        "SELECT operation, memory_id, org_id, action, reason_codes, matched_rule_ids, policy_version, enforced,"
        " actor, login FROM memgov.decision_log WHERE decision_id = %s",
        (result["decision_id"],),
    ).fetchone()
    assert logged == (
        "remember", entry[0], ORG, "deny", ["QUARANTINE_PURGED"], entry[1]["matched_rule_ids"],
        entry[1]["policy_version"], True, logins.reviewer, logins.reviewer,
    )  # fmt: skip
    (status,) = su.execute("SELECT status FROM memgov.quarantine WHERE quarantine_id = %s", (quarantine_id,)).fetchone()
    assert status == "purged"


# == settings changes leave a trace ==========================================================


def changes(su: psycopg.Connection[Any]) -> list[tuple[Any, ...]]:
    return su.execute(
        "SELECT login, actor, name, old_value, new_value FROM memgov.settings_changes ORDER BY change_id"
    ).fetchall()


def test_an_admin_settings_change_is_recorded_with_who_and_what(su, admin, logins):
    start = len(changes(su))
    admin.execute("UPDATE memgov.settings SET value = 4096 WHERE name = 'max_other_bytes'")
    admin.execute("UPDATE memgov.settings SET value = value WHERE name = 'max_other_bytes'")  # no change
    admin.execute("SET ROLE memgov_admin")
    admin.execute("UPDATE memgov.settings SET value = 16384 WHERE name = 'max_other_bytes'")
    assert changes(su)[start:] == [
        (logins.admin, logins.admin, "max_other_bytes", 16384, 4096),
        (logins.admin, "memgov_admin", "max_other_bytes", 4096, 16384),
    ]
    (report,) = admin.execute("SELECT memgov.verify_decision_log()").fetchone()
    assert report["ok"] is True and report["settings_changes"]["first_break"] is None
    assert report["settings_changes"]["changes"] == len(changes(su))


TRAIL_ATTACKS = {
    "update": "UPDATE memgov.settings_changes SET new_value = 1",
    "delete": "DELETE FROM memgov.settings_changes",
    "truncate": "TRUNCATE memgov.settings_changes",
    "insert": "INSERT INTO memgov.settings_changes (actor, name, prev_hash, change_hash) VALUES ('x', 'x', '', '')",
    "disable": "ALTER TABLE memgov.settings_changes DISABLE TRIGGER refuse_change",
    "disable_all": "ALTER TABLE memgov.settings_changes DISABLE TRIGGER ALL",
    "drop": "DROP TRIGGER refuse_change ON memgov.settings_changes",
    "unrecorded": "ALTER TABLE memgov.settings DISABLE TRIGGER record_change",
    "drop_recorder": "DROP TRIGGER record_change ON memgov.settings",
    "replica": "SET session_replication_role = replica",
}


@pytest.mark.parametrize("attack", sorted(TRAIL_ATTACKS))
def test_admin_cannot_rewrite_erase_or_silence_the_record(su, admin, attack):
    admin.execute("UPDATE memgov.settings SET value = 8192 WHERE name = 'max_other_bytes'")  # a record exists
    with refused(su, "42501"):
        admin.execute(TRAIL_ATTACKS[attack])


@pytest.mark.parametrize("attempt", ["update", "delete", "truncate"])
def test_superuser_and_owner_are_refused_too(su, attempt):
    su.execute("UPDATE memgov.settings SET value = 8192 WHERE name = 'max_other_bytes'")
    for owner in (False, True):
        before = snapshot(su)
        with pytest.raises(psycopg.Error) as info, su.transaction():
            su.execute("SET LOCAL session_replication_role = replica")
            if owner:
                su.execute("SET LOCAL ROLE memgov_owner")
            su.execute(TRAIL_ATTACKS[attempt])
        assert info.value.sqlstate == "42501" and "memgov.settings_changes is append-only" in str(info.value)
        assert snapshot(su) == before


def test_a_change_removed_or_altered_behind_the_guard_is_found(su, admin):
    for value in (2048, 4096, 8192):
        admin.execute("UPDATE memgov.settings SET value = %s WHERE name = 'max_other_bytes'", (value,))
    ids = [r[0] for r in su.execute("SELECT change_id FROM memgov.settings_changes ORDER BY change_id")]
    with su.transaction(force_rollback=True):  # what only the owner can do: lift the guard
        su.execute("SET LOCAL ROLE memgov_owner")
        su.execute("ALTER TABLE memgov.settings_changes DISABLE TRIGGER refuse_change")
        su.execute("UPDATE memgov.settings_changes SET new_value = 99999 WHERE change_id = %s", (ids[-2],))
        (report,) = su.execute("SELECT memgov.verify_decision_log()").fetchone()
        assert report["ok"] is False
        assert report["settings_changes"]["first_break"]["change_id"] == ids[-2]
        assert report["settings_changes"]["first_break"]["problem"] == "altered"
        assert any("settings changes BROKEN" in line for line in report_lines(report | {"policy_drift": []}))
    with su.transaction(force_rollback=True):
        su.execute("SET LOCAL ROLE memgov_owner")
        su.execute("ALTER TABLE memgov.settings_changes DISABLE TRIGGER refuse_change")
        su.execute("DELETE FROM memgov.settings_changes WHERE change_id = %s", (ids[-2],))
        (report,) = su.execute("SELECT memgov.verify_decision_log()").fetchone()
        assert report["settings_changes"]["first_break"]["change_id"] == ids[-1]
        assert report["settings_changes"]["first_break"]["problem"] == "missing"


@pytest.mark.slow
def test_memgov_status_shows_the_last_change(su, admin, logins, memgov_dsn):
    admin.execute("UPDATE memgov.settings SET value = 32768 WHERE name = 'max_fact_text_bytes'")
    data = status(login_dsn(memgov_dsn, logins.admin))
    change = data["last_setting_change"]
    assert (change["name"], change["old_value"], change["new_value"], change["login"]) == (
        "max_fact_text_bytes", 65536, 32768, logins.admin,
    )  # fmt: skip
    result = run_memgov("status", "--dsn", login_dsn(memgov_dsn, logins.admin))
    assert result.returncode == 0, result.stderr
    assert "settings changed   max_fact_text_bytes 65536 -> 32768 at " in result.stdout
    assert f"by {logins.admin}" in result.stdout


# == MERGE shows that hidden rows exist (a documented limit) =================================

MERGE_BLIND = (
    "MERGE INTO memgov.long_term_memory_items t USING (SELECT 1) s ON true"
    " WHEN MATCHED THEN UPDATE SET confidence = 0.5"
)


def test_merge_shows_that_a_hidden_row_exists_and_nothing_more(su, writer):
    """PostgreSQL 15 checks a MERGE's UPDATE policies as errors, not filters, and applies the
    SELECT policies only when the statement reads a column of the target: a MERGE that reads
    none fails on a row its caller cannot see (docs/security.md, "What memgov cannot stop")."""
    # nothing hidden: the blind MERGE matches nothing and succeeds
    assert writer.execute(MERGE_BLIND).rowcount == 0
    seed(su, "allowed", org=OTHER, fact_text="the vault code is banana")
    # a row of another tenant now exists: the same MERGE fails, and changes nothing
    with refused(su, "42501") as info:
        writer.execute(MERGE_BLIND)
    assert "violates row-level security policy" in str(info.value)
    # content is never reached: reading a column of the target applies the SELECT policies
    # as filters, so a probe of the hidden text matches nothing, as a plain UPDATE does
    for probe in ("t.fact_text LIKE '%banana%'", "t.fact_text LIKE '%apple%'", f"t.org_id = '{OTHER}'"):
        with unchanged(su, f"MERGE ON {probe}"):
            merged = writer.execute(
                "MERGE INTO memgov.long_term_memory_items t USING (SELECT 1) s ON "
                + probe
                + " WHEN MATCHED THEN UPDATE SET confidence = 0.5"
            )
            assert merged.rowcount == 0
    with unchanged(su, "a plain UPDATE"):
        assert writer.execute("UPDATE memgov.long_term_memory_items SET confidence = 0.5").rowcount == 0
    # DELETE stays refused to clients, MERGE or not
    with refused(su, "42501"):
        writer.execute("MERGE INTO memgov.long_term_memory_items t USING (SELECT 1) s ON true WHEN MATCHED THEN DELETE")

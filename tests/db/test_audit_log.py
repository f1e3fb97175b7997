"""The append-only, sealed decision log (sql/080_audit.sql): sealing, and nobody changes the log.

Writes are governed writes of a real writer login; the administrator is a real login
role in memgov_admin (``user=<login>``, never a superuser that SET ROLEs). Every refused
attempt is followed by a check that the log, its seals and its archive records are
exactly as they were. Tampering is tests/db/test_audit_log_verify.py, archival and
`memgov verify-log` tests/db/test_audit_log_archive.py.
"""

from __future__ import annotations

import re

import psycopg
import pytest

from tests import audit_log_helpers
from tests.audit_log_helpers import LOG_TABLES, guard_lifted, log_state, login, seal, sealed_ids, verify, write, writes
from tests.cli_helpers import raises_sqlstate

#: the fixtures this module shares with its topic's other modules, and those they ask for
#: (pytest looks for fixtures by name in the test module)
admin = audit_log_helpers.admin
logins = audit_log_helpers.logins
su = audit_log_helpers.su
writer = audit_log_helpers.writer


HEX64 = re.compile(r"[0-9a-f]{64}")


# -- sealing ----------------------------------------------------------------------------------


def test_sealing_covers_every_committed_row_once(su, admin, writer):
    ids = writes(writer, 5)
    report = verify(admin)
    assert report["ok"] is True and report["seals"] == 0 and report["unsealed_rows"] == 5
    assert report["last_hash"] is None and report["first_break"] is None

    first = seal(admin)
    assert first["sealed"] == 5 and first["seals"] == 1 and HEX64.fullmatch(first["last_hash"])
    assert sealed_ids(su) == ids
    report = verify(admin)
    assert report == report | {"ok": True, "seals": 1, "rows": 5, "unsealed_rows": 0, "first_break": None,
                               "last_seal_id": 1, "last_hash": first["last_hash"]}  # fmt: skip

    # nothing new: nothing sealed, the chain as it was
    assert seal(admin)["sealed"] == 0
    assert verify(admin)["last_hash"] == first["last_hash"]

    # several seals in one call, each continuing the previous one
    more = writes(writer, 5)
    second = seal(admin, batch_rows=2)
    assert second["sealed"] == 5 and second["seals"] == 3 and second["last_seal_id"] == 4
    assert sealed_ids(su) == ids + more
    chain = su.execute(
        "SELECT seal_id, prev_hash, seal_hash, row_count FROM memgov.decision_log_seals ORDER BY seal_id"
    ).fetchall()
    assert [c[3] for c in chain] == [5, 2, 2, 1]
    assert chain[0][1] == bytes(32)
    assert all(chain[i][1] == chain[i - 1][2] for i in range(1, len(chain)))
    report = verify(admin)
    assert report["ok"] is True and report["seals"] == 4 and report["rows"] == 10
    assert report["last_hash"] == second["last_hash"] == chain[-1][2].hex()


def test_verification_does_not_depend_on_the_session(su, admin, writer):
    """The digests are the same whatever TimeZone or DateStyle the verifying session uses."""
    writes(writer, 3)
    seal(admin)
    admin.execute("SET TimeZone = 'Pacific/Chatham'")
    admin.execute("SET DateStyle = 'SQL, DMY'")
    assert verify(admin)["ok"] is True


def test_run_maintenance_seals_and_says_so(su, admin, writer):
    writes(writer, 3)
    admin.execute("CALL memgov.run_maintenance()")
    summary = admin.execute("SELECT summary FROM memgov.maintenance_runs ORDER BY run_id DESC LIMIT 1").fetchone()[0]
    assert summary["sealed"] == 3
    assert verify(admin)["unsealed_rows"] == 0
    admin.execute("CALL memgov.run_maintenance()")
    summary = admin.execute("SELECT summary FROM memgov.maintenance_runs ORDER BY run_id DESC LIMIT 1").fetchone()[0]
    assert summary["sealed"] == 0
    assert verify(admin)["ok"] is True
    # a finished run's summary is not the administrator's to rewrite through the seal
    run_id, before = admin.execute(
        "SELECT run_id, summary FROM memgov.maintenance_runs ORDER BY run_id DESC LIMIT 1"
    ).fetchone()
    writes(writer, 2)
    assert admin.execute("SELECT memgov.seal_decision_log(p_run_id => %s)", (run_id,)).fetchone()[0]["sealed"] == 2
    assert (
        su.execute("SELECT summary FROM memgov.maintenance_runs WHERE run_id = %s", (run_id,)).fetchone()[0] == before
    )


def test_a_chain_ahead_of_this_cluster_is_not_sealed_over(su, admin, writer):
    """As after a logical copy into a cluster whose transaction counter is behind the chain's:
    the seal warns (MG409) and seals nothing."""
    writes(writer, 1)
    seal(admin)
    writes(writer, 1)
    notices: list[tuple[str | None, str | None]] = []
    su.add_notice_handler(lambda diag: notices.append((diag.severity_nonlocalized, diag.sqlstate)))
    with su.transaction(force_rollback=True):
        with guard_lifted(su):
            su.execute("UPDATE memgov.decision_log_seals SET last_xact_id = %s", (2**62,))
        assert seal(su)["sealed"] == 0
    assert ("WARNING", "MG409") in notices
    assert seal(admin)["sealed"] == 1


def test_a_late_commit_is_not_a_break(memgov_dsn, logins, su, admin):
    """A transaction takes decision_id d1, another takes d2 > d1 and commits first, a seal
    runs, then the first commits: the seal covered d2 but not d1, and d1 is sealed next."""
    with login(memgov_dsn, logins["writer"], autocommit=False) as early, \
         login(memgov_dsn, logins["writer2"], autocommit=False) as late:  # fmt: skip
        # `early` holds the older transaction id, `late` the lower decision id
        x_early = int(early.execute("SELECT pg_current_xact_id()::text").fetchone()[0])
        d1 = write(late)
        x_late = int(late.execute("SELECT pg_current_xact_id()::text").fetchone()[0])
        d2 = write(early)
        assert d1 < d2 and x_early < x_late
        early.commit()

        sealed = seal(admin)
        horizon = sealed["horizon_xact_id"]
        assert horizon <= x_late  # the open transaction holds the horizon back
        assert d1 not in sealed_ids(su)
        assert (d2 in sealed_ids(su)) == (x_early < horizon)
        report = verify(admin)
        assert report["ok"] is True, report

        late.commit()  # d1 appears now, below ids that are already sealed
        report = verify(admin)
        assert report["ok"] is True, report
        assert report["unsealed_rows"] == (1 if d2 in sealed_ids(su) else 2)

    assert seal(admin)["sealed"] >= 1
    assert sorted(sealed_ids(su)) == [d1, d2]
    report = verify(admin)
    assert report["ok"] is True and report["rows"] == 2 and report["unsealed_rows"] == 0


def test_an_aborted_write_leaves_no_gap(memgov_dsn, logins, su, admin, writer):
    """A rolled-back write used up a decision_id; the chain does not miss it."""
    first = write(writer)
    with login(memgov_dsn, logins["writer2"], autocommit=False) as aborted:
        lost = write(aborted)
        aborted.rollback()
    last = write(writer)
    assert first < lost < last
    seal(admin)
    assert sealed_ids(su) == [first, last]
    assert verify(admin)["ok"] is True


# -- nobody changes the log ------------------------------------------------------------------

ATTEMPTS = {
    "update": "UPDATE memgov.{table} SET org_id = org_id",
    "delete": "DELETE FROM memgov.{table}",
    "truncate": "TRUNCATE memgov.{table}",
}


@pytest.mark.parametrize("table", LOG_TABLES)
@pytest.mark.parametrize("attempt", sorted(ATTEMPTS))
def test_admin_login_cannot_change_the_log(su, admin, writer, table, attempt):
    writes(writer, 2)
    seal(admin)
    before = log_state(su)
    with raises_sqlstate("42501"):
        admin.execute(ATTEMPTS[attempt].format(table=table))
    assert log_state(su) == before


def test_admin_cannot_switch_the_guard_off(su, admin, writer):
    writes(writer, 2)
    before = log_state(su)
    with raises_sqlstate("42501"):
        admin.execute("SET session_replication_role = replica")
    with raises_sqlstate("42501"):
        admin.execute("ALTER TABLE memgov.decision_log DISABLE TRIGGER refuse_change")
    with raises_sqlstate("42501"):
        admin.execute("DROP TRIGGER refuse_change ON memgov.decision_log")
    # setting the archiving marker proves nothing
    admin.execute("SET memgov.archiving = '1'")
    with raises_sqlstate("42501"):
        admin.execute("DELETE FROM memgov.decision_log")
    assert log_state(su) == before


@pytest.mark.parametrize("as_owner", [False, True], ids=["superuser", "memgov_owner"])
@pytest.mark.parametrize("table", LOG_TABLES)
@pytest.mark.parametrize("attempt", sorted(ATTEMPTS))
def test_superuser_and_owner_are_refused_too(su, admin, writer, table, attempt, as_owner):
    writes(writer, 2)
    seal(admin)
    admin.execute("SELECT memgov.archive_decision_log(clock_timestamp())")  # an archive record exists
    writes(writer, 1)
    seal(admin)
    before = log_state(su)
    for replica in (False, True):
        with su.transaction(force_rollback=True):
            if replica:  # ordinary triggers do not fire in this mode
                su.execute("SET LOCAL session_replication_role = replica")
            if as_owner:
                su.execute("SET LOCAL ROLE memgov_owner")
                su.execute("SET LOCAL memgov.archiving = '1'")  # names a real, but earlier, archive
            with pytest.raises(psycopg.Error) as info:
                with su.transaction():
                    su.execute(ATTEMPTS[attempt].format(table=table))
        assert info.value.sqlstate == "42501", info.value
        assert f"memgov.{table} is append-only" in str(info.value)
        assert log_state(su) == before


def test_writer_and_reviewer_can_neither_verify_nor_seal(memgov_dsn, logins, su, admin, writer):
    writes(writer, 1)
    before = log_state(su)
    with login(memgov_dsn, logins["reviewer"]) as reviewer:
        for conn in (writer, reviewer):
            for statement in ("SELECT memgov.verify_decision_log()", "SELECT memgov.seal_decision_log()",
                              "SELECT memgov.archive_decision_log(now())",
                              "SELECT * FROM memgov.decision_log_seals",
                              "SELECT * FROM memgov.decision_log_archives",
                              "UPDATE memgov.decision_log SET action = 'allow'"):  # fmt: skip
                with raises_sqlstate("42501"):
                    conn.execute(statement)
    assert log_state(su) == before

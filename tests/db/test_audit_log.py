"""The append-only, sealed decision log (sql/080_audit.sql) and `memgov verify-log`.

Writes are governed writes of a real writer login; the administrator is a real login
role in memgov_admin (``user=<login>``, never a superuser that SET ROLEs). Tampering
is done the only way left: as a superuser who disables the guard trigger. Every refused
attempt is followed by a check that the log, its seals and its archive records are
exactly as they were.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from decimal import Decimal
from typing import Any

import psycopg
import pytest
from psycopg import conninfo, sql

from memgov_pg.compiler import compile_policy
from memgov_pg.policy import load_policy
from tests.clean_slate import fresh
from tests.cli_helpers import assert_one_line_error, raises_sqlstate, run_memgov

ORG = "acme"
POLICY = 'version: "1.0.0"\ndefaults: {on_policy_miss: allow}\nsources: {user_confirmed: ["*"]}\n'
LOG_TABLES = ("decision_log", "decision_log_seals", "decision_log_archives")
HEX64 = re.compile(r"[0-9a-f]{64}")


# -- logins, sessions, writes -------------------------------------------------------------


@pytest.fixture(scope="module")
def logins(memgov_dsn: str) -> Iterator[dict[str, str]]:
    """Login roles of this module: an administrator, two writers, a reviewer."""
    tag = f"{os.getpid()}_{secrets.token_hex(3)}"
    names = {kind: f"audit_{tag}_{kind}" for kind in ("admin", "writer", "writer2", "reviewer")}
    groups = {"admin": "memgov_admin", "writer": "memgov_writer", "writer2": "memgov_writer",
              "reviewer": "memgov_reviewer"}  # fmt: skip
    with psycopg.connect(memgov_dsn, autocommit=True) as su:
        for kind, name in names.items():
            su.execute(sql.SQL("CREATE ROLE {} LOGIN IN ROLE {}").format(
                sql.Identifier(name), sql.Identifier(groups[kind])))  # fmt: skip
    yield names
    with psycopg.connect(memgov_dsn, autocommit=True) as su:
        for name in names.values():
            su.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s", (name,))
            su.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(name)))
            su.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(name)))


def login_dsn(dsn: str, role: str) -> str:
    return conninfo.make_conninfo(dsn, user=role)


@contextmanager
def login(dsn: str, role: str, *, autocommit: bool = True) -> Iterator[psycopg.Connection[Any]]:
    """A connection as the login ``role`` (session_user is that login), acting in tenant acme."""
    with psycopg.connect(login_dsn(dsn, role), autocommit=autocommit) as conn:
        assert conn.execute("SELECT session_user::text").fetchone() == (role,)
        conn.execute("SELECT set_config('memgov.org_id', %s, false)", (ORG,))
        if not autocommit:
            conn.commit()
        yield conn


@pytest.fixture
def su(db_conn: psycopg.Connection[Any]) -> psycopg.Connection[Any]:
    """Superuser connection; every test starts from an empty log and an allow-all policy, and
    archival without a floor (archive_min_age 0: these tests archive what they just wrote)."""
    fresh(db_conn, slate)
    return db_conn


def slate(conn: psycopg.Connection[Any]) -> None:
    conn.execute("UPDATE memgov.settings SET value = 0 WHERE name = 'archive_min_age'")
    conn.execute(compile_policy(load_policy(POLICY), "*").install_sql())


@pytest.fixture
def admin(memgov_dsn: str, logins: dict[str, str], su: psycopg.Connection[Any]) -> Iterator[psycopg.Connection[Any]]:
    with login(memgov_dsn, logins["admin"]) as conn:
        yield conn


@pytest.fixture
def writer(memgov_dsn: str, logins: dict[str, str], su: psycopg.Connection[Any]) -> Iterator[psycopg.Connection[Any]]:
    with login(memgov_dsn, logins["writer"]) as conn:
        yield conn


def write(conn: psycopg.Connection[Any], text: str = "likes green tea") -> int:
    """A governed INSERT; returns the id of the decision it logged."""
    row = conn.execute(
        "INSERT INTO memgov.long_term_memory_items (org_id, category, fact_text, source, confidence)"
        " VALUES (%s, 'user_fact', %s, 'agent_extracted', %s) RETURNING decision_id",
        (ORG, text, Decimal("0.9")),
    ).fetchone()
    assert row is not None and row[0] is not None
    return int(row[0])


def writes(conn: psycopg.Connection[Any], n: int) -> list[int]:
    return [write(conn, f"fact number {i}") for i in range(n)]


def seal(conn: psycopg.Connection[Any], batch_rows: int | None = None) -> dict[str, Any]:
    if batch_rows is None:
        return conn.execute("SELECT memgov.seal_decision_log()").fetchone()[0]
    return conn.execute("SELECT memgov.seal_decision_log(%s)", (batch_rows,)).fetchone()[0]


def verify(conn: psycopg.Connection[Any]) -> dict[str, Any]:
    return conn.execute("SELECT memgov.verify_decision_log()").fetchone()[0]


def log_state(su: psycopg.Connection[Any]) -> dict[str, list[str]]:
    """Every row of the log, its seals and its archive records, as the superuser sees them."""
    return {
        table: [r[0] for r in su.execute(
            sql.SQL("SELECT to_jsonb(t)::text FROM memgov.{} t ORDER BY 1").format(sql.Identifier(table)))]
        for table in LOG_TABLES
    }  # fmt: skip


def sealed_ids(su: psycopg.Connection[Any]) -> list[int]:
    rows = su.execute(
        "SELECT id FROM memgov.decision_log_seals, unnest(decision_ids) AS id ORDER BY seal_id"
    ).fetchall()
    return [r[0] for r in rows]


@contextmanager
def guard_lifted(su: psycopg.Connection[Any]) -> Iterator[None]:
    """What a superuser (or memgov_owner) can do and nobody else: switch the guard off."""
    with su.transaction():
        for table in LOG_TABLES:
            su.execute(sql.SQL("ALTER TABLE memgov.{} DISABLE TRIGGER refuse_change").format(sql.Identifier(table)))
        yield
        for table in LOG_TABLES:
            su.execute(
                sql.SQL("ALTER TABLE memgov.{} ENABLE ALWAYS TRIGGER refuse_change").format(sql.Identifier(table))
            )


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


def settings_changes(su: psycopg.Connection[Any]) -> list[int]:
    return [r[0] for r in su.execute("SELECT change_id FROM memgov.settings_changes ORDER BY change_id")]


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

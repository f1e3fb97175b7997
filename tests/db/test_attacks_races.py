"""Attacks by two sessions at once, and by locks, as real logins: INSERT ... ON CONFLICT over
held, hidden and other tenants' ids, row and advisory locks against other tenants' writes,
reviewers and the sweep, and a client's long transaction against the log's seals.

Two logins are interleaved step by step: a statement that must wait runs on a thread, and
the test waits for the lock state it expects (``pg_blocking_pids``, tests/waiting.py) or for
the statement's end, never for a length of time. Each attack asserts what it could not do
and that memgov's tables, log and queues are as they were; where PostgreSQL lets any client
do it, the test pins the behaviour that docs/security.md ("What memgov cannot stop")
describes, with the deployer's remedy.
"""

from __future__ import annotations

import datetime as dt
import threading
import uuid
from typing import Any

import psycopg
import pytest
from psycopg import sql

from tests.attack_helpers import (
    ORG,
    OTHER,
    READ_POLICY,
    Login,
    Logins,
    deploy_policy,
    insert,
    item,
    memory,
    refused,
    request_of,
    seed,
    snapshot,
)
from tests.waiting import blocked_by, join, wait_for

DAYS_AGO_10 = dt.datetime.now(dt.UTC) - dt.timedelta(days=10)


@pytest.fixture
def governed(su: psycopg.Connection[Any]) -> psycopg.Connection[Any]:
    """The attack policy with read rules, globally: sensitive memories are withheld from writers."""
    deploy_policy(su, "2.0.0", READ_POLICY)
    return su


@pytest.fixture
def rival(login: Login, logins: Logins) -> psycopg.Connection[Any]:
    """A second writer login of acme."""
    return login(logins.member)


class Background:
    """One statement on its own thread (its connection is the thread's until it ends): the
    rows or row count it returned, or its error."""

    def __init__(self, conn: psycopg.Connection[Any], statement: str | sql.Composable, params: Any = None) -> None:
        self.pid = conn.info.backend_pid
        self.result: Any = None
        self.error: psycopg.Error | None = None
        self.done = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(conn, statement, params), daemon=True)
        self._thread.start()

    def _run(self, conn: psycopg.Connection[Any], statement: str | sql.Composable, params: Any) -> None:
        try:
            cur = conn.execute(statement, params)
            self.result = cur.fetchall() if cur.description else cur.rowcount
        except psycopg.Error as exc:
            self.error = exc
        finally:
            self.done.set()

    def join(self, what: str) -> Background:
        join(self._thread, what)
        return self

    def waits_for(self, su: psycopg.Connection[Any], holder: psycopg.Connection[Any], what: str) -> None:
        """Wait until the statement waits for ``holder``'s lock; fail if it ends first."""
        wait_for(lambda: self.done.is_set() or blocked_by(su, self.pid, holder.info.backend_pid), what)
        assert not self.done.is_set(), f"{what}: it did not wait (result {self.result!r}, error {self.error!r})"

    def never_waits(self, su: psycopg.Connection[Any], what: str) -> Background:
        """Wait until the statement ends; fail if it waits for a lock first."""
        wait_for(lambda: self.done.is_set() or blocked_by(su, self.pid), what)
        assert self.done.is_set(), f"{what}: it waits for a lock of backend(s) {blocked_pids(su, self.pid)}"
        return self.join(what)


def blocked_pids(su: psycopg.Connection[Any], pid: int) -> list[int]:
    row = su.execute("SELECT pg_blocking_pids(%s)", (pid,)).fetchone()
    return list(row[0]) if row and row[0] else []


def upsert(row: dict[str, Any], clause: str) -> sql.Composed:
    """An INSERT of ``row`` followed by ``clause`` (ON CONFLICT ...)."""
    return sql.SQL("INSERT INTO memgov.long_term_memory_items ({}) VALUES ({}) {}").format(
        sql.SQL(", ").join(map(sql.Identifier, row)),
        sql.SQL(", ").join(sql.Literal(v) for v in row.values()),
        sql.SQL(clause),  # type: ignore[arg-type]
    )


def rows_of(su: psycopg.Connection[Any], table: str) -> list[str]:
    return snapshot(su)[f"memgov.{table}"]


def requests_for(su: psycopg.Connection[Any], memory_id: uuid.UUID) -> dict[str, tuple[uuid.UUID, str]]:
    """The approval requests of a memory, by the login that made them: (request_id, status)."""
    rows = su.execute(
        "SELECT requested_login, request_id, status FROM memgov.approval_requests WHERE memory_id = %s", (memory_id,)
    ).fetchall()
    return {login_: (request_id, status) for login_, request_id, status in rows}


def age_request(su: psycopg.Connection[Any], request_id: uuid.UUID, by: str) -> None:
    su.execute(
        "UPDATE memgov.approval_requests SET requested_at = requested_at - %s::interval WHERE request_id = %s",
        (by, request_id),
    )


def run_sweep(su: psycopg.Connection[Any], admin: psycopg.Connection[Any]) -> dict[str, Any]:
    """A whole maintenance run by the admin login, which must never wait for a client's lock."""
    Background(admin, "CALL memgov.run_maintenance()").never_waits(su, "the sweep")
    row = su.execute("SELECT status, summary FROM memgov.maintenance_runs ORDER BY run_id DESC LIMIT 1").fetchone()
    assert row is not None and row[0] == "finished", row
    summary: dict[str, Any] = row[1]
    return summary


# == INSERT ... ON CONFLICT over held, hidden and other tenants' ids ============================
#
# The write trigger decides (and logs, and files a held write's request) before PostgreSQL
# looks for a conflict: an INSERT ... ON CONFLICT DO NOTHING that runs into an existing row
# leaves a request for a row it never stored. That request must never reach the row it lost
# to, another writer's held memory with the same memory_id (ids of hidden rows are not
# secret: docs/recall.md).


def test_denying_the_request_of_a_lost_upsert_leaves_the_held_row_it_lost_to(su, writer, rival, reviewer):
    victim = insert(writer, item("held", fact_text="likes tea at the board meeting")).fetchone()[0]
    real = request_of(su, victim)
    held_row = rows_of(su, "long_term_memory_items")
    lost = rival.execute(upsert(item("held", memory_id=victim, fact_text="junk"), "ON CONFLICT DO NOTHING"))
    assert lost.rowcount == 0
    phantom = requests_for(su, victim)[rival.info.user][0]
    reviewer.execute("SELECT memgov.deny(%s, 'junk')", (phantom,))
    assert rows_of(su, "long_term_memory_items") == held_row, "denying the rival's request removed another row"
    assert requests_for(su, victim)[writer.info.user] == (real, "pending")
    assert reviewer.execute("SELECT memgov.approve(%s)", (real,)).fetchone()[0]["status"] == "approved"
    assert memory(su, victim)["fact_text"] == "likes tea at the board meeting"


def test_a_writer_reviewer_cannot_approve_its_own_held_write_through_a_lost_upsert(su, login, logins, rival):
    """Four eyes: the rival files an identical request under the id of the held write; the
    login that made the write may approve the rival's request, never its own row."""
    both = login(logins.both)
    own = insert(both, item("held")).fetchone()[0]
    assert rival.execute(upsert(item("held", memory_id=own), "ON CONFLICT DO NOTHING")).rowcount == 0
    requests = requests_for(su, own)
    with refused(su, "MG404"):
        both.execute("SELECT memgov.approve(%s)", (requests[rival.info.user][0],))
    with refused(su, "42501"):
        both.execute("SELECT memgov.approve(%s)", (requests[logins.both][0],))
    assert memory(su, own)["status"] == "pending_approval"


def test_racing_upserts_over_a_held_id_leave_the_winners_row_to_its_own_request(su, writer, rival, reviewer, admin):
    """The rival's INSERT ... ON CONFLICT DO NOTHING waits for the writer's uncommitted held
    row and loses; its request, older than the winner's and expired, is swept without the
    row, and confirming the memory approves the winner's request."""
    memory_id = uuid.uuid4()
    writer.execute("BEGIN")
    insert(writer, item("held", memory_id=memory_id))
    racing = Background(rival, upsert(item("held", memory_id=memory_id), "ON CONFLICT DO NOTHING"))
    racing.waits_for(su, writer, "the rival's upsert to wait for the writer's uncommitted row")
    writer.execute("COMMIT")
    racing.join("the rival's upsert")
    assert (racing.error, racing.result) == (None, 0)
    requests = requests_for(su, memory_id)
    real, phantom = requests[writer.info.user][0], requests[rival.info.user][0]
    # the lost request is older than the winner's (its transaction began first) and is due
    age_request(su, phantom, "30 days")
    held_row = rows_of(su, "long_term_memory_items")
    assert run_sweep(su, admin)["expired"]["approvals"] == 1
    assert rows_of(su, "long_term_memory_items") == held_row, "the sweep removed the row with the lost request"
    assert requests_for(su, memory_id)[rival.info.user] == (phantom, "expired")
    # an older request of the rival's, still open, is not the memory's either
    other = rival.execute(upsert(item("held", memory_id=memory_id), "ON CONFLICT DO NOTHING"))
    assert other.rowcount == 0
    second = next(r for r, s in requests_for(su, memory_id).values() if s == "pending" and r != real)
    age_request(su, second, "1 hour")
    assert reviewer.execute("SELECT memgov.confirm(%s)", (memory_id,)).fetchone()[0]["outcome"] == "approved"
    assert requests_for(su, memory_id)[writer.info.user] == (real, "approved")
    assert (second, "pending") in requests_for(su, memory_id).values()


@pytest.mark.parametrize("race", [False, True], ids=["committed", "racing"])
def test_an_upsert_never_reads_a_hidden_or_pending_row_it_runs_into(governed, writer, rival, race):
    """DO UPDATE ... WHERE a function of the writer's own is handed the existing row: row level
    security refuses the row first, so the function never sees a withheld or pending one."""
    su = governed
    seen: list[str] = []
    writer.add_notice_handler(lambda n: seen.append(n.message_primary or ""))
    writer.execute(
        "CREATE FUNCTION pg_temp.leak(v text) RETURNS boolean LANGUAGE plpgsql"
        " AS $$ BEGIN RAISE NOTICE 'leak: %', v; RETURN true; END $$"
    )
    clause = (
        "ON CONFLICT (memory_id, org_id) DO UPDATE SET fact_text = EXCLUDED.fact_text"
        " WHERE pg_temp.leak(long_term_memory_items.fact_text || ' ' || long_term_memory_items.status)"
        " RETURNING fact_text"
    )
    for kind, text in (("allowed", "walrus ulcer notes"), ("held", "likes walrus tea")):
        extra = {"is_sensitive": True} if kind == "allowed" else {}
        target = uuid.uuid4()
        if race:  # the rival's row is uncommitted when the writer's upsert runs into it
            rival.execute("BEGIN")
            insert(rival, item(kind, memory_id=target, fact_text=text, **extra))
            attack = Background(writer, upsert(item("allowed", memory_id=target), clause))
            attack.waits_for(su, rival, "the upsert to wait for the rival's uncommitted row")
            rival.execute("COMMIT")
            attack.join("the upsert")
            assert attack.error is not None and attack.error.sqlstate == "42501", attack.error
        else:
            insert(rival, item(kind, memory_id=target, fact_text=text, **extra))
            with refused(su, "42501"):
                writer.execute(upsert(item("allowed", memory_id=target), clause))
        assert not [s for s in seen if s.startswith("leak")], seen
        assert memory(su, target)["fact_text"] == text


def test_an_upsert_under_another_tenants_id_neither_waits_for_nor_reaches_its_row(su, writer, login, logins):
    """Keys are (memory_id, org_id): globex's uncommitted row holds up nothing in acme, so a
    wait tells acme nothing; naming globex is refused before anything is decided."""
    theirs = uuid.uuid4()
    gwriter = login(logins.gwriter, OTHER)
    gwriter.execute("BEGIN")
    insert(gwriter, item("allowed", org=OTHER, memory_id=theirs, fact_text="globex plans"))
    clause = "ON CONFLICT (memory_id, org_id) DO UPDATE SET fact_text = EXCLUDED.fact_text RETURNING org_id"
    done = Background(writer, upsert(item("allowed", memory_id=theirs), clause)).never_waits(su, "acme's upsert")
    assert (done.error, done.result) == (None, [(ORG,)])
    for conflict in ("ON CONFLICT DO NOTHING", clause):
        with refused(su, "42501"):
            writer.execute(upsert(item("allowed", org=OTHER, memory_id=theirs), conflict))
    gwriter.execute("COMMIT")
    assert memory(su, theirs, OTHER)["fact_text"] == "globex plans"
    assert memory(su, theirs, ORG)["fact_text"] == "likes green tea"


def test_an_upsert_that_skips_its_first_row_logs_the_decision_it_took_for_it(su, writer):
    """The decision is taken before PostgreSQL finds the conflict: the log keeps it, and the
    statement's shared decision names the skipped memory beside the ones stored (the limit
    docs/security.md states), never a memory of another decision."""
    existing = seed(su, "allowed")
    new = [uuid.uuid4(), uuid.uuid4()]
    values = [item("allowed", memory_id=i, fact_text=f"fact {n}") for n, i in enumerate([existing, *new])]
    columns = ("memory_id", "org_id", "category", "fact_text", "source", "confidence")
    tuples = sql.SQL(", ").join(
        sql.SQL("({})").format(sql.SQL(", ").join(sql.Literal(r[c]) for c in columns)) for r in values
    )
    stmt = sql.SQL("INSERT INTO memgov.long_term_memory_items ({}) VALUES {} ON CONFLICT DO NOTHING").format(
        sql.SQL(", ").join(map(sql.Identifier, columns)), tuples
    )
    assert writer.execute(stmt).rowcount == 2
    (decision_id, memory_ids, count), *others = su.execute(
        "SELECT decision_id, memory_ids, memory_count FROM memgov.decision_log"
    ).fetchall()
    assert others == []
    assert sorted(memory_ids) == sorted([existing, *new]) and count == 3
    assert memory(su, existing)["decision_id"] is None  # the seeded row keeps its own (none)
    assert {memory(su, i)["decision_id"] for i in new} == {decision_id}


def test_single_row_inserts_inside_one_statement_are_all_listed_on_the_decision_they_share(su, writer):
    """Inside a DO block (or any function) each INSERT is a statement of its own, but the
    top-level statement is one: the later rows share the first one's log row, which must
    list them, so that every memory is found by its id in the log."""
    ids = [uuid.uuid4() for _ in range(3)]
    inserts = "".join(
        f"INSERT INTO memgov.long_term_memory_items (memory_id, org_id, category, fact_text, source, confidence)"
        f" VALUES ('{i}', 'acme', 'user_fact', 'fact {n}', 'agent_extracted', 0.9);"
        for n, i in enumerate(ids)
    )
    writer.execute(f"DO $$ BEGIN {inserts} END $$")
    for memory_id in ids:
        found = su.execute(
            "SELECT d.decision_id FROM memgov.decision_log d WHERE d.memory_id = %s OR d.memory_ids @> ARRAY[%s]",
            (memory_id, memory_id),
        ).fetchall()
        assert found == [(memory(su, memory_id)["decision_id"],)], f"{memory_id} is not named by its decision"


# == locks against other tenants, reviewers and the sweep ==========================================


@pytest.mark.parametrize("how", ["apply_retention", "select_for_update"])
def test_a_lock_on_a_pending_row_never_stalls_the_sweep(su, writer, rival, login, logins, admin, how):
    """A client that holds a held memory's row (memgov.apply_retention locks a memory it cannot
    read and leaves it; a writer+reviewer login can SELECT it FOR UPDATE) keeps that request
    from expiring until its transaction ends: the sweep passes it by, for every tenant."""
    pending = insert(rival, item("held")).fetchone()[0]
    request = request_of(su, pending)
    age_request(su, request, "30 days")
    other = insert(rival, item("held", fact_text="likes more tea")).fetchone()[0]
    age_request(su, request_of(su, other), "30 days")
    holder = login(logins.both) if how == "select_for_update" else writer
    holder.execute("BEGIN")
    if how == "apply_retention":
        assert holder.execute("SELECT memgov.apply_retention(%s)", (pending,)).fetchone()[0]["deleted"] is False
    else:
        assert holder.execute(
            "SELECT memory_id FROM memgov.long_term_memory_items WHERE memory_id = %s FOR UPDATE", (pending,)
        ).fetchall() == [(pending,)]
    assert run_sweep(su, admin)["expired"]["approvals"] == 1  # the other request, not this one
    assert memory(su, other) is None and memory(su, pending) is not None
    assert requests_for(su, pending)[rival.info.user] == (request, "pending")
    holder.execute("ROLLBACK")
    assert run_sweep(su, admin)["expired"]["approvals"] == 1
    assert memory(su, pending) is None
    assert requests_for(su, pending)[rival.info.user] == (request, "expired")


def test_a_writers_row_lock_defers_its_deletion_to_a_later_sweep(su, writer, admin):
    """An expired memory is hidden from its writer (row level security), so the lock is taken
    while the memory lives, and the memory then falls due (the engine's owner moves its
    creation back: a KEY SHARE lock lets that UPDATE through)."""
    due = seed(su, "allowed", retention_policy="ttl_7d")
    writer.execute("BEGIN")
    assert writer.execute(
        "SELECT 1 FROM memgov.long_term_memory_items WHERE memory_id = %s FOR KEY SHARE", (due,)
    ).fetchall() == [(1,)]
    with su.transaction():
        su.execute("SET LOCAL ROLE memgov_owner")
        su.execute(
            "UPDATE memgov.long_term_memory_items SET created_at = %s, expires_at = NULL WHERE memory_id = %s",
            (DAYS_AGO_10, due),
        )
    assert su.execute(
        "SELECT expires_at < now() FROM memgov.long_term_memory_items WHERE memory_id = %s", (due,)
    ).fetchone() == (True,)
    assert run_sweep(su, admin)["deleted"]["ttl"] == 0
    writer.execute("ROLLBACK")
    assert run_sweep(su, admin)["deleted"]["ttl"] == 1
    assert memory(su, due) is None


def test_a_writers_row_lock_holds_a_reviewers_call_on_that_memory_until_it_ends(su, writer, reviewer):
    """PostgreSQL lets whoever may UPDATE a row lock it: a reviewer's call on the memory waits
    for the writer's transaction (docs/security.md: a lock_timeout for the reviewers'
    application turns the wait into 55P03, nothing done)."""
    mine = insert(writer, item("allowed")).fetchone()[0]
    writer.execute("BEGIN")
    writer.execute("SELECT 1 FROM memgov.long_term_memory_items WHERE memory_id = %s FOR UPDATE", (mine,))
    reviewer.execute("SET lock_timeout = '200ms'")  # the lock is held until the writer ends, however fast the machine
    with refused(su, "55P03"):
        reviewer.execute("SELECT memgov.confirm(%s)", (mine,))
    reviewer.execute("RESET lock_timeout")
    confirm = Background(reviewer, "SELECT memgov.confirm(%s)", (mine,))
    confirm.waits_for(su, writer, "the reviewer's confirm to wait for the writer's lock")
    writer.execute("ROLLBACK")
    confirm.join("the reviewer's confirm")
    assert confirm.error is None and confirm.result[0][0]["outcome"] == "confirmed"


def test_a_writer_locks_nothing_of_another_tenant(su, writer, login, logins):
    theirs = seed(su, "allowed", org=OTHER)
    gwriter = login(logins.gwriter, OTHER)
    writer.execute("BEGIN")
    for strength in ("UPDATE", "NO KEY UPDATE", "SHARE", "KEY SHARE"):
        assert writer.execute(f"SELECT 1 FROM memgov.long_term_memory_items FOR {strength}").fetchall() == []
    writer.execute("SAVEPOINT s")
    with pytest.raises(psycopg.Error) as info:
        writer.execute("SELECT memgov.apply_retention(%s)", (theirs,))
    assert info.value.sqlstate == "MG404"
    writer.execute("ROLLBACK TO SAVEPOINT s")
    update = Background(gwriter, "UPDATE memgov.long_term_memory_items SET confidence = 0.8 WHERE memory_id = %s",
                        (theirs,)).never_waits(su, "globex's update")  # fmt: skip
    assert (update.error, update.result) == (None, 1)
    writer.execute("ROLLBACK")


def test_a_lock_on_memgovs_settings_or_policy_rows_holds_up_no_write(su, admin, writer):
    """An admin may lock the settings' rows (it may UPDATE them); the write path only reads
    them, so no write waits. Policy versions and engine locks it may not lock at all."""
    admin.execute("BEGIN")
    assert admin.execute("SELECT name FROM memgov.settings FOR UPDATE").fetchall()
    big = item("allowed", fact_text="tea " * 600)  # over 1 KiB: the write path reads the limits
    done = Background(writer, upsert(big, "")).never_waits(su, "a 2 KiB write")
    assert (done.error, done.result) == (None, 1)
    admin.execute("ROLLBACK")
    for table in ("policy_versions", "engine_locks", "tenant_grants"):
        with refused(su, "42501"), admin.transaction():
            admin.execute(sql.SQL("SELECT 1 FROM memgov.{} FOR KEY SHARE").format(sql.Identifier(table)))


def test_the_leases_key_seen_in_pg_locks_gives_a_client_nothing(su, writer, admin, login, logins):
    """pg_locks shows every session the running sweep's advisory-lock key. A writer that takes
    it once the run lets go holds a lock no run looks at: the next run draws another key."""
    due = seed(su, "allowed", retention_policy="ttl_7d", created_at=DAYS_AGO_10)
    key = admin.execute("SELECT memgov.claim_maintenance()").fetchone()[0]
    seen = writer.execute(
        "SELECT classid::text::bigint, objid::text::bigint FROM pg_locks"
        " WHERE locktype = 'advisory' AND objsubid = 2 AND pid = %s",
        (admin.info.backend_pid,),
    ).fetchall()
    assert seen == [tuple(k & 0xFFFFFFFF for k in key)]
    assert writer.execute("SELECT pg_try_advisory_lock(%s, %s)", key).fetchone() == (False,)
    taking = Background(writer, "SELECT pg_advisory_lock(%s, %s)", key)
    taking.waits_for(su, admin, "the writer to queue for the lease's key")
    admin.execute("SELECT memgov.release_maintenance(%s)", (key,))
    taking.join("the writer's advisory lock")
    assert taking.error is None
    assert su.execute("SELECT memgov.maintenance_holder()").fetchone() == (None,)
    sweeper = login(logins.admin)
    assert run_sweep(su, sweeper)["deleted"]["ttl"] == 1
    assert memory(su, due) is None
    writer.execute("SELECT pg_advisory_unlock_all()")


def test_an_open_client_transaction_holds_back_the_seal_until_it_ends(su, writer, rival, admin):
    """The seal's horizon is the oldest running transaction: a writer that opens one (any
    role may take a transaction id) keeps every later row unsealed for as long as it stays
    open. A role's timeouts do not stop it: the session may set its own."""
    su.execute(sql.SQL("ALTER ROLE {} SET idle_in_transaction_session_timeout = '10min'").format(
        sql.Identifier(writer.info.user)))  # fmt: skip
    try:
        with psycopg.connect(writer.info.dsn, autocommit=True) as again:
            assert again.execute("SHOW idle_in_transaction_session_timeout").fetchone() == ("10min",)
            again.execute("SET idle_in_transaction_session_timeout = 0")  # a user setting: nothing stops it
            again.execute("BEGIN")
            again.execute("SELECT pg_current_xact_id()")
            later = insert(rival, item("allowed")).fetchone()[0]
            decision_id = memory(su, later)["decision_id"]
            admin.execute("SELECT memgov.seal_decision_log()")
            assert not sealed(su, decision_id), "a row after the open transaction was sealed"
            again.execute("ROLLBACK")
        admin.execute("SELECT memgov.seal_decision_log()")
        assert sealed(su, decision_id)
    finally:
        su.execute(sql.SQL("ALTER ROLE {} RESET idle_in_transaction_session_timeout").format(
            sql.Identifier(writer.info.user)))  # fmt: skip


def sealed(su: psycopg.Connection[Any], decision_id: int) -> bool:
    row = su.execute(
        "SELECT EXISTS (SELECT FROM memgov.decision_log_seals WHERE %s = ANY (decision_ids))", (decision_id,)
    ).fetchone()
    return bool(row and row[0])


def test_the_statement_level_delete_refusal_has_no_way_around(su, login, logins):
    """Clients hold no DELETE privilege: neither a view of their own, MERGE nor a writable CTE
    reaches the table's rows."""
    mine = seed(su, "allowed")
    for role in ("writer", "reviewer", "admin", "both"):
        conn = login(getattr(logins, role))
        conn.execute("CREATE TEMP VIEW mine AS SELECT * FROM memgov.long_term_memory_items")
        for statement in (
            sql.SQL("DELETE FROM pg_temp.mine"),
            sql.SQL("WITH gone AS (DELETE FROM memgov.long_term_memory_items RETURNING 1) SELECT count(*) FROM gone"),
            sql.SQL(
                "MERGE INTO memgov.long_term_memory_items m USING (SELECT {}::uuid AS id) s"
                " ON m.memory_id = s.id WHEN MATCHED THEN DELETE"
            ).format(sql.Literal(mine)),
        ):
            with refused(su, "42501", "MG403"):
                conn.execute(statement)
    assert memory(su, mine) is not None


def test_a_listener_in_an_open_transaction_keeps_the_notification_queue_from_trimming(su, login, logins, rival):
    """Any login may LISTEN, with no memgov role: while it keeps a transaction open, what
    other sessions NOTIFY (held writes notify their reviewers) stays queued for it; a full
    queue fails every NOTIFY (docs/security.md, "What memgov cannot stop")."""
    listener = login(logins.nobody, None)
    listener.execute("LISTEN memgov_attack_queue")
    listener.execute("BEGIN")
    listener.execute("SELECT 1")
    for _ in range(3):
        rival.execute("SELECT pg_notify('memgov_attack_queue', repeat('x', 7000))")
    insert(rival, item("held"))  # a held write notifies its tenant's approval channel
    assert rival.execute("SELECT pg_notification_queue_usage()").fetchone()[0] > 0
    listener.execute("COMMIT")

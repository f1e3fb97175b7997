"""Shadow deployments and replays (docs/changing-policies.md), as real writer, reviewer
and admin logins: a candidate decides every write and read of its scope beside the active
policy, only the active decision is enforced, and each decision is recorded once."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import psycopg
import pytest
from psycopg.types.json import Jsonb

from memgov_pg.compiler import compile_policy
from memgov_pg.deploy import pg_regex_checker
from memgov_pg.policy import load_policy
from tests.attack_helpers import (
    GLOBAL_VERSION,
    ORG,
    OTHER,
    POLICY,
    READ_POLICY,
    Logins,
    as_json,
    deploy_policy,
    insert,
    item,
    login_dsn,
    memgov_tables,
    refused,
    request_of,
    unchanged,
)
from tests.cli_helpers import assert_one_line_error, run_memgov
from tests.waiting import DEADLINE, join

# The candidate: uncertain preferences are stored, untrusted PII is refused.
CANDIDATE = POLICY.replace(
    "    action: require_approval\n    reason_codes: [LOW_CONFIDENCE_PREFERENCE]",
    "    action: allow\n    reason_codes: [PREFERENCE_STORED]",
).replace("    action: quarantine\n", "    action: deny\n")
CANDIDATE_VERSION = "1.1.0"
# what the candidate applies where the attack policy applied each action
CANDIDATE_ACTION = {"allow": "allow", "require_approval": "allow", "quarantine": "deny", "deny": "deny"}


def stage(su: psycopg.Connection[Any], text: str = CANDIDATE, version: str = CANDIDATE_VERSION,
          tenant: str = "*") -> None:  # fmt: skip
    policy = load_policy(text.format(version=version, description="legal hold"), regex_checker=pg_regex_checker(su))
    su.execute(compile_policy(policy, tenant).stage_sql())


def start_shadow(su: psycopg.Connection[Any], text: str = CANDIDATE, version: str = CANDIDATE_VERSION,
                 tenant: str = "*") -> int:  # fmt: skip
    with su.transaction():
        stage(su, text, version, tenant)
        row = su.execute("SELECT memgov.start_shadow(%s, %s)", (tenant, version)).fetchone()
    assert row is not None
    return int(row[0])


def shadowed(su: psycopg.Connection[Any], org: str = ORG) -> list[tuple[Any, ...]]:
    """Each logged decision of ``org`` beside what the shadow recorded for it (None: nothing)."""
    return su.execute(
        """SELECT l.decision_id, l.operation, l.memory_id, CASE WHEN l.enforced THEN l.action ELSE 'allow' END,
                  l.policy_version, s.operation, s.memory_id, s.active_action, s.candidate_action,
                  s.candidate_rule_ids
             FROM memgov.decision_log l
             LEFT JOIN memgov.shadow_decisions s ON s.decision_id = l.decision_id
            WHERE l.org_id = %s ORDER BY l.decision_id""",
        (org,),
    ).fetchall()


def report(su: psycopg.Connection[Any], org: str = "*") -> dict[str, Any]:
    row = su.execute("SELECT memgov.shadow_report(%s)", (org,)).fetchone()
    assert row is not None
    return dict(row[0])


def test_a_shadow_decides_every_write_beside_the_active_policy_which_alone_is_enforced(su, writer):
    start_shadow(su)
    allowed = insert(writer, item("allowed")).fetchone()[0]
    held = insert(writer, item("held")).fetchone()[0]
    writer.execute("SELECT memgov.remember(%s)", (as_json(item("quarantined")),))
    writer.execute("SELECT memgov.remember(%s)", (as_json(item("denied")),))
    with pytest.raises(psycopg.Error) as denied:  # raised: its decision is rolled back with it
        insert(writer, item("denied"))
    assert denied.value.sqlstate == "MG403"
    writer.execute("UPDATE memgov.long_term_memory_items SET fact_text = 'likes jasmine tea' WHERE memory_id = %s",
                   (allowed,))  # fmt: skip
    writer.execute("SELECT memgov.forget(%s)", (allowed,))

    rows = shadowed(su)
    assert [(r[1], r[3], r[8]) for r in rows] == [
        ("remember", "allow", "allow"),
        ("remember", "require_approval", "allow"),
        ("remember", "quarantine", "deny"),
        ("remember", "deny", "deny"),
        ("update", "allow", "allow"),
        ("forget", "allow", "allow"),
    ]
    # each logged decision recorded once, under its own id, operation and memory
    assert all(r[1] == r[5] and r[2] == r[6] and r[3] == r[7] for r in rows)
    assert all(r[4] == GLOBAL_VERSION for r in rows)
    # only the active decisions were applied: held, quarantined, nothing refused that it stored
    status = su.execute("SELECT status FROM memgov.long_term_memory_items WHERE memory_id = %s", (held,)).fetchone()
    assert status == ("pending_approval",)
    assert su.execute("SELECT count(*) FROM memgov.quarantine WHERE status = 'held'").fetchone() == (1,)

    got = report(su)
    assert {k: got[k] for k in ("candidate", "tenant", "state", "decisions")} == {
        "candidate": CANDIDATE_VERSION, "tenant": "*", "state": "running", "decisions": 6}  # fmt: skip
    assert [(d["active"], d["candidate"], d["count"]) for d in got["divergences"]] == [
        ("quarantine", "deny", 1),
        ("require_approval", "allow", 1),
    ]
    example = got["divergences"][1]["examples"][0]
    assert (example["decision_id"], example["memory_id"]) == (rows[1][0], str(held))
    assert (example["active_rule_ids"], example["candidate_rule_ids"]) == (
        ["hold-uncertain-preferences"], ["hold-uncertain-preferences"])  # fmt: skip
    assert example["candidate_reason_codes"] == ["PREFERENCE_STORED"]


def test_the_global_shadow_sees_the_tenants_that_follow_the_global_policy_a_tenant_shadow_its_own(su, login, logins):
    acme, globex = login(logins.writer), login(logins.gwriter, OTHER)
    start_shadow(su)
    insert(acme, item("held"))
    insert(globex, item("held", OTHER))
    assert [r[8] for r in shadowed(su, ORG)] == ["allow"]
    assert [r[8] for r in shadowed(su, OTHER)] == [None]  # globex follows a policy of its own

    start_shadow(su, version="7.1.0-globex", tenant=OTHER)
    insert(acme, item("held"))
    insert(globex, item("held", OTHER))
    assert [r[8] for r in shadowed(su, OTHER)] == [None, "allow"]
    assert [r[8] for r in shadowed(su, ORG)] == ["allow", "allow"]
    assert report(su, OTHER)["decisions"] == 1 and report(su)["decisions"] == 2


def test_reads_are_shadowed_with_the_candidates_read_rules(su, writer):
    insert(writer, item("allowed"))
    start_shadow(su, READ_POLICY)
    assert len(writer.execute("SELECT * FROM memgov.search(%s)", (Jsonb({"context_source": "untrusted"}),)).fetchall())
    got = report(su)
    assert got["decisions"] == 1
    [divergence] = got["divergences"]
    assert (divergence["active"], divergence["candidate"]) == ("allow", "deny")
    assert divergence["examples"][0]["operation"] == "search"
    assert divergence["examples"][0]["candidate_rule_ids"] == ["deny-untrusted-recall"]


#: writes each writer starts after ``during`` has committed, before it stops
WRITES_AFTER = 3


def _write_concurrently(dsn: str, logins: Logins, rounds: int, during: Any = None) -> list[BaseException]:
    """Four writer logins (two in acme, two in globex) writing at once, ``rounds`` writes each;
    ``during`` runs (and commits) when each has written half of them, and each goes on until
    it has started WRITES_AFTER writes after that commit, however fast or slow the machine."""
    errors: list[BaseException] = []
    kinds = ("allowed", "held", "quarantined")
    halfway = threading.Barrier(5 if during else 4)
    committed = threading.Event()  # `during` returned: its transaction committed
    over = threading.Event()  # `during` returned or failed
    if not during:
        over.set()
    deadline = time.monotonic() + DEADLINE

    def write(role: str, org: str) -> None:
        try:
            with psycopg.connect(login_dsn(dsn, role), autocommit=True) as conn:
                conn.execute("SELECT set_config('memgov.org_id', %s, false)", (org,))
                n = after = 0
                while n < rounds or not over.is_set() or (committed.is_set() and after < WRITES_AFTER):
                    assert time.monotonic() < deadline, f"{role} wrote {n} rows, {after} after the commit"
                    if n == rounds // 2:
                        halfway.wait(timeout=DEADLINE)
                    started_after = committed.is_set()
                    try:
                        insert(conn, item(kinds[n % 3], org))
                    except psycopg.Error as exc:  # a denial (a promoted candidate's) logs nothing
                        if exc.sqlstate != "MG403":
                            raise
                    n += 1
                    after += started_after
        except BaseException as exc:  # reported by the test
            errors.append(exc)

    def act() -> None:
        try:
            halfway.wait(timeout=DEADLINE)
            during()
            committed.set()
        except BaseException as exc:  # reported by the test
            errors.append(exc)
        finally:
            over.set()

    writers = ((logins.writer, ORG), (logins.writer, ORG), (logins.gwriter, OTHER), (logins.gwriter, OTHER))
    threads = [threading.Thread(target=write, args=writer) for writer in writers]
    if during:
        threads.append(threading.Thread(target=act))
    for t in threads:
        t.start()
    for t in threads:
        join(t, "a writer")
    return errors


def test_under_concurrent_writes_no_shadow_decision_is_lost_or_misattributed(su, memgov_dsn, logins):
    start_shadow(su)
    assert _write_concurrently(memgov_dsn, logins, rounds=60) == []
    rows = shadowed(su)
    assert len(rows) == 120
    lost = [r for r in rows if r[8] is None]
    wrong = [r for r in rows if r[8] is not None
             and (r[5], r[6], r[7], r[8]) != (r[1], r[2], r[3], CANDIDATE_ACTION[r[3]])]  # fmt: skip
    assert (lost, wrong) == ([], [])
    assert {r[3] for r in rows} == {"allow", "require_approval", "quarantine"}
    # nothing recorded that the log does not hold; globex was never the global shadow's
    assert su.execute("SELECT count(*), count(DISTINCT decision_id) FROM memgov.shadow_decisions").fetchone() == (
        120, 120)  # fmt: skip
    assert [r for r in shadowed(su, OTHER) if r[8] is not None] == []
    assert report(su)["decisions"] == 120


def test_a_promotion_under_concurrent_writes_leaves_each_decision_shadowed_or_the_candidates(su, memgov_dsn, logins):
    start_shadow(su)
    with psycopg.connect(memgov_dsn, autocommit=True) as other:
        errors = _write_concurrently(memgov_dsn, logins, rounds=60,
                                     during=lambda: other.execute("SELECT memgov.promote_shadow('*')"))  # fmt: skip
    assert errors == []
    rows = shadowed(su)  # the candidate's denials raised: rolled back, not logged
    before = [r for r in rows if r[4] == GLOBAL_VERSION]
    after = [r for r in rows if r[4] == CANDIDATE_VERSION]
    assert len(before) + len(after) == len(rows) and len(before) >= 60 and after, (len(before), len(after))
    assert [r for r in before if r[8] != CANDIDATE_ACTION[r[3]]] == []  # shadowed until the promotion
    assert [r for r in after if r[8] is not None] == []  # decided by the candidate itself, no shadow
    assert report(su)["state"] == "promoted"


def test_promote_activates_the_candidate_and_stop_keeps_the_active_policy(su, writer):
    start_shadow(su)
    insert(writer, item("held"))
    assert su.execute("SELECT memgov.promote_shadow('*')").fetchone() == (CANDIDATE_VERSION,)
    active = "SELECT version FROM memgov.policy_versions WHERE org_id = '*' AND active"
    assert su.execute(active).fetchone() == (CANDIDATE_VERSION,)
    assert insert(writer, item("held")).fetchone()[1] == "active"  # the candidate decides now
    assert report(su)["state"] == "promoted" and report(su)["decisions"] == 1
    assert su.execute("SELECT memgov.rollback_policy('*')").fetchone() == (GLOBAL_VERSION,)

    start_shadow(su, version="1.2.0")
    insert(writer, item("held"))
    assert su.execute("SELECT memgov.stop_shadow('*')").fetchone() == ("1.2.0",)
    assert su.execute(active).fetchone() == (GLOBAL_VERSION,)
    assert insert(writer, item("held")).fetchone()[1] == "pending_approval"
    assert report(su)["state"] == "stopped" and report(su)["decisions"] == 1  # kept after the stop
    start_shadow(su, version="1.3.0")  # the next shadow of the scope starts afresh
    assert su.execute("SELECT count(*) FROM memgov.shadow_decisions").fetchone() == (0,)


def test_rollback_never_goes_back_to_a_version_that_was_only_shadowed(su):
    start_shadow(su)
    su.execute("SELECT memgov.stop_shadow('*')")
    deploy_policy(su, "2.0.0")
    assert su.execute("SELECT memgov.rollback_policy('*')").fetchone() == (GLOBAL_VERSION,)


def test_shadowing_the_active_version_or_a_missing_one_changes_nothing(su):
    with refused(su, "MG409"):
        su.execute("SELECT memgov.start_shadow('*', %s)", (GLOBAL_VERSION,))
    with refused(su, "MG404"):
        su.execute("SELECT memgov.start_shadow('*', '9.9.9')")
    for call in ("promote_shadow", "stop_shadow", "shadow_report"):
        with refused(su, "MG404"):
            su.execute(f"SELECT memgov.{call}('*')")


@pytest.mark.parametrize("role", ["writer", "reviewer"])
def test_writer_and_reviewer_logins_read_no_shadow_and_start_none(su, login, logins, role):
    start_shadow(su)
    conn = login(getattr(logins, role))
    for statement in ("SELECT * FROM memgov.shadow_decisions", "SELECT * FROM memgov.policy_shadows",
                      f"SELECT memgov.start_shadow('*', '{GLOBAL_VERSION}')",
                      f"SELECT memgov.replay('*', '{CANDIDATE_VERSION}')"):  # fmt: skip
        with refused(su, "42501"):
            conn.execute(statement)


# -- replay --------------------------------------------------------------------------


@pytest.mark.slow
def test_replay_reports_what_a_candidate_would_change_and_changes_nothing(su, login, logins, memgov_dsn, tmp_path):
    writer = login(logins.writer)
    insert(writer, item("allowed", fact_text="decided before the window"))
    with su.transaction():
        stage(su)  # deployed, not active
    start_shadow(su, version="1.2.0")  # a running shadow, which the replay must leave as it is
    (last_before,) = su.execute("SELECT max(decision_id) FROM memgov.decision_log").fetchone()
    insert(writer, item("allowed"))
    held = insert(writer, item("held")).fetchone()[0]
    writer.execute("SELECT memgov.remember(%s)", (as_json(item("quarantined")),))
    writer.execute("SELECT memgov.remember(%s)", (as_json(item("denied")),))  # logged, no payload kept
    insert(login(logins.gwriter, OTHER), item("held", OTHER))  # globex: its own policy, not the global's
    held_decision = {r[2]: r[0] for r in shadowed(su)}[held]
    quarantined_decision = su.execute("SELECT decision_id FROM memgov.quarantine").fetchone()[0]

    # by hand: the allowed memory stays allowed (a stored memory), the held preference would
    # be stored (its approval request, not its pending row: once), the PII refused (its
    # quarantine entry); the denied secret left no payload, the first memory is too old
    expected = {
        "candidate": CANDIDATE_VERSION, "tenant": "*", "decisions": 3,
        "sources": {"approval_requests": 1, "memories": 1, "quarantine": 1},
        "divergences": [
            {"active": "quarantine", "candidate": "deny", "count": 1, "sources": {"quarantine": 1},
             "examples": [quarantined_decision]},
            {"active": "require_approval", "candidate": "allow", "count": 1, "sources": {"approval_requests": 1},
             "examples": [held_decision]},
        ],
    }  # fmt: skip
    # the window: back to the first decision after the first memory's, whatever time the writes
    # took (one statement, so both read the same now())
    with unchanged(su, "the replay"):  # committed at once (autocommit): it undoes its own work
        got, since = su.execute(
            "SELECT memgov.replay('*', %(version)s, w.since), w.since::text"
            "  FROM (SELECT now() - min(decided_at) AS since FROM memgov.decision_log"
            "         WHERE decision_id > %(last)s) AS w",
            {"version": CANDIDATE_VERSION, "last": last_before},
        ).fetchone()
    first_memory_at, window_from = su.execute(
        "SELECT min(decided_at), min(decided_at) FILTER (WHERE decision_id > %s) FROM memgov.decision_log",
        (last_before,),
    ).fetchone()
    assert first_memory_at < window_from  # the first memory was decided before the window
    for divergence in got["divergences"]:
        divergence["examples"] = [e["decision_id"] for e in divergence["examples"]]
    assert {k: got[k] for k in expected} == expected
    assert got["since"] == since
    assert report(su)["candidate"] == "1.2.0" and report(su)["state"] == "running"

    # the command line, as an admin login: the same report over the last hour, nothing deployed
    path = tmp_path / "candidate.yaml"
    path.write_text(CANDIDATE.format(version="1.4.0", description="legal hold"))
    with unchanged(su, "memgov replay"):
        result = run_memgov("replay", str(path), "--since", "1h", "--json", "--dsn",
                            login_dsn(memgov_dsn, logins.admin))  # fmt: skip
    assert result.returncode == 0, result.stderr
    cli = json.loads(result.stdout)
    assert (cli["candidate"], cli["decisions"], cli["sources"]) == (
        "1.4.0", 4, {"approval_requests": 1, "memories": 2, "quarantine": 1})  # fmt: skip
    assert [(d["active"], d["candidate"], d["count"]) for d in cli["divergences"]] == [
        ("quarantine", "deny", 1), ("require_approval", "allow", 1)]  # fmt: skip


def raise_rollback(conn: psycopg.Connection[Any]) -> None:
    raise psycopg.Rollback()


def test_a_tenant_replay_decides_that_tenants_payloads_only(su, login, logins):
    insert(login(logins.writer), item("held"))
    insert(login(logins.gwriter, OTHER), item("held", OTHER))
    with su.transaction():
        stage(su, version="7.1.0-globex", tenant=OTHER)
        got = su.execute("SELECT memgov.replay(%s, '7.1.0-globex')", (OTHER,)).fetchone()[0]
        raise_rollback(su)
    assert (got["tenant"], got["decisions"], got["sources"]) == (OTHER, 1, {"approval_requests": 1})
    assert [(d["active"], d["candidate"]) for d in got["divergences"]] == [("require_approval", "allow")]


# -- the command line ----------------------------------------------------------------


@pytest.mark.slow
def test_the_shadow_commands_as_an_admin_login(su, memgov_dsn, logins, writer, tmp_path):
    dsn = login_dsn(memgov_dsn, logins.admin)
    path = tmp_path / "candidate.yaml"
    path.write_text(CANDIDATE.format(version=CANDIDATE_VERSION, description="legal hold"))
    started = run_memgov("deploy", str(path), "--shadow", "--json", "--dsn", dsn)
    assert started.returncode == 0, started.stderr
    assert json.loads(started.stdout) | {"rules": 0} == {"version": CANDIDATE_VERSION, "tenant": "*", "rules": 0,
                                                          "shadow": True}  # fmt: skip
    insert(writer, item("held"))
    text = run_memgov("shadow", "report", "--dsn", dsn)
    assert text.returncode == 0, text.stderr
    assert "1 decisions" in text.stdout and "require_approval -> allow: 1" in text.stdout
    shown = json.loads(run_memgov("shadow", "report", "--json", "--examples", "0", "--dsn", dsn).stdout)
    assert list(shown)[:2] == ["candidate", "tenant"]
    assert shown["divergences"] == [{"active": "require_approval", "candidate": "allow", "count": 1, "examples": []}]
    promoted = run_memgov("shadow", "promote", "--dsn", dsn)
    assert (promoted.returncode, promoted.stdout.strip()) == (0, f"active: {CANDIDATE_VERSION}")
    assert_one_line_error(run_memgov("shadow", "stop", "--dsn", dsn), "no shadow runs", "MG404")


@pytest.mark.slow
def test_the_commands_refuse_bad_input_with_one_line_and_change_nothing(su, memgov_dsn, tmp_path):
    with unchanged(su, "bad command lines"):
        assert_one_line_error(run_memgov("shadow", "promote", "--dsn", memgov_dsn), "no shadow runs", "MG404")
        assert_one_line_error(run_memgov("shadow", "report", "--tenant", "nobody-here", "--dsn", memgov_dsn),
                              "no shadow has run for tenant nobody-here")  # fmt: skip
        active = tmp_path / "active.yaml"
        active.write_text(POLICY.format(version=GLOBAL_VERSION, description="legal hold"))
        assert_one_line_error(run_memgov("deploy", str(active), "--shadow", "--dsn", memgov_dsn),
                              "already the active version", "MG409")  # fmt: skip
        bad = run_memgov("replay", str(active), "--since", "3x", "--dsn", memgov_dsn)
        assert bad.returncode == 2 and "--since" in bad.stderr and "Traceback" not in bad.stderr
        assert_one_line_error(run_memgov("replay", str(tmp_path / "missing.yaml"), "--dsn", memgov_dsn),
                              "cannot read policy")  # fmt: skip


def test_every_table_of_the_schema_is_wiped_between_tests(su):
    assert {"policy_shadows", "shadow_decisions"} <= set(memgov_tables(su))


# -- samples kept for replay (replay.sample_rate) ---------------------------------------

SAMPLED = POLICY + "replay: {{sample_rate: 1, keep: 2 days}}\n"


def samples(su: psycopg.Connection[Any]) -> list[tuple[Any, ...]]:
    return su.execute(
        "SELECT operation, payload ->> 'fact_text' FROM memgov.replay_samples ORDER BY decision_id"
    ).fetchall()


def test_a_sampling_policy_keeps_what_it_stored_or_held_and_replay_decides_it_first(su, writer):
    insert(writer, item("held"))
    assert samples(su) == []  # no sample unless the policy asks
    deploy_policy(su, "1.0.1", SAMPLED)
    stored = insert(writer, item("allowed")).fetchone()[0]
    insert(writer, item("held"))
    writer.execute("SELECT memgov.remember(%s)", (as_json(item("quarantined")),))  # in the quarantine already
    writer.execute("SELECT memgov.remember(%s)", (as_json(item("denied")),))  # a denial: never kept
    writer.execute("UPDATE memgov.long_term_memory_items SET fact_text = 'likes jasmine tea' WHERE memory_id = %s",
                   (stored,))  # fmt: skip
    assert samples(su) == [("remember", "likes green tea"), ("remember", "likes tea"), ("update", "likes jasmine tea")]

    with su.transaction():
        stage(su)
        got = su.execute("SELECT memgov.replay('*', %s)", (CANDIDATE_VERSION,)).fetchone()[0]
        raise_rollback(su)
    # the first held preference (before sampling) from its request, the rest from the samples
    assert (got["decisions"], got["sources"]) == (5, {"approval_requests": 1, "quarantine": 1, "samples": 3})
    assert [(d["active"], d["candidate"], d["sources"]) for d in got["divergences"]] == [
        ("require_approval", "allow", {"approval_requests": 1, "samples": 1}),
        ("quarantine", "deny", {"quarantine": 1}),
    ]


def test_a_sample_goes_with_its_memory_with_its_policy_and_after_keep(su, writer, login, logins):
    deploy_policy(su, "1.0.1", SAMPLED)
    forgotten = insert(writer, item("allowed")).fetchone()[0]
    held = insert(writer, item("held")).fetchone()[0]
    old = insert(writer, item("allowed", fact_text="an old one")).fetchone()[0]
    insert(writer, item("allowed", fact_text="a recent one"))
    writer.execute("SELECT memgov.forget(%s)", (forgotten,))
    login(logins.reviewer).execute("SELECT memgov.deny(%s)", (request_of(su, held),))
    assert samples(su) == [("remember", "an old one"), ("remember", "a recent one")]

    with su.transaction():
        su.execute("SET LOCAL ROLE memgov_owner")
        su.execute("UPDATE memgov.replay_samples SET sampled_at = now() - interval '3 days' WHERE memory_id = %s",
                   (old,))  # fmt: skip
    su.execute("CALL memgov.run_maintenance()")
    summary = su.execute("SELECT summary FROM memgov.maintenance_runs ORDER BY run_id DESC LIMIT 1").fetchone()[0]
    assert summary["replay_samples_pruned"] == 1
    assert samples(su) == [("remember", "a recent one")]

    deploy_policy(su, "1.0.2")  # a policy that does not sample: its tenants' samples go
    assert samples(su) == []


def test_a_writer_cannot_read_the_samples(su, writer):
    deploy_policy(su, "1.0.1", SAMPLED)
    insert(writer, item("allowed"))
    with refused(su, "42501"):
        writer.execute("SELECT * FROM memgov.replay_samples")


def test_a_candidate_that_fails_never_fails_the_write(su, writer):
    start_shadow(su)
    function = su.execute(
        "SELECT function_name FROM memgov.policy_versions WHERE org_id = '*' AND version = %s", (CANDIDATE_VERSION,)
    ).fetchone()[0]
    with su.transaction():  # a candidate whose decision raises (as no compiled policy should)
        su.execute(f"""CREATE OR REPLACE FUNCTION memgov.{function}(p_item memgov.long_term_memory_items,
                       p_operation text, p_actor text) RETURNS memgov.decision LANGUAGE plpgsql
                       AS $$ BEGIN RETURN 1 / 0; END $$""")
    assert insert(writer, item("held")).fetchone()[1] == "pending_approval"
    [divergence] = report(su)["divergences"]
    assert (divergence["active"], divergence["candidate"]) == ("require_approval", "error")
    assert divergence["examples"][0]["candidate_reason_codes"] == ["SHADOW_ERROR", "22012"]


@pytest.mark.slow
def test_status_shows_the_running_shadows(su, memgov_dsn, writer):
    start_shadow(su)
    insert(writer, item("held"))
    status = json.loads(run_memgov("status", "--json", "--dsn", memgov_dsn).stdout)
    assert [(s["org_id"], s["version"], s["decisions"]) for s in status["shadows"]] == [("*", CANDIDATE_VERSION, 1)]
    text = run_memgov("status", "--dsn", memgov_dsn).stdout
    assert f"global {CANDIDATE_VERSION} (1 decisions)" in text
    su.execute("SELECT memgov.stop_shadow('*')")
    assert json.loads(run_memgov("status", "--json", "--dsn", memgov_dsn).stdout)["shadows"] == []


def test_the_decision_taken_again_on_approval_is_shadowed_too(su, writer, login, logins):
    start_shadow(su)
    held = insert(writer, item("held")).fetchone()[0]
    login(logins.reviewer).execute("SELECT memgov.approve(%s)", (request_of(su, held),))
    rows = [r for r in shadowed(su) if r[2] == held]
    assert [(r[1], r[3], r[8]) for r in rows] == [
        ("remember", "require_approval", "allow"),  # the write
        ("remember", "require_approval", "allow"),  # the approval's second decision
    ]
    assert report(su)["decisions"] == 2

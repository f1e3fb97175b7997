"""A database of each released revision, populated the way that release left it,
upgrades to head: nothing is lost, the sealed log stays intact, and writes are
still decided by the policies it had."""

from __future__ import annotations

import subprocess
from pathlib import Path

import psycopg
import pytest

from memgov_pg.cluster import find_bindir
from memgov_pg.compiler import compile_policy
from memgov_pg.migrate import current_revision, head_revision, upgrade
from memgov_pg.policy import load_policy
from tests.attack_helpers import connect_login

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
RELEASES = sorted(FIXTURES.glob("populated_*.sql"))

#: every table whose rows a release leaves behind
TABLES = (
    "long_term_memory_items", "decision_log", "approval_requests", "quarantine", "feedback_events",
    "deletion_log", "policy_versions", "memory_policy_rules", "policy_activations", "policy_shadows",
    "shadow_decisions", "replay_samples", "decision_log_seals", "maintenance_runs",
)  # fmt: skip


def counts(conn: psycopg.Connection) -> dict[str, int]:
    return {t: conn.execute(f"SELECT count(*) FROM memgov.{t}").fetchone()[0] for t in TABLES}


def intact(conn: psycopg.Connection) -> dict:
    report = conn.execute("SELECT memgov.verify_decision_log()").fetchone()[0]
    assert report["ok"], report
    return report


@pytest.fixture(params=RELEASES, ids=lambda p: p.stem.removeprefix("populated_"))
def released(request, memgov_server):
    """A database at a released revision, with the story that release played."""
    revision = request.param.stem.removeprefix("populated_")
    name = f"upgrade_from_{revision}"
    memgov_server.drop_database(name)
    dsn = memgov_server.create_database(name)
    upgrade(dsn, revision)
    subprocess.run(
        [str(find_bindir() / "psql"), "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", dsn, "-f", str(request.param)],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    try:
        yield dsn, revision
    finally:
        memgov_server.drop_database(name)


@pytest.mark.slow
def test_a_populated_release_upgrades_to_head_and_keeps_governing(released):
    dsn, revision = released
    with psycopg.connect(dsn, autocommit=True) as su:
        before = counts(su)
        sealed_before = intact(su)
        assert before["decision_log"] >= 15 and before["quarantine"] > 0
        assert before["deletion_log"] > 0 and before["shadow_decisions"] > 0 and before["decision_log_seals"] > 0
        assert su.execute("SELECT count(*) FROM memgov.approval_requests WHERE status = 'pending'").fetchone()[0] > 0

        # a memory the user confirmed, in globex (read rules): the release's compiled policy
        # refuses its get to an agent, for want of a claim on its source
        with su.transaction():
            su.execute("SET LOCAL ROLE memgov_owner")
            confirmed = su.execute(
                "INSERT INTO memgov.long_term_memory_items (org_id, project_id, category, fact_text, source,"
                " confidence, context_source) VALUES ('globex', 'p1', 'user_fact', 'Walks the dog at noon',"
                " 'user_confirmed', 1.0, 'langgraph') RETURNING memory_id"
            ).fetchone()[0]
        before = counts(su)
        with connect_login(dsn, "memgov_fixture_agent", "globex") as agent:
            with pytest.raises(psycopg.Error) as refused:
                agent.execute("SELECT * FROM memgov.get(%s)", (confirmed,))
            assert refused.value.sqlstate == "MG403" and "SOURCE_NOT_PERMITTED" in str(refused.value)

        upgrade(dsn)
        assert (revision, current_revision(dsn)) == (revision, head_revision())
        assert counts(su) == before
        assert intact(su)["rows"] == sealed_before["rows"]
        # the release's seals keep their v1 hash (no settings head) and verify as they did
        assert su.execute("SELECT count(*) FROM memgov.decision_log_seals WHERE settings_change_id IS NOT NULL"
                          ).fetchone() == (0,)  # fmt: skip
        # every deployed decide function is now what this compiler writes for its policy
        for org_id, source, function in su.execute(
            "SELECT org_id, source_yaml, function_name FROM memgov.policy_versions ORDER BY org_id, version"
        ).fetchall():
            body = su.execute(
                "SELECT prosrc FROM pg_proc WHERE oid = to_regprocedure(format("
                "'memgov.%%I(memgov.long_term_memory_items, text, text)', %s::text))",
                (function,),
            ).fetchone()[0]
            assert body == compile_policy(load_policy(source), org_id).bodies[0], (org_id, function)
        # and the code is what its record says (the upgrade rewrote both alike): no drift
        assert su.execute("SELECT * FROM memgov.policy_drift()").fetchall() == []

    # the agent reads what the user confirmed: no redeploy needed
    with connect_login(dsn, "memgov_fixture_agent", "globex") as agent:
        assert agent.execute("SELECT fact_text FROM memgov.get(%s)", (confirmed,)).fetchall() == [
            ("Walks the dog at noon",)
        ]
        found = agent.execute('SELECT fact_text FROM memgov.search(\'{"text": "walks", "project_id": "p1"}\')')
        assert sorted(r[0] for r in found) == ["Walks the dog at noon", "Walks to work"]
        selected = agent.execute("SELECT fact_text FROM memgov.long_term_memory_items WHERE memory_id = %s",
                                 (confirmed,)).fetchall()  # fmt: skip
        assert selected == [("Walks the dog at noon",)]

    # a writer login's writes are decided by the policies the release deployed
    with connect_login(dsn, "memgov_fixture_agent", "acme") as agent:
        with pytest.raises(psycopg.Error) as denied:
            agent.execute(
                "INSERT INTO memgov.long_term_memory_items (org_id, category, fact_text, source, confidence) "
                "VALUES ('acme', 'user_fact', 'api_key=sk-live-0123456789abcdef', 'agent_extracted', 0.9)"
            )
        assert denied.value.sqlstate == "MG403" and "block-secrets" in str(denied.value)
        status = agent.execute(
            "INSERT INTO memgov.long_term_memory_items (org_id, category, fact_text, source, confidence) "
            "VALUES ('acme', 'preference', 'Prefers tea', 'agent_extracted', 0.9) RETURNING status"
        ).fetchone()
        assert status == ("active",)
    with connect_login(dsn, "memgov_fixture_agent", "globex") as agent:  # globex's override, read rules
        found = agent.execute('SELECT fact_text FROM memgov.search(\'{"text": "walks to work", "project_id": "p1"}\')')
        assert [r[0] for r in found] == ["Walks to work"]

    # a request held by the release is approved by a reviewer login after the upgrade
    with connect_login(dsn, "memgov_fixture_reviewer", "acme") as reviewer:
        approved = reviewer.execute(
            "SELECT memgov.approve(request_id) ->> 'status' FROM memgov.approval_requests "
            "WHERE status = 'pending' AND payload ->> 'fact_text' = 'Has a cat named Miso'"
        ).fetchone()
        assert approved == ("approved",)

    # and the sweep seals what the release left unsealed and what came after, its seals
    # covering the settings trail (a change made after the upgrade) after the release's
    with psycopg.connect(dsn, autocommit=True) as su:
        v1_seals = su.execute("SELECT count(*) FROM memgov.decision_log_seals").fetchone()[0]
        su.execute("UPDATE memgov.settings SET value = value + 1024 WHERE name = 'max_other_bytes'")
        (head,) = su.execute("SELECT max(change_id) FROM memgov.settings_changes").fetchone()
        su.execute("CALL memgov.run_maintenance()")
        report = intact(su)
        assert report["unsealed_rows"] == 0 and report["rows"] == counts(su)["decision_log"]
        heads = su.execute("SELECT settings_change_id FROM memgov.decision_log_seals ORDER BY seal_id").fetchall()
        assert heads[:v1_seals] == [(None,)] * v1_seals and heads[v1_seals:] and set(heads[v1_seals:]) == {(head,)}

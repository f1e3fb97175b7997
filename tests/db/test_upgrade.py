"""A database of each released revision, populated the way that release left it,
upgrades to head: nothing is lost, the sealed log stays intact, and writes are
still decided by the policies it had."""

from __future__ import annotations

import subprocess
from pathlib import Path

import psycopg
import pytest

from memgov_pg.cluster import find_bindir
from memgov_pg.migrate import current_revision, head_revision, upgrade
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


def test_a_populated_release_upgrades_to_head_and_keeps_governing(released):
    dsn, revision = released
    with psycopg.connect(dsn, autocommit=True) as su:
        before = counts(su)
        sealed_before = intact(su)
        assert before["decision_log"] >= 15 and before["quarantine"] > 0
        assert before["deletion_log"] > 0 and before["shadow_decisions"] > 0 and before["decision_log_seals"] > 0
        assert su.execute("SELECT count(*) FROM memgov.approval_requests WHERE status = 'pending'").fetchone()[0] > 0

        upgrade(dsn)
        assert (revision, current_revision(dsn)) == (revision, head_revision())
        assert counts(su) == before
        assert intact(su)["rows"] == sealed_before["rows"]

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
        found = agent.execute('SELECT fact_text FROM memgov.search(\'{"text": "walks", "project_id": "p1"}\')')
        assert [r[0] for r in found] == ["Walks to work"]

    # a request held by the release is approved by a reviewer login after the upgrade
    with connect_login(dsn, "memgov_fixture_reviewer", "acme") as reviewer:
        approved = reviewer.execute(
            "SELECT memgov.approve(request_id) ->> 'status' FROM memgov.approval_requests "
            "WHERE status = 'pending' AND payload ->> 'fact_text' = 'Has a cat named Miso'"
        ).fetchone()
        assert approved == ("approved",)

    # and the sweep seals what the release left unsealed and what came after
    with psycopg.connect(dsn, autocommit=True) as su:
        su.execute("CALL memgov.run_maintenance()")
        report = intact(su)
        assert report["unsealed_rows"] == 0 and report["rows"] == counts(su)["decision_log"]

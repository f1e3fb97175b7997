"""The command line against real servers: migrate, status, the embedded cluster, bad input."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import psycopg
import pytest

from memgov_pg.migrate import current_revision, head_revision
from tests.cli_helpers import assert_one_line_error, run_memgov
from tests.net_helpers import plain_bind_fails, refused_port


def test_migrate_with_dsn(empty_dsn):
    result = run_memgov("migrate", "--dsn", empty_dsn, "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {
        "from": None,
        "to": head_revision(),
        "version_table": "public.memgov_alembic_version",
        "host_owned": False,
    }
    again = run_memgov("migrate", "--dsn", empty_dsn)
    assert again.returncode == 0
    assert "already at" in again.stdout


def test_migrate_with_memgov_dsn_environment(empty_dsn):
    result = run_memgov("migrate", env={"MEMGOV_DSN": empty_dsn})
    assert result.returncode == 0, result.stderr
    assert current_revision(empty_dsn) == head_revision()


def test_status_reports_revision_and_tables(memgov_dsn):
    result = run_memgov("status", "--dsn", memgov_dsn, "--json")
    assert result.returncode == 0, result.stderr
    status = json.loads(result.stdout)
    assert status["schema_revision"] == status["head_revision"] == head_revision()
    assert "long_term_memory_items" in status["tables"]


@pytest.mark.parametrize(
    ("dsn", "fragment"),
    [
        ("not a dsn", "invalid DSN"),
        ("postgresql://postgres@127.0.0.1:{refused}/memgov", "Connection refused"),
        ("host=no-such-host.invalid dbname=x", "no-such-host.invalid"),
    ],
    ids=["malformed", "refused", "unknown-host"],
)
@pytest.mark.parametrize("command", ["migrate", "status"])
def test_bad_dsn_is_one_line(command, dsn, fragment):
    with refused_port() as port:
        assert_one_line_error(run_memgov(command, "--dsn", dsn.format(refused=port)), fragment)


def test_wrong_database_name_is_one_line(memgov_server):
    dsn = memgov_server.dsn("no_such_database")
    assert_one_line_error(run_memgov("migrate", "--dsn", dsn), "no_such_database")


def test_no_dsn_and_no_embedded_cluster(tmp_path):
    result = run_memgov("status", cwd=tmp_path)
    assert_one_line_error(result, "memgov up")


def test_missing_server_binaries(tmp_path):
    result = run_memgov("up", env={"MEMGOV_PG_BINDIR": str(tmp_path / "nothing"), "MEMGOV_HOME": str(tmp_path)})
    assert_one_line_error(result, "binaries not found")


def test_unknown_command_is_a_usage_error():
    result = run_memgov("frobnicate")
    assert result.returncode == 2
    assert "Traceback" not in result.stderr


@pytest.mark.slow
def test_embedded_cluster_up_migrate_down(tmp_path):
    home = tmp_path / "home" / ".memgov"
    env = {"MEMGOV_HOME": str(home)}
    up = run_memgov("up", "--json", env=env)
    assert up.returncode == 0, up.stderr
    info = json.loads(up.stdout)
    try:
        with psycopg.connect(info["dsn"]) as conn:
            preload = conn.execute("SHOW shared_preload_libraries").fetchone()[0]
            assert "pg_cron" in preload
        # every command uses the embedded cluster when no DSN is given
        migrated = run_memgov("migrate", env=env)
        assert migrated.returncode == 0, migrated.stderr
        assert current_revision(info["dsn"]) == head_revision()
        # `up` again is harmless and keeps the same DSN
        again = run_memgov("up", "--json", env=env)
        assert again.returncode == 0, again.stderr
        assert json.loads(again.stdout)["dsn"] == info["dsn"]
        # stopped under a client's feet, the server closes the connection first: its end lingers
        # on the port (FIN_WAIT_2, then TIME_WAIT), which keeps neither PostgreSQL nor `up` from it
        with psycopg.connect(info["dsn"]) as client:
            assert run_memgov("down", env=env).returncode == 0
            assert plain_bind_fails(int(info["port"])), "nothing lingers on the port: the test shows nothing"
            restarted = run_memgov("up", "--json", env=env)
            assert restarted.returncode == 0, restarted.stderr
            assert json.loads(restarted.stdout)["dsn"] == info["dsn"]
            client.close()
    finally:
        down = run_memgov("down", env=env)
    assert down.returncode == 0, down.stderr
    assert down.stdout.strip() == "stopped"
    stopped = run_memgov("status", env=env)
    assert_one_line_error(stopped, "memgov up")
    shutil.rmtree(Path(info["datadir"]).parent, ignore_errors=True)


def test_search_prints_what_the_policy_lets_the_login_recall(memgov_dsn, db_conn):
    from memgov_pg.deploy import deploy

    root = Path(__file__).resolve().parents[2]
    deploy(memgov_dsn, root / "policies" / "examples" / "memproof.yaml", tenant="cli-recall")
    with db_conn.transaction():
        db_conn.execute("SET LOCAL ROLE memgov_owner")
        for text, sensitive in (("walks to work", False), ("walks with a cane after surgery", True)):
            db_conn.execute(
                "INSERT INTO memgov.long_term_memory_items (org_id, project_id, category, fact_text, source,"
                " confidence, is_sensitive) VALUES ('cli-recall', 'p1', 'user_fact', %s, 'agent_extracted', 0.9, %s)",
                (text, sensitive),
            )
    found = run_memgov("search", "walks", "--tenant", "cli-recall", "--project", "p1", "--json", "--dsn", memgov_dsn)
    assert found.returncode == 0, found.stderr
    data = json.loads(found.stdout)
    assert [m["fact_text"] for m in data["memories"]] == ["walks to work"]
    assert (data["returned"], data["withheld"], data["decision"]["action"]) == (1, 1, "allow")
    text = run_memgov("search", "walks", "--tenant", "cli-recall", "--project", "p1", "--dsn", memgov_dsn)
    assert "walks to work" in text.stdout and "1 returned, 1 withheld" in text.stderr
    denied = run_memgov("search", "walks", "--tenant", "cli-recall", "--project", "p1",
                        "--context-source", "custom", "--dsn", memgov_dsn)  # fmt: skip
    assert_one_line_error(denied, "deny-recall-from-untrusted")
    assert run_memgov("search", "walks", "--dsn", memgov_dsn).returncode == 2  # --tenant is required
    assert run_memgov("search", "--tenant", "cli-recall", "--limit", "0", "--dsn", memgov_dsn).returncode == 2


def test_demo_plays_its_story_recall_included(memgov_dsn):
    result = run_memgov("demo", "--dsn", memgov_dsn, env={"COLUMNS": "200"})
    assert result.returncode == 0, result.stderr
    for line in ("block-secrets", "recalls “Olena” (memgov.search)", "READS_NOT_GOVERNED", "runs the retention sweep"):
        assert line in result.stdout, line


def test_demo_shadows_a_candidate_promotes_it_and_leaves_the_default_in_force(memgov_dsn):
    for _ in range(2):  # a second run tells the same story
        result = run_memgov("demo", "--dsn", memgov_dsn, env={"COLUMNS": "200"})
        assert result.returncode == 0, result.stderr
        for line in ("--shadow (1.1.0-demo", "3 decisions; require_approval → allow: 2", "active: 1.1.0-demo",
                     "active: 1.0.0"):  # fmt: skip
            assert line in result.stdout, line
    with psycopg.connect(memgov_dsn) as conn:
        active = conn.execute("SELECT version FROM memgov.policy_versions WHERE org_id = '*' AND active").fetchall()
        running = conn.execute("SELECT count(*) FROM memgov.policy_shadows WHERE ended_at IS NULL").fetchone()
    assert (active, running) == ([("1.0.0",)], (0,))

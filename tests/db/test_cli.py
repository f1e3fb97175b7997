"""The command line against real servers: migrate, status, the embedded cluster, bad input."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

from memgov_pg.migrate import current_revision, head_revision
from tests.attack_helpers import login_dsn
from tests.cli_helpers import assert_one_line_error, run_memgov
from tests.net_helpers import plain_bind_fails, refused_port

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
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


@pytest.mark.slow
def test_migrate_with_memgov_dsn_environment(empty_dsn):
    result = run_memgov("migrate", env={"MEMGOV_DSN": empty_dsn})
    assert result.returncode == 0, result.stderr
    assert current_revision(empty_dsn) == head_revision()


@pytest.mark.slow
def test_status_reports_revision_and_tables(memgov_dsn):
    result = run_memgov("status", "--dsn", memgov_dsn, "--json")
    assert result.returncode == 0, result.stderr
    status = json.loads(result.stdout)
    assert status["schema_revision"] == status["head_revision"] == head_revision()
    assert "long_term_memory_items" in status["tables"]


@pytest.mark.slow
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


@pytest.mark.slow
def test_wrong_database_name_is_one_line(memgov_server):
    dsn = memgov_server.dsn("no_such_database")
    assert_one_line_error(run_memgov("migrate", "--dsn", dsn), "no_such_database")


@pytest.mark.slow
def test_migrate_as_a_login_that_is_not_a_superuser_names_the_role(empty_dsn, memgov_dsn, logins):
    for role in (logins.admin, logins.nobody):
        result = run_memgov("migrate", "--dsn", login_dsn(empty_dsn, role))
        assert_one_line_error(
            result,
            "permission denied for schema public [42501]",
            "`memgov migrate` needs a superuser (it creates memgov's roles, schema and grants), "
            f"and {role} is not one; run it as a superuser",
        )
        assert result.returncode == 1
    with psycopg.connect(empty_dsn) as conn:
        created = conn.execute(
            "SELECT to_regclass('public.memgov_alembic_version'), to_regnamespace('memgov')"
        ).fetchone()
    assert created == (None, None)
    # at head there is nothing to do, which an operator may be told too
    at_head = run_memgov("migrate", "--dsn", login_dsn(memgov_dsn, logins.admin))
    assert at_head.returncode == 0, at_head.stderr
    assert "already at" in at_head.stdout


@pytest.mark.slow
def test_deploy_and_rollback_without_memgov_admin_name_the_role(memgov_dsn, logins):
    policy = str(ROOT / "policies" / "default.yaml")
    with psycopg.connect(memgov_dsn) as conn:
        before = conn.execute("SELECT count(*), count(*) FILTER (WHERE active) FROM memgov.policy_versions").fetchone()
    for role in (logins.writer, logins.reviewer, logins.nobody):
        for command in (("deploy", policy, "--tenant", "cli-roles"), ("rollback", "--tenant", "cli-roles")):
            result = run_memgov(*command, "--dsn", login_dsn(memgov_dsn, role))
            assert_one_line_error(
                result,
                "[42501]",
                f"`memgov {command[0]}` needs a login in memgov_admin, and {role} is not one; connect as such a "
                f"login, or have a superuser grant it: GRANT memgov_admin TO {role}",
            )
            assert result.returncode == 1
    with psycopg.connect(memgov_dsn) as conn:
        after = conn.execute("SELECT count(*), count(*) FILTER (WHERE active) FROM memgov.policy_versions").fetchone()
    assert after == before
    deployed = run_memgov("deploy", policy, "--tenant", "cli-roles", "--dsn", login_dsn(memgov_dsn, logins.admin))
    assert deployed.returncode == 0, deployed.stderr


def _database(result) -> str:
    assert result.returncode == 0, result.stdout + result.stderr
    return str(json.loads(result.stdout)["database"])


@pytest.mark.slow
def test_dsn_on_the_group_and_its_order(memgov_dsn, empty_dsn):
    """`memgov --dsn X COMMAND` works; the command's --dsn wins over it, and it wins over MEMGOV_DSN."""
    governed = psycopg.conninfo.conninfo_to_dict(memgov_dsn)["dbname"]
    other = psycopg.conninfo.conninfo_to_dict(empty_dsn)["dbname"]
    assert _database(run_memgov("--dsn", memgov_dsn, "status", "--json")) == governed
    with refused_port() as port:
        refused = f"postgresql://postgres@127.0.0.1:{port}/nowhere"
        assert _database(run_memgov("--dsn", refused, "status", "--json", "--dsn", memgov_dsn)) == governed
        assert _database(run_memgov("--dsn", memgov_dsn, "status", "--json", env={"MEMGOV_DSN": refused})) == governed
    assert _database(run_memgov("status", "--json", env={"MEMGOV_DSN": empty_dsn})) == other
    assert _database(run_memgov("--dsn", empty_dsn, "status", "--json", env={"MEMGOV_DSN": memgov_dsn})) == other
    # a nested command too, and one that fails reports the group's database
    run = run_memgov("--dsn", memgov_dsn, "retention", "run", "--dry-run", "--json")
    assert run.returncode == 0, run.stderr
    assert_one_line_error(run_memgov("--dsn", refused, "status", env={"MEMGOV_DSN": memgov_dsn}), "nowhere")


@pytest.mark.slow
def test_help_names_where_the_database_comes_from():
    group = run_memgov("--help")
    assert group.returncode == 0
    steps = ("the command's --dsn", "memgov --dsn X COMMAND", "MEMGOV_DSN", "PGHOST", "PGSERVICEFILE",
             "the embedded cluster of `memgov up`")  # fmt: skip
    order = [group.stdout.index(step) for step in steps]
    assert order == sorted(order), group.stdout
    command = " ".join(run_memgov("status", "--help").stdout.split())
    assert "the command's --dsn, else memgov --dsn, else MEMGOV_DSN, else libpq's own PG* variables" in command


@pytest.mark.slow
def test_no_dsn_and_no_embedded_cluster(tmp_path):
    result = run_memgov("status", cwd=tmp_path)
    assert_one_line_error(result, "memgov up")


@pytest.mark.slow
def test_missing_server_binaries(tmp_path):
    result = run_memgov("up", env={"MEMGOV_PG_BINDIR": str(tmp_path / "nothing"), "MEMGOV_HOME": str(tmp_path)})
    assert_one_line_error(result, "binaries not found")


@pytest.mark.slow
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
        # without --json it prints the DSN and nothing else, so that `psql "$(memgov up)"` works
        text = run_memgov("up", env=env)
        assert text.returncode == 0, text.stderr
        assert text.stdout == info["dsn"] + "\n", text.stdout
        psql = subprocess.run(
            ["bash", "-c", 'psql "$(memgov up)" -X -At -c "SELECT current_database(), current_user"'],
            capture_output=True,
            text=True,
            env=_env_with_memgov() | env,
            timeout=120,
        )
        assert psql.returncode == 0, psql.stderr
        assert psql.stdout.strip() == "memgov|postgres"
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


def _env_with_memgov() -> dict[str, str]:
    """The environment with this venv's `memgov` first on the PATH, no MEMGOV_DSN / MEMGOV_HOME."""
    env = {k: v for k, v in os.environ.items() if k not in ("MEMGOV_DSN", "MEMGOV_HOME")}
    return env | {"PATH": f"{Path(sys.executable).parent}:{env.get('PATH', '/usr/bin:/bin')}"}


@pytest.mark.slow
@pytest.mark.parametrize(
    ("shell", "line"),
    [
        ("bash", "complete -o nosort -F _memgov_completion memgov"),
        ("zsh", "#compdef memgov"),
        ("fish", "complete --no-files --command memgov"),
    ],
)
def test_shell_completion_scripts_as_the_docs_load_them(shell, line):
    script = subprocess.run(["memgov"], capture_output=True, text=True,
                            env=_env_with_memgov() | {"_MEMGOV_COMPLETE": f"{shell}_source"})  # fmt: skip
    assert script.returncode == 0, script.stderr
    assert line in script.stdout, script.stdout


@pytest.mark.slow
def test_the_bash_completion_completes_commands():
    # the line of docs/operations.md, then what bash does on `memgov mig<TAB>` and `memgov retention <TAB>`
    script = """
        eval "$(_MEMGOV_COMPLETE=bash_source memgov)"
        for words in "memgov mig" "memgov retention "; do
            read -ra COMP_WORDS <<< "$words"
            [ "${words: -1}" = " " ] && COMP_WORDS+=("")
            COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
            COMPREPLY=()
            _memgov_completion memgov
            echo "${COMPREPLY[*]}"
        done
    """
    completed = subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=_env_with_memgov())
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.splitlines() == ["migrate", "run schedule unschedule"], completed.stdout


@pytest.mark.slow
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


@pytest.mark.slow
def test_demo_plays_its_story_recall_included(memgov_dsn):
    result = run_memgov("demo", "--dsn", memgov_dsn, env={"COLUMNS": "200"})
    assert result.returncode == 0, result.stderr
    for line in ("block-secrets", "recalls “Olena” (memgov.search)", "READS_NOT_GOVERNED", "runs the retention sweep"):
        assert line in result.stdout, line


@pytest.mark.slow
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

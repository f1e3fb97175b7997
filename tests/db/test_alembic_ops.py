"""Policies as Alembic revisions: op.deploy_memory_policy / op.undeploy_memory_policy
(online in the migration's transaction, offline through psql), memgov.undeploy_policy
and its activation history, and `memgov revision`."""

from __future__ import annotations

import importlib.util
import io
import logging
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
import sqlalchemy as sa
from alembic.config import Config
from alembic.migration import MigrationContext
from alembic.operations import Operations
from psycopg.types.json import Jsonb

from alembic import command
from memgov_pg.alembic_ops import version_location
from memgov_pg.cluster import find_bindir
from memgov_pg.db import connect
from memgov_pg.errors import MemgovError
from memgov_pg.migrate import head_revision, upgrade
from tests.attack_helpers import connect_login, refused, unchanged
from tests.cli_helpers import assert_one_line_error, raises_sqlstate, run_memgov
from tests.decision_cases import reset_policies

ITEM = {"org_id": "acme", "category": "gossip", "fact_text": "x", "source": "user_confirmed", "confidence": 0.9}


def policy_text(version: str, action: str = "allow") -> str:
    # ':' and '%' reach the compiled bodies: they must not be taken for bind parameters
    return (
        f'version: "{version}"\n'
        "description: 'ratio: 100% of gossip'\n"
        "defaults: {on_policy_miss: deny}\n"
        "rules:\n"
        f"  - {{id: gossip-rule, priority: 1, category: gossip, action: {action}}}\n"
        "  - {id: no-percent, priority: 2, when: [{field: fact_text, operator: regex, value: '100%:x'}],"
        " action: deny}\n"
    )


@pytest.fixture(autouse=True)
def clean(db_conn):
    reset_policies(db_conn)
    db_conn.execute("DELETE FROM memgov.policy_activations")


@pytest.fixture
def engine(memgov_dsn) -> Iterator[sa.Engine]:
    eng = sa.create_engine("postgresql+psycopg://", creator=lambda: connect(memgov_dsn), poolclass=sa.pool.NullPool)
    yield eng
    eng.dispose()


@pytest.fixture
def admin_login(db_conn) -> Iterator[str]:
    name = "ops_admin_login"
    db_conn.execute(f"DROP ROLE IF EXISTS {name}")
    db_conn.execute(f"CREATE ROLE {name} LOGIN IN ROLE memgov_admin")
    yield name
    db_conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s", (name,))
    db_conn.execute(f"DROP OWNED BY {name}")
    db_conn.execute(f"DROP ROLE {name}")


@pytest.fixture
def writer_login(db_conn) -> Iterator[str]:
    name = "ops_writer_login"
    db_conn.execute(f"DROP ROLE IF EXISTS {name}")
    db_conn.execute(f"CREATE ROLE {name} LOGIN IN ROLE memgov_writer")
    yield name
    db_conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s", (name,))
    db_conn.execute(f"DROP OWNED BY {name}")
    db_conn.execute(f"DROP ROLE {name}")


def operations(connection: sa.Connection) -> Operations:
    return Operations(MigrationContext.configure(connection))


def active(conn: psycopg.Connection[Any], org: str = "*") -> str | None:
    row = conn.execute("SELECT version FROM memgov.policy_versions WHERE org_id = %s AND active", (org,)).fetchone()
    return None if row is None else row[0]


def decide(conn: psycopg.Connection[Any]) -> dict[str, Any]:
    return conn.execute("SELECT memgov.evaluate(%s)", (Jsonb(ITEM),)).fetchone()[0]


def test_version_location_is_memgovs_revisions():
    path = Path(version_location())
    assert path.is_absolute()
    assert (path / "0001_initial.py").is_file()


def test_deploy_runs_in_the_migration_transaction_and_a_later_failure_rolls_it_back(engine, db_conn):
    with pytest.raises(sa.exc.ProgrammingError):
        with engine.begin() as connection:
            op = operations(connection)
            deployed = op.deploy_memory_policy(policy_text("1.0.0"))
            assert deployed.version == "1.0.0"
            # the migration sees its own deploy before commit; another session does not
            assert connection.exec_driver_sql("SELECT memgov.policy_settings('acme')->>'version'").scalar() == "1.0.0"
            assert active(db_conn) is None
            connection.exec_driver_sql("SELECT * FROM a_table_that_does_not_exist")  # a later failing revision
    assert active(db_conn) is None
    assert db_conn.execute("SELECT count(*) FROM memgov.policy_versions").fetchone() == (0,)
    assert decide(db_conn)["reason_codes"] == ["NO_ACTIVE_POLICY"]


def test_two_deploys_in_one_transaction_then_undeploy_walks_back(engine, db_conn, writer_login):
    with engine.begin() as connection:
        op = operations(connection)
        op.deploy_memory_policy(policy_text("1.0.0", "allow"))
        op.deploy_memory_policy(policy_text("2.0.0", "require_approval"))
    assert active(db_conn) == "2.0.0"
    history = db_conn.execute(
        "SELECT version, previous_version, undoes FROM memgov.policy_activations ORDER BY activation_id"
    ).fetchall()
    assert history == [("1.0.0", None, None), ("2.0.0", "1.0.0", None)]

    with engine.begin() as connection:
        assert operations(connection).undeploy_memory_policy("2.0.0") == "1.0.0"
    assert active(db_conn) == "1.0.0"
    assert decide(db_conn)["action"] == "allow"

    with engine.begin() as connection:
        assert operations(connection).undeploy_memory_policy("1.0.0") is None
    assert active(db_conn) is None
    # no active policy: the engine fails closed, for a real writer too
    conn = connect_login(db_conn.info.dsn, writer_login)
    with raises_sqlstate("MG403"):
        conn.execute(
            "INSERT INTO memgov.long_term_memory_items (org_id, category, fact_text, source, confidence)"
            " VALUES ('acme', 'gossip', 'x', 'agent_extracted', 0.9)"
        )
    conn.close()
    # both versions stay deployed; a later upgrade re-activates 1.0.0 as a fresh activation
    with engine.begin() as connection:
        operations(connection).deploy_memory_policy(policy_text("1.0.0", "allow"))
    assert active(db_conn) == "1.0.0"
    with engine.begin() as connection:
        assert operations(connection).undeploy_memory_policy("1.0.0") is None


def test_undeploy_of_a_version_that_is_not_active_changes_nothing(engine, db_conn):
    with engine.begin() as connection:
        op = operations(connection)
        op.deploy_memory_policy(policy_text("1.0.0"))
        op.deploy_memory_policy(policy_text("2.0.0"))
    notices: list[str] = []
    db_conn.add_notice_handler(lambda d: notices.append(d.message_primary or ""))
    with unchanged(db_conn, "undeploying an inactive version"):
        assert db_conn.execute("SELECT memgov.undeploy_policy('*', '1.0.0')").fetchone() == ("2.0.0",)
        assert db_conn.execute("SELECT memgov.undeploy_policy('*', 'never-deployed')").fetchone() == ("2.0.0",)
    assert any("not the active one" in n for n in notices), notices
    for bad in ("NULL", "''"):
        with raises_sqlstate("22023"):
            db_conn.execute(f"SELECT memgov.undeploy_policy('*', {bad})")
    with raises_sqlstate("22023"):
        db_conn.execute("SELECT memgov.undeploy_policy('Not A Tenant!', '1.0.0')")


def test_undeploy_after_a_redeploy_of_an_older_version(engine, db_conn):
    # revisions: A, B, A again; downgrading all three walks A -> B -> A -> none
    with engine.begin() as connection:
        op = operations(connection)
        for version in ("1.0.0", "2.0.0", "1.0.0"):
            op.deploy_memory_policy(policy_text(version))
    with engine.begin() as connection:
        op = operations(connection)
        assert op.undeploy_memory_policy("1.0.0") == "2.0.0"
        assert op.undeploy_memory_policy("2.0.0") == "1.0.0"
        assert op.undeploy_memory_policy("1.0.0") is None


def test_undeploy_of_a_second_deploy_of_one_version_keeps_it(engine, db_conn, writer_login):
    # two revisions deploy 1.0.0: undoing the second leaves the first's deploy, not none
    for _ in range(2):
        with engine.begin() as connection:
            operations(connection).deploy_memory_policy(policy_text("1.0.0", "allow"))
    with engine.begin() as connection:
        assert operations(connection).undeploy_memory_policy("1.0.0") == "1.0.0"
    assert active(db_conn) == "1.0.0"
    conn = connect_login(db_conn.info.dsn, writer_login)
    stored = conn.execute(
        "INSERT INTO memgov.long_term_memory_items (org_id, category, fact_text, source, confidence)"
        " VALUES ('acme', 'gossip', 'x', 'agent_extracted', 0.9) RETURNING status, policy_version"
    ).fetchone()
    conn.close()
    assert stored == ("active", "1.0.0")  # decided by 1.0.0, not refused for want of a policy
    with engine.begin() as connection:
        assert operations(connection).undeploy_memory_policy("1.0.0") is None
    assert active(db_conn) is None


@pytest.mark.slow
def test_undeploy_of_a_revision_that_deployed_the_active_version_keeps_it(engine, db_conn, memgov_dsn, tmp_path):
    # `memgov deploy` made 1.0.0 active (and deploys it again: a no-op, recorded as nothing);
    # then revisions deploy 1.0.0 and 2.0.0: downgrading both walks back to 1.0.0, not to none
    path = tmp_path / "p.yaml"
    path.write_text(policy_text("1.0.0", "allow"))
    for _ in range(2):
        assert run_memgov("deploy", str(path), env={"MEMGOV_DSN": memgov_dsn}).returncode == 0
    with engine.begin() as connection:
        op = operations(connection)
        op.deploy_memory_policy(policy_text("1.0.0", "allow"))
        op.deploy_memory_policy(policy_text("2.0.0", "require_approval"))
    with engine.begin() as connection:
        op = operations(connection)
        assert op.undeploy_memory_policy("2.0.0") == "1.0.0"
        assert op.undeploy_memory_policy("1.0.0") == "1.0.0"
    assert active(db_conn) == "1.0.0"
    assert decide(db_conn)["policy_version"] == "1.0.0"
    history = db_conn.execute(
        "SELECT version, previous_version, undoes IS NOT NULL FROM memgov.policy_activations ORDER BY activation_id"
    ).fetchall()
    assert history == [("1.0.0", None, False), ("1.0.0", "1.0.0", False), ("2.0.0", "1.0.0", False),
                       ("1.0.0", "2.0.0", True), ("1.0.0", "1.0.0", True)]  # fmt: skip


def test_a_revision_deploys_into_a_database_not_yet_at_memgovs_head(empty_dsn):
    # a host revision may run before memgov's newest revision: it activates as that schema does
    upgrade(empty_dsn, "0001_initial")
    eng = sa.create_engine("postgresql+psycopg://", creator=lambda: connect(empty_dsn), poolclass=sa.pool.NullPool)
    try:
        with eng.begin() as connection:
            operations(connection).deploy_memory_policy(policy_text("1.0.0", "allow"))
    finally:
        eng.dispose()
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        assert active(conn) == "1.0.0"


def test_tenant_deploy_and_undeploy_leave_the_global_policy(engine, db_conn):
    with engine.begin() as connection:
        op = operations(connection)
        op.deploy_memory_policy(policy_text("1.0.0", "allow"))
        op.deploy_memory_policy(policy_text("7.0.0", "require_approval"), tenant="acme")
    assert decide(db_conn)["policy_version"] == "7.0.0"
    with engine.begin() as connection:
        assert operations(connection).undeploy_memory_policy("7.0.0", tenant="acme") is None
    assert (active(db_conn), active(db_conn, "acme")) == ("1.0.0", None)
    assert decide(db_conn)["policy_version"] == "1.0.0"


def test_deploy_from_a_path(engine, db_conn, tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text(policy_text("3.0.0"))
    with engine.begin() as connection:
        operations(connection).deploy_memory_policy(path)
    assert active(db_conn) == "3.0.0"


def test_deploy_without_the_memgov_schema_says_so(empty_dsn):
    eng = sa.create_engine("postgresql+psycopg://", creator=lambda: connect(empty_dsn), poolclass=sa.pool.NullPool)
    with pytest.raises(MemgovError, match="memgov schema is not in this database"):
        with eng.begin() as connection:
            operations(connection).deploy_memory_policy(policy_text("1.0.0"))
    eng.dispose()


def psql(dsn: str, script: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(find_bindir() / "psql"), "-X", "-v", "ON_ERROR_STOP=1", "-q", "-d", dsn],
        input=script,
        capture_output=True,
        text=True,
        timeout=60,
    )


def offline_sql(run: Any) -> str:
    buf = io.StringIO()
    ctx = MigrationContext.configure(dialect_name="postgresql", opts={"as_sql": True, "output_buffer": buf})
    run(Operations(ctx))
    return buf.getvalue()


@pytest.mark.slow
def test_offline_sql_run_by_psql_deploys_and_undeploys(db_conn, memgov_dsn):
    deploy_sql = offline_sql(lambda op: (op.deploy_memory_policy(policy_text("1.0.0")),
                                         op.deploy_memory_policy(policy_text("2.0.0"))))  # fmt: skip
    assert "memgov.stage_policy(" in deploy_sql and "p_revision => true" in deploy_sql
    result = psql(memgov_dsn, "BEGIN;\n" + deploy_sql + "COMMIT;\n")
    assert result.returncode == 0, result.stderr
    assert active(db_conn) == "2.0.0"
    undeploy_sql = offline_sql(lambda op: op.undeploy_memory_policy("2.0.0"))
    result = psql(memgov_dsn, undeploy_sql)
    assert result.returncode == 0, result.stderr
    assert active(db_conn) == "1.0.0"


# -- attacks: only admins undeploy, nobody writes the history -------------------------


ATTACKS = {
    "undeploy": "SELECT memgov.undeploy_policy('*', '2.0.0')",
    "insert_history": "INSERT INTO memgov.policy_activations (org_id, version, previous_version)"
    " VALUES ('*', '2.0.0', NULL)",
    "update_history": "UPDATE memgov.policy_activations SET previous_version = NULL",
    "delete_history": "DELETE FROM memgov.policy_activations",
    "read_history": "SELECT * FROM memgov.policy_activations",
    "truncate_history": "TRUNCATE memgov.policy_activations",
}


@pytest.mark.parametrize("attack", sorted(ATTACKS))
@pytest.mark.parametrize("group", ["memgov_writer", "memgov_reviewer"])
def test_x_writers_and_reviewers_cannot_undeploy_or_touch_the_history(engine, db_conn, group, attack):
    with engine.begin() as connection:
        op = operations(connection)
        op.deploy_memory_policy(policy_text("1.0.0"))
        op.deploy_memory_policy(policy_text("2.0.0"))
    name = f"ops_x_{group.split('_')[1]}"
    db_conn.execute(f"DROP ROLE IF EXISTS {name}")
    db_conn.execute(f"CREATE ROLE {name} LOGIN IN ROLE {group}")
    try:
        conn = connect_login(db_conn.info.dsn, name)
        with refused(db_conn, "42501"):
            conn.execute(ATTACKS[attack])
        conn.close()
    finally:
        db_conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s", (name,))
        db_conn.execute(f"DROP OWNED BY {name}")
        db_conn.execute(f"DROP ROLE {name}")
    assert active(db_conn) == "2.0.0"


def test_an_admin_login_undeploys_and_is_recorded(engine, db_conn, admin_login):
    with engine.begin() as connection:
        op = operations(connection)
        op.deploy_memory_policy(policy_text("1.0.0"))
        op.deploy_memory_policy(policy_text("2.0.0"))
    conn = connect_login(db_conn.info.dsn, admin_login, org=None)
    assert conn.execute("SELECT memgov.undeploy_policy('*', '2.0.0')").fetchone() == ("1.0.0",)
    with raises_sqlstate("42501"):
        conn.execute("DELETE FROM memgov.policy_activations")
    conn.close()
    last = db_conn.execute(
        "SELECT version, previous_version, undoes IS NOT NULL, activated_by FROM memgov.policy_activations"
        " ORDER BY activation_id DESC LIMIT 1"
    ).fetchone()
    assert last == ("1.0.0", "2.0.0", True, admin_login)


# -- memgov revision ----------------------------------------------------------------


@pytest.fixture
def restores_logging() -> Iterator[None]:
    """The env.py of `alembic init` calls logging.config.fileConfig, which disables every
    logger that exists already (memgov_pg's too) and replaces the root's handlers: the
    tests that run it in this process put logging back as it was for the tests after them."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    loggers = {n: lg.disabled for n, lg in logging.root.manager.loggerDict.items() if isinstance(lg, logging.Logger)}
    yield
    root.handlers[:] = handlers
    root.setLevel(level)
    for name, disabled in loggers.items():
        logging.getLogger(name).disabled = disabled


def host_project(tmp_path: Path, url: str = "postgresql+psycopg://") -> Path:
    """`alembic init`, with memgov's branch in version_locations (path_separator = space)."""
    root = tmp_path / "host"
    root.mkdir()
    ini = root / "alembic.ini"
    config = Config(str(ini))
    command.init(config, str(root / "migrations"))
    text = ini.read_text()
    text = text.replace("path_separator = os", "path_separator = space")
    text = text.replace(
        "# version_locations = %(here)s/bar:%(here)s/bat:%(here)s/alembic/versions",
        f"version_locations = %(here)s/migrations/versions {version_location()}",
    )
    text = text.replace("sqlalchemy.url = driver://user:pass@localhost/dbname", f"sqlalchemy.url = {url}")
    ini.write_text(text)
    return root


def load_module(path: Path) -> Any:
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_revision_writes_a_revision_that_embeds_the_policy(tmp_path, empty_dsn, restores_logging):
    url = sa.engine.make_url("postgresql+psycopg://")
    params = psycopg.conninfo.conninfo_to_dict(empty_dsn)
    url = url.set(host=params.get("host"), port=int(params["port"]) if params.get("port") else None,
                  username=params.get("user"), password=params.get("password"), database=params["dbname"])  # fmt: skip
    root = host_project(tmp_path, url.render_as_string(hide_password=False).replace("%", "%%"))
    first = tmp_path / "first.yaml"
    first.write_text(policy_text("1.0.0", "allow") + '# a comment with """ and \\ stays verbatim\n')
    second = tmp_path / "second.yaml"
    second.write_text(policy_text("2.0.0", "require_approval"))

    out = run_memgov("revision", "--policy", str(first), "-m", "first policy", cwd=root)
    assert out.returncode == 0, out.stderr
    path1 = Path(out.stdout.strip())
    assert path1.parent == root / "migrations" / "versions"
    rev1 = load_module(path1)
    assert rev1.POLICY == first.read_text()
    assert rev1.down_revision is None
    assert rev1.depends_on == head_revision()  # memgov's head: its schema exists first

    out = run_memgov("revision", "--policy", str(second), "--config", str(root / "alembic.ini"), "--tenant", "acme")
    assert out.returncode == 0, out.stderr
    rev2 = load_module(Path(out.stdout.strip()))
    assert rev2.down_revision == rev1.revision
    assert (rev2.TENANT, rev2.POLICY_VERSION) == ("acme", "2.0.0")
    assert second.read_text() in Path(out.stdout.strip()).read_text()  # reviewable: the YAML as written

    # the revisions run: upgrade heads (memgov's branch first), then downgrade -1
    config = Config(str(root / "alembic.ini"))
    command.upgrade(config, "heads")
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        assert (active(conn), active(conn, "acme")) == ("1.0.0", "2.0.0")
        command.downgrade(config, "-1")
        assert (active(conn), active(conn, "acme")) == ("1.0.0", None)


@pytest.mark.slow
def test_revision_refuses_a_bad_policy_and_writes_nothing(tmp_path):
    root = host_project(tmp_path)
    bad = tmp_path / "bad.yaml"
    bad.write_text('version: "1.0.0"\nrules:\n  - {id: r, priority: 1, action: explode}\n')
    out = run_memgov("revision", "--policy", str(bad), cwd=root)
    assert out.returncode == 1
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "bad.yaml:3" in lines[0] and "Traceback" not in out.stderr, out.stderr
    assert list((root / "migrations" / "versions").glob("*.py")) == []

    out = run_memgov("revision", "--policy", str(tmp_path / "missing.yaml"), cwd=root)
    assert out.returncode == 1 and len(out.stderr.strip().splitlines()) == 1, out.stderr
    good = tmp_path / "good.yaml"
    good.write_text(policy_text("1.0.0"))
    out = run_memgov("revision", "--policy", str(good), "--config", str(tmp_path / "nope.ini"))
    assert_one_line_error(out, "no Alembic configuration")
    out = run_memgov("revision", "--policy", str(good), "--tenant", "Not A Tenant!", cwd=root)
    assert out.returncode != 0 and len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert list((root / "migrations" / "versions").glob("*.py")) == []


@pytest.mark.slow
def test_revisions_offline_through_psql(tmp_path, empty_dsn, restores_logging):
    root = host_project(tmp_path)
    policy = tmp_path / "p.yaml"
    policy.write_text(policy_text("1.0.0"))
    out = run_memgov("revision", "--policy", str(policy), "-m", 'say "hi" \\ there', cwd=root)
    assert out.returncode == 0, out.stderr
    assert load_module(Path(out.stdout.strip())).__doc__.startswith('say "hi" \\ there')
    buf = io.StringIO()
    config = Config(str(root / "alembic.ini"), output_buffer=buf)
    command.upgrade(config, "heads", sql=True)
    result = psql(empty_dsn, buf.getvalue())
    assert result.returncode == 0, result.stderr
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        assert active(conn) == "1.0.0"
        assert decide(conn)["action"] == "allow"


@pytest.mark.slow
def test_revision_without_memgovs_branch_in_the_host_has_no_depends_on(tmp_path):
    root = host_project(tmp_path)
    ini = root / "alembic.ini"
    ini.write_text(ini.read_text().replace(f" {version_location()}", ""))
    policy = tmp_path / "p.yaml"
    policy.write_text(policy_text("1.0.0"))
    out = run_memgov("revision", "--policy", str(policy), cwd=root)
    assert out.returncode == 0, out.stderr
    module = load_module(Path(out.stdout.strip()))
    assert (module.down_revision, module.depends_on) == (None, None)


@pytest.mark.parametrize(
    "function", ["memgov.undeploy_policy(text, text)", "memgov.activate_policy(text, text, boolean)"]
)
def test_the_activation_functions_pass_plpgsql_check(db_conn, plpgsql_check, function):
    errors = db_conn.execute(
        "SELECT level, message FROM plpgsql_check_function_tb(%s::regprocedure) WHERE level = 'error'", (function,)
    ).fetchall()
    assert errors == []

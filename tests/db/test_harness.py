"""The test harness itself: a pg_cron-enabled server and a fresh database per module."""

from __future__ import annotations

import psycopg

from memgov_pg.migrate import current_revision, head_revision


def test_module_database_is_migrated_to_head(memgov_dsn):
    assert current_revision(memgov_dsn) == head_revision()


def test_module_database_is_a_copy_and_copies_are_isolated(db_conn, memgov_server, memgov_template):
    name = db_conn.execute("SELECT current_database()").fetchone()[0]
    assert name != memgov_template
    db_conn.execute("CREATE TABLE public.harness_probe (x int)")
    other = f"{name}_sibling"
    sibling_dsn = memgov_server.create_database(other, template=memgov_template)
    try:
        with psycopg.connect(sibling_dsn) as sibling:
            found = sibling.execute("SELECT to_regclass('public.harness_probe')").fetchone()[0]
            assert found is None
            assert sibling.execute("SELECT to_regclass('memgov.decision_log')").fetchone()[0]
    finally:
        memgov_server.drop_database(other)


def test_server_runs_pg_cron_with_background_workers(db_conn, memgov_server, requires_pg_cron):
    settings = dict(
        db_conn.execute(
            "SELECT name, setting FROM pg_settings"
            " WHERE name IN ('shared_preload_libraries', 'cron.database_name',"
            " 'cron.use_background_workers')"
        ).fetchall()
    )
    assert "pg_cron" in settings["shared_preload_libraries"]
    if memgov_server.kind == "local":
        assert settings["cron.database_name"] == "postgres"
        assert settings["cron.use_background_workers"] == "on"

"""A pytest plugin: real PostgreSQL 15 with pg_cron for tests of memgov and of
the applications that use it.

Load it with ``pytest_plugins = ["memgov_pg.testing"]`` in a conftest.py, or
``pytest -p memgov_pg.testing``. Where the server comes from:

* default: one throw-away cluster per test session, started from the machine's
  binaries on a free port (as an unprivileged OS user when running as root),
  with ``shared_preload_libraries = 'pg_cron'``;
* ``MEMGOV_TEST_DSN``: an existing server (a superuser DSN); tests that need
  pg_cron are skipped when that server has not loaded it;
* ``MEMGOV_TEST_DOCKER=1``: a testcontainers PostgreSQL built from
  ``docker/Dockerfile`` (shipped in the wheel; pg_cron included); skipped with a reason when no Docker
  engine answers.

A template database is migrated once per session (Alembic, to head) and every
test module gets a fresh copy via ``CREATE DATABASE ... TEMPLATE``.

Fixtures: ``memgov_server``, ``memgov_template``, ``memgov_dsn`` (a fresh
migrated database per module), ``db_conn`` (an autocommit psycopg connection to
it, per test), ``empty_dsn`` (a fresh empty database per test).
"""

from __future__ import annotations

import itertools
import os
import re
import shutil
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import conninfo, sql

from .cluster import LocalCluster, free_port
from .db import connect


@dataclass
class Server:
    """A PostgreSQL server the tests may create databases on, as a superuser."""

    admin_dsn: str
    has_pg_cron: bool
    kind: str
    _stop: list[Any] = field(default_factory=list)

    def dsn(self, dbname: str) -> str:
        """The superuser DSN of database ``dbname`` on this server."""
        params = conninfo.conninfo_to_dict(self.admin_dsn)
        params["dbname"] = dbname
        return conninfo.make_conninfo(**params)  # type: ignore[arg-type]

    def create_database(self, name: str, template: str | None = None) -> str:
        """Create database ``name`` (a copy of ``template`` when given); return its DSN."""
        stmt = sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name))
        if template:
            stmt = sql.SQL("{} TEMPLATE {}").format(stmt, sql.Identifier(template))
        deadline = time.monotonic() + 120
        while True:
            try:
                with connect(self.admin_dsn, autocommit=True) as conn:
                    conn.execute(stmt)
                return self.dsn(name)
            except psycopg.errors.ObjectInUse:
                # the template's last sessions are still exiting: PostgreSQL waits 5 s for them,
                # which a loaded machine may exceed
                if template is None or time.monotonic() > deadline:
                    raise

    def drop_database(self, name: str) -> None:
        """Drop database ``name`` if it exists, disconnecting its sessions (``WITH (FORCE)``)."""
        with connect(self.admin_dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))

    def close(self) -> None:
        """Stop what was started for this server (the cluster, the container), last first."""
        for stop in reversed(self._stop):
            stop()


def _probe_pg_cron(admin_dsn: str) -> bool:
    with connect(admin_dsn, autocommit=True) as conn:
        loaded = conn.execute("SELECT current_setting('shared_preload_libraries')").fetchone()
        if not loaded or "pg_cron" not in loaded[0]:
            return False
        conn.execute("CREATE EXTENSION IF NOT EXISTS pg_cron")
    return True


def _local_server() -> Server:
    base = Path(tempfile.mkdtemp(prefix="memgov-test-"))
    cluster = LocalCluster(base, free_port(), durable=False)
    cluster.init()
    cluster.start_on_a_free_port()
    cluster.bootstrap()

    def stop() -> None:
        cluster.stop()
        shutil.rmtree(base, ignore_errors=True)

    return Server(cluster.dsn("postgres"), has_pg_cron=True, kind="local", _stop=[stop])


def _docker_server() -> Server:
    try:
        from testcontainers.core.image import DockerImage
        from testcontainers.postgres import PostgresContainer

        import docker

        docker.from_env().ping()
    except Exception as exc:  # no client library, no engine, no permission
        pytest.skip(f"MEMGOV_TEST_DOCKER=1 but no Docker engine answers: {exc}")
    from .resources import docker_dir

    # the build context is package data of the wheel (memgov_pg/docker), or docker/ of a checkout
    image = DockerImage(path=str(docker_dir()), tag="memgov-pg-test:15")
    image.build()
    container = PostgresContainer(str(image), username="postgres", password="postgres", dbname="postgres")
    container.with_command(
        "postgres -c shared_preload_libraries=pg_cron -c cron.database_name=postgres "
        "-c cron.use_background_workers=on -c max_worker_processes=32"
    )
    container.start()
    url = container.get_connection_url().replace("postgresql+psycopg2://", "postgresql://")
    return Server(url, has_pg_cron=_probe_pg_cron(url), kind="docker", _stop=[container.stop])


@pytest.fixture(scope="session")
def memgov_server() -> Iterator[Server]:
    """The PostgreSQL server of this test session."""
    if dsn := os.environ.get("MEMGOV_TEST_DSN"):
        server = Server(dsn, has_pg_cron=_probe_pg_cron(dsn), kind="external")
    elif os.environ.get("MEMGOV_TEST_DOCKER") == "1":
        server = _docker_server()
    else:
        server = _local_server()
    try:
        yield server
    finally:
        server.close()


_counter = itertools.count()


def _unique(prefix: str, hint: str = "") -> str:
    tail = re.sub(r"[^a-z0-9]+", "_", hint.lower()).strip("_")[-30:]
    return f"{prefix}_{os.getpid()}_{next(_counter)}_{tail}".rstrip("_")


@pytest.fixture(scope="session")
def memgov_template(memgov_server: Server) -> Iterator[str]:
    """Name of a database migrated to head, used as the template of every test database."""
    from .migrate import upgrade

    name = _unique("memgov_template")
    upgrade(memgov_server.create_database(name))
    try:
        yield name
    finally:
        memgov_server.drop_database(name)


@pytest.fixture(scope="module")
def memgov_dsn(memgov_server: Server, memgov_template: str, request: pytest.FixtureRequest) -> Iterator[str]:
    """DSN (superuser) of a fresh migrated database for this test module."""
    name = _unique("memgov_test", request.module.__name__.rsplit(".", 1)[-1])
    dsn = memgov_server.create_database(name, template=memgov_template)
    try:
        yield dsn
    finally:
        memgov_server.drop_database(name)


@pytest.fixture
def db_conn(memgov_dsn: str) -> Iterator[psycopg.Connection[Any]]:
    """An autocommit superuser connection to this module's migrated database."""
    with psycopg.connect(memgov_dsn, autocommit=True) as conn:
        yield conn


@pytest.fixture
def empty_dsn(memgov_server: Server, request: pytest.FixtureRequest) -> Iterator[str]:
    """DSN of a fresh empty database (no memgov schema) for this test."""
    name = _unique("memgov_empty", request.node.name)
    dsn = memgov_server.create_database(name)
    try:
        yield dsn
    finally:
        memgov_server.drop_database(name)


@pytest.fixture
def requires_pg_cron(memgov_server: Server) -> None:
    """Skip the test unless the test server has loaded pg_cron."""
    if not memgov_server.has_pg_cron:
        pytest.skip("the test server has not loaded pg_cron (shared_preload_libraries)")

"""`memgov migrate --wait SECONDS`: a server that starts listening later (a container still
starting) is waited for, within the bound; one that answers is never waited for."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from memgov_pg.cluster import LocalCluster, free_port
from memgov_pg.migrate import current_revision, head_revision
from tests.cli_helpers import assert_one_line_error, run_memgov
from tests.net_helpers import refused_port


@pytest.fixture
def stopped_cluster():
    """A cluster that exists (initdb has run) but is not started: nothing listens on its port."""
    base = Path(tempfile.mkdtemp(prefix="memgov-wait-"))
    cluster = LocalCluster(base, free_port(), durable=False)
    cluster.init()
    try:
        yield cluster
    finally:
        cluster.stop()
        shutil.rmtree(base, ignore_errors=True)


@pytest.mark.slow
def test_migrate_waits_for_a_server_that_starts_listening_later(stopped_cluster):
    dsn = stopped_cluster.dsn("postgres")
    env = {k: v for k, v in os.environ.items() if k not in ("MEMGOV_DSN", "MEMGOV_HOME")}
    migrate = subprocess.Popen(
        [sys.executable, "-m", "memgov_pg.cli", "-v", "migrate", "--wait", "600", "--dsn", dsn],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        # the event to start on: it has found nothing listening and says it waits
        assert migrate.stderr is not None
        first = migrate.stderr.readline()
        assert "waiting up to 600 s for 127.0.0.1:" in first, first
        stopped_cluster.start()
        out, err = migrate.communicate(timeout=600)
    finally:
        if migrate.poll() is None:
            migrate.kill()
            migrate.wait()
    assert migrate.returncode == 0, err
    assert "memgov schema upgraded from nothing to" in out
    assert current_revision(dsn) == head_revision()


@pytest.mark.slow
def test_the_wait_is_bounded_and_ends_in_the_connection_error():
    with refused_port() as port:
        result = run_memgov("migrate", "--wait", "1", "--dsn", f"postgresql://postgres@127.0.0.1:{port}/postgres")
    assert_one_line_error(result, "cannot connect to 127.0.0.1:", "Connection refused", "(waited 1 s)")


@pytest.mark.slow
def test_a_server_that_answers_is_not_waited_for(memgov_server):
    # it refuses the login (no such database): --wait must not turn that into a wait of
    # ten minutes, which the helper's timeout would stop as a failure
    result = run_memgov("migrate", "--wait", "600", "--dsn", memgov_server.dsn("no_such_database"), timeout=120)
    assert_one_line_error(result, "no_such_database")
    assert "waited" not in result.stderr


@pytest.mark.slow
def test_a_negative_wait_is_a_usage_error():
    result = run_memgov("migrate", "--wait", "-1", "--dsn", "postgresql://postgres@127.0.0.1:1/postgres")
    assert result.returncode == 2
    assert "Traceback" not in result.stderr

"""The Docker image of docker/ (used by MEMGOV_TEST_DOCKER=1 and docker-compose.yml)."""

from __future__ import annotations

import os

import pytest


@pytest.mark.docker
@pytest.mark.skipif(
    os.environ.get("MEMGOV_TEST_DOCKER") != "1", reason="set MEMGOV_TEST_DOCKER=1 to test the Docker image"
)
def test_docker_server_has_pg_cron(memgov_server):
    assert memgov_server.kind == "docker"
    assert memgov_server.has_pg_cron

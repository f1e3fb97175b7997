"""The Docker image of docker/ and docker-compose.yml: checked statically always, run when an engine answers."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests import yaml_text

REPO = Path(__file__).resolve().parents[2]


def _compose() -> dict:
    return yaml_text.safe_load((REPO / "docker-compose.yml").read_text(encoding="utf-8"))


def test_compose_database_has_pg_cron_and_a_healthcheck():
    db = _compose()["services"]["postgres"]
    assert db["build"] == "./docker"
    args = " ".join(db["command"])
    assert "shared_preload_libraries=pg_cron" in args
    assert f"cron.database_name={db['environment']['POSTGRES_DB']}" in args
    check = db["healthcheck"]["test"]
    assert check[:2] == ["CMD", "pg_isready"], check
    # over TCP: the unix socket answers during the image's init-only server, which has no port
    assert check[check.index("-h") + 1] == "127.0.0.1", check


def test_database_image_creates_pg_cron_at_init():
    dockerfile = (REPO / "docker" / "Dockerfile").read_text(encoding="utf-8")
    assert "postgresql-15-cron" in dockerfile
    assert "shared_preload_libraries=pg_cron" in dockerfile
    assert "/docker-entrypoint-initdb.d/" in dockerfile
    init = (REPO / "docker" / "initdb" / "10-pg-cron.sh").read_text(encoding="utf-8")
    assert "SHOW cron.database_name" in init
    assert "CREATE EXTENSION IF NOT EXISTS pg_cron" in init


def test_compose_one_shot_service_waits_for_health_then_migrates_deploys_schedules():
    services = _compose()["services"]
    app = services["memgov"]
    assert app["depends_on"]["postgres"]["condition"] == "service_healthy"
    assert app["build"] == "."
    assert app["restart"] == "no"
    assert "@postgres:5432/" in app["environment"]["MEMGOV_DSN"]
    script = (REPO / "docker" / "memgov-init.sh").read_text(encoding="utf-8").splitlines()
    steps = [line.split()[:2] for line in script if line.startswith("memgov ")]
    assert steps == [["memgov", "migrate"], ["memgov", "deploy"], ["memgov", "retention"]]
    # the first connection waits, bounded, for a server that is not listening yet
    (migrate,) = [line.split() for line in script if line.startswith("memgov migrate")]
    assert migrate[2] == "--wait" and migrate[3] == '"${MEMGOV_WAIT:-60}"', migrate
    dockerfile = (REPO / "Dockerfile").read_text(encoding="utf-8")
    assert "pip install" in dockerfile and "memgov-init" in dockerfile


def test_dockerignore_keeps_local_state_out_and_what_the_image_copies_in():
    ignored = {
        line.strip() for line in (REPO / ".dockerignore").read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.startswith("#")
    }  # fmt: skip
    assert {".git", ".venv", ".memgov"} <= ignored
    copied = [
        source
        for line in (REPO / "Dockerfile").read_text(encoding="utf-8").splitlines()
        if line.startswith("COPY ")
        for source in line.split()[1:-1]
    ]
    assert copied, "the Dockerfile copies nothing?"
    for source in copied:
        assert (REPO / source).exists(), source
        assert source.split("/")[0] not in ignored, f"{source} is copied but .dockerignore excludes it"


@pytest.mark.docker
@pytest.mark.skipif(
    os.environ.get("MEMGOV_TEST_DOCKER") != "1", reason="no Docker engine here: set MEMGOV_TEST_DOCKER=1 where one runs"
)
def test_docker_server_has_pg_cron(memgov_server):
    assert memgov_server.kind == "docker"
    assert memgov_server.has_pg_cron

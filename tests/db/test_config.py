"""Which database a command reaches: --dsn > MEMGOV_DSN > libpq's PG* variables and service files;
`python -m memgov_pg`; logging with -v / --quiet."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from psycopg import conninfo

from memgov_pg.cli.dsn import resolve_dsn
from tests.cli_helpers import run_memgov

PG_VARIABLES = ("PGHOST", "PGHOSTADDR", "PGPORT", "PGDATABASE", "PGUSER", "PGPASSWORD", "PGSERVICE", "PGSERVICEFILE")


def libpq_env(dsn: str) -> dict[str, str]:
    """PGHOST/PGPORT/PGUSER/PGDATABASE (and PGPASSWORD) naming the database of ``dsn``."""
    params = conninfo.conninfo_to_dict(dsn)
    names = {"host": "PGHOST", "port": "PGPORT", "user": "PGUSER", "dbname": "PGDATABASE", "password": "PGPASSWORD"}
    return {env: str(params[key]) for key, env in names.items() if params.get(key)}


def database_of(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, result.stderr
    return str(json.loads(result.stdout)["database"])


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (*PG_VARIABLES, "MEMGOV_DSN"):
        monkeypatch.delenv(name, raising=False)


@pytest.mark.slow
def test_pg_variables_reach_the_server(memgov_dsn, clean_env):
    result = run_memgov("status", "--json", env=libpq_env(memgov_dsn))
    assert database_of(result) == conninfo.conninfo_to_dict(memgov_dsn)["dbname"]


@pytest.mark.slow
def test_service_file_reaches_the_server(memgov_dsn, clean_env, tmp_path):
    params = conninfo.conninfo_to_dict(memgov_dsn)
    lines = ["[memgov-test]"] + [f"{key}={value}" for key, value in params.items() if value]
    service_file = tmp_path / "pg_service.conf"
    service_file.write_text("\n".join(lines) + "\n")
    env = {"PGSERVICEFILE": str(service_file), "PGSERVICE": "memgov-test"}
    assert database_of(run_memgov("status", "--json", env=env)) == params["dbname"]


@pytest.mark.slow
def test_dsn_beats_memgov_dsn_beats_pg_variables(memgov_dsn, empty_dsn, clean_env):
    governed = conninfo.conninfo_to_dict(memgov_dsn)["dbname"]
    other = conninfo.conninfo_to_dict(empty_dsn)["dbname"]
    env = libpq_env(empty_dsn)
    assert database_of(run_memgov("status", "--json", env=env)) == other
    assert database_of(run_memgov("status", "--json", env=env | {"MEMGOV_DSN": memgov_dsn})) == governed
    both = env | {"MEMGOV_DSN": empty_dsn}
    assert database_of(run_memgov("status", "--json", "--dsn", memgov_dsn, env=both)) == governed


def test_resolve_dsn_order(clean_env, monkeypatch):
    assert resolve_dsn("dbname=a") == "dbname=a"
    monkeypatch.setenv("MEMGOV_DSN", "dbname=b")
    assert resolve_dsn(None) == "dbname=b"
    monkeypatch.delenv("MEMGOV_DSN")
    monkeypatch.setenv("PGDATABASE", "c")
    assert resolve_dsn(None) == ""  # libpq resolves it


@pytest.mark.slow
def test_python_m_memgov_pg(memgov_dsn):
    env = {k: v for k, v in os.environ.items() if k != "MEMGOV_DSN"}
    result = subprocess.run(
        [sys.executable, "-m", "memgov_pg", "status", "--json", "--dsn", memgov_dsn],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    assert database_of(result) == conninfo.conninfo_to_dict(memgov_dsn)["dbname"]


@pytest.mark.slow
def test_verbose_logs_the_connection_without_password(memgov_dsn):
    result = run_memgov("-v", "status", "--dsn", memgov_dsn)
    assert result.returncode == 0, result.stderr
    dbname = conninfo.conninfo_to_dict(memgov_dsn)["dbname"]
    assert any(line.startswith("memgov: INFO: connected to ") and dbname in line for line in result.stderr.splitlines())
    password = conninfo.conninfo_to_dict(memgov_dsn).get("password")
    if password:
        assert password not in result.stderr
    assert "DEBUG" not in result.stderr
    debug = run_memgov("-vv", "status", "--dsn", memgov_dsn)
    assert "memgov: DEBUG: database from --dsn" in debug.stderr
    quiet = run_memgov("--quiet", "status", "--dsn", memgov_dsn)
    assert quiet.returncode == 0
    assert quiet.stderr == ""
    plain = run_memgov("status", "--dsn", memgov_dsn)
    assert "INFO" not in plain.stderr

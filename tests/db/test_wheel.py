"""The built wheel carries the SQL, the Alembic scripts, the shipped policies, the schema and the
licence, and works on its own: installed into a fresh venv, run from outside the repository, it
migrates, deploys the shipped default policy, decides an item, sweeps and passes `status --check`."""

from __future__ import annotations

import json
import subprocess
import sys
import venv
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest

from memgov_pg import __version__
from memgov_pg.migrate import current_revision, head_revision

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    build = subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--outdir", str(out), str(REPO)],
        capture_output=True,
        text=True,
    )
    assert build.returncode == 0, build.stdout[-3000:] + build.stderr[-3000:]
    (found,) = out.glob("memgov_pg-*.whl")
    return found


def test_wheel_contains_sql_and_migrations(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    for path in sorted((REPO / "sql").glob("*.sql")):
        assert f"memgov_pg/sql/{path.name}" in names
    for path in sorted((REPO / "alembic").rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            assert f"memgov_pg/alembic/{path.relative_to(REPO / 'alembic')}" in names


def test_wheel_carries_policies_schema_licence_and_typing(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    for path in sorted((REPO / "policies").rglob("*")):
        if path.is_file():
            assert f"memgov_pg/policies/{path.relative_to(REPO / 'policies')}" in names
    assert "memgov_pg/py.typed" in names
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names), sorted(names)


def test_wheel_metadata_has_one_version_and_runtime_dependencies_only(wheel):
    with zipfile.ZipFile(wheel) as zf:
        (meta_name,) = [n for n in zf.namelist() if n.endswith(".dist-info/METADATA")]
        meta = Parser().parsestr(zf.read(meta_name).decode())
    assert meta["Version"] == __version__
    assert meta["License-Expression"] == "Apache-2.0"
    runtime = [r for r in meta.get_all("Requires-Dist") or [] if "extra ==" not in r]
    names = sorted(r.split(">")[0].split("[")[0].split("=")[0].strip().lower() for r in runtime)
    # what runtime code imports, and nothing that only tests use
    assert names == ["alembic", "click", "psycopg", "psycopg-pool", "pyyaml", "rich", "sqlalchemy"], names


@pytest.fixture(scope="module")
def installed(wheel, tmp_path_factory) -> Path:
    """A fresh venv with only the wheel (and its dependencies) installed."""
    env_dir = tmp_path_factory.mktemp("venv")
    venv.EnvBuilder(with_pip=True).create(env_dir)
    pip = subprocess.run(
        [str(env_dir / "bin" / "python"), "-m", "pip", "install", "-q", str(wheel)],
        capture_output=True,
        text=True,
    )
    assert pip.returncode == 0, pip.stderr[-3000:]
    return env_dir


@pytest.mark.slow
def test_installed_wheel_migrates_deploys_evaluates_and_checks(installed, empty_dsn, tmp_path):
    # run from an empty directory, with no access to the checkout: nothing of it can be found
    workdir = tmp_path / "elsewhere"
    workdir.mkdir()

    def memgov(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(installed / "bin" / "memgov"), *args, "--dsn", empty_dsn],
            capture_output=True,
            text=True,
            cwd=workdir,
            env={"PATH": "/usr/bin:/bin", "HOME": str(workdir)},
        )

    result = memgov("migrate")
    assert result.returncode == 0, result.stderr
    assert current_revision(empty_dsn) == head_revision()

    result = memgov("deploy", "default")
    assert result.returncode == 0, result.stderr
    assert "1.0.0" in result.stdout, result.stdout

    item = {"org_id": "acme", "category": "user_fact", "fact_text": "api_key = sk-live-0123456789abcdefABCDEF",
            "source": "agent_extracted", "confidence": 0.9}  # fmt: skip
    result = memgov("evaluate", "--json", "--item", json.dumps(item))
    assert result.returncode == 0, result.stderr
    decision = json.loads(result.stdout)
    assert decision["action"] == "deny", decision
    assert "block-secrets" in decision["matched_rule_ids"], decision

    result = memgov("status", "--check")  # nothing has swept this database, nor will
    assert result.returncode == 1, result.stdout + result.stderr
    assert result.stdout.startswith("retention has never run and no pg_cron job runs it"), result.stdout
    result = memgov("retention", "run")
    assert result.returncode == 0, result.stderr
    result = memgov("status", "--check")
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith("healthy: "), result.stdout

    located = subprocess.run(
        [str(installed / "bin" / "python"), "-c", "import memgov_pg.resources as r; print(r.sql_dir())"],
        capture_output=True,
        text=True,
        cwd=workdir,
    )
    assert located.stdout.strip().startswith(str(installed)), located.stdout

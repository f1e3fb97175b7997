"""The built wheel carries the SQL and the Alembic scripts, and migrates on its own."""

from __future__ import annotations

import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

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


@pytest.mark.slow
def test_installed_wheel_migrates_a_database(wheel, empty_dsn, tmp_path):
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    pip = subprocess.run(
        [str(env_dir / "bin" / "python"), "-m", "pip", "install", "-q", str(wheel)],
        capture_output=True,
        text=True,
    )
    assert pip.returncode == 0, pip.stderr[-3000:]
    # run from an empty directory, so nothing of the checkout can be found
    workdir = tmp_path / "elsewhere"
    workdir.mkdir()
    result = subprocess.run(
        [str(env_dir / "bin" / "memgov"), "migrate", "--dsn", empty_dsn],
        capture_output=True,
        text=True,
        cwd=workdir,
        env={"PATH": "/usr/bin:/bin"},
    )
    assert result.returncode == 0, result.stderr
    assert current_revision(empty_dsn) == head_revision()
    located = subprocess.run(
        [str(env_dir / "bin" / "python"), "-c", "import memgov_pg.resources as r; print(r.sql_dir())"],
        capture_output=True,
        text=True,
        cwd=workdir,
    )
    assert located.stdout.strip().startswith(str(env_dir)), located.stdout

"""The wheel, built and installed by the commands of the README's "Install into your app", in a
fresh venv: it carries the SQL, the Alembic scripts, the shipped policies and their tests, the
schema and the licence, and works on its own: run from outside the repository, it migrates,
deploys and tests the shipped default policy, schedules retention, decides an item, passes
`status --check` and runs the README's Python tour."""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import venv
import zipfile
from dataclasses import dataclass
from email.parser import Parser
from pathlib import Path

import pytest

from memgov_pg import __version__
from memgov_pg.migrate import current_revision, head_revision
from tests import yaml_text

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"

#: the README's install commands, which this module runs as they are written
INSTALL = [
    "cd /path/to/memgov-pg",
    "python3 -m pip wheel --no-deps --wheel-dir dist .",
    "cd /path/to/your-app",
    "pip install /path/to/memgov-pg/dist/memgov_pg-*.whl",
]
SET_UP = [
    "export MEMGOV_DSN=postgresql://postgres@localhost:5432/app",
    "memgov migrate",
    "memgov deploy default",
    "memgov test default",
    "memgov retention schedule",
]
EXAMPLE_DSN = "postgresql://postgres@localhost:5432/app"
#: what a copy of the checkout leaves out: local state, caches, builds
LOCAL = (".git", ".venv", ".memgov", "dist", "build", "__pycache__", "*.egg-info", ".*_cache", ".hypothesis")


def readme_block(section: str, language: str) -> str:
    """The first ``language`` code block of the README's ``## section``."""
    text = README.read_text(encoding="utf-8").split(f"\n## {section}\n", 1)[1].split("\n## ", 1)[0]
    return text.split(f"```{language}\n", 1)[1].split("```", 1)[0]


@dataclass(frozen=True)
class Installed:
    """Where the README's commands built and installed the wheel."""

    clone: Path
    app: Path
    venv: Path
    wheel: Path

    def bash(self, lines: list[str], dsn: str | None = None) -> subprocess.CompletedProcess[str]:
        """README lines as one bash script, in the app's directory with its venv first on the PATH."""
        script = "\n".join(["set -euo pipefail", f"cd {self.app}", *lines])
        script = script.replace("/path/to/memgov-pg", str(self.clone)).replace("/path/to/your-app", str(self.app))
        if dsn is not None:
            script = script.replace(EXAMPLE_DSN, shlex.quote(dsn))
        env = {"PATH": f"{self.venv / 'bin'}:/usr/bin:/bin", "HOME": str(self.app), "VIRTUAL_ENV": str(self.venv)}
        return subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=env, cwd=self.app)


def test_the_readme_shows_the_commands_this_module_runs():
    assert readme_block("Install into your app", "sh").splitlines() == INSTALL + SET_UP


#: the tests of the built wheel (make test-fast leaves them out)
BUILDS_THE_WHEEL = pytest.mark.slow(reason="builds the wheel: pip in a new venv, a process and tens of seconds")


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Installed:
    """A copy of the checkout, an empty app directory and a fresh venv (the app's), then the
    README's install commands: the wheel built in the copy, installed into the venv."""
    base = tmp_path_factory.mktemp("install")
    clone = base / "memgov-pg"
    shutil.copytree(REPO, clone, symlinks=True, ignore=shutil.ignore_patterns(*LOCAL))
    app = base / "your-app"
    app.mkdir()
    venv.EnvBuilder(with_pip=True).create(base / "venv")
    done = Installed(clone, app, base / "venv", clone)
    result = done.bash(INSTALL)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    (wheel,) = (clone / "dist").glob("memgov_pg-*.whl")
    return Installed(clone, app, base / "venv", wheel)


@pytest.fixture(scope="module")
def wheel(installed) -> Path:
    return installed.wheel


@BUILDS_THE_WHEEL
def test_wheel_contains_sql_and_migrations(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    for path in sorted((REPO / "sql").rglob("*.sql")):  # the named queries too (sql/queries/)
        assert f"memgov_pg/sql/{path.relative_to(REPO / 'sql').as_posix()}" in names
    for path in sorted((REPO / "alembic").rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            assert f"memgov_pg/alembic/{path.relative_to(REPO / 'alembic')}" in names


@BUILDS_THE_WHEEL
def test_wheel_carries_policies_schema_licence_and_typing(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    for path in sorted((REPO / "policies").rglob("*")):
        if path.is_file():
            assert f"memgov_pg/policies/{path.relative_to(REPO / 'policies')}" in names
    assert "memgov_pg/py.typed" in names
    assert "memgov_pg/deploy/postgres_exporter/queries.yaml" in names  # docs/monitoring.md
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names), sorted(names)


@BUILDS_THE_WHEEL
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


@pytest.mark.slow
def test_installed_wheel_migrates_deploys_tests_evaluates_and_checks(installed, empty_dsn, requires_pg_cron):
    # the README's commands, from the app's directory, which holds nothing of the checkout
    result = installed.bash(SET_UP, dsn=empty_dsn)
    try:
        assert result.returncode == 0, result.stdout + result.stderr
        assert current_revision(empty_dsn) == head_revision()
        assert "deployed 1.0.0" in result.stdout, result.stdout
        cases = len(_cases("default"))
        assert f"default: {cases} passed, 0 failed" in result.stdout, result.stdout

        def memgov(*args: str) -> subprocess.CompletedProcess[str]:
            return installed.bash([shlex.join(["memgov", *args, "--dsn", empty_dsn])])

        item = {"org_id": "acme", "category": "user_fact", "fact_text": "api_key = sk-live-0123456789abcdefABCDEF",
                "source": "agent_extracted", "confidence": 0.9}  # fmt: skip
        result = memgov("evaluate", "--json", "--item", json.dumps(item))
        assert result.returncode == 0, result.stderr
        decision = json.loads(result.stdout)
        assert decision["action"] == "deny", decision
        assert "block-secrets" in decision["matched_rule_ids"], decision

        result = memgov("status", "--check")
        assert result.returncode == 0, result.stdout + result.stderr
        assert result.stdout.startswith("healthy: "), result.stdout

        # the README's Python tour, as it is written
        tour = installed.bash([f"export MEMGOV_DSN={shlex.quote(empty_dsn)}", "python - <<'TOUR'",
                               readme_block("A Python tour", "python"), "TOUR"])  # fmt: skip
        assert tour.returncode == 0, tour.stderr
        assert tour.stdout.splitlines() == ["allow", "['block-secrets']", "['Prefers green tea']"]

        located = installed.bash(["python -c 'import memgov_pg.resources as r; print(r.sql_dir())'"])
        assert located.stdout.strip().startswith(str(installed.venv)), located.stdout
    finally:
        installed.bash([shlex.join(["memgov", "retention", "unschedule", "--dsn", empty_dsn])])


def _cases(name: str) -> list[object]:
    return list(yaml_text.safe_load((REPO / "policies" / f"{name}.test.yaml").read_text())["cases"])

"""scripts/setup installs what a make target needs: `make demo` never needs plpgsql_check,
`make test` does, and an unprivileged user without it still gets a working setup."""

from __future__ import annotations

import os
import pwd
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from memgov_pg.cluster import _pkglibdir, find_bindir

REPO = Path(__file__).resolve().parents[2]
SETUP = REPO / "scripts" / "setup"


def _postgres(root: Path, *, cron: bool = True, plpgsql_check: bool = False) -> Path:
    """A PostgreSQL 15 directory layout (bin/ and lib/) linking to this machine's own files,
    with pg_cron and plpgsql_check present or not; returns its bin/."""
    bindir, libdir = find_bindir(), _pkglibdir(find_bindir())
    (root / "bin").mkdir(parents=True)
    (root / "lib").mkdir()
    for tool in ("initdb", "pg_ctl", "postgres"):
        (root / "bin" / tool).symlink_to(bindir / tool)
    libraries = ["pg_cron.so"] * cron + ["plpgsql_check.so"] * plpgsql_check
    for library in libraries:
        if not (libdir / library).is_file():
            pytest.skip(f"{library} is not installed on this machine")
        (root / "lib" / library).symlink_to(libdir / library)
    return root / "bin"


EXPORTER = "prometheus-postgres-exporter"  # test only, and on PATH or not: see the test below


def _missing(target: str, bindir: Path, *, exporter: bool = False) -> list[str]:
    out = subprocess.run(
        [str(SETUP), "--missing", target],
        capture_output=True,
        text=True,
        env=dict(os.environ, MEMGOV_PG_BINDIR=str(bindir)),
    )
    assert out.returncode == 0, out.stderr
    return [p for p in out.stdout.split() if exporter or p != EXPORTER]


@pytest.mark.slow
def test_demo_needs_postgres_and_pg_cron_only(tmp_path):
    without_check = _postgres(tmp_path / "a")
    assert _missing("demo", without_check) == []
    assert _missing("test", without_check) == ["postgresql-15-plpgsql-check"]
    assert _missing("test", _postgres(tmp_path / "b", plpgsql_check=True)) == []
    no_cron = _postgres(tmp_path / "c", cron=False)
    assert _missing("demo", no_cron) == ["postgresql-15-cron"]
    assert _missing("test", no_cron) == ["postgresql-15-cron", "postgresql-15-plpgsql-check"]
    nothing = tmp_path / "d" / "bin"
    assert _missing("demo", nothing)[:3] == ["postgresql-15", "postgresql-contrib", "postgresql-15-cron"]


@pytest.mark.slow
def test_test_wants_the_exporter_unless_it_is_on_path(tmp_path):
    bindir = _postgres(tmp_path / "a", plpgsql_check=True)
    assert _missing("demo", bindir, exporter=True) == []
    assert _missing("test", bindir, exporter=True) == ([] if shutil.which(EXPORTER) else [EXPORTER])


@pytest.mark.slow
def test_a_bad_target_is_a_usage_error():
    out = subprocess.run([str(SETUP), "--missing", "everything"], capture_output=True, text=True)
    assert out.returncode == 2
    assert "usage: scripts/setup" in out.stderr


def _recipe(target: str) -> list[str]:
    out = subprocess.run(["make", "-n", "-C", str(REPO), target], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return [line for line in out.stdout.splitlines() if not line.startswith("make")]


@pytest.mark.slow
def test_make_demo_sets_up_for_the_demo_and_make_test_for_the_tests():
    demo = _recipe("demo")
    assert demo[0] == "scripts/setup demo", demo
    assert not any("setup test" in line or "plpgsql" in line for line in demo), demo
    assert _recipe("test")[0] == "scripts/setup test"


@pytest.fixture
def unprivileged() -> Iterator[tuple[dict[str, object], Path]]:
    """Run as a user who is not root and has no password-less sudo: ``nobody`` when we are
    root, ourselves otherwise. Yields the subprocess arguments and a directory it owns."""
    if os.geteuid() == 0:
        user = pwd.getpwnam("nobody")
        extra: dict[str, object] = {"user": user.pw_uid, "group": user.pw_gid, "extra_groups": []}
    elif shutil.which("sudo") and subprocess.run(["sudo", "-n", "true"], capture_output=True).returncode == 0:
        pytest.skip("this user has password-less sudo: scripts/setup would install the packages")
    else:
        user, extra = pwd.getpwuid(os.geteuid()), {}
    base = Path(tempfile.mkdtemp(prefix="memgov-setup-"))
    base.chmod(0o755)
    try:
        yield extra, base
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _checkout(base: Path, owner: dict[str, object]) -> Path:
    """scripts/setup in a directory of its own, with a .venv that is already set up."""
    root = base / "checkout"
    (root / "scripts").mkdir(parents=True)
    shutil.copy2(SETUP, root / "scripts" / "setup")
    shutil.copy2(REPO / "pyproject.toml", root / "pyproject.toml")
    (root / ".venv" / "bin").mkdir(parents=True)
    (root / ".venv" / "bin" / "python").symlink_to(Path(sys.base_prefix) / "bin" / "python3")
    stamp = root / ".venv" / ".setup-stamp"
    stamp.touch()
    newer = (root / "pyproject.toml").stat().st_mtime + 10
    os.utime(stamp, (newer, newer))
    for path in [base, *base.rglob("*")]:
        if owner and not path.is_symlink():
            os.chown(path, int(str(owner["user"])), int(str(owner["group"])))
    assert (root / "scripts" / "setup").stat().st_mode & stat.S_IXUSR
    return root


@pytest.mark.slow
def test_an_unprivileged_user_without_plpgsql_check_can_set_up_the_demo_and_the_tests(unprivileged):
    extra, base = unprivileged
    root = _checkout(base, extra)
    without_check = _postgres(base / "pg")

    def setup(target: str, bindir: Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run(  # type: ignore[call-overload, no-any-return]
            [str(root / "scripts" / "setup"), target],
            capture_output=True,
            text=True,
            env={"PATH": "/usr/bin:/bin", "HOME": str(base), "MEMGOV_PG_BINDIR": str(bindir)},
            cwd=str(base),
            **extra,
        )

    demo = setup("demo", without_check)
    assert demo.returncode == 0, demo.stderr
    assert "plpgsql" not in demo.stdout + demo.stderr

    test = setup("test", without_check)
    assert test.returncode == 0, test.stderr
    assert "postgresql-15-plpgsql-check is not installed, and this user cannot install it" in test.stderr
    assert "will be skipped" in test.stderr

    no_cron = setup("demo", _postgres(base / "pg-no-cron", cron=False))
    assert no_cron.returncode == 1
    assert "install them as root (apt-get install postgresql-15-cron)" in no_cron.stderr

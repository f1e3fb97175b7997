"""Fixtures shared by the whole suite."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import psycopg
import pytest

from tests.kept_session import KeptSession

if TYPE_CHECKING:  # imported by pytest as a plugin below: importing it here first would skip its assert rewriting
    from memgov_pg.testing import Server

# memgov_pg.testing: the cluster and databases; tests.attack_helpers: the login roles
pytest_plugins = ["memgov_pg.testing", "tests.attack_helpers"]

PLPGSQL_CHECK_PACKAGE = "postgresql-15-plpgsql-check"


@pytest.fixture(scope="module")
def kept_session(memgov_dsn: str) -> Iterator[KeptSession]:
    """The superuser session this module's tests share while they leave it as opened (tests/kept_session.py)."""
    kept = KeptSession(memgov_dsn)
    try:
        yield kept
    finally:
        kept.close()


@pytest.fixture
def db_conn(kept_session: KeptSession) -> Iterator[psycopg.Connection[Any]]:
    """An autocommit superuser connection to this module's migrated database (memgov_pg.testing's
    fixture, but a session that the previous test left as it was opened is handed on)."""
    yield kept_session.take()
    kept_session.give_back()


def _can_install_packages() -> bool:
    """Whether `make test` (scripts/setup test) could install Debian packages here: root, or password-less sudo."""
    if os.geteuid() == 0:
        return True
    if shutil.which("sudo") is None:
        return False
    return subprocess.run(["sudo", "-n", "true"], capture_output=True).returncode == 0


@pytest.fixture
def plpgsql_check(memgov_server: Server, db_conn: psycopg.Connection[Any]) -> None:
    """plpgsql_check in this module's database, for the tests of PostgreSQL's static checker.

    Only `make test` needs the extension (Debian's postgresql-15-plpgsql-check): scripts/setup
    installs it as root or through password-less sudo. Where it could not (any other user),
    the test is skipped with the reason; where it could, its absence is a failure, so that
    CI (which runs `make test` as root) never skips these tests.
    """
    available = db_conn.execute("SELECT 1 FROM pg_catalog.pg_available_extensions WHERE name = 'plpgsql_check'")
    if available.fetchone() is None:
        if memgov_server.kind != "local":
            pytest.skip(f"the test server ({memgov_server.kind}) has no plpgsql_check: install {PLPGSQL_CHECK_PACKAGE} "
                        "there to run this test")  # fmt: skip
        if _can_install_packages():
            pytest.fail(f"plpgsql_check is not installed though this user can install it: run `make test` "
                        f"(scripts/setup test installs {PLPGSQL_CHECK_PACKAGE})")  # fmt: skip
        pytest.skip(f"{PLPGSQL_CHECK_PACKAGE} is not installed and this user cannot install it (not root, no "
                    "password-less sudo): install it as root to run this test")  # fmt: skip
    db_conn.execute("CREATE EXTENSION IF NOT EXISTS plpgsql_check")

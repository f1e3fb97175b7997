"""`memgov standby-logger setup` / `remove` on the suite's cluster (docs/operations.md, "Setting up the
standby logger"): what it creates, and what it refuses. A standby's reads through it:
tests/db/test_standby_reads.py.

The setup is a superuser's: an admin login is refused in one line. It will not hand the logger's
rights to a login that may do more (a writer), nor keep dblink where every role may call it (a
client could then use the connection memgov keeps open in its session); each refusal changes
nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg import conninfo

from tests.attack_helpers import Logins, assert_same, snapshot
from tests.cli_helpers import assert_one_line_error, run_memgov

pytestmark = pytest.mark.slow

LOGIN = "setup_standby_log"
PRIMARY = "host=127.0.0.1 port=5999 dbname=memgov"


@pytest.fixture
def su(db_conn: psycopg.Connection[Any]) -> Iterator[psycopg.Connection[Any]]:
    yield db_conn
    db_conn.execute("SELECT memgov.remove_standby_logger()")
    db_conn.execute("DROP EXTENSION IF EXISTS dblink")
    db_conn.execute("DROP SCHEMA IF EXISTS memgov_dblink")
    db_conn.execute(f"DROP ROLE IF EXISTS {LOGIN}")


def setup(dsn: str, *args: str) -> Any:
    return run_memgov("standby-logger", "setup", "--primary-dsn", PRIMARY, "--dsn", dsn, *args)


def test_setup_creates_the_logger_and_remove_drops_it(memgov_dsn: str, su: psycopg.Connection[Any]) -> None:
    done = setup(memgov_dsn, "--login", LOGIN)
    assert done.returncode == 0, done.stderr
    assert "127.0.0.1:5999/memgov" in done.stdout and "scram-sha-256" in done.stdout
    server = su.execute("SELECT srvoptions FROM pg_foreign_server WHERE srvname = 'memgov_primary'").fetchone()
    assert server is not None and sorted(server[0]) == ["dbname=memgov", "host=127.0.0.1", "port=5999"]
    # the login: a member of memgov_standby_logger alone, no attribute beyond LOGIN
    row = su.execute(
        "SELECT rolcanlogin, rolsuper OR rolcreaterole OR rolcreatedb OR rolbypassrls,"
        "       ARRAY(SELECT g.rolname FROM pg_auth_members m JOIN pg_roles g ON g.oid = m.roleid"
        "              WHERE m.member = r.oid)"
        "  FROM pg_roles r WHERE rolname = %s",
        (LOGIN,),
    ).fetchone()
    assert row == (True, False, ["memgov_standby_logger"])
    # dblink in its own schema, which only memgov_owner may use
    assert su.execute(
        "SELECT has_schema_privilege('memgov_writer', 'memgov_dblink', 'USAGE'),"
        "       has_schema_privilege('memgov_owner', 'memgov_dblink', 'USAGE')"
    ).fetchone() == (False, True)
    # run again: the password changes, nothing else
    again = setup(memgov_dsn, "--login", LOGIN)
    assert again.returncode == 0, again.stderr
    removed = run_memgov("standby-logger", "remove", "--dsn", memgov_dsn)
    assert removed.returncode == 0 and "removed" in removed.stdout
    assert su.execute("SELECT FROM pg_foreign_server WHERE srvname = 'memgov_primary'").fetchone() is None
    again = run_memgov("standby-logger", "remove", "--dsn", memgov_dsn)
    assert again.returncode == 0 and "no standby logger" in again.stdout


def test_an_admin_login_may_not_set_it_up(memgov_dsn: str, su: psycopg.Connection[Any], logins: Logins) -> None:
    before = snapshot(su)
    refused = setup(conninfo.make_conninfo(memgov_dsn, user=logins.admin), "--login", LOGIN)
    assert_one_line_error(refused, "superuser")
    # nor call the SQL function
    with psycopg.connect(conninfo.make_conninfo(memgov_dsn, user=logins.admin), autocommit=True) as admin:
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            admin.execute("SELECT memgov.setup_standby_logger('h', 1, 'd', %s, 'p')", (LOGIN,))
    assert_same(before, snapshot(su))
    assert su.execute("SELECT FROM pg_roles WHERE rolname = %s", (LOGIN,)).fetchone() is None


def test_a_login_that_may_do_more_is_not_made_the_logger(
    memgov_dsn: str, su: psycopg.Connection[Any], logins: Logins
) -> None:
    before = snapshot(su)
    refused = setup(memgov_dsn, "--login", logins.writer)
    assert_one_line_error(refused, "may do more than log standby reads", "[42501]")
    assert_same(before, snapshot(su))
    assert su.execute("SELECT FROM pg_foreign_server WHERE srvname = 'memgov_primary'").fetchone() is None


def test_dblink_every_role_may_call_is_refused(memgov_dsn: str, su: psycopg.Connection[Any]) -> None:
    su.execute("CREATE EXTENSION dblink SCHEMA public")  # as CREATE EXTENSION leaves it: PUBLIC may call it
    refused = setup(memgov_dsn, "--login", LOGIN)
    assert_one_line_error(refused, "every role may call it", "REVOKE EXECUTE ON ALL FUNCTIONS IN SCHEMA public")
    assert su.execute("SELECT FROM pg_foreign_server WHERE srvname = 'memgov_primary'").fetchone() is None
    su.execute("REVOKE EXECUTE ON ALL FUNCTIONS IN SCHEMA public FROM PUBLIC")
    done = setup(memgov_dsn, "--login", LOGIN)
    assert done.returncode == 0, done.stderr

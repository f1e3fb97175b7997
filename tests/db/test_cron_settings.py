"""memgov.cron_settings(): pg_cron's two superuser-only settings for memgov_admin, and nothing more.

The function runs as memgov_settings_reader, the one memgov role that holds
pg_read_all_settings. Attacked here by real logins (tests/attack_helpers.py): the client
roles may not call it nor become its owner; an admin login gets pg_cron's database and
cron.log_run from it and still reads no other superuser-only setting, cannot hand the
reader a function of its own nor replace this one, and cannot make the function read
anything else by shadowing what it calls. Every attack leaves memgov's tables, functions
and roles as they were.
"""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from tests.attack_helpers import Logins, refused, snapshot, unchanged

READER = "memgov_settings_reader"
#: superuser-only settings of PostgreSQL 15 that pg_read_all_settings would show
SECRET_SETTINGS = (
    "primary_conninfo",
    "ssl_passphrase_command",
    "data_directory",
    "hba_file",
    "shared_preload_libraries",
)


@pytest.fixture
def su(db_conn: psycopg.Connection[Any], logins: Logins) -> psycopg.Connection[Any]:
    """The superuser of the module's migrated database."""
    return db_conn


def cron_settings_seen_by_superuser(su: psycopg.Connection[Any]) -> tuple[Any, Any]:
    row = su.execute(
        "SELECT (SELECT setting FROM pg_settings WHERE name = 'cron.database_name'),"
        "       (SELECT setting FROM pg_settings WHERE name = 'cron.log_run')"
    ).fetchone()
    assert row is not None
    return row[0], row[1]


@pytest.mark.parametrize("role", ["writer", "reviewer", "both", "puppet", "nobody"])
def test_clients_cannot_read_pg_cron_s_settings_through_it(su, login, logins, role):
    conn = login(getattr(logins, role))
    with refused(su, "42501"):
        conn.execute("SELECT * FROM memgov.cron_settings()")


@pytest.mark.parametrize("role", ["writer", "reviewer", "admin", "nobody"])
@pytest.mark.parametrize(
    "statement",
    [
        f"SET ROLE {READER}",
        f"GRANT {READER} TO CURRENT_USER",
        f"GRANT pg_read_all_settings TO {READER}",  # no admin option: nobody but a superuser
        f"ALTER ROLE {READER} LOGIN",
        f"ALTER ROLE {READER} PASSWORD 'x'",
    ],
)
def test_no_login_can_become_the_reader_or_change_it(su, login, logins, role, statement):
    conn = login(getattr(logins, role))
    with refused(su, "42501"):
        conn.execute(statement)


def test_an_admin_gets_the_two_settings_and_no_other(su, login, logins):
    admin = login(logins.admin)
    with unchanged(su):
        row = admin.execute("SELECT cron_database, log_run, readable FROM memgov.cron_settings()").fetchone()
    assert row == (*cron_settings_seen_by_superuser(su), True)
    # pg_read_all_settings is the function's, not the caller's
    for name in ("cron.database_name", "cron.log_run", *SECRET_SETTINGS):
        with refused(su, "42501"):
            admin.execute("SELECT current_setting(%s)", (name,))
    hidden = admin.execute("SELECT count(*) FROM pg_settings WHERE name = ANY(%s)", (list(SECRET_SETTINGS),))
    assert hidden.fetchone() == (0,)


@pytest.mark.parametrize(
    "statement",
    [
        # replace the body with one that reads another setting
        "CREATE OR REPLACE FUNCTION memgov.cron_settings(OUT cron_database text, OUT log_run text,"
        " OUT readable boolean) LANGUAGE sql SECURITY DEFINER AS"
        " $$ SELECT current_setting('primary_conninfo'), 'on', true $$",
        "ALTER FUNCTION memgov.cron_settings() SET search_path = public",
        "ALTER FUNCTION memgov.cron_settings() OWNER TO memgov_admin",
        "ALTER FUNCTION memgov.cron_settings() SECURITY INVOKER",
        "DROP FUNCTION memgov.cron_settings()",
    ],
)
def test_an_admin_cannot_change_what_runs_as_the_reader(su, login, logins, statement):
    with refused(su, "42501"):
        login(logins.admin).execute(statement)


def test_nobody_can_hand_it_on(su, login, logins):
    """A writer is refused; an admin's GRANT, without the grant option, is a warning in
    PostgreSQL, not an error: either way nothing changes and PUBLIC still may not call it."""
    with refused(su, "42501"):
        login(logins.writer).execute("GRANT EXECUTE ON FUNCTION memgov.cron_settings() TO PUBLIC")
    admin = login(logins.admin)
    warnings: list[str] = []
    admin.add_notice_handler(lambda diag: warnings.append(diag.message_primary or ""))
    with unchanged(su):
        admin.execute("GRANT EXECUTE ON FUNCTION memgov.cron_settings() TO PUBLIC")
    assert warnings == ['no privileges were granted for "cron_settings"']
    with refused(su, "42501"):
        login(logins.nobody).execute("SELECT * FROM memgov.cron_settings()")


def test_an_admin_cannot_hand_the_reader_a_function_of_its_own(su, login, logins):
    admin = login(logins.admin)
    admin.execute("CREATE TEMP TABLE scratch (x int)")  # the admin login may create temporary objects
    admin.execute(
        "CREATE FUNCTION pg_temp.leak() RETURNS text LANGUAGE sql SECURITY DEFINER"
        " AS $$ SELECT current_setting('primary_conninfo') $$"
    )
    with refused(su, "42501"):
        admin.execute(f"ALTER FUNCTION pg_temp.leak() OWNER TO {READER}")


def test_shadowing_what_it_calls_changes_nothing(su, login, logins):
    """Its path is pg_catalog, pg_temp and every name in it is pg_catalog's: a caller's temporary
    pg_settings, operators or functions are never the ones it uses."""
    admin = login(logins.admin)
    expected = admin.execute("SELECT * FROM memgov.cron_settings()").fetchone()
    admin.execute("CREATE TEMP VIEW pg_settings AS SELECT 'cron.database_name'::text AS name,"
                  " current_setting('server_version') AS setting, 'postmaster'::text AS context")  # fmt: skip
    admin.execute("CREATE FUNCTION pg_temp.pg_has_role(text, text) RETURNS boolean LANGUAGE sql AS 'SELECT false'")
    admin.execute("SET search_path = pg_temp, pg_catalog")
    with unchanged(su):
        assert admin.execute("SELECT * FROM memgov.cron_settings()").fetchone() == expected


def test_the_reader_owns_this_function_alone_and_holds_no_other_role(su):
    owned = su.execute(
        "SELECT p.oid::regprocedure::text FROM pg_proc p WHERE p.proowner = %s::regrole"
        " UNION ALL SELECT c.oid::regclass::text FROM pg_class c WHERE c.relowner = %s::regrole"
        " UNION ALL SELECT n.nspname::text FROM pg_namespace n WHERE n.nspowner = %s::regrole",
        (READER, READER, READER),
    ).fetchall()
    assert owned == [("memgov.cron_settings()",)]
    row = su.execute(
        "SELECT r.rolcanlogin, r.rolsuper, r.rolcreaterole, r.rolbypassrls,"
        "       array(SELECT m.roleid::regrole::text FROM pg_auth_members m WHERE m.member = r.oid),"
        "       array(SELECT m.member::regrole::text FROM pg_auth_members m WHERE m.roleid = r.oid)"
        "  FROM pg_roles r WHERE r.rolname = %s",
        (READER,),
    ).fetchone()
    assert row == (False, False, False, False, ["pg_read_all_settings"], [])
    acl = su.execute("SELECT proacl::text[] FROM pg_proc WHERE oid = 'memgov.cron_settings()'::regprocedure")
    assert sorted(acl.fetchone()[0]) == sorted([f"{READER}=X/{READER}", f"memgov_admin=X/{READER}"])
    assert "<roles>" in snapshot(su)  # the attacks above compare roles and memberships too

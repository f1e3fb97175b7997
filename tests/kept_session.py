"""The superuser's session of a test module, handed to each test that leaves it as it was opened.

A test's ``db_conn`` used to be a new session: 6 ms to log in, then 15 ms more before its first
statements ran at full speed (the catalog caches and the compiled PL/pgSQL a new backend builds
again), and most tests only read and write rows through it. So a module keeps one session, and
each test gets it back only if nothing the next test could observe has changed:

- on the client: autocommit, the default row factory, prepare threshold and transaction
  characteristics, no notice or notify handler, no adapter registered on the connection;
- on the server: no transaction open, the same ``current_user`` as ``session_user``, every
  setting of ``pg_settings`` as at the login (but the defaults PL/pgSQL and plpgsql_check add
  when a session first loads them), each ``memgov.*`` setting that sql/ reads still unset
  (custom settings are not in ``pg_settings``; once set, even locally, one reads '' and no
  longer NULL), no temporary schema, no advisory lock, no ``LISTEN``, no open cursor, no
  prepared statement but psycopg's own.

``DISCARD SEQUENCES`` after each test forgets ``currval`` (memgov's per-session secret is one),
as a new session would. Anything else, an error included, closes the session and the next test
logs in again. Tests that are about sessions themselves open their own (``login``, ``as_role``).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import psycopg
from psycopg.rows import tuple_row

SQL_DIR = Path(__file__).resolve().parents[1] / "sql"

#: what a test could see of a session, compared with the same read right after the login
_STATE = r"""
SELECT session_user = current_user,
       (SELECT md5(string_agg(name || '=' || coalesce(setting, '') || ':' || source, ',' ORDER BY name))
          FROM pg_catalog.pg_settings
         WHERE NOT (source = 'default' AND name LIKE 'plpgsql%%')),
       pg_catalog.pg_my_temp_schema() = 0,
       NOT EXISTS (SELECT FROM pg_catalog.pg_listening_channels()),
       NOT EXISTS (SELECT FROM pg_catalog.pg_locks
                    WHERE pid = pg_catalog.pg_backend_pid() AND locktype = 'advisory'),
       NOT EXISTS (SELECT FROM pg_catalog.pg_cursors WHERE name <> ''),
       NOT EXISTS (SELECT FROM pg_catalog.pg_prepared_statements WHERE name NOT LIKE '\_pg3\_%%'),
       ARRAY(SELECT pg_catalog.current_setting(name, true) FROM unnest(%(memgov_settings)s::text[]) AS name)
"""


#: the memgov.* settings that sql/ reads (custom settings never show in pg_settings): read one by
#: one, as a NULL until the session first sets them
MEMGOV_SETTINGS = sorted(
    {m for path in SQL_DIR.glob("*.sql") for m in re.findall(r"current_setting\('(memgov\.[a-z_]+)'", path.read_text())}
)


def _state(conn: psycopg.Connection[Any]) -> tuple[Any, ...]:
    row = conn.execute(_STATE, {"memgov_settings": MEMGOV_SETTINGS}).fetchone()
    assert row is not None
    return tuple(row)


def _client_is_as_opened(conn: psycopg.Connection[Any]) -> bool:
    adapters = conn.adapters
    return (
        not conn.closed
        and not conn.broken
        and conn.autocommit
        and conn.row_factory is tuple_row
        and conn.prepare_threshold == 5
        and conn.isolation_level is None
        and conn.read_only is None
        and conn.deferrable is None
        and not conn._notice_handlers
        and not conn._notify_handlers
        and not any(getattr(adapters, "_own_dumpers", {True: True}).values())
        and not any(getattr(adapters, "_own_dumpers_by_oid", [True]))
        and not any(getattr(adapters, "_own_loaders", [True]))
        and conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
    )


class KeptSession:
    """One superuser session of a module's database, reused while tests leave it as opened."""

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        self._conn: psycopg.Connection[Any] | None = None
        self._opened: tuple[Any, ...] = ()

    def take(self) -> psycopg.Connection[Any]:
        """The kept session, or a new one when there is none."""
        if self._conn is None:
            self._conn = psycopg.connect(self.dsn, autocommit=True)
            self._opened = _state(self._conn)
        return self._conn

    def give_back(self) -> None:
        """Keep the session for the next test if the test left it as opened, else close it."""
        conn, self._conn = self._conn, None
        if conn is None:
            return
        try:
            if _client_is_as_opened(conn):
                conn.execute("DISCARD SEQUENCES")
                if _state(conn) == self._opened:
                    self._conn = conn
                    return
        except psycopg.Error:
            pass
        conn.close()

    def close(self) -> None:
        """Close the kept session (the module's end)."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None

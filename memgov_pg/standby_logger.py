"""``memgov standby-logger setup|remove``: governed reads on a hot standby, logged on the primary.

The SQL does the work (``memgov.setup_standby_logger``, sql/065_standby_reads.sql); this module
reads the primary's address from a DSN, makes the login's password (random: only the user
mapping ever needs it) and turns errors into one line.
"""

from __future__ import annotations

import secrets
from typing import Any

import psycopg
from psycopg import conninfo
from psycopg.rows import dict_row

from .db import connect
from .errors import MemgovError
from .resources import query

DEFAULT_LOGIN = "memgov_standby_log"


def primary_address(primary_dsn: str) -> tuple[str, int, str]:
    """host, port and database of the primary as the standbys reach it, from a libpq DSN."""
    try:
        parts = conninfo.conninfo_to_dict(primary_dsn)
    except psycopg.ProgrammingError as exc:
        raise MemgovError(f"--primary-dsn: {exc}") from None
    host, dbname = parts.get("host") or parts.get("hostaddr"), parts.get("dbname")
    if not host or not dbname:
        raise MemgovError("--primary-dsn must name the primary's host and dbname as the standbys reach it")
    try:
        port = int(parts.get("port") or 5432)
    except ValueError:
        raise MemgovError(f"--primary-dsn: port {parts.get('port')!r} is not a number") from None
    return str(host), port, str(dbname)


def setup(dsn: str, primary_dsn: str, login: str = DEFAULT_LOGIN, password: str | None = None) -> dict[str, Any]:
    """Sets up (or moves) the standby logger on the primary ``dsn``: what was set up (no password)."""
    host, port, dbname = primary_address(primary_dsn)
    params = {"host": host, "port": port, "dbname": dbname, "login": login,
              "password": password or secrets.token_urlsafe(32)}  # fmt: skip
    return dict(_call(dsn, "standby_logger_setup", params)["setup"])


def remove(dsn: str) -> bool:
    """Removes the standby logger's server and user mapping: whether there was one."""
    return bool(_call(dsn, "standby_logger_remove", {})["removed"])


def _call(dsn: str, name: str, params: dict[str, Any]) -> dict[str, Any]:
    with connect(dsn, row_factory=dict_row) as conn:
        try:
            row = conn.execute(query(name), params).fetchone()
            conn.commit()
        except psycopg.Error as exc:
            message = (exc.diag.message_primary or str(exc)).replace("\n", " ")
            hint = f" ({exc.diag.message_hint})" if exc.diag.message_hint else ""
            if isinstance(exc, psycopg.errors.InsufficientPrivilege) and not hint:
                hint = " (run it as a superuser, on the primary)"
            raise MemgovError(f"standby logger: {message}{hint} [{exc.sqlstate}]") from None
    assert row is not None
    return dict(row)

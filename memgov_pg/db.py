"""Connections and one-line connection errors (which database a command means: memgov_pg.cli.dsn)."""

from __future__ import annotations

import logging
import os
import time
from typing import Any

import psycopg
from psycopg import conninfo, pq

from .errors import ConnectionFailed

log = logging.getLogger("memgov_pg")


def describe(dsn: str) -> str:
    """The DSN without its password, for messages."""
    try:
        params = conninfo.conninfo_to_dict(dsn)
    except psycopg.Error:
        return "an invalid DSN"
    params.pop("password", None)
    env = os.environ
    service = params.get("service") or env.get("PGSERVICE")
    host = params.get("host") or env.get("PGHOST") or "localhost"
    port = params.get("port") or env.get("PGPORT") or "5432"
    dbname = params.get("dbname") or env.get("PGDATABASE") or params.get("user") or env.get("PGUSER") or ""
    if service and not (params.get("host") or env.get("PGHOST")):
        return f"service {service}" + (f" ({dbname})" if params.get("dbname") else "")
    return f"{host}:{port}/{dbname}"


def first_line(exc: BaseException) -> str:
    """The most useful single line of a driver error."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    for line in lines:
        # libpq puts "connection to server at ... failed: <why>" first
        if "failed:" in line:
            return line.rsplit("failed:", 1)[1].strip() or line
    return lines[0] if lines else type(exc).__name__


def error_message(exc: BaseException) -> str:
    """One line for an error: a driver error's primary message, else the exception's text."""
    if isinstance(exc, psycopg.Error):
        return exc.diag.message_primary or first_line(exc)
    return str(exc)


def connect(dsn: str, **kwargs: Any) -> psycopg.Connection[Any]:
    """psycopg.connect, with failures turned into one clear line."""
    try:
        conninfo.conninfo_to_dict(dsn)
    except psycopg.Error as exc:
        raise ConnectionFailed(f"invalid DSN: {first_line(exc)}") from None
    try:
        conn = psycopg.connect(dsn, connect_timeout=10, **kwargs)
    except psycopg.Error as exc:
        raise ConnectionFailed(f"cannot connect to {describe(dsn)}: {first_line(exc)}") from None
    if log.isEnabledFor(logging.INFO):
        info = conn.info
        log.info("connected to %s:%s/%s as %s", info.host, info.port, info.dbname, info.user)
    return conn


def wait_for_server(dsn: str, seconds: float) -> None:
    """Return once the server of ``dsn`` answers, waiting for at most ``seconds``.

    The server is asked as ``pg_isready`` asks it (libpq's ``PQping``): while nothing
    listens yet, or the server is still starting up, it is asked again every half second.
    A server that answers is not waited for, even when it will refuse the login: the
    connection that follows says why. When the time is up, raises the connection's own
    error, one line, saying how long it waited.
    """
    try:
        probe = conninfo.make_conninfo(dsn, connect_timeout=10)
    except psycopg.Error:
        return  # connect() reports the invalid DSN
    deadline = time.monotonic() + seconds
    waiting = False
    while True:
        state = pq.PGconn.ping(probe.encode())
        if state in (pq.Ping.OK, pq.Ping.NO_ATTEMPT):
            return
        left = deadline - time.monotonic()
        if left <= 0:
            break
        if not waiting:
            log.info("waiting up to %g s for %s to accept connections", seconds, describe(dsn))
            waiting = True
        time.sleep(min(0.5, left))
    try:
        connect(dsn).close()
    except ConnectionFailed as exc:
        raise ConnectionFailed(f"{exc} (waited {seconds:g} s)") from None

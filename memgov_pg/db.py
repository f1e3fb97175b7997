"""Connections: which database a command talks to, and one-line connection errors."""

from __future__ import annotations

import os
from typing import Any

import psycopg
from psycopg import conninfo

from .errors import ConnectionFailed


def describe(dsn: str) -> str:
    """The DSN without its password, for messages."""
    try:
        params = conninfo.conninfo_to_dict(dsn)
    except psycopg.Error:
        return "an invalid DSN"
    params.pop("password", None)
    host = params.get("host") or "localhost"
    port = params.get("port") or "5432"
    dbname = params.get("dbname") or params.get("user") or ""
    return f"{host}:{port}/{dbname}"


def first_line(exc: BaseException) -> str:
    """The most useful single line of a driver error."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    for line in lines:
        # libpq puts "connection to server at ... failed: <why>" first
        if "failed:" in line:
            return line.rsplit("failed:", 1)[1].strip() or line
    return lines[0] if lines else type(exc).__name__


def resolve_dsn(explicit: str | None = None) -> str:
    """``--dsn``, else ``MEMGOV_DSN``, else the embedded cluster of ``memgov up``."""
    if explicit:
        return explicit
    if env := os.environ.get("MEMGOV_DSN"):
        return env
    from .cluster import EmbeddedCluster

    embedded = EmbeddedCluster()
    if dsn := embedded.dsn():
        return dsn
    raise ConnectionFailed(
        "no database given: pass --dsn, set MEMGOV_DSN, or start the embedded cluster with `memgov up`"
    )


def connect(dsn: str, **kwargs: Any) -> psycopg.Connection[Any]:
    """psycopg.connect, with failures turned into one clear line."""
    try:
        conninfo.conninfo_to_dict(dsn)
    except psycopg.Error as exc:
        raise ConnectionFailed(f"invalid DSN: {first_line(exc)}") from None
    try:
        return psycopg.connect(dsn, connect_timeout=10, **kwargs)
    except psycopg.Error as exc:
        raise ConnectionFailed(f"cannot connect to {describe(dsn)}: {first_line(exc)}") from None

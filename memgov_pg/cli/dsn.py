"""Which database a command means: ``--dsn``, ``MEMGOV_DSN``, libpq's environment, `memgov up`.

Only the command line (and the Alembic environment that ``memgov migrate`` and
``alembic`` run) decides this; the library takes the DSN it is given.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg

from ..db import connect
from ..errors import ConnectionFailed, MemgovError

log = logging.getLogger("memgov_pg")

#: libpq's own variables that name a server; any of them set means "let libpq resolve it".
LIBPQ_VARIABLES = ("PGHOST", "PGHOSTADDR", "PGPORT", "PGDATABASE", "PGUSER", "PGSERVICE")


def libpq_configured() -> bool:
    """Whether libpq's environment (PG* variables, a connection service file) names a server."""
    if any(os.environ.get(name) for name in LIBPQ_VARIABLES):
        return True
    service_file = os.environ.get("PGSERVICEFILE")
    return service_file is not None and service_file != "" and Path(service_file).is_file()


def resolve_dsn(explicit: str | None = None) -> str:
    """``--dsn``, else ``MEMGOV_DSN``, else libpq's own environment, else the embedded cluster.

    ``explicit`` is the command's ``--dsn``, else the group's (``memgov --dsn X COMMAND``):
    the command line hands whichever was given (:mod:`.base`).

    libpq's own: any of ``PGHOST``, ``PGHOSTADDR``, ``PGPORT``, ``PGDATABASE``,
    ``PGUSER``, ``PGSERVICE`` set, or ``PGSERVICEFILE`` naming an existing file.
    The DSN is then empty and libpq resolves it (variables, service file,
    ``~/.pgpass``) as psql would.
    """
    if explicit:
        log.debug("database from --dsn")
        return explicit
    if env := os.environ.get("MEMGOV_DSN"):
        log.debug("database from MEMGOV_DSN")
        return env
    if libpq_configured():
        log.debug("database from libpq's environment (PG* variables or a service file)")
        return ""
    from ..cluster import EmbeddedCluster

    embedded = EmbeddedCluster()
    if dsn := embedded.dsn():
        log.debug("database: the embedded cluster")
        return dsn
    raise ConnectionFailed(
        "no database given: pass --dsn, set MEMGOV_DSN or libpq's PGHOST/PGDATABASE/PGSERVICE, "
        "or start the embedded cluster with `memgov up`"
    )


@contextmanager
def optional_connection(dsn: str | None) -> Iterator[psycopg.Connection[Any] | None]:
    """A connection when a database is configured (--dsn, MEMGOV_DSN, `memgov up`), else None."""
    try:
        target = resolve_dsn(dsn)
    except MemgovError:
        if dsn:
            raise
        yield None
        return
    with connect(target) as conn:
        yield conn

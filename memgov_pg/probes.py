"""Read-only probes of a governed database that several commands share.

Whether the schema is installed (``memgov retention``, ``memgov verify-log``), the
deployed policy code that is not what its deploy recorded (``memgov doctor``,
``memgov verify-log``) and a restored copy's transaction counter behind the sealed
decision log (the same two). Each is one query of sql/queries/; this module holds
no command of its own.
"""

from __future__ import annotations

from typing import Any

import psycopg

from .errors import MemgovError
from .resources import query


class SchemaMissing(MemgovError):
    """The database has no memgov schema."""


def require_schema(conn: psycopg.Connection[Any]) -> None:
    """Raise SchemaMissing unless ``conn``'s database has the memgov schema."""
    row = conn.execute(query("memgov_schema_installed")).fetchone()
    if not (row and row[0]):
        database = conn.info.dbname
        raise SchemaMissing(f"database {database} has no memgov schema: run `memgov migrate` first")


def policy_drift(conn: psycopg.Connection[Any]) -> list[dict[str, Any]] | None:
    """The deployed policy functions (and ``memgov.decide``) whose live code is not what
    their deploy recorded (``memgov.policy_drift()``): ``org_id``, ``version``,
    ``function_name``, ``problem`` each; None when the schema predates the check."""
    installed = conn.execute(query("policy_drift_installed")).fetchone()
    if not (installed and installed[0]):
        return None
    cur = conn.execute(query("policy_drift"))
    columns = [c.name for c in cur.description or ()]
    return [dict(zip(columns, row, strict=True)) for row in cur.fetchall()]


def counter_behind(conn: psycopg.Connection[Any]) -> dict[str, Any] | None:
    """The cluster's transaction counter, when it is behind the decision log, and the fix.

    ``{"next_xact_id", "needed_xact_id", "epoch", "data_directory"}``: new rows would take
    transaction ids from ``next_xact_id`` where the log needs ``needed_xact_id`` or more;
    ``pg_resetwal --epoch=<epoch>`` on the stopped cluster moves the counter past it (the
    epoch is the high 32 bits of a 64-bit transaction id, which the server stores nowhere
    else). None when the counter is past the log, as on the cluster that wrote it.
    """
    found = conn.execute(query("xid_counter_behind")).fetchone()
    if found is None or found[1] is None:
        return None
    next_xact_id, needed, datadir = int(found[0]), int(found[1]), found[2]
    return {
        "next_xact_id": next_xact_id,
        "needed_xact_id": needed,
        "epoch": ((needed - 1) >> 32) + 1,
        "data_directory": datadir,
    }


def counter_problem(behind: dict[str, Any]) -> str:
    """What is wrong with a restored copy's transaction counter."""
    return (
        f"this cluster's transaction counter ({behind['next_xact_id']}) is behind the decision log's "
        f"({behind['needed_xact_id']}), as after pg_restore into another cluster: new decisions would break "
        "the seal chain"
    )


def counter_remedy(behind: dict[str, Any]) -> str:
    """The command that moves the counter past the log (on the stopped cluster)."""
    datadir = behind.get("data_directory") or "DATADIR"
    return (
        f"before any write, stop the server and run `pg_resetwal --epoch={behind['epoch']} -D {datadir}` "
        "as its OS user, then start it (docs/operations.md#restore-from-pg_dump)"
    )


def counter_fix(behind: dict[str, Any]) -> str:
    """One line: what is wrong with a restored copy's transaction counter, and the command that fixes it."""
    return f"{counter_problem(behind)}; {counter_remedy(behind)}"

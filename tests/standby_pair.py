"""A primary of its own with a streaming hot standby and the standby logger set up (docs/operations.md,
"Reads on a standby"): shared by tests/db/test_standby_reads.py and tests/bench/bench_standby.py.

The primary's pg_hba.conf asks the standby logger's login for a password (scram-sha-256), as dblink
requires for memgov_owner; every other login is trusted on 127.0.0.1 as in the rest of the suite.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import conninfo

from memgov_pg.cluster import LocalCluster
from tests.attack_helpers import READ_POLICY, deploy_policy, insert, item
from tests.cli_helpers import run_memgov
from tests.db.test_restore import (
    as_login,
    migrated_with_logins,
    new_cluster,
    remove,
    run_as_server,
    wait_for,
    write_file,
)

LOGGER = "memgov_standby_log"
READ_VERSION = "2.0.0"


@dataclass
class Pair:
    primary: LocalCluster
    standby: LocalCluster
    primary_dsn: str
    standby_dsn: str
    stored: dict[str, Any]

    def caught_up(self) -> None:
        """Waits until the standby has replayed everything the primary wrote so far."""
        with psycopg.connect(self.primary_dsn, autocommit=True) as su:
            lsn = su.execute("SELECT pg_current_wal_lsn()::text").fetchone()[0]  # type: ignore[index]

        def replayed() -> bool:
            try:
                with psycopg.connect(self.standby_dsn, autocommit=True) as conn:
                    row = conn.execute("SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", (lsn,)).fetchone()
                    return bool(row and row[0])
            except psycopg.OperationalError:
                return False

        wait_for("the standby to replay the primary's writes", replayed)


def as_standby_login(pair: Pair, role: str) -> psycopg.Connection[Any]:
    """The login of ``role`` (tests/db/test_restore.py's logins) on the standby, in tenant acme."""
    return as_login(pair.standby_dsn, role)


@contextmanager
def standby_pair() -> Iterator[Pair]:
    """Builds the pair: the attack policy with read rules, two memories, the standby logger; yields it."""
    primary = new_cluster("standby-reads-primary")
    standby = new_cluster("standby-reads-standby")
    try:
        primary.init()
        primary.start_on_a_free_port()
        primary.bootstrap()
        dsn = migrated_with_logins(primary)
        with psycopg.connect(dsn, autocommit=True) as su:
            deploy_policy(su, READ_VERSION, text=READ_POLICY)
            hba = su.execute("SHOW hba_file").fetchone()[0]  # type: ignore[index]
            text = su.execute("SELECT pg_read_file(%s)", (hba,)).fetchone()[0]  # type: ignore[index]
            write_file(primary, hba, f"host all {LOGGER} 127.0.0.1/32 scram-sha-256\n{text}")
            su.execute("SELECT pg_reload_conf()")
        primary_dsn = conninfo.make_conninfo(dsn)
        where = conninfo.make_conninfo(host="127.0.0.1", port=str(primary.port), dbname="memgov")
        done = run_memgov("standby-logger", "setup", "--primary-dsn", where, "--dsn", dsn)
        assert done.returncode == 0, done.stderr
        stored: dict[str, Any] = {}
        with as_login(dsn, "writer") as writer:
            stored["tea"] = insert(writer, item("allowed")).fetchone()[0]  # type: ignore[index]
            stored["sensitive"] = insert(
                writer, item("allowed", fact_text="a sensitive one", is_sensitive=True)
            ).fetchone()[0]  # type: ignore[index]
        standby.os_user.own(standby.base)
        run_as_server(primary, "pg_basebackup", "-h", "127.0.0.1", "-p", str(primary.port), "-U", "postgres",
                      "-D", str(standby.datadir), "-X", "stream", "-c", "fast", "-R", "--no-sync")  # fmt: skip
        standby.configure()
        standby.start_on_a_free_port()
        pair = Pair(primary, standby, primary_dsn, conninfo.make_conninfo(dsn, port=str(standby.port)), stored)
        pair.caught_up()
        yield pair
    finally:
        remove(standby)
        remove(primary)

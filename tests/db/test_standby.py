"""Reads on a hot standby (docs/operations.md, "Reads on a standby"): a streaming standby of
the test cluster (pg_basebackup -R into a second local cluster), read by real logins.

memgov.search and memgov.get log their decision, which a standby cannot write: they are
refused with SQLSTATE 25006 and a hint that sends them to the primary, under a policy
that governs reads and under one that does not. A direct SELECT does not log (row level
security decides it, on the primary as on the standby): it reads on the standby what it
reads on the primary."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import conninfo

from memgov_pg.cluster import LocalCluster, free_port
from memgov_pg.testing import Server
from tests.attack_helpers import (
    ORG,
    OTHER,
    READ_POLICY,
    Logins,
    deploy_policies,
    deploy_policy,
    insert,
    item,
    login_dsn,
)
from tests.decision_cases import wipe
from tests.waiting import wait_for

pytestmark = pytest.mark.slow

SELECT = "SELECT fact_text FROM memgov.long_term_memory_items ORDER BY fact_text"


@pytest.fixture(scope="module")
def primary(memgov_dsn: str, logins: Logins) -> dict[str, Any]:
    """The module's database on the primary: reads governed for acme (the attack policy with
    read rules: a sensitive memory is withheld), not for globex; a memory of each kind."""
    with psycopg.connect(memgov_dsn, autocommit=True) as su:
        wipe(su)
        deploy_policies(su)
        deploy_policy(su, "2.0.0-acme", text=READ_POLICY, tenant=ORG)
    stored: dict[str, Any] = {}
    for org, role in ((ORG, logins.writer), (OTHER, logins.gwriter)):
        with psycopg.connect(login_dsn(memgov_dsn, role), autocommit=True) as writer:
            writer.execute("SELECT set_config('memgov.org_id', %s, false)", (org,))
            stored[org] = insert(writer, item("allowed", org=org)).fetchone()[0]
            insert(writer, item("allowed", org=org, fact_text="a sensitive one", is_sensitive=True))
    return stored


@pytest.fixture(scope="module")
def standby(memgov_server: Server, memgov_dsn: str, primary: dict[str, Any]) -> Iterator[str]:
    """A streaming standby of the test cluster, caught up with the module's writes: its DSN."""
    if memgov_server.kind != "local":
        pytest.skip(f"a standby is built from the suite's own local cluster, not a {memgov_server.kind} server")
    source = conninfo.conninfo_to_dict(memgov_server.dsn("postgres"))
    base = Path(tempfile.mkdtemp(prefix="memgov-standby-"))
    cluster = LocalCluster(base, free_port(), durable=False)
    cluster.os_user.own(base)
    try:
        out = cluster.os_user.run([
            str(cluster.bindir / "pg_basebackup"), "-h", str(source["host"]), "-p", str(source["port"]),
            "-U", str(source.get("user", "postgres")), "-D", str(cluster.datadir), "-R", "-X", "stream",
            "-c", "fast", "--no-sync",
        ])  # fmt: skip
        assert out.returncode == 0, out.stderr
        cluster.configure()  # its own port; primary_conninfo and standby.signal come from -R
        cluster.start_on_a_free_port()
        dsn = conninfo.make_conninfo(memgov_dsn, port=str(cluster.port))
        # caught up: the module's writes are there (a LSN the primary has flushed, replayed)
        with psycopg.connect(memgov_dsn, autocommit=True) as su:
            lsn = su.execute("SELECT pg_current_wal_lsn()::text").fetchone()[0]

        def replayed() -> bool:
            try:
                with psycopg.connect(dsn, autocommit=True) as conn:
                    row = conn.execute(
                        "SELECT pg_is_in_recovery() AND pg_last_wal_replay_lsn() >= %s::pg_lsn", (lsn,)
                    ).fetchone()
                    return bool(row and row[0])
            except psycopg.OperationalError:  # still starting up
                return False

        wait_for(replayed, "the standby to replay the module's writes")
        yield dsn
    finally:
        cluster.stop()
        shutil.rmtree(base, ignore_errors=True)


def connect(dsn: str, role: str, org: str) -> psycopg.Connection[Any]:
    conn = psycopg.connect(login_dsn(dsn, role), autocommit=True)
    conn.execute("SELECT set_config('memgov.org_id', %s, false)", (org,))
    return conn


@pytest.mark.parametrize("org", [ORG, OTHER], ids=["reads-governed", "reads-not-governed"])
def test_a_governed_read_on_the_standby_is_refused_with_the_remedy(
    standby: str, memgov_dsn: str, logins: Logins, primary: dict[str, Any], org: str
) -> None:
    role = logins.writer if org == ORG else logins.gwriter
    with connect(standby, role, org) as conn:
        for call, arg in (("memgov.search(%s)", '{"text": "tea"}'), ("memgov.get(%s)", str(primary[org]))):
            with pytest.raises(psycopg.errors.ReadOnlySqlTransaction) as refused:
                conn.execute(f"SELECT * FROM {call}", (arg,))
            diag = refused.value.diag
            assert diag.sqlstate == "25006"
            assert "this server is a standby" in str(diag.message_primary)
            assert "to the primary" in str(diag.message_hint)
    # the same read on the primary works, and is logged there
    with connect(memgov_dsn, role, org) as conn, conn.transaction():
        assert conn.execute("SELECT count(*) FROM memgov.search(%s)", ('{"text": "tea"}',)).fetchone() == (1,)
        recall = conn.execute("SELECT current_setting('memgov.last_recall')::jsonb").fetchone()
        assert recall is not None and recall[0]["decision_id"] is not None


def test_a_read_only_transaction_on_the_primary_is_refused_too(
    memgov_dsn: str, logins: Logins, primary: dict[str, Any]
) -> None:
    with connect(memgov_dsn, logins.writer, ORG) as conn:
        with pytest.raises(psycopg.errors.ReadOnlySqlTransaction) as refused:
            with conn.transaction():
                conn.execute("SET TRANSACTION READ ONLY")
                conn.execute("SELECT * FROM memgov.get(%s)", (primary[ORG],))
        assert "this transaction is read-only" in str(refused.value.diag.message_primary)
        assert "read-write transaction" in str(refused.value.diag.message_hint)


@pytest.mark.parametrize("org", [ORG, OTHER], ids=["reads-governed", "reads-not-governed"])
def test_a_direct_select_reads_on_the_standby_what_it_reads_on_the_primary(
    standby: str, memgov_dsn: str, logins: Logins, primary: dict[str, Any], org: str
) -> None:
    role = logins.writer if org == ORG else logins.gwriter
    with connect(memgov_dsn, role, org) as on_primary, connect(standby, role, org) as on_standby:
        expected = on_primary.execute(SELECT).fetchall()
        assert on_standby.execute(SELECT).fetchall() == expected
    # acme's read rules withhold the sensitive memory; globex reads both
    assert [r[0] for r in expected] == (["likes green tea"] if org == ORG else ["a sensitive one", "likes green tea"])

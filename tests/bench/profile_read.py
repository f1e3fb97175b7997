"""What row level security costs a plain SELECT, in CPU instructions a row (callgrind).

    python -m tests.bench.profile_read [--rows 2000]

The read-side companion of ``profile_write`` (same method, same reasons: instruction counts
do not move with the machine's load). It builds its own cluster, loads --rows memories of
tenant ``tenk`` on the engine's own path under ``policies/examples/memproof.yaml`` (a policy
with read rules, one of them on the reader), and runs ``postgres --single`` under callgrind
on a copy of the data directory, as an agent's role (memgov_writer, memgov.org_id set),
with sequential scans off as ``bench_read`` does (both sides read the primary key's index):

    bare copy, no row security      the table's owner, WHERE org_id = (SELECT 'tenk')
    default policy                  row security, reads not governed (no get decision)
    memproof, read classes          row security as shipped: each row's stored read class
    memproof, decided per row       the same rows without a class (as a row of another
                                    epoch is): a get decision per row, as before read classes

Each cell is the instructions of ``SELECT count(*)`` over every column of the tenant's rows
minus those of the same statement for a tenant without rows, divided by --rows: the
server's start, the plan and the per-statement work (the reader's classes) cancel out.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

import psycopg

from memgov_pg.cluster import LocalCluster, free_port
from memgov_pg.deploy import deploy
from memgov_pg.migrate import upgrade
from tests.bench.common import table
from tests.bench.profile_write import instructions, one_line

ROOT = Path(__file__).resolve().parents[2]
ROLE = "memgov_bench_reader"
GOVERNED = "memgov.long_term_memory_items"

LOAD = f"""
INSERT INTO {GOVERNED} (org_id, project_id, category, fact_text, source, confidence, context_source)
SELECT 'tenk', 'p' || (i % 10), (ARRAY['preference', 'user_fact', 'project_fact', 'decision'])[1 + i % 4],
       'The user mentioned fact number ' || i || ' about their work on project Atlas',
       (ARRAY['agent_extracted', 'user_confirmed'])[1 + i % 2], 0.900, 'langgraph'
  FROM generate_series(1, %(rows)s) AS i
"""
# what a reader asks: every column of every row of its tenant that it may read
SELECT = "SELECT count(*) FROM (SELECT * FROM {table} {where} OFFSET 0) AS s"
NO_CLASSES = [
    f"ALTER TABLE {GOVERNED} DISABLE TRIGGER enforce_write",
    f"UPDATE {GOVERNED} SET read_class = NULL",
    f"ALTER TABLE {GOVERNED} ENABLE ALWAYS TRIGGER enforce_write",
]
DEFAULT_POLICY = ["SELECT memgov.rollback_policy('*')"]

# (label, SQL run as the superuser first, whether the reader reads through row security)
LAYERS: list[tuple[str, list[str], bool]] = [
    ("bare copy, no row security", [], False),
    ("default policy (reads not governed)", DEFAULT_POLICY, True),
    ("memproof, read classes (as shipped)", [], True),
    ("memproof, decided per row", NO_CLASSES, True),
]


def script(prefix: list[str], governed: bool, tenant: str) -> str:
    lines = [*(one_line(s) for s in prefix), "SET enable_seqscan = off;", "SET max_parallel_workers_per_gather = 0;",
             "SET client_min_messages = warning;"]  # fmt: skip
    if governed:
        lines += [f"SET memgov.org_id = '{tenant}';", f"SET ROLE {ROLE};"]
        statement = SELECT.format(table=GOVERNED, where="")
    else:
        statement = SELECT.format(table=GOVERNED, where=f"WHERE org_id = (SELECT '{tenant}'::text)")
    lines += [statement + ";"] * 3  # the first run plans and warms: the difference keeps all three
    return "\n".join(lines) + "\n"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--rows", type=int, default=2000, help="memories of the tenant read")
    args = p.parse_args()
    if shutil.which("valgrind") is None or shutil.which("callgrind_annotate") is None:
        print("profile-read: skipped: needs valgrind (Debian package valgrind)")
        return
    base = Path(tempfile.mkdtemp(prefix="memgov-profile-read-"))
    cluster = LocalCluster(base, free_port(), durable=False)
    running = False
    try:
        cluster.init()
        cluster.start_on_a_free_port()
        running = True
        cluster.bootstrap()
        with psycopg.connect(cluster.dsn("postgres"), autocommit=True) as conn:
            conn.execute("CREATE DATABASE bench")
        dsn = cluster.dsn("bench")
        upgrade(dsn)
        deploy(dsn, ROOT / "policies" / "default.yaml")
        deploy(dsn, ROOT / "policies" / "examples" / "memproof.yaml")
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f"DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '{ROLE}') THEN "
                         f"CREATE ROLE {ROLE} LOGIN; END IF; END $$")  # fmt: skip
            conn.execute(f"GRANT memgov_writer TO {ROLE}")
            with conn.transaction():
                conn.execute("SET LOCAL ROLE memgov_owner")
                conn.execute(LOAD.replace("%(rows)s", str(args.rows)))
            classes = conn.execute(f"SELECT count(read_class) FROM {GOVERNED}").fetchone()
            assert classes == (args.rows,), f"every loaded row has a read class: {classes}"
            conn.execute(f"VACUUM ANALYZE {GOVERNED}")
        cluster.stop()
        running = False
        rows: list[tuple[str, ...]] = []
        for label, prefix, governed in LAYERS:
            total = instructions(cluster, cluster.datadir, script(prefix, governed, "tenk"))
            empty = instructions(cluster, cluster.datadir, script(prefix, governed, "empty"))
            rows.append((label, f"{(total - empty) / (3 * args.rows):,.0f}"))
            print(f"  {label}: done", file=sys.stderr, flush=True)
    finally:
        if running:
            cluster.stop()
        shutil.rmtree(base, ignore_errors=True)
    print(f"instructions per row of a plain SELECT of {args.rows:,} rows (callgrind)\n")
    print(table(rows, ("layer", "instructions a row")))


if __name__ == "__main__":
    main()

"""The governed write path vs. a bare copy of the table, in the same run.

    python -m tests.bench.bench_write [--dsn DSN] [--seconds 15] [--rows 100000]

(1) pgbench, 2 clients, prepared statements, single-row INSERTs as an agent's
    login role (member of memgov_writer, memgov.org_id set), into
    memgov.long_term_memory_items with policies/default.yaml deployed vs. into
    bench.bare (LIKE the table INCLUDING ALL: same columns, constraints and
    indexes; no trigger). Goal: governed TPS >= 0.85 x bare.
(2) Bulk INSERT ... SELECT of --rows rows, same role: governed time <= 1.5 x bare.
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import psycopg
from psycopg import conninfo

from memgov_pg.cluster import find_bindir
from memgov_pg.deploy import deploy
from tests.bench.common import bench_database, parser, table

ROOT = Path(__file__).resolve().parents[2]
ROLE = "memgov_bench_agent"
COLUMNS = "org_id, project_id, category, fact_text, source, confidence, context_source"

SETUP = f"""
DO $$ BEGIN
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '{ROLE}') THEN
        CREATE ROLE {ROLE} LOGIN;
    END IF;
END $$;
GRANT memgov_writer TO {ROLE};
CREATE SCHEMA bench;
CREATE TABLE bench.bare (LIKE memgov.long_term_memory_items INCLUDING ALL);
CREATE TABLE bench.source AS
SELECT 'acme'::text AS org_id, 'p1'::text AS project_id,
       (ARRAY['preference', 'user_fact', 'project_fact', 'decision'])[1 + i % 4] AS category,
       'The user mentioned fact number ' || i || ' about their work on project Atlas' AS fact_text,
       'agent_extracted'::text AS source,
       0.900::numeric(4,3) AS confidence, 'mcp'::text AS context_source
  FROM generate_series(1, %(rows)s) AS i;
GRANT USAGE ON SCHEMA bench TO {ROLE};
GRANT SELECT, INSERT, TRUNCATE ON bench.bare, bench.source TO {ROLE};
"""

# what an agent sends: one fact at a time, the common case that the policy stores
INSERT = (
    "\\set n random(1, 1000000)\n"
    "INSERT INTO {table} (" + COLUMNS + ") VALUES "
    "('acme', 'p1', 'preference', 'The user prefers dark mode, note ' || :n, 'agent_extracted', 0.9, 'mcp');\n"
)


def pgbench(dsn: str, table_name: str, seconds: int) -> float:
    params = conninfo.conninfo_to_dict(dsn)
    with tempfile.NamedTemporaryFile("w", suffix=".sql", delete=False) as script:
        script.write(INSERT.format(table=table_name))
    os.chmod(script.name, 0o644)
    env = dict(os.environ, PGOPTIONS="-c memgov.org_id=acme")
    out = subprocess.run(
        [str(find_bindir() / "pgbench"), "-n", "-M", "prepared", "-c", "2", "-j", "2", "-T", str(seconds),
         "-f", script.name, "-h", str(params.get("host", "127.0.0.1")), "-p", str(params.get("port", 5432)),
         "-U", ROLE, str(params["dbname"])],
        capture_output=True, text=True, env=env,
    )  # fmt: skip
    os.unlink(script.name)
    if out.returncode != 0:
        raise SystemExit(f"bench: pgbench failed: {out.stderr.strip().splitlines()[-1:]}")
    match = re.search(r"tps = ([0-9.]+)", out.stdout)
    assert match, out.stdout
    return float(match.group(1))


def bulk(conn: psycopg.Connection[Any], target: str, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        with conn.transaction():
            if target.startswith("memgov."):
                conn.execute("SET LOCAL ROLE memgov_owner")  # the one role allowed to TRUNCATE it
            conn.execute(f"TRUNCATE {target}")
        conn.execute("CHECKPOINT")
        start = time.perf_counter()
        with conn.transaction():
            conn.execute(f"SET LOCAL ROLE {ROLE}")
            conn.execute("SET LOCAL memgov.org_id = 'acme'")
            conn.execute(f"INSERT INTO {target} ({COLUMNS}) SELECT {COLUMNS} FROM bench.source")
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    p = parser(__doc__ or "")
    p.add_argument("--seconds", type=int, default=15)
    p.add_argument("--rows", type=int, default=100_000)
    args = p.parse_args()
    with bench_database(args.dsn, "memgov_bench_write") as dsn, psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(SETUP.replace("%(rows)s", str(args.rows)))
        deploy(dsn, ROOT / "policies" / "default.yaml")
        conn.execute("SET max_parallel_workers_per_gather = 0")
        results: list[tuple[str, ...]] = []
        # alternate bare and governed runs so drift hits both
        bare_tps, governed_tps = [], []
        for _ in range(args.repeat):
            bare_tps.append(pgbench(dsn, "bench.bare", args.seconds))
            governed_tps.append(pgbench(dsn, "memgov.long_term_memory_items", args.seconds))
        bare, governed = max(bare_tps), max(governed_tps)
        results.append(("(1) pgbench single-row INSERT, bare", f"{bare:.0f} tps", "1.00"))
        results.append(("(1) pgbench single-row INSERT, governed", f"{governed:.0f} tps",
                        f"{governed / bare:.2f} of bare (goal >= 0.85)"))  # fmt: skip
        bare_s = bulk(conn, "bench.bare", args.repeat)
        governed_s = bulk(conn, "memgov.long_term_memory_items", args.repeat)
        n = args.rows
        results.append(("(2) INSERT...SELECT, bare", f"{bare_s:.3f} s ({bare_s / n * 1e6:.1f} µs/row)", "1.00"))
        results.append(("(2) INSERT...SELECT, governed", f"{governed_s:.3f} s ({governed_s / n * 1e6:.1f} µs/row)",
                        f"{governed_s / bare_s:.2f}x bare (goal <= 1.5)"))  # fmt: skip
        decisions = conn.execute("SELECT action, count(*) FROM memgov.decision_log GROUP BY 1 ORDER BY 1").fetchall()
    print(f"pgbench: 2 clients, prepared, {args.seconds} s, best of {args.repeat}; bulk: {args.rows} rows\n")
    print(table(results, ("measurement", "result", "ratio")))
    print("\ndecisions logged:", ", ".join(f"{a} {c}" for a, c in decisions))


if __name__ == "__main__":
    main()

"""The governed write path vs. a bare copy of the table, in the same run.

    python -m tests.bench.bench_write [--dsn DSN] [--seconds 15] [--sizes 10000,50000,100000,1000000]

bench.bare is ``LIKE memgov.long_term_memory_items INCLUDING ALL``: the same
columns, constraints and indexes, no trigger. Every client is an agent's login
role (member of memgov_writer, memgov.org_id set); ``policies/default.yaml`` is
deployed.

(1) pgbench, 2 clients, prepared single-row INSERTs that the policy stores
    (preferences at confidence 0.9). Must reach >= 0.80 of bare, goal >= 0.90.
(1b) the same with a realistic mix: half of the INSERTs are facts at
    confidence 0.7, which the policy holds for approval (a pending row, a
    request, a NOTIFY). Must reach >= 0.65 of bare, goal >= 0.80.
(2) Bulk INSERT ... SELECT of N rows that the policy stores, a line per size
    of --sizes (50k is the figure of record). Must reach <= 2.0x bare, goal <= 1.5x.

Floors, measured the same way, that say what no decision logic can go below:
(1e) (1) with memgov.enforce_write() reduced to RETURN NEW (the trigger call
    and row security only), and (1l) reduced to logging one constant decision
    through memgov.log_decision(): any write path that logs every write in its
    own transaction from a row trigger costs at least that.
(2d) the default policy's secret detector alone (memgov.contains_secret over
    the same rows' fact_text, in a SELECT) against the bare INSERT of (2).
"""

from __future__ import annotations

import functools
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
from tests.bench.common import (
    EMPTY_TRIGGER,
    LOG_ONLY_TRIGGER,
    bench_database,
    best_of,
    parser,
    stand_in_trigger,
    table,
)

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
       0.900::numeric(4,3) AS confidence, 'mcp'::text AS context_source, i
  FROM generate_series(1, %(rows)s) AS i;
CREATE INDEX ON bench.source (i);
GRANT USAGE ON SCHEMA bench TO {ROLE};
GRANT SELECT, INSERT, TRUNCATE ON bench.bare, bench.source TO {ROLE};
"""

# what an agent sends: one fact at a time, the common case that the policy stores
ALL_STORED = (
    "\\set n random(1, 1000000)\n"
    "INSERT INTO {table} (" + COLUMNS + ") VALUES "
    "('acme', 'p1', 'preference', 'The user prefers dark mode, note ' || :n, 'agent_extracted', 0.9, 'mcp');\n"
)
# half of them facts at confidence 0.7: held for approval by the default policy's review rule
MIXED = (
    "\\set n random(1, 1000000)\n"
    "INSERT INTO {table} (" + COLUMNS + ") VALUES "
    "('acme', 'p1', 'user_fact', 'The user mentioned fact ' || :n, 'agent_extracted',"
    " CASE WHEN :n % 2 = 0 THEN 0.9 ELSE 0.7 END, 'mcp');\n"
)


def pgbench(dsn: str, table_name: str, seconds: int, script_text: str = ALL_STORED) -> float:
    params = conninfo.conninfo_to_dict(dsn)
    with tempfile.NamedTemporaryFile("w", suffix=".sql", delete=False) as script:
        script.write(script_text.format(table=table_name))
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


def bulk(conn: psycopg.Connection[Any], target: str, repeat: int, rows: int) -> float:
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
            conn.execute(f"INSERT INTO {target} ({COLUMNS}) SELECT {COLUMNS} FROM bench.source WHERE i <= {rows:d}")
        times.append(time.perf_counter() - start)
    return min(times)


# (2d): the detector that the default policy's first rule reads on every write
DETECTOR = "SELECT count(*) FROM bench.source WHERE i <= {rows:d} AND memgov.contains_secret(fact_text)"


def single_rows(dsn: str, args: Any, script: str) -> tuple[float, float]:
    """Best bare and governed throughput of ``script`` over --repeat runs, alternated so that drift hits both."""
    bare_tps, governed_tps = [], []
    for _ in range(args.repeat):
        bare_tps.append(pgbench(dsn, "bench.bare", args.seconds, script))
        governed_tps.append(pgbench(dsn, "memgov.long_term_memory_items", args.seconds, script))
    return max(bare_tps), max(governed_tps)


def tps_row(name: str, bare: float, governed: float, goal: str) -> tuple[str, ...]:
    """A pgbench line: throughput, the time a transaction takes, and governed / bare."""
    return (name, f"{bare:.0f} tps ({1e6 / bare:.0f} µs/txn)", f"{governed:.0f} tps ({1e6 / governed:.0f} µs/txn)",
            f"{governed / bare:.2f}", goal)  # fmt: skip


def main() -> None:
    p = parser(__doc__ or "")
    p.add_argument("--seconds", type=int, default=15, help="length of each pgbench run")
    p.add_argument("--sizes", default="10000,50000,100000,1000000", help="bulk sizes, comma-separated")
    args = p.parse_args()
    sizes = sorted({int(n) for n in args.sizes.split(",")})
    with bench_database(args.dsn, "memgov_bench_write") as dsn, psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(SETUP.replace("%(rows)s", str(max(sizes))))
        deploy(dsn, ROOT / "policies" / "default.yaml")
        conn.execute("SET max_parallel_workers_per_gather = 0")
        rows: list[tuple[str, ...]] = []
        for label, script, goal in (("(1) single-row INSERTs, all stored", ALL_STORED, ">= 0.80 (goal 0.90)"),
                                    ("(1b) single-row INSERTs, half held", MIXED, ">= 0.65 (goal 0.80)")):  # fmt: skip
            rows.append(tps_row(label, *single_rows(dsn, args, script), goal))
        for label, body in (("(1e) floor: (1), the write trigger empty", EMPTY_TRIGGER),
                            ("(1l) floor: (1), the write trigger only logging", LOG_ONLY_TRIGGER)):  # fmt: skip
            with stand_in_trigger(conn, body):
                rows.append(tps_row(label, *single_rows(dsn, args, ALL_STORED), "-"))
        for n in sizes:
            bare_s = bulk(conn, "bench.bare", args.repeat, n)
            governed_s = bulk(conn, "memgov.long_term_memory_items", args.repeat, n)
            rows.append((f"(2) INSERT ... SELECT of {n:,} rows",
                         f"{bare_s * 1e3:.0f} ms ({bare_s / n * 1e6:.1f} µs/row)",
                         f"{governed_s * 1e3:.0f} ms ({governed_s / n * 1e6:.1f} µs/row)",
                         f"{governed_s / bare_s:.2f}x", "<= 2.0x (goal 1.5x)"))  # fmt: skip
            if n == 50_000:
                detector_s = best_of(args.repeat, functools.partial(conn.execute, DETECTOR.format(rows=n)))
                rows.append(("(2d) floor: the secret detector alone, 50,000 rows",
                             f"{bare_s * 1e3:.0f} ms (the INSERT of (2))",
                             f"{detector_s * 1e3:.0f} ms ({detector_s / n * 1e6:.1f} µs/row)",
                             f"+{detector_s / bare_s:.2f}x", "-"))  # fmt: skip
        decisions = conn.execute("SELECT action, count(*) FROM memgov.decision_log GROUP BY 1 ORDER BY 1").fetchall()
    print(f"pgbench: 2 clients, prepared, {args.seconds} s a run; best of {args.repeat} for every figure\n")
    print(table(rows, ("measurement", "bare (same run)", "governed", "governed / bare", "must reach")))
    print("\ndecisions logged:", ", ".join(f"{a} {c}" for a, c in decisions))


if __name__ == "__main__":
    main()

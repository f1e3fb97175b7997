"""What a shadow deployment costs the write path, in the same run.

    python -m tests.bench.bench_shadow [--dsn DSN] [--seconds 15]

The table, role and workloads are bench_write's: pgbench, 2 clients, prepared
single-row INSERTs by an agent's login role, policies/default.yaml active. Each
workload runs three ways, alternated: into bench.bare (no trigger), into the
governed table, and into the governed table while a global shadow of the demo's
candidate (default.yaml storing agent facts above 0.5) runs: a second decision
and a row of memgov.shadow_decisions per write.
(3) all stored; (3b) half of them held for approval; (4) a bulk INSERT ... SELECT
of 50,000 rows.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import psycopg

from memgov_pg import shadow
from memgov_pg.demo import candidate_policy
from memgov_pg.deploy import deploy
from tests.bench.bench_write import ALL_STORED, MIXED, SETUP, bulk, pgbench
from tests.bench.common import bench_database, parser, table

ROOT = Path(__file__).resolve().parents[2]
GOVERNED = "memgov.long_term_memory_items"
BULK_ROWS = 50_000


def main() -> None:
    p = parser(__doc__ or "")
    p.add_argument("--seconds", type=int, default=15, help="length of each pgbench run")
    args = p.parse_args()
    default = ROOT / "policies" / "default.yaml"
    with bench_database(args.dsn, "memgov_bench_shadow") as dsn, psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(SETUP.replace("%(rows)s", str(BULK_ROWS)))
        deploy(dsn, default)
        with tempfile.TemporaryDirectory() as scratch:
            candidate = Path(scratch) / "candidate.yaml"
            candidate.write_text(candidate_policy(default), encoding="utf-8")
            deploy(dsn, candidate, shadow=True)
        shadow.stop(dsn)
        rows: list[tuple[str, ...]] = []
        for label, script in (("(3) single-row INSERTs, all stored", ALL_STORED),
                              ("(3b) single-row INSERTs, half held", MIXED)):  # fmt: skip
            bare, plain, shadowed = [], [], []
            for _ in range(args.repeat):
                bare.append(pgbench(dsn, "bench.bare", args.seconds, script))
                plain.append(pgbench(dsn, GOVERNED, args.seconds, script))
                conn.execute("SELECT memgov.start_shadow('*', %s)", (shadow_version(conn),))
                shadowed.append(pgbench(dsn, GOVERNED, args.seconds, script))
                conn.execute("SELECT memgov.stop_shadow('*')")
            b, g, s = max(bare), max(plain), max(shadowed)
            rows.append((label, f"{b:.0f} tps ({1e6 / b:.0f} µs)", f"{g:.0f} tps ({1e6 / g:.0f} µs)",
                         f"{s:.0f} tps ({1e6 / s:.0f} µs)", f"{s / g:.2f}", f"{s / b:.2f}"))  # fmt: skip
        b_s = bulk(conn, "bench.bare", args.repeat, BULK_ROWS)
        g_s = bulk(conn, GOVERNED, args.repeat, BULK_ROWS)
        conn.execute("SELECT memgov.start_shadow('*', %s)", (shadow_version(conn),))
        s_s = bulk(conn, GOVERNED, args.repeat, BULK_ROWS)
        conn.execute("SELECT memgov.stop_shadow('*')")
        rows.append((f"(4) INSERT ... SELECT of {BULK_ROWS:,} rows", f"{b_s * 1e3:.0f} ms",
                     f"{g_s * 1e3:.0f} ms ({g_s / BULK_ROWS * 1e6:.1f} µs/row)",
                     f"{s_s * 1e3:.0f} ms ({s_s / BULK_ROWS * 1e6:.1f} µs/row)",
                     f"{g_s / s_s:.2f}", f"{b_s / s_s:.2f}"))  # fmt: skip
        recorded = conn.execute("SELECT count(*) FROM memgov.shadow_decisions").fetchone()
    print(f"pgbench: 2 clients, prepared, {args.seconds} s a run; best of {args.repeat} for every figure")
    print("(4): the throughput ratios are time ratios inverted, so that every ratio reads the same way\n")
    print(table(rows, ("measurement", "bare (same run)", "governed", "governed + shadow",
                       "shadow / governed", "shadow / bare")))  # fmt: skip
    print(f"\nshadow decisions recorded by the last shadow: {recorded[0] if recorded else 0}")


def shadow_version(conn: psycopg.Connection[object]) -> str:
    """The candidate's version (deployed, inactive)."""
    row = conn.execute("SELECT version FROM memgov.policy_versions WHERE org_id = '*' AND NOT active").fetchone()
    assert row is not None
    return str(row[0])


if __name__ == "__main__":
    main()

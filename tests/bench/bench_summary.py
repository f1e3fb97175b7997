"""``make bench``: every measure of record in one table, each against its baseline of the same run.

    scripts/bench [--quick] [--repeat N] [--out FILE] [--scale-json FILE] [--10m] [--skip PART,...]
    python -m tests.bench.bench_summary ...

One throw-away durable cluster (fsync, synchronous_commit on) or the superuser
DSN of --dsn / MEMGOV_BENCH_DSN. Each part runs in a fresh database; each figure
is the best of --repeat runs (MEMGOV_BENCH_REPEAT, default 3) of both sides,
measured alternately in the same run on the same rows, except the instruction
counts (callgrind: the same on every run) and the scale ratio (the p50 of
--searches searches at each size). --quick shrinks every size (the row says
which it measured) to prove the tooling in minutes; its figures are not of
record. --out FILE (or MEMGOV_BENCH_OUT) also writes the table as markdown.

Parts (--skip takes their names): profile, bulk, sweep, select, scale, writers, policy.
The search row comes from a scale run: this one's (100k and 1M, with --10m 1M and
10M; --quick 10k and 100k) or the JSON of ``scripts/bench scale --json FILE``
given as --scale-json.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg

from memgov_pg.compiler import compile_policy
from memgov_pg.deploy import deploy
from memgov_pg.policy import load_policy
from tests.bench import bench_policy, bench_read, bench_retention, bench_scale, bench_write, profile_write
from tests.bench.common import bench_database, bench_server, parser, timings
from tests.bench.summary import Row, markdown, tally, write

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_POLICY = ROOT / "policies" / "default.yaml"
PARTS = ("profile", "bulk", "sweep", "select", "scale", "writers", "policy")


@dataclass(frozen=True)
class Sizes:
    """The sizes of one run: the figures of record, or --quick's."""

    profile_rows: int = 200
    profile_bulk: int = 2000
    bulk: int = 50_000
    sweep_table: int = 400_000  # half expired
    per_row: tuple[int, int] = (100_000, 1_000_000)  # expired rows (of twice as many)
    sparse: tuple[int, int, int] = (10_000, 100_000, 2_000_000)  # expired rows, small table, large table
    select_others: int = 100_000  # other tenants' rows beside the 10,000 read
    scale: tuple[int, int] = (100_000, 1_000_000)
    searches: int = 200
    writers_window: float = 5.0
    policy_rows: int = 100_000


QUICK = Sizes(profile_rows=40, profile_bulk=400, bulk=10_000, sweep_table=40_000, per_row=(10_000, 100_000),
              sparse=(1_000, 10_000, 200_000), select_others=10_000, scale=(10_000, 100_000), searches=50,
              writers_window=2.0, policy_rows=10_000)  # fmt: skip


def k(n: int) -> str:
    return bench_scale.label(n) if n >= 10_000 and n % 1000 == 0 else f"{n:,}"


# -- the parts: each returns its rows ------------------------------------------------------------


def profile_rows(sizes: Sizes) -> list[Row]:
    names = ("instructions, stored single-row write", "instructions, held single-row write",
             "instructions, bulk row")  # fmt: skip
    musts, goals = (650_000, 1_200_000, 200_000), (560_000, 1_000_000, 160_000)
    if not profile_write.have_valgrind():
        return [
            Row(n, "-", None, "<=", m, g, "k", "needs valgrind") for n, m, g in zip(names, musts, goals, strict=True)
        ]
    layers = [profile_write.LAYERS[0], profile_write.LAYERS[-1]]
    (_, bare), (_, shipped) = profile_write.profile(sizes.profile_rows, sizes.profile_bulk, layers)
    counts = (sizes.profile_rows, sizes.profile_rows, sizes.profile_bulk)
    return [Row(n, f"bare copy {b / 1000:,.0f}k", s, "<=", m, g, "k", note=f"a write of {c:,}")
            for n, b, s, m, g, c in zip(names, bare, shipped, musts, goals, counts, strict=True)]  # fmt: skip


def without_detectors(text: str) -> str:
    """The default policy without its content-detector rule (block-secrets), a version of its own."""
    out = text.replace("  - id: block-secrets\n", "  - id: block-secrets\n    enabled: false\n")
    out = out.replace('version: "1.0.0"', 'version: "1.0.0-no-detectors"')
    if load_policy(out).needs_detectors:
        raise SystemExit("bench: the default policy reads a detector beside block-secrets: update without_detectors()")
    return out


def install(conn: psycopg.Connection[Any], text: str) -> None:
    conn.execute(compile_policy(load_policy(text)).install_sql())


def bulk_rows(server: str, sizes: Sizes, repeat: int) -> list[Row]:
    n = sizes.bulk
    with bench_database(server, "memgov_bench_summary_bulk") as dsn, psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(bench_write.SETUP.replace("%(rows)s", str(n)))
        deploy(dsn, DEFAULT_POLICY)
        conn.execute("SET max_parallel_workers_per_gather = 0")
        out = []
        for label, text, must, goal in (
            ("default policy", DEFAULT_POLICY.read_text(encoding="utf-8"), 1.8, 1.4),
            ("a policy without content detectors", without_detectors(DEFAULT_POLICY.read_text(encoding="utf-8")),
             1.4, 1.2),
        ):  # fmt: skip
            install(conn, text)
            bare, governed = [], []
            for _ in range(repeat):  # alternated, so that drift hits both
                bare.append(bench_write.bulk(conn, "bench.bare", 1, n))
                governed.append(bench_write.bulk(conn, "memgov.long_term_memory_items", 1, n))
            b, g = min(bare), min(governed)
            out.append(Row(f"bulk {k(n)}, {label} / bare", f"bare copy {b / n * 1e6:.1f} µs/row", g / b, "<=",
                           must, goal, note=f"{g / n * 1e6:.1f} µs/row"))  # fmt: skip
    return out


def sweep_rows(server: str, sizes: Sizes, repeat: int) -> list[Row]:
    r = bench_retention
    with bench_database(server, "memgov_bench_summary_sweep") as dsn, psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SET max_parallel_workers_per_gather = 0")
        conn.execute(r.SETUP)
        deploy(dsn, DEFAULT_POLICY)

        def alternated(table_rows: int, every: int = 2) -> tuple[float, float]:
            """Best plain DELETE and best sweep of the same freshly filled rows, alternated."""
            plain, swept = [], []
            for _ in range(repeat):
                plain += timings(1, lambda: r.plain_delete(conn), lambda: r.fill(conn, table_rows, every))
                swept += timings(1, lambda: r.sweep(conn), lambda: r.fill(conn, table_rows, every, bare=False))
            return min(plain), min(swept)

        rows = sizes.sweep_table
        plain, swept = alternated(rows)
        due = rows // 2
        out = [Row(f"sweep {k(due)} of {k(rows)} / plain DELETE", f"plain DELETE {plain / due * 1e6:.2f} µs/row",
                   swept / plain, "<=", 3.0, 2.0, note=f"{swept / due * 1e6:.2f} µs/row")]  # fmt: skip

        # The two rows below compare the sweep with itself at two sizes; beside each, the same
        # comparison for a plain DELETE of the same rows from the bare copy: what PostgreSQL's
        # own DELETE pays for the larger table (pages touched, WAL, cache), the floor of the ratio.
        small, large = sizes.per_row
        (plain_small, swept_small), (plain_large, swept_large) = (alternated(2 * n) for n in (small, large))
        out.append(Row(f"sweep per-row cost, {k(large)} expired / {k(small)} expired",
                       f"{k(small)} expired: {swept_small / small * 1e6:.2f} µs/row",
                       (swept_large / large) / (swept_small / small), "<=", 1.2, 1.1,
                       note=f"{swept_large / large * 1e6:.2f} µs/row; plain DELETE "
                            f"{(plain_large / large) / (plain_small / small):.2f}×"))  # fmt: skip

        expired, small_table, large_table = sizes.sparse
        (plain_small, swept_small), (plain_large, swept_large) = (
            alternated(n, n // expired) for n in (small_table, large_table))  # fmt: skip
        out.append(Row(f"sweep of {k(expired)} expired in {k(large_table)} rows / in {k(small_table)}",
                       f"in {k(small_table)}: {swept_small * 1e3:.0f} ms", swept_large / swept_small, "<=", 1.5, 1.2,
                       note=f"{swept_large * 1e3:.0f} ms; plain DELETE {plain_large / plain_small:.2f}×"))  # fmt: skip
    return out


def writers_rows(server: str, sizes: Sizes, repeat: int) -> list[Row]:
    r = bench_retention
    with bench_database(server, "memgov_bench_summary_writers") as dsn, psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(r.SETUP)
        deploy(dsn, DEFAULT_POLICY)
        runs = [r.writer_rates(dsn, conn, sizes.sweep_table, sizes.writers_window) for _ in range(repeat)]
    ratios = [during / quiet for quiet, during, _, _ in runs]
    best = max(range(len(runs)), key=lambda i: ratios[i])
    quiet, during, seconds, _ = runs[best]
    note = f"{during:,.0f} inserts/s, sweep {seconds:.1f} s, runs {min(ratios):.2f}–{max(ratios):.2f}"
    return [Row(f"{r.WRITERS} writers during a sweep of {k(sizes.sweep_table // 2)} / without a sweep",
                f"without: {quiet:,.0f} inserts/s", ratios[best], ">=", 0.8, 0.9, "share", note=note)]  # fmt: skip


def select_rows(server: str, sizes: Sizes, repeat: int) -> list[Row]:
    rd = bench_read
    with bench_database(server, "memgov_bench_summary_select") as dsn, psycopg.connect(dsn, autocommit=True) as owner:
        with owner.transaction():
            owner.execute("SET LOCAL ROLE memgov_owner")
            owner.execute(rd.LOAD, {"org": "acme", "rows": sizes.select_others, "vocabulary": rd.VOCABULARY})
            owner.execute(rd.LOAD, {"org": "tenk", "rows": 10_000, "vocabulary": rd.VOCABULARY})
        owner.execute("VACUUM ANALYZE memgov.long_term_memory_items")
        deploy(dsn, rd.POLICIES["memproof"])  # a policy with read rules: a get decision per row
        with psycopg.connect(dsn, autocommit=True) as reader:
            reader.execute("SET ROLE memgov_writer")
            reader.execute("SELECT set_config('memgov.org_id', 'tenk', false)")
            for conn in (owner, reader):
                conn.execute("SET max_parallel_workers_per_gather = 0")
                conn.execute("SET enable_seqscan = off")  # both on the primary key's index (see bench_read)
            shown = len(reader.execute(rd.SELECT_RLS).fetchall())
            bare, rls = [], []
            for _ in range(repeat):
                bare += timings(1, lambda: owner.execute(rd.SELECT_BARE).fetchall())
                rls += timings(1, lambda: reader.execute(rd.SELECT_RLS).fetchall())
    b, g = min(bare), min(rls)
    return [Row("plain SELECT of 10k rows under read rules / without row security",
                f"owner's SELECT {b * 1e3:.1f} ms", b / g, ">=", 0.5, 0.8, "share",
                note=f"{g * 1e3:.1f} ms, memproof.yaml, {shown:,} rows shown")]  # fmt: skip


def scale_rows(server: str | None, sizes: Sizes, repeat: int, scale_json: str | None, ten_million: bool) -> list[Row]:
    if scale_json:
        results = {int(size): ops for size, ops in json.loads(Path(scale_json).read_text(encoding="utf-8")).items()}
        source = f"from {Path(scale_json).name}"
    else:
        assert server is not None
        steps = (1_000_000, 10_000_000) if ten_million else sizes.scale
        results = bench_scale.run(server, list(steps), sizes.searches, repeat)
        source = "this run"
    small, large = sorted(results)[-2:]
    a, b = results[small]["search p50"], results[large]["search p50"]
    note = f"{b * 1e3:.2f} ms, {source}"
    if (small, large) != (1_000_000, 10_000_000):
        note += "; 10M / 1M needs --10m"
    return [Row(f"memgov.search p50 at {k(large)} memories / at {k(small)}", f"at {k(small)}: {a * 1e3:.2f} ms",
                b / a, "<=", 1.5, 1.2, note=note)]  # fmt: skip


def policy_rows(server: str, sizes: Sizes, repeat: int) -> list[Row]:
    bp = bench_policy
    n = sizes.policy_rows
    with bench_database(server, "memgov_bench_summary_policy") as dsn, psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SET max_parallel_workers_per_gather = 0")
        conn.execute(bp.SETUP)
        deploy(dsn, DEFAULT_POLICY)
        policy = load_policy(DEFAULT_POLICY.read_bytes())
        with conn.cursor() as cur:
            cur.executemany("INSERT INTO bench.rules VALUES (%s, %s, %s, %s, %s, %s)", bp.interpreted_rules(policy))
        bp.fill_source(conn, n, bp.CATEGORIES)
        compiled = bp.timed_insert(conn, "compiled", repeat)
        interpreted = bp.timed_insert(conn, "interpreted", repeat)
        bp.fill_source(conn, n, [f"cat{c:03d}" for c in range(100)])
        bp.deploy_text(conn, bp.many_rules_policy(4, 5, "20.0.0"))
        small = bp.timed_insert(conn, "compiled", repeat)
        bp.deploy_text(conn, bp.many_rules_policy(100, 5, "500.0.0"))
        big = bp.timed_insert(conn, "compiled", repeat)
    # "keep": no worse than where they stand (4.8× faster; 1.2–1.6× the 20-rule time)
    return [
        Row(f"compiled policy, bulk {k(n)}: interpreted / compiled", f"interpreted {interpreted / n * 1e6:.1f} µs/row",
            interpreted / compiled, ">=", 4.0, 4.8, note=f"compiled {compiled / n * 1e6:.1f} µs/row"),
        Row(f"compiled policy, bulk {k(n)}: 500 rules / 20 rules", f"20 rules {small / n * 1e6:.1f} µs/row",
            big / small, "<=", 1.6, 1.2, note=f"{big / n * 1e6:.1f} µs/row"),
    ]  # fmt: skip


# -- the run -------------------------------------------------------------------------------------


def main() -> None:
    p = parser(__doc__ or "")
    p.add_argument("--quick", action="store_true", help="small sizes: proves the tooling, figures not of record")
    p.add_argument("--out", default=os.environ.get("MEMGOV_BENCH_OUT"), help="also write the table here (markdown)")
    p.add_argument("--scale-json", help="take the search row from this `scripts/bench scale --json` file")
    p.add_argument("--10m", dest="ten_million", action="store_true", help="the search row at 10M / 1M (hours)")
    p.add_argument("--skip", default="", help=f"parts to leave out, comma-separated: {', '.join(PARTS)}")
    args = p.parse_args()
    skip = {s.strip() for s in args.skip.split(",") if s.strip()}
    if skip - set(PARTS):
        raise SystemExit(f"bench: unknown part(s) {', '.join(sorted(skip - set(PARTS)))} (parts: {', '.join(PARTS)})")
    sizes, repeat = (QUICK if args.quick else Sizes()), args.repeat
    rows: list[Row] = []

    def part(name: str, run: Any) -> None:
        if name in skip:
            return
        print(f"bench: {name} ...", file=sys.stderr, flush=True)
        rows.extend(run())

    part("profile", lambda: profile_rows(sizes))
    with bench_server(args.dsn) as server:
        part("bulk", lambda: bulk_rows(server, sizes, repeat))
        part("sweep", lambda: sweep_rows(server, sizes, repeat))
        part("select", lambda: select_rows(server, sizes, repeat))
        part("scale", lambda: scale_rows(server, sizes, repeat, args.scale_json, args.ten_million))
        part("writers", lambda: writers_rows(server, sizes, repeat))
        part("policy", lambda: policy_rows(server, sizes, repeat))
    kind = "--quick (small sizes, not of record)" if args.quick else "sizes of record"
    title = f"memgov-pg benchmark summary: best of {repeat}, {kind}, {os.cpu_count()} CPUs"
    text = markdown(rows, title) + "\n" + tally(rows) + "\n"
    print(text)
    if args.out:
        write(args.out, text)
        print(f"bench: written to {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()

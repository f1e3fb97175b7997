"""What each operation costs as the table grows: 100k, 1M and (behind --10m) 10M memories.

    scripts/bench scale [--10m] [--sizes 100000,1000000] [--searches 200] [--json FILE]

The table grows in steps, each size adding to the one before, and at each size
measures, as a tenant's writer (memgov_writer, memgov.org_id set), default policy:

    search p50        memgov.search of one word in one project, a transaction each (median)
    get p50           memgov.get(memory_id) of one of the tenant's memories (median)
    single write p50  a single-row INSERT the policy stores, a transaction each (median)
    sweep per row     CALL memgov.run_maintenance() deleting the expired 1 % of the rows
                      the step added, divided by the rows it deleted (one run: it deletes)
    plain SELECT      SELECT * of the tenant's 10,000 memories under row security, per row (best of --repeat)

and prints each cost per size and the ratio of each size to the one before
(1M / 100k, 10M / 1M): a cost that stays flat as the table grows has ratios near 1.

The data: tenants of 10,000 memories each (the 10M table holds 1,000 of them),
ten projects a tenant, eight words of a 2,000-word vocabulary a memory, so a
word matches about 40 memories of a tenant whatever the table's size. The live
rows go through governance as it is: ``INSERT ... SELECT generate_series`` as
each tenant's writer, every row decided by the deployed policy and logged (a
bulk statement's stored rows share their log row). The expired 1 % are loaded
as memgov_owner, the engine's own path, which decides nothing: the engine sets
a client's ``created_at`` itself, so no client can write an already old row.
Before the expired rows are loaded, a maintenance run seals the log the load
wrote, so the measured sweep does the sweep's work only.
"""

from __future__ import annotations

import itertools
import json
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from memgov_pg.deploy import deploy
from tests.bench.common import bench_database, bench_server, best_of, parser, table

ROOT = Path(__file__).resolve().parents[2]
TENANT_ROWS = 10_000
VOCABULARY = 2000
EXPIRED_EVERY = 100  # 1 % of the rows a step adds are expired
OPERATIONS = ("search p50", "get p50", "single write p50", "sweep per row", "plain SELECT per row")

# a tenant's live memories, through the write trigger as its writer (the policy stores them)
LIVE = """
INSERT INTO memgov.long_term_memory_items
       (org_id, project_id, category, fact_text, source, confidence, context_source)
SELECT %(org)s, 'p' || (i %% 10), (ARRAY['preference', 'user_fact', 'project_fact', 'decision'])[1 + i %% 4],
       (SELECT string_agg('w' || (1 + floor(random() * %(vocabulary)s))::int, ' ') FROM generate_series(1, 8 + i * 0)),
       'agent_extracted', 0.9, 'mcp'
  FROM generate_series(1, %(rows)s) AS i
"""
# expired memories of the tenants t<first>..t<last>, on the engine's own path (see above)
EXPIRED = """
INSERT INTO memgov.long_term_memory_items
       (org_id, project_id, category, fact_text, source, confidence, retention_policy, context_source,
        created_at, updated_at)
SELECT 't' || (%(first)s + i %% %(tenants)s), 'p' || (i %% 10), 'user_fact', 'Expired fact #' || i,
       'agent_extracted', 0.9, 'ttl_7d', 'mcp', now() - interval '8 days', now() - interval '8 days'
  FROM generate_series(1, %(rows)s) AS i
"""
SINGLE = (
    "INSERT INTO memgov.long_term_memory_items (org_id, project_id, category, fact_text, source, confidence,"
    " context_source) VALUES ('t0', 'p1', 'preference', %s, 'agent_extracted', 0.9, 'mcp')"
)


def writer(dsn: str, org: str) -> psycopg.Connection[Any]:
    conn = psycopg.connect(dsn, autocommit=True)
    conn.execute("SET ROLE memgov_writer")
    conn.execute("SELECT set_config('memgov.org_id', %s, false)", (org,))
    return conn


def grow(dsn: str, owner: psycopg.Connection[Any], have: int, size: int) -> None:
    """Adds tenants up to ``size`` memories: live rows as each tenant's writer, then 1 % expired."""
    first, last = have // TENANT_ROWS, size // TENANT_ROWS
    started = time.perf_counter()
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SET ROLE memgov_writer")
        for t in range(first, last):
            with conn.transaction():
                conn.execute("SELECT set_config('memgov.org_id', %s, true)", (f"t{t}",))
                conn.execute(LIVE, {"org": f"t{t}", "rows": TENANT_ROWS, "vocabulary": VOCABULARY})
            if (t - first + 1) % 50 == 0:
                print(f"  scale: {t + 1} tenants loaded", file=sys.stderr, flush=True)
    owner.execute("CALL memgov.run_maintenance()")  # seals what the load logged: not the measured sweep's work
    with owner.transaction():
        owner.execute("SET LOCAL ROLE memgov_owner")
        owner.execute(EXPIRED, {"first": first, "tenants": last - first, "rows": (size - have) // EXPIRED_EVERY})
    owner.execute("VACUUM ANALYZE memgov.long_term_memory_items")
    owner.execute("VACUUM ANALYZE memgov.decision_log")
    owner.execute("CHECKPOINT")
    print(f"  scale: {size:,} memories built in {time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)


def p50(run: Any, args_list: list[Any]) -> float:
    times = []
    for a in args_list:
        start = time.perf_counter()
        run(a)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def expired(conn: psycopg.Connection[Any]) -> int:
    row = conn.execute("SELECT count(*) FROM memgov.long_term_memory_items WHERE expires_at <= now()").fetchone()
    return int(row[0]) if row else 0


def measure(dsn: str, owner: psycopg.Connection[Any], searches: int, repeat: int) -> dict[str, float]:
    """Seconds of each operation at the table's present size (per row for the sweep and the SELECT)."""
    rng = random.Random(7)
    words = [f"w{rng.randint(1, VOCABULARY)}" for _ in range(searches)]
    out: dict[str, float] = {}
    with writer(dsn, "t0") as conn:
        ids = [r[0] for r in conn.execute("SELECT memory_id FROM memgov.long_term_memory_items LIMIT 1000")]
        picks = [rng.choice(ids) for _ in range(searches)]

        def search(word: str) -> None:
            conn.execute("SELECT * FROM memgov.search(%s)", (Jsonb({"text": word, "project_id": "p1"}),),
                         prepare=True).fetchall()  # fmt: skip

        def get(memory_id: Any) -> None:
            conn.execute("SELECT * FROM memgov.get(%s)", (memory_id,), prepare=True).fetchall()

        def write(n: int) -> None:
            conn.execute(SINGLE, (f"Scale bench single write {n}",), prepare=True)

        for run, inputs in ((search, words[:20]), (get, picks[:20]), (write, range(20))):
            p50(run, list(inputs))  # warm the plans and the cache
        out["search p50"] = p50(search, words)
        out["get p50"] = p50(get, picks)
        out["single write p50"] = p50(write, list(range(20, 20 + searches)))
        shown = len(conn.execute("SELECT * FROM memgov.long_term_memory_items").fetchall())
        out["plain SELECT per row"] = best_of(
            repeat, lambda: conn.execute("SELECT * FROM memgov.long_term_memory_items").fetchall()
        ) / max(shown, 1)
    due = expired(owner)
    start = time.perf_counter()
    owner.execute("CALL memgov.run_maintenance()")
    took = time.perf_counter() - start
    left = expired(owner)
    out["sweep per row"] = took / max(due - left, 1)
    return out


def run(server: str, sizes: list[int], searches: int = 200, repeat: int = 3) -> dict[int, dict[str, float]]:
    """Each operation's cost at each size (seconds; per row for the sweep and the plain SELECT)."""
    results: dict[int, dict[str, float]] = {}
    with bench_database(server, "memgov_bench_scale") as dsn, psycopg.connect(dsn, autocommit=True) as owner:
        deploy(dsn, ROOT / "policies" / "default.yaml")
        have = 0
        for size in sorted(sizes):
            grow(dsn, owner, have, size)
            have = size
            results[size] = measure(dsn, owner, searches, repeat)
    return results


def label(size: int) -> str:
    return f"{size // 1_000_000}M" if size % 1_000_000 == 0 else f"{size // 1000}k"


def cost(op: str, seconds: float) -> str:
    return f"{seconds * 1e6:.1f} µs" if "per row" in op else f"{seconds * 1e3:.2f} ms"


def report(results: dict[int, dict[str, float]]) -> str:
    sizes = sorted(results)
    steps = list(itertools.pairwise(sizes))
    header = ("operation", *(label(s) for s in sizes), *(f"{label(b)} / {label(a)}" for a, b in steps))
    rows = [(op, *(cost(op, results[s][op]) for s in sizes),
             *(f"{results[b][op] / results[a][op]:.2f}×" for a, b in steps)) for op in OPERATIONS]  # fmt: skip
    return table(rows, header)


def main() -> None:
    p = parser(__doc__ or "")
    p.add_argument("--sizes", default="100000,1000000", help="table sizes, comma-separated (multiples of 10,000)")
    p.add_argument("--10m", dest="ten_million", action="store_true", help="add the 10,000,000-memory step (hours)")
    p.add_argument("--searches", type=int, default=200, help="searches, gets and writes per p50")
    p.add_argument("--json", help="also write the figures (seconds) to this file as JSON")
    args = p.parse_args()
    sizes = sorted({int(s) for s in args.sizes.split(",") if s.strip()} | ({10_000_000} if args.ten_million else set()))
    if any(s % TENANT_ROWS for s in sizes):
        raise SystemExit(f"scale: every size must be a multiple of {TENANT_ROWS:,}")
    with bench_server(args.dsn) as server:
        results = run(server, sizes, args.searches, args.repeat)
    print(
        f"default policy; tenants of {TENANT_ROWS:,} memories; p50 of {args.searches}, SELECT best of {args.repeat}\n"
    )
    print(report(results))
    if args.json:
        Path(args.json).write_text(json.dumps({str(k): v for k, v in results.items()}, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()

"""The Python engine under concurrency: 64 remember() calls through a pool of 8, at
once (``asyncio.gather``) vs. one after another, in the same run.

    python -m tests.bench.bench_engine [--dsn DSN] [--repeat 5] [--calls 64] [--pool 8]

Both runs use the same ``MemoryPolicyEngine`` over an open ``AsyncConnectionPool``
(min_size = max_size = --pool), an agent's login role (member of memgov_writer),
``policies/default.yaml`` deployed; each call is its own transaction. The figure is
sequential time / concurrent time (best of --repeat).
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import psycopg
from psycopg import conninfo
from psycopg_pool import AsyncConnectionPool

from memgov_pg.deploy import deploy
from memgov_pg.engine import MemoryPolicyEngine
from tests.bench.common import bench_database, parser, table

ROOT = Path(__file__).resolve().parents[2]
ROLE = "memgov_bench_engine_agent"


def item(n: int) -> dict[str, Any]:
    return {"org_id": "acme", "project_id": "p1", "category": "user_fact",
            "fact_text": f"The user mentioned fact number {n} about project Atlas",
            "source": "agent_extracted", "confidence": 0.9, "context_source": "mcp"}  # fmt: skip


async def measure(dsn: str, calls: int, size: int, repeat: int) -> tuple[float, float]:
    async with AsyncConnectionPool(dsn, min_size=size, max_size=size, open=False) as pool:
        await pool.open(wait=True)
        engine = MemoryPolicyEngine.from_pool(pool, org_id="acme")

        async def sequential() -> None:
            for n in range(calls):
                await engine.remember(item(n))

        async def concurrent() -> None:
            await asyncio.gather(*(engine.remember(item(n)) for n in range(calls)))

        await concurrent()  # warm every connection (plans, PL/pgSQL caches)
        best = {"sequential": float("inf"), "concurrent": float("inf")}
        for _ in range(repeat):
            for name, run in (("sequential", sequential), ("concurrent", concurrent)):
                start = time.perf_counter()
                await run()
                best[name] = min(best[name], time.perf_counter() - start)
    return best["sequential"], best["concurrent"]


def main() -> None:
    p = parser(__doc__ or "")
    p.add_argument("--calls", type=int, default=64)
    p.add_argument("--pool", type=int, default=8)
    p.set_defaults(repeat=5)
    args = p.parse_args()
    with bench_database(args.dsn, "memgov_bench_engine") as target:
        with psycopg.connect(target, autocommit=True) as conn:
            if not conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (ROLE,)).fetchone():
                conn.execute(f"CREATE ROLE {ROLE} LOGIN")
            conn.execute(f"GRANT memgov_writer TO {ROLE}")
        deploy(target, ROOT / "policies" / "default.yaml")
        agent = conninfo.make_conninfo(target, user=ROLE)
        seq, conc = asyncio.run(measure(agent, args.calls, args.pool, args.repeat))
    rows = [
        (f"{args.calls} sequential remember()", f"{seq * 1000:.1f} ms", f"{seq / args.calls * 1000:.2f} ms/call"),
        (
            f"{args.calls} concurrent remember(), pool of {args.pool}",
            f"{conc * 1000:.1f} ms",
            f"{conc / args.calls * 1000:.2f} ms/call",
        ),
    ]
    print(table(rows, (f"run (best of {args.repeat})", "total", "per call")))
    print(f"speed-up: {seq / conc:.2f}x")


if __name__ == "__main__":
    main()

"""A LangGraph store on memgov vs. LangGraph's PostgresStore, on the same database.

    python -m tests.bench.bench_langgraph [--dsn DSN] [--items 500] [--repeat 3]

--items puts of new keys, --items puts of the same keys again (updates), --items gets and
--items searches (namespace prefix, limit 10, no query), each call its own transaction, on
one connection: ``PostgresStore`` (langgraph-checkpoint-postgres, without pgvector: its
tables in schema public, as the database's owner) against ``MemgovStore`` as memgov_writer
under policies/default.yaml (each put decided and logged, each get a logged get decision,
each search read under row level security). Calls per second and the ratio memgov /
PostgresStore (1.0: the same speed). Best of --repeat; both sides measured in the same run.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import psycopg
from psycopg.rows import dict_row

from memgov_pg.deploy import deploy
from tests.bench.common import bench_database, parser, table

ROOT = Path(__file__).resolve().parents[2]
LABELS = {"put": "puts (new keys)", "update": "puts (updates)", "get": "gets", "search": "searches"}


def run(store: Any, items: int, round_: list[int]) -> dict[str, float]:
    """Seconds of each phase, over fresh keys (``round_`` counts the runs)."""
    round_[0] += 1
    ns = ("bench", f"r{round_[0]}")
    seconds = {}
    for phase in ("put", "update", "get", "search"):
        start = time.perf_counter()
        for i in range(items):
            if phase in ("put", "update"):
                store.put((*ns, f"u{i % 10}"), f"k{i}", {"text": f"note {i} of {phase}", "n": i})
            elif phase == "get":
                assert store.get((*ns, f"u{i % 10}"), f"k{i}") is not None
            else:
                store.search((*ns, f"u{i % 10}"), limit=10)
        seconds[phase] = time.perf_counter() - start
    return seconds


def main() -> None:
    from langgraph.store.postgres import PostgresStore

    from memgov_pg.langgraph import MemgovStore

    p = parser(__doc__ or "")
    p.add_argument("--items", type=int, default=500, help="calls of each kind per run")
    args = p.parse_args()
    with bench_database(args.dsn, "memgov_bench_langgraph") as dsn:
        deploy(dsn, ROOT / "policies" / "default.yaml")
        best: dict[str, dict[str, float]] = {"postgres": {}, "memgov": {}}
        with (
            psycopg.connect(dsn, autocommit=True, prepare_threshold=0, row_factory=dict_row) as plain,
            psycopg.connect(dsn, autocommit=True) as governed,
        ):
            pg_store = PostgresStore(plain)
            pg_store.setup()
            governed.execute("SET ROLE memgov_writer")
            mg_store = MemgovStore(governed, org_id="acme")
            mg_store.setup()
            rounds = {"postgres": [0], "memgov": [0]}
            for _ in range(args.repeat):
                for name, store in (("postgres", pg_store), ("memgov", mg_store)):
                    for phase, secs in run(store, args.items, rounds[name]).items():
                        best[name][phase] = min(best[name].get(phase, secs), secs)
        rows = [
            (
                f"{args.items:,} {LABELS[phase]}",
                f"{args.items / best['postgres'][phase]:,.0f}/s",
                f"{args.items / best['memgov'][phase]:,.0f}/s",
                f"{best['postgres'][phase] / best['memgov'][phase]:.2f}",
            )
            for phase in ("put", "update", "get", "search")
        ]
        print(table(rows, ("calls", "PostgresStore", "MemgovStore", "memgov / PostgresStore")))


if __name__ == "__main__":
    main()

"""Governed reads vs. the same reads ungoverned.

    python -m tests.bench.bench_read [--dsn DSN] [--rows 1000000] [--searches 1000] [--repeat 3]

(1) Recall: --searches full-text searches of one word each (words drawn from a
    2,000-word vocabulary; every memory holds eight, so a word matches about
    four thousand of the --rows memories of tenant acme, four hundred of its
    project p1) in project p1, returning at most 20 rows, one search per
    transaction, on one connection as memgov_writer:
    ``SELECT * FROM memgov.search(...)`` against the bare, prepared
    ``SELECT ... WHERE search_vector @@ q ORDER BY ts_rank_cd(...) LIMIT 20`` on
    the same GIN index, as the table's owner (no row level security, no log).
    Searches per second, governed / bare: target at least 0.8. Measured under
    the default policy (it names neither search nor get: one search decision,
    one log row) and under policies/examples/memproof.yaml (it governs reads: a
    get decision per candidate as well).
(2) A direct SELECT of the 10,000 memories of tenant tenk as memgov_writer,
    through row level security, against the same SELECT as the owner with a
    WHERE org_id = (SELECT 'tenk') clause instead, both on the primary key's
    index (enable_seqscan off): under each of the two policies. Both sides run
    without parallel workers (the row level security functions are not parallel
    safe, so a writer's plans never have them).

Best of --repeat for every figure; both sides of a ratio are measured in the
same run on the same rows.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from memgov_pg.deploy import deploy
from tests.bench.common import bench_database, best_of, parser, table

ROOT = Path(__file__).resolve().parents[2]
VOCABULARY = 2000
POLICIES = {"default": ROOT / "policies" / "default.yaml", "memproof": ROOT / "policies" / "examples" / "memproof.yaml"}

# memories of eight words w1..w2000 each, loaded on the engine's own path (as memgov_owner:
# no decision per row); confidence and age vary so that the score has something to weigh
LOAD = """
INSERT INTO memgov.long_term_memory_items
       (org_id, project_id, category, fact_text, source, confidence, created_at, updated_at)
SELECT %(org)s, 'p' || (i %% 10), (ARRAY['preference', 'user_fact', 'project_fact', 'decision'])[1 + i %% 4],
       (SELECT string_agg('w' || (1 + floor(random() * %(vocabulary)s))::int, ' ') FROM generate_series(1, 8 + i * 0)),
       'agent_extracted', round((0.5 + random() / 2)::numeric, 3),
       now() - random() * interval '90 days', now() - random() * interval '90 days'
  FROM generate_series(1, %(rows)s) AS i
"""

BARE = """
SELECT m.memory_id, m.org_id, m.project_id, m.agent_id, m.subject_id, m.session_id, m.category,
       m.fact_text, m.source, m.confidence, m.is_sensitive, m.retention_policy, m.context_source,
       m.metadata, m.created_at, m.updated_at, m.last_confirmed_at, m.expires_at, m.policy_version,
       m.decision_id, ts_rank_cd(m.search_vector, q, 32) AS rank
  FROM memgov.long_term_memory_items m, websearch_to_tsquery('pg_catalog.simple', %(text)s) AS q
 WHERE m.search_vector @@ q AND m.org_id = 'acme' AND m.status = 'active' AND m.project_id = 'p1'
 ORDER BY rank DESC
 LIMIT 20
"""

SELECT_RLS = "SELECT * FROM memgov.long_term_memory_items"
# the tenant as an uncorrelated subquery, as row level security's (SELECT memgov.session_tenant())
# is; both sides run with enable_seqscan off, so that both read the primary key's org_id (the
# planner otherwise picks a sequential scan for one and the index for the other by their row
# estimates, and the ratio measures the plans instead of the policy)
SELECT_BARE = "SELECT * FROM memgov.long_term_memory_items WHERE org_id = (SELECT 'tenk'::text)"


def searches(conn: psycopg.Connection[Any], words: list[str], governed: bool) -> int:
    """Runs one search per word (autocommit: a transaction each); the rows returned."""
    returned = 0
    for word in words:
        if governed:
            query = Jsonb({"text": word, "project_id": "p1"})
            cur = conn.execute("SELECT * FROM memgov.search(%s)", (query,), prepare=True)
        else:
            cur = conn.execute(BARE, {"text": word}, prepare=True)
        returned += len(cur.fetchall())
    return returned


def main() -> None:
    p = parser(__doc__ or "")
    p.add_argument("--rows", type=int, default=1_000_000, help="memories of tenant acme")
    p.add_argument("--searches", type=int, default=1000, help="searches per run")
    args = p.parse_args()
    words = [f"w{random.Random(i).randint(1, VOCABULARY)}" for i in range(args.searches)]
    with bench_database(args.dsn, "memgov_bench_read") as dsn, psycopg.connect(dsn, autocommit=True) as owner:
        with owner.transaction():
            owner.execute("SET LOCAL ROLE memgov_owner")
            owner.execute(LOAD, {"org": "acme", "rows": args.rows, "vocabulary": VOCABULARY})
            owner.execute(LOAD, {"org": "tenk", "rows": 10_000, "vocabulary": VOCABULARY})
        owner.execute("VACUUM ANALYZE memgov.long_term_memory_items")
        owner.execute("SET max_parallel_workers_per_gather = 0")  # as the writer's plans (no parallel-safe RLS)
        rows: list[tuple[str, ...]] = []
        with psycopg.connect(dsn, autocommit=True) as writer:
            writer.execute("SET ROLE memgov_writer")
            writer.execute("SET max_parallel_workers_per_gather = 0")
            for name, path in POLICIES.items():
                deploy(dsn, path)
                writer.execute("SELECT set_config('memgov.org_id', 'acme', false)")
                searches(writer, words[:20], True)  # warm the plans and the cache
                searches(owner, words[:20], False)
                bare_s = best_of(args.repeat, lambda: searches(owner, words, False))
                governed_s = best_of(args.repeat, lambda: searches(writer, words, True))
                got = searches(writer, words[:100], True)
                rows.append((f"(1) {args.searches:,} searches, {name} policy",
                             f"{args.searches / bare_s:,.0f}/s", f"{args.searches / governed_s:,.0f}/s",
                             f"{bare_s / governed_s:.2f}", f"{got / 100:.1f} rows a search"))  # fmt: skip

                writer.execute("SELECT set_config('memgov.org_id', 'tenk', false)")
                for conn in (owner, writer):
                    conn.execute("SET enable_seqscan = off")
                assert len(writer.execute(SELECT_RLS).fetchall()) <= 10_000
                bare_s = best_of(args.repeat, lambda: owner.execute(SELECT_BARE).fetchall())
                rls_s = best_of(args.repeat, lambda: writer.execute(SELECT_RLS).fetchall())
                shown = len(writer.execute(SELECT_RLS).fetchall())
                for conn in (owner, writer):
                    conn.execute("RESET enable_seqscan")
                rows.append((f"(2) SELECT of 10,000 rows, {name} policy", f"{bare_s * 1e3:.1f} ms",
                             f"{rls_s * 1e3:.1f} ms", f"{bare_s / rls_s:.2f}", f"{shown:,} rows shown"))  # fmt: skip
    print(f"{args.rows:,} memories; best of {args.repeat} for every figure\n")
    print(table(rows, ("measurement", "bare (same run)", "governed", "governed / bare", "")))


if __name__ == "__main__":
    main()

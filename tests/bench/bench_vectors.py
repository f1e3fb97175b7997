"""The LangGraph store's semantic search without pgvector (sql/066_vectors.sql), and its parts.

    python -m tests.bench.bench_vectors [--dsn DSN] [--items 1000] [--dims 128] [--repeat 5]

Puts --items items (one vector each, --dims dimensions, random) into one namespace of one
tenant through ``MemgovStore`` as memgov_writer under policies/default.yaml, then times:

- a put with an index against one without (what ``memgov.store_vectors`` adds to a put);
- a search by vector, limit 10, for each distance, as the writer (row level security);
- its parts, as the superuser (no row level security), over the same rows: the rows of the
  namespace alone, the same with the content check (sha256 of each text), the dot products
  alone, and the whole ``memgov.store_vector_search``;
- the store's full-text search of the same namespace, for scale.

Embedding is not timed: the index's ``embed`` returns a stored random vector. Milliseconds
per call, best of --repeat.
"""

from __future__ import annotations

import random
import time
from pathlib import Path

import psycopg
from langchain_core.embeddings import Embeddings

from memgov_pg.deploy import deploy
from tests.bench.common import bench_database, best_of, parser, table

ROOT = Path(__file__).resolve().parents[2]
ORG = "acme"


class RandomEmbeddings(Embeddings):
    """A random vector per text, the same on every call (no model: embedding is not timed)."""

    def __init__(self, dims: int) -> None:
        self.dims = dims
        self.known: dict[str, list[float]] = {}
        self.rng = random.Random(42)

    def _one(self, text: str) -> list[float]:
        if text not in self.known:
            self.known[text] = [self.rng.gauss(0, 1) for _ in range(self.dims)]
        return self.known[text]

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self._one(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._one(text)


PARTS = {
    "rows of the namespace": """
        SELECT count(*) FROM memgov.long_term_memory_items m
         WHERE m.org_id = 'acme' AND m.namespace = 'bench.docs' AND m.status = 'active'""",
    "+ content check (sha256 per row)": """
        SELECT count(*) FROM memgov.long_term_memory_items m
          JOIN memgov.memory_vectors v ON v.memory_id = m.memory_id AND v.org_id = m.org_id
               AND v.content_hash = sha256(convert_to(m.fact_text, 'UTF8'))
         WHERE m.org_id = 'acme' AND m.namespace = 'bench.docs' AND m.status = 'active'""",
    "dot products alone": """
        SELECT max((SELECT sum(e.x * e.y) FROM unnest(v.vector, %(q)s::float8[]) e(x, y)))
          FROM memgov.memory_vectors v WHERE v.org_id = 'acme'""",
    "store_vector_search (cosine), no RLS": """
        SELECT count(*) FROM memgov.store_vector_search('bench', %(q)s::float8[], 'cosine')""",
}


def ms(seconds: float, calls: int = 1) -> str:
    return f"{seconds * 1000 / calls:.2f} ms"


def main() -> None:
    from memgov_pg.langgraph import MemgovStore

    p = parser(__doc__ or "")
    p.add_argument("--items", type=int, default=1000, help="items in the namespace searched")
    p.add_argument("--dims", type=int, default=128, help="dimensions of each vector")
    p.set_defaults(repeat=5)
    args = p.parse_args()
    embed = RandomEmbeddings(args.dims)
    rows: list[tuple[str, str]] = []
    with bench_database(args.dsn, "memgov_bench_vectors") as dsn:
        deploy(dsn, ROOT / "policies" / "default.yaml")
        with psycopg.connect(dsn, autocommit=True) as governed, psycopg.connect(dsn, autocommit=True) as su:
            governed.execute("SET ROLE memgov_writer")
            for distance in ("cosine", "inner_product", "l2"):
                config = {"dims": args.dims, "embed": embed, "fields": ["text"], "distance_type": distance}
                store = MemgovStore(governed, org_id=ORG, index=config)
                if distance == "cosine":
                    start = time.perf_counter()
                    for i in range(args.items):
                        store.put(("bench", "docs"), f"k{i}", {"text": f"note {i}"})
                    indexed = time.perf_counter() - start
                    plain = MemgovStore(governed, org_id=ORG)
                    start = time.perf_counter()
                    for i in range(args.items):
                        plain.put(("plainbench",), f"k{i}", {"text": f"note {i}"})
                    unindexed = time.perf_counter() - start
                    rows.append((f"put without an index ({args.items:,} calls)", ms(unindexed, args.items)))
                    rows.append((f"put with an index, {args.dims} dims", ms(indexed, args.items)))
                queries = [f"question {i}" for i in range(20)]
                took = best_of(args.repeat, lambda s=store, qs=queries: [s.search(("bench",), query=q) for q in qs])
                rows.append((f"search by vector, {distance}, as the writer", ms(took, len(queries))))
            took = best_of(args.repeat, lambda: [plain.search(("plainbench",), query=f"note {i}") for i in range(20)])
            rows.append(("full-text search (no index), as the writer", ms(took, 20)))
            su.execute("SELECT set_config('memgov.org_id', 'acme', false)")
            q = embed.embed_query("question 0")
            for name, statement in PARTS.items():
                took = best_of(args.repeat, lambda s=statement: su.execute(s, {"q": q}).fetchall())
                rows.append((f"part: {name}", ms(took)))
        print(f"{args.items:,} items of {args.dims} dimensions in one namespace; limit 10")
        print(table(rows, ("what", "per call")))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Cost of the content detectors per row, against sum(length(t)) measured in the same run.

    python3 scripts/bench_detectors.py --dsn postgresql://localhost/memgov [--rows 100000]

Generates deterministic memory-like texts (seeded): mostly prose of 20-300
characters in English and Ukrainian, some with dates, versions, prices and
ids; about 5 % carry PII and 2 % a secret. They go into a TEMP table (gone
when the session ends), parallel workers are disabled, and each query runs
--repeat times; the best run counts. The database must already have
sql/020_detectors.sql applied.
"""



from __future__ import annotations

import argparse
import random
import sys
import time
from collections.abc import Iterator

import psycopg

# --------------------------------------------------------------------------- texts

EN_WORDS = (
    "the user prefers short answers and dark mode in every editor they open "
    "project atlas moves billing from mysql to postgres before the next quarter "
    "team decided to ship on tuesdays after standup and review each pull request "
    "she likes hiking coffee without sugar and weekly summaries in british english "
    "deployment runs on kubernetes with three replicas behind a load balancer "
    "remember that the client wants invoices in pdf and reports every monday "
    "latency budget is tight so cache warm paths and avoid chatty round trips "
    "password reset flows and token refresh are handled by the identity service"
).split()
UK_WORDS = (
    "користувач любить короткі відповіді та темну тему у кожному редакторі "
    "проєкт переносить білінг на постгрес до кінця кварталу без простою "
    "команда вирішила робити реліз щовівторка після стендапу та рев'ю коду "
    "вона любить гори каву без цукру і щотижневі підсумки українською мовою "
    "звіти потрібні щопонеділка а рахунки лише у форматі пдф для бухгалтерії"
).split()
NUMERIC_BITS = (
    "2024-03-15",
    "2024-03-15T14:30:00Z",
    "v2.10.0-rc1",
    "PostgreSQL 15.4",
    "$1,299.99",
    "1 299,00 грн",
    "192.168.10.25",
    "550e8400-e29b-41d4-a716-446655440000",
    "commit 3f2a9c1",
    "order 4260181590830166",
    "p99 250 ms",
    "room 101",
    "12 engineers",
)
PII_BITS = (
    "olena.koval@example.com",
    "j.smith+billing@acme-corp.co.uk",
    "+380 67 123 45 67",
    "(555) 123-4567",
    "020 7946 0958",
    "SSN 123-45-6789",
    "card 4111 1111 1111 1111",
    "5555-5555-5555-4444",
)
SECRET_BITS = (
    "api_key=abc123def456ghi789",
    "password: hunter2hunter2",
    "Authorization: Bearer 8f14e45fceea167a5a36dedd4bea2543",
    "sk-proj-FAKEZYn9ZhyiA4uoRgnatmUdjAWtGSU8po_EXAMPLE1",
    "AKIAIOSFODNN7EXAMPLE",
    "ghp_FAKEmrcXgGCJbW56eCuNGMGmSrCEXAMPLE01",
    "-----BEGIN PRIVATE KEY-----",
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
)


def generate(rows: int, seed: int) -> Iterator[tuple[str, str]]:
    """Yield (text, label) pairs; label is 'pii', 'secret' or 'clean'."""
    rng = random.Random(seed)
    for _ in range(rows):
        words = UK_WORDS if rng.random() < 0.3 else EN_WORDS
        target = rng.randint(20, 300)
        parts: list[str] = []
        size = 0
        while size < target:
            part = rng.choice(NUMERIC_BITS) if rng.random() < 0.04 else rng.choice(words)
            parts.append(part)
            size += len(part) + 1
        roll = rng.random()
        label = "clean"
        if roll < 0.05:
            label, bit = "pii", rng.choice(PII_BITS)
        elif roll < 0.07:
            label, bit = "secret", rng.choice(SECRET_BITS)
        if label != "clean":
            parts.insert(rng.randrange(len(parts) + 1), bit)
        if parts[0] in words:  # capitalise prose, never a key or a number
            parts[0] = parts[0].capitalize()
        yield " ".join(parts) + ".", label


# --------------------------------------------------------------------------- timing


def best_of(conn: psycopg.Connection, query: str, repeat: int) -> tuple[float, object]:
    """Run `query` `repeat` times; return the fastest wall time in seconds and its result."""
    best = float("inf")
    result: object = None
    for _ in range(repeat):
        started = time.perf_counter()
        row = conn.execute(query).fetchone()
        best = min(best, time.perf_counter() - started)
        result = row[0] if row else None
    return best, result


QUERIES = {
    "baseline sum(length(t))": "SELECT sum(length(t)) FROM bench_texts",
    "contains_pii OR contains_secret": (
        "SELECT count(*) FILTER (WHERE memgov.contains_pii(t) OR memgov.contains_secret(t)) FROM bench_texts"
    ),
    "  contains_pii alone": "SELECT count(*) FILTER (WHERE memgov.contains_pii(t)) FROM bench_texts",
    "  contains_secret alone": ("SELECT count(*) FILTER (WHERE memgov.contains_secret(t)) FROM bench_texts"),
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dsn", required=True, help="libpq connection string or URI")
    parser.add_argument("--rows", type=int, default=100_000, help="texts to generate (default 100000)")
    parser.add_argument("--repeat", type=int, default=5, help="runs per query, best counts (default 5)")
    parser.add_argument("--seed", type=int, default=20240315, help="generator seed")
    args = parser.parse_args(argv)
    if args.rows < 1 or args.repeat < 1:
        parser.error("--rows and --repeat must be positive")

    try:
        conn = psycopg.connect(args.dsn, autocommit=True)
    except psycopg.Error as exc:
        message = " ".join(str(exc).split())
        print(f"bench_detectors: cannot connect: {message}", file=sys.stderr)
        return 1

    with conn:
        found = conn.execute(
            "SELECT to_regprocedure('memgov.contains_pii(text)') IS NOT NULL"
            " AND to_regprocedure('memgov.contains_secret(text)') IS NOT NULL"
        ).fetchone()
        if not found or not found[0]:
            print(
                "bench_detectors: memgov detectors are not installed in this database (apply sql/020_detectors.sql)",
                file=sys.stderr,
            )
            return 1

        conn.execute("SET max_parallel_workers_per_gather = 0")
        conn.execute("CREATE TEMP TABLE bench_texts (t text NOT NULL, label text NOT NULL)")
        labels = {"clean": 0, "pii": 0, "secret": 0}
        with conn.cursor().copy("COPY bench_texts (t, label) FROM STDIN") as copy:
            for text, label in generate(args.rows, args.seed):
                labels[label] += 1
                copy.write_row((text, label))
        conn.execute("VACUUM ANALYZE bench_texts")
        stats = conn.execute(
            "SELECT count(*), avg(length(t))::numeric(10, 1), min(length(t)), max(length(t)) FROM bench_texts"
        ).fetchone()
        assert stats is not None
        version = conn.execute("SHOW server_version").fetchone()

        print(f"server {version[0] if version else '?'}; parallel workers off; best of {args.repeat}")
        print(
            f"rows {stats[0]}, length avg {stats[1]} (min {stats[2]}, max {stats[3]}); "
            f"generated with PII {labels['pii']}, with a secret {labels['secret']}"
        )

        best_of(conn, QUERIES["contains_pii OR contains_secret"], 1)  # warm caches and regexes
        timings: dict[str, tuple[float, object]] = {
            name: best_of(conn, query, args.repeat) for name, query in QUERIES.items()
        }

    rows = stats[0]
    baseline = timings["baseline sum(length(t))"][0]
    print(f"\n{'query':<34}{'µs/row':>9}{'ratio':>8}{'result':>12}")
    for name, (seconds, result) in timings.items():
        print(f"{name:<34}{seconds / rows * 1e6:>9.3f}{seconds / baseline:>8.1f}{result!s:>12}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

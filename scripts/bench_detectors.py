#!/usr/bin/env python3
"""Accuracy and cost of the content detectors, each against a reference of the same run.

    python3 scripts/bench_detectors.py --dsn postgresql://localhost/memgov [--rows 100000]
    python3 scripts/bench_detectors.py --dsn … --only accuracy      # or: cost, adversarial

Three parts, all on by default:

accuracy
    Precision and recall of memgov.contains_pii / memgov.contains_secret per
    source, in one table: our labelled corpus (tests/cases/detectors/*.yaml)
    and the external benchmark in ../shared/bench/detectors_external/ beside
    the repository (other projects' test cases; its README says where each
    group comes from), plus how many of its unclaimed positives (kinds the
    docs do not claim) each detector and each opt-in field flags. A missing
    external directory is reported and skipped.
cost
    Generates deterministic memory-like texts (seeded): mostly prose of 20-300
    characters in English and Ukrainian, some with dates, versions, prices and
    ids; about 5 % carry PII and 2 % a secret. They go into a TEMP table (gone
    when the session ends), parallel workers are disabled, and each query runs
    --repeat times; the best run counts, as a ratio to sum(length(t)).
adversarial
    µs per KB of each detector on 1 MB inputs built to make a regex engine
    backtrack (long runs of digits with separators, of key characters, of
    anchors without their token ...), next to the same input at 64 KB: equal
    figures mean linear time.

The database must already have sql/020_detectors.sql applied.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import pathlib
import random
import sys
import time
from collections.abc import Iterator, Sequence

import psycopg
import yaml

# the scoring the tests use, from the repository this script belongs to
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from tests.detector_scoring import Score, unescape_copy_text

ROOT = pathlib.Path(__file__).resolve().parents[1]
CORPUS_DIR = ROOT / "tests" / "cases" / "detectors"
EXTERNAL_DIR = ROOT.parent / "shared" / "bench" / "detectors_external"
DETECTORS = {"pii": "memgov.contains_pii", "secret": "memgov.contains_secret"}
# Opt-in fields: not part of contains_pii / contains_secret, reported on the unclaimed set.
EXTRA_FIELDS = {"iban": "memgov.contains_iban", "ip_address": "memgov.contains_ip_address"}

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


# --------------------------------------------------------------------------- accuracy


@dataclasses.dataclass(frozen=True)
class Labelled:
    detector: str  # pii | secret
    expected: bool
    source: str  # "ours" or the external source's project
    text: str


def load_corpus() -> list[Labelled]:
    """Our corpus: every line is labelled for both detectors."""
    rows: list[Labelled] = []
    for path in sorted(CORPUS_DIR.glob("*.yaml")):
        for entry in yaml.safe_load(path.read_text(encoding="utf-8")):
            for detector in DETECTORS:
                rows.append(Labelled(detector, bool(entry[detector]), "ours", entry["text"]))
    return rows


def read_tsv(path: pathlib.Path) -> list[tuple[str, str, str, str]]:
    lines = path.read_text(encoding="utf-8").split("\n")
    header, body = lines[0].split("\t"), [line for line in lines[1:] if line]
    assert header == ["detector", "expected", "source", "text"], f"{path}: unexpected header {header}"
    return [tuple(unescape_copy_text(f) for f in line.split("\t", 3)) for line in body]  # type: ignore[misc]


def load_external(directory: pathlib.Path) -> tuple[list[Labelled], list[tuple[str, str]]]:
    """The claimed rows (labelled) and the unclaimed positives as (source, text)."""
    claimed = [
        Labelled(det, exp == "1", src.split(":", 1)[0], text)
        for det, exp, src, text in read_tsv(directory / "detectors_external.tsv")
    ]
    unclaimed = [(src, text) for _det, _exp, src, text in read_tsv(directory / "detectors_external_unclaimed.tsv")]
    return claimed, unclaimed


def evaluate(conn: psycopg.Connection, expressions: Sequence[str], texts: Sequence[str]) -> list[tuple]:
    """Evaluate each expression (over column c.t) on every text, in one query, in order."""
    rows = conn.execute(
        f"SELECT {', '.join(expressions)} FROM unnest(%s::text[]) WITH ORDINALITY AS c(t, n) ORDER BY c.n",
        [list(texts)],
    ).fetchall()
    return [tuple(row) for row in rows]


def accuracy(conn: psycopg.Connection, external_dir: pathlib.Path, show_errors: bool) -> None:
    rows = load_corpus()
    unclaimed: list[tuple[str, str]] = []
    if (external_dir / "detectors_external.tsv").is_file():
        claimed, unclaimed = load_external(external_dir)
        rows += claimed
    else:
        print(f"external benchmark not found in {external_dir}: our corpus only")

    texts = sorted({row.text for row in rows})
    results = dict(zip(texts, evaluate(conn, [f"{f}(c.t)" for f in DETECTORS.values()], texts), strict=True))
    column = {detector: i for i, detector in enumerate(DETECTORS)}

    scores: dict[tuple[str, str], Score] = collections.defaultdict(Score)
    errors: list[str] = []
    for row in rows:
        got = bool(results[row.text][column[row.detector]])
        keys = (
            [(row.detector, "ours")]
            if row.source == "ours"
            else [(row.detector, "external"), (row.detector, f"external:{row.source}")]
        )
        for key in keys:
            scores[key].add(row.expected, got)
        if got != row.expected:
            errors.append(f"  {'FN' if row.expected else 'FP'} {row.detector:<6} {row.source:<15} {row.text!r}")

    print(f"\n{'detector':<10}{'source':<22}{'TP':>5}{'FP':>5}{'FN':>5}{'TN':>5}{'precision':>11}{'recall':>8}")
    for detector in DETECTORS:
        keys = sorted((k for k in scores if k[0] == detector), key=lambda k: (k[1].split(":")[0] != "ours", k[1]))
        for _, source in keys:
            s = scores[(detector, source)]
            label = source if ":" not in source else "  " + source.split(":", 1)[1]
            print(f"{detector:<10}{label:<22}{s.tp:>5}{s.fp:>5}{s.fn:>5}{s.tn:>5}{s.precision:>11.3f}{s.recall:>8.3f}")

    if unclaimed:
        fields = dict(DETECTORS)
        available = conn.execute(
            "SELECT array_agg(f) FROM unnest(%s::text[]) f WHERE to_regprocedure(f || '(text)') IS NOT NULL",
            [list(EXTRA_FIELDS.values())],
        ).fetchone()
        fields.update({k: v for k, v in EXTRA_FIELDS.items() if v in ((available and available[0]) or [])})
        flags = evaluate(conn, [f"coalesce({f}(c.t), false)" for f in fields.values()], [t for _, t in unclaimed])
        print(f"\nunclaimed positives ({len(unclaimed)}, kinds the docs do not claim): flagged by")
        for i, function in enumerate(fields.values()):
            count = sum(1 for f in flags if f[i])
            print(f"  {function + '()':<32}{count:>5}")
        either = sum(1 for f in flags if f[0] or f[1])
        print(f"  {'contains_pii OR contains_secret':<32}{either:>5}")
        by_source: dict[str, list[int]] = collections.defaultdict(lambda: [0, 0])
        for (source, _), f in zip(unclaimed, flags, strict=True):
            by_source[source.split("/")[0]][0] += 1
            by_source[source.split("/")[0]][1] += bool(any(f))
        if show_errors:
            print("  per source (flagged by any field / rows):")
            for source, (n, flagged) in sorted(by_source.items()):
                print(f"    {source:<48}{flagged:>4} / {n}")

    if show_errors:
        print("\nexternal errors:")
        print("\n".join(sorted(errors)) or "  none")


# --------------------------------------------------------------------------- timing


def best_of(conn: psycopg.Connection, query: str, repeat: int, params: Sequence[object] = ()) -> tuple[float, object]:
    """Run `query` `repeat` times; return the fastest wall time in seconds and its result."""
    best = float("inf")
    result: object = None
    for _ in range(repeat):
        started = time.perf_counter()
        row = conn.execute(query, params).fetchone()
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


def cost(conn: psycopg.Connection, rows: int, repeat: int, seed: int) -> None:
    conn.execute("CREATE TEMP TABLE bench_texts (t text NOT NULL, label text NOT NULL)")
    labels = {"clean": 0, "pii": 0, "secret": 0}
    with conn.cursor().copy("COPY bench_texts (t, label) FROM STDIN") as copy:
        for text, label in generate(rows, seed):
            labels[label] += 1
            copy.write_row((text, label))
    conn.execute("VACUUM ANALYZE bench_texts")
    stats = conn.execute(
        "SELECT count(*), avg(length(t))::numeric(10, 1), min(length(t)), max(length(t)) FROM bench_texts"
    ).fetchone()
    assert stats is not None
    print(
        f"\nrows {stats[0]}, length avg {stats[1]} (min {stats[2]}, max {stats[3]}); "
        f"generated with PII {labels['pii']}, with a secret {labels['secret']}"
    )

    best_of(conn, QUERIES["contains_pii OR contains_secret"], 1)  # warm caches and regexes
    timings = {name: best_of(conn, query, repeat) for name, query in QUERIES.items()}
    baseline = timings["baseline sum(length(t))"][0]
    print(f"\n{'query':<34}{'µs/row':>9}{'ratio':>8}{'result':>12}")
    for name, (seconds, result) in timings.items():
        print(f"{name:<34}{seconds / stats[0] * 1e6:>9.3f}{seconds / baseline:>8.1f}{result!s:>12}")


# Each unit repeated to 1 MB: near-misses of every pattern, so that the
# engine keeps partial matches alive across the whole input.
ADVERSARIAL = {
    "digits": "1",
    "digits and spaces": "1 ",
    "phone separators": "1-2.3 (4) ",
    "plus and digits": "+1 ",
    "at signs": "a@",
    "dotted host": "a.",
    "key characters": "aZ9_",
    "separators": "=:",
    "equals signs": "=",
    "closing brackets": ">",
    "quote and comma": '",',
    "key = no value": "password=",
    "key is": "token is ",
    "anchor prefixes": "sk-AKIAghp_xox",
    "jwt segments": "eyJaaaaaaaaaa.",
    "url user info": "a://b:",
    "iban-like": "DE89 ",
    "hex and colons": "fe80:",
    "dotted quads": "1.2.3.",
    "letters": "a",
}


def adversarial(conn: psycopg.Connection, repeat: int) -> None:
    functions = [*DETECTORS.values()]
    present = conn.execute(
        "SELECT array_agg(f) FROM unnest(%s::text[]) f WHERE to_regprocedure(f || '(text)') IS NOT NULL",
        [list(EXTRA_FIELDS.values())],
    ).fetchone()
    functions += (present and present[0]) or []
    sizes = (64 * 1024, 1024 * 1024)
    print(f"\nµs per KB, best of {repeat}; 64 KB → 1 MB (equal figures: linear time)")
    print(f"{'input':<20}" + "".join(f"{f.split('.')[1]:>26}" for f in functions))
    worst = (0.0, "")
    for name, unit in ADVERSARIAL.items():
        cells = []
        for function in functions:
            per_kb = []
            for size in sizes:
                text = (unit * (size // len(unit) + 1))[:size]
                seconds, _ = best_of(conn, f"SELECT {function}(%s)", repeat, [text])
                per_kb.append(seconds * 1e6 / (size / 1024))
            cells.append(f"{per_kb[0]:>11.1f} → {per_kb[1]:>8.1f}")
            if per_kb[1] > worst[0]:
                worst = (per_kb[1], f"{function} on {name!r}")
        print(f"{name:<20}" + "".join(f"{c:>26}" for c in cells))
    print(f"worst at 1 MB: {worst[0]:.1f} µs/KB ({worst[1]})")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dsn", required=True, help="libpq connection string or URI")
    parser.add_argument("--rows", type=int, default=100_000, help="texts to generate (default 100000)")
    parser.add_argument("--repeat", type=int, default=5, help="runs per query, best counts (default 5)")
    parser.add_argument("--seed", type=int, default=20240315, help="generator seed")
    parser.add_argument(
        "--only", action="append", choices=["accuracy", "cost", "adversarial"], help="run only this part"
    )
    parser.add_argument("--external", type=pathlib.Path, default=EXTERNAL_DIR, help="external benchmark directory")
    parser.add_argument("--errors", action="store_true", help="list the external benchmark's misses")
    args = parser.parse_args(argv)
    if args.rows < 1 or args.repeat < 1:
        parser.error("--rows and --repeat must be positive")
    parts = args.only or ["accuracy", "cost", "adversarial"]

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
        version = conn.execute("SHOW server_version").fetchone()
        print(f"server {version[0] if version else '?'}; parallel workers off; best of {args.repeat}")
        if "accuracy" in parts:
            accuracy(conn, args.external, args.errors)
        if "cost" in parts:
            cost(conn, args.rows, args.repeat, args.seed)
        if "adversarial" in parts:
            adversarial(conn, min(args.repeat, 3))
    return 0


if __name__ == "__main__":
    sys.exit(main())

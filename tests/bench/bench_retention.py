"""The retention sweep vs. a plain DELETE, how both scale, and writers during a sweep.

    python -m tests.bench.bench_retention [--dsn DSN] [--rows 400000] [--repeat 3]
        [--sizes 10000,100000] [--million] [--tables 100000,2000000] [--table-expired 10000]
        [--batch-sizes 500,1000,2000,5000,10000]
        [--window 5] [--no-writers]

(a) ``CALL memgov.run_maintenance()`` deleting the expired half (--rows / 2)
    of the governed table, vs. one plain ``DELETE ... WHERE expires_at <= now()``
    of the same rows from a bare copy of the table (same columns and indexes,
    no trigger, no log), best of --repeat, with the spread of the runs and the
    cost per deleted row. Must: at most 3.0x the DELETE; goal: 2.0x. The
    sweep is timed with the default policy (whose auto_delete rules make it
    also read their index range: low confidences, none here) and with the same policy minus its
    auto_delete rules (TTL work only). Profile rows time the parts on their
    own: the governed table's DELETE as the engine (its row trigger's WHEN
    skips the trigger function), the sweep's batching on the bare copy, and
    the same with a deletion log of one row per deleted memory (the old
    shape) or one row per batch holding the ids (memgov.deletion_log's shape).
(s) Scaling: the same two figures for each size of --sizes expired rows (half
    of a table twice as large), a line per size; --million adds 1 000 000
    expired rows out of 2 000 000 (about ten minutes on 2 CPUs: off by default).
(t) The same --table-expired expired rows (default 10 000) in tables of each size of
    --tables rows (default 100 000 and 2 000 000), the rest fresh: the sweep's time in
    each and its ratio to the smallest. Must: at most 1.5x from 100k to 2M; goal: 1.2x.
    The sweep's candidates come from indexes, so the table's size should not show.
(b) Two writers doing single-row INSERTs through the governed table (as
    memgov_writer, memgov.org_id set, default policy deployed, one statement
    per transaction): inserts per second while a sweep runs vs. without one,
    median of --repeat, with the spread. Must: at least 0.8; goal: 0.9.
    Measured with the sweep yielding to busy sessions (the default
    memgov.maintenance_yield) and without (maintenance_yield = 0); what the
    writers' backends waited on is printed below the table.
(c) With --batch-sizes: (a)'s sweep and (b)'s ratio for each retention.batch_size
    (the default policy with that batch size), to choose the default by measurement.

Every figure is measured in the same run on the same rows. Without --dsn the
benchmark starts its own durable cluster (fsync, full_page_writes and
synchronous_commit on), as a production server runs.
"""

from __future__ import annotations

import collections
import os
import statistics
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg

from memgov_pg.compiler import compile_policy
from memgov_pg.deploy import deploy
from memgov_pg.policy import load_policy
from tests.bench.common import bench_database, parser, table, timings

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_POLICY = ROOT / "policies" / "default.yaml"
WRITERS = 2

SETUP = """
CREATE SCHEMA bench;
-- the bare copy: same columns, defaults, constraints and indexes; no trigger, no row security
CREATE TABLE bench.bare (LIKE memgov.long_term_memory_items INCLUDING ALL);
-- memgov.deletion_log's shape (a row per batch and tenant, the ids GIN-indexed) ...
CREATE TABLE bench.batch_log (LIKE memgov.deletion_log INCLUDING ALL);
-- ... and the shape it had before: a row per deleted memory
CREATE TABLE bench.row_log (
    deletion_id     bigint       GENERATED ALWAYS AS IDENTITY,
    deleted_at      timestamptz  NOT NULL DEFAULT now(),
    memory_id       uuid         NOT NULL,
    org_id          text         NOT NULL,
    reason          text         NOT NULL CHECK (reason IN ('ttl', 'confidence', 'auto_delete', 'rejected')),
    rule_id         text,
    policy_version  text,
    run_id          bigint,
    PRIMARY KEY (org_id, deletion_id)
);
CREATE INDEX ON bench.row_log USING brin (deleted_at);

-- For the profile: the sweep's batching (lock a batch SKIP LOCKED, reading the ids the log
-- needs; delete it by ctid; commit) on the bare copy, with no log, a log row per deleted row,
-- or a log row per batch and tenant.
CREATE PROCEDURE bench.batched_delete(p_batch integer, p_log text)
LANGUAGE plpgsql AS $$
DECLARE
    v_batch tid[];
    v_ids uuid[];
    v_orgs text[];
    v_n integer;
BEGIN
    LOOP
        SELECT array_agg(b.ctid), array_agg(b.memory_id), array_agg(b.org_id)
          INTO v_batch, v_ids, v_orgs
          FROM (SELECT d.ctid, d.memory_id, d.org_id FROM bench.bare d WHERE d.expires_at <= now()
                 ORDER BY d.expires_at LIMIT p_batch FOR UPDATE SKIP LOCKED) AS b;
        DELETE FROM bench.bare m WHERE m.ctid = ANY ((SELECT v_batch)::tid[]);
        IF p_log = 'row' THEN
            INSERT INTO bench.row_log (memory_id, org_id, reason, policy_version, run_id)
            SELECT u.memory_id, u.org_id, 'ttl', '1.0.0', 1 FROM unnest(v_ids, v_orgs) AS u (memory_id, org_id);
        ELSIF p_log = 'batch' THEN
            INSERT INTO bench.batch_log (org_id, reason, policy_version, run_id, memory_count, memory_ids)
            SELECT u.org_id, 'ttl', '1.0.0', 1, count(*), array_agg(u.memory_id ORDER BY u.memory_id)
              FROM unnest(v_ids, v_orgs) AS u (memory_id, org_id) GROUP BY u.org_id;
        END IF;
        v_n := coalesce(cardinality(v_batch), 0);
        COMMIT;
        EXIT WHEN v_n < p_batch;
    END LOOP;
END
$$;
"""

# Half expired (ttl_7d, 8 days old; one in --every rows), a quarter ttl_30d and the rest permanent (fresh).
# Confidence 0.5..0.99: no auto_delete rule of the default policy matches.
FILL = """
INSERT INTO memgov.long_term_memory_items
       (org_id, project_id, agent_id, category, fact_text, source, confidence, retention_policy,
        context_source, created_at, updated_at)
SELECT 't' || (g %% 10), 'p' || (g %% 50), 'agent',
       (ARRAY['user_fact', 'preference', 'project_fact', 'decision'])[1 + g %% 4],
       (ARRAY['Prefers dark mode in every editor', 'The project Atlas moves billing to PostgreSQL',
              'Decided to ship on Tuesdays after standup', 'Likes hiking and coffee without sugar',
              'Deployment runs on Kubernetes with three replicas', 'Uses Python 3.11 and psycopg 3'])[1 + g %% 6]
         || ' #' || g,
       'agent_extracted', 0.5 + (g %% 50) / 100.0,
       CASE WHEN g %% %(every)s = 0 THEN 'ttl_7d' WHEN g %% 4 = 1 THEN 'ttl_30d' ELSE 'permanent_until_revoked' END,
       'mcp',
       CASE WHEN g %% %(every)s = 0 THEN now() - interval '8 days' ELSE now() - interval '1 day' END,
       now() - interval '1 day'
  FROM generate_series(1, %(rows)s) AS g
"""


_RETENTION = (
    "CASE WHEN g %% %(every)s = 0 THEN 'ttl_7d' WHEN g %% 4 = 1 THEN 'ttl_30d' ELSE 'permanent_until_revoked' END"
)
_CREATED = "CASE WHEN g %% %(every)s = 0 THEN now() - interval '8 days' ELSE now() - interval '1 day' END"
assert _RETENTION in FILL and _CREATED in FILL
# (t): the same rows, none expired (ttl_30d or permanent, a day old) ...
FRESH = FILL.replace(_RETENTION, "CASE WHEN g %% 2 = 0 THEN 'ttl_30d' ELSE 'permanent_until_revoked' END").replace(
    _CREATED, "now() - interval '1 day'"
)
# ... and all expired (ttl_7d, 8 days old)
EXPIRED = FILL.replace(_RETENTION, "'ttl_7d'").replace(_CREATED, "now() - interval '8 days'")


APPEND_ONLY = ("decision_log", "decision_log_seals", "decision_log_archives")


def reset(conn: psycopg.Connection[Any]) -> None:
    """Empty the governed table and the logs (a superuser may TRUNCATE them; the append-only
    decision log and its seals once their guard trigger is lifted for the transaction)."""
    with conn.transaction():
        for name in APPEND_ONLY:
            conn.execute(f"ALTER TABLE memgov.{name} DISABLE TRIGGER refuse_truncate")
        conn.execute(
            "TRUNCATE memgov.long_term_memory_items, memgov.deletion_log, memgov.maintenance_runs,"
            " memgov.decision_log, memgov.decision_log_seals, memgov.decision_log_archives,"
            " bench.bare, bench.batch_log, bench.row_log"
        )
        for name in APPEND_ONLY:
            conn.execute(f"ALTER TABLE memgov.{name} ENABLE ALWAYS TRIGGER refuse_truncate")


def fill(conn: psycopg.Connection[Any], rows: int, every: int = 2, bare: bool = True) -> None:
    """The same rows in the governed table (engine's path: expires_at kept by the trigger) and, with
    ``bare``, the bare copy; one row in ``every`` expired."""
    reset(conn)
    with conn.transaction():
        conn.execute("SET LOCAL ROLE memgov_owner")
        conn.execute(FILL, {"rows": rows, "every": every})
    if bare:
        # every column but the generated ones (search_vector): PostgreSQL computes those itself
        row = conn.execute(
            "SELECT string_agg(quote_ident(attname), ', ' ORDER BY attnum) FROM pg_attribute"
            " WHERE attrelid = 'bench.bare'::regclass AND attnum > 0 AND NOT attisdropped AND attgenerated = ''"
        ).fetchone()
        assert row is not None
        columns = row[0]
        conn.execute(f"INSERT INTO bench.bare ({columns}) SELECT {columns} FROM memgov.long_term_memory_items")
    conn.execute(
        "VACUUM ANALYZE memgov.long_term_memory_items, bench.bare, memgov.deletion_log, bench.batch_log, bench.row_log"
    )
    conn.execute("CHECKPOINT")


def fill_table(conn: psycopg.Connection[Any], rows: int, due: int) -> None:
    """(t): ``rows - due`` fresh rows, then ``due`` expired ones (topped up again before each run)."""
    reset(conn)
    with conn.transaction():
        conn.execute("SET LOCAL ROLE memgov_owner")
        conn.execute(FRESH, {"rows": rows - due})
    top_up(conn, due)


def top_up(conn: psycopg.Connection[Any], due: int) -> None:
    with conn.transaction():
        conn.execute("SET LOCAL ROLE memgov_owner")
        conn.execute(EXPIRED, {"rows": due})
    conn.execute("VACUUM ANALYZE memgov.long_term_memory_items, memgov.deletion_log")
    conn.execute("CHECKPOINT")


def expired(conn: psycopg.Connection[Any], table_name: str) -> int:
    return int(conn.execute(f"SELECT count(*) FROM {table_name} WHERE expires_at <= now()").fetchone()[0])


def sweep(conn: psycopg.Connection[Any]) -> None:
    conn.execute("CALL memgov.run_maintenance()")


def plain_delete(conn: psycopg.Connection[Any]) -> None:
    conn.execute("DELETE FROM bench.bare WHERE expires_at <= now()")


def engine_delete(conn: psycopg.Connection[Any]) -> None:
    """One DELETE of the expired rows from the governed table as memgov_owner (no log)."""
    with conn.transaction():
        conn.execute("SET LOCAL ROLE memgov_owner")
        conn.execute("DELETE FROM memgov.long_term_memory_items WHERE expires_at <= now()")


def batched_delete(conn: psycopg.Connection[Any], log: str, batch_size: int) -> None:
    conn.execute("CALL bench.batched_delete(%s, %s)", (batch_size, log))
    assert expired(conn, "bench.bare") == 0


def policy_text(batch_size: int | None = None, ttl_only: bool = False) -> str:
    """The default policy, with another retention.batch_size and/or without its auto_delete rules
    (each variant a version of its own)."""
    text = DEFAULT_POLICY.read_text(encoding="utf-8")
    version = "1.0.0"
    if ttl_only:
        text, _, _ = text.partition("  - id: forget-stale-low-confidence")
        version += "-ttl-only"
    if batch_size is not None:
        assert "  batch_size: 5000\n" in text
        text = text.replace("  batch_size: 5000\n", f"  batch_size: {batch_size}\n")
        version += f"-batch-{batch_size}"
    return text.replace('version: "1.0.0"', f'version: "{version}"')


def use_policy(conn: psycopg.Connection[Any], text: str) -> int:
    """Deploy (or re-activate) a policy; returns its retention.batch_size."""
    policy = load_policy(text)
    conn.execute(compile_policy(policy).install_sql())
    return int(conn.execute("SELECT memgov.policy_setting('*', 'retention', 'batch_size')").fetchone()[0])


# -- (b) writers ---------------------------------------------------------------------------------


class Writers:
    """WRITERS connections inserting one row per transaction as memgov_writer, counting inserts."""

    def __init__(self, dsn: str) -> None:
        self.conns = []
        for i in range(WRITERS):
            conn = psycopg.connect(dsn, autocommit=True)
            conn.execute("SET ROLE memgov_writer")
            conn.execute("SELECT set_config('memgov.org_id', %s, false)", (f"w{i}",))
            conn.execute("SET plan_cache_mode = auto")
            self.conns.append(conn)
        self.counts = [0] * WRITERS
        self.stop = threading.Event()
        self.threads: list[threading.Thread] = []

    def _write(self, index: int) -> None:
        conn = self.conns[index]
        org = f"w{index}"
        n = 0
        while not self.stop.is_set():
            conn.execute(
                "INSERT INTO memgov.long_term_memory_items"
                " (org_id, project_id, category, fact_text, source, confidence, context_source)"
                " VALUES (%s, 'p1', 'user_fact', %s, 'agent_extracted', 0.9, 'mcp')",
                (org, f"Writer {index} learned fact {n}"),
                prepare=True,
            )
            n += 1
            self.counts[index] = n

    def start(self) -> None:
        self.stop.clear()
        self.threads = [threading.Thread(target=self._write, args=(i,), daemon=True) for i in range(WRITERS)]
        for t in self.threads:
            t.start()

    def total(self) -> int:
        return sum(self.counts)

    def halt(self) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(30)

    def close(self) -> None:
        for conn in self.conns:
            conn.close()


class WaitSampler:
    """Samples what the writers' backends wait on (pg_stat_activity) every 20 ms while active."""

    def __init__(self, dsn: str, pids: list[int]) -> None:
        self.dsn, self.pids = dsn, pids
        self.samples: collections.Counter[str] = collections.Counter()
        self.active = threading.Event()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            while not self.stop.is_set():
                if self.active.is_set():
                    for (wait,) in conn.execute(
                        "SELECT CASE WHEN state = 'active' THEN coalesce(wait_event_type || ':' || wait_event, 'CPU')"
                        " ELSE 'client (Python)' END FROM pg_stat_activity WHERE pid = ANY(%s)",
                        (self.pids,),
                    ):
                        self.samples[wait] += 1
                time.sleep(0.02)

    def share(self) -> str:
        total = sum(self.samples.values()) or 1
        return ", ".join(f"{name} {n / total:.0%}" for name, n in self.samples.most_common(4))


def writer_rates(
    dsn: str, conn: psycopg.Connection[Any], rows: int, window: float, sweep_yield: str | None = None
) -> tuple[float, float, float, str]:
    """(inserts/s without a sweep, inserts/s during a sweep, sweep seconds, where the writers waited
    during the sweep) on freshly filled rows; ``sweep_yield`` sets memgov.maintenance_yield."""
    fill(conn, rows)
    writers = Writers(dsn)
    sampler = WaitSampler(dsn, [c.info.backend_pid for c in writers.conns])
    try:
        sampler.thread.start()
        writers.start()
        time.sleep(1.0)  # warm up: plans cached, connections busy
        n0, t0 = writers.total(), time.perf_counter()
        time.sleep(window)
        n1, t1 = writers.total(), time.perf_counter()
        quiet = (n1 - n0) / (t1 - t0)
        options = f"-c memgov.maintenance_yield={sweep_yield}" if sweep_yield is not None else ""
        with psycopg.connect(dsn, autocommit=True, options=options) as sweeper:
            sampler.active.set()
            n2, t2 = writers.total(), time.perf_counter()
            sweep(sweeper)
            n3, t3 = writers.total(), time.perf_counter()
            sampler.active.clear()
        during = (n3 - n2) / (t3 - t2)
    finally:
        writers.halt()
        writers.close()
        sampler.stop.set()
        sampler.thread.join(5)
    return quiet, during, t3 - t2, sampler.share()


# -- reporting -------------------------------------------------------------------------------------


def spread(values: list[float], unit: str = "s", digits: int = 3) -> str:
    """min–max of the runs (the machine is shared: the best is the figure, the spread its noise)."""
    if len(values) < 2:
        return ""
    return f" ({min(values):.{digits}f}–{max(values):.{digits}f} {unit})"


class Timer:
    """Runs each measurement --repeat times on freshly filled rows, keeping every run's seconds."""

    def __init__(self, conn: psycopg.Connection[Any], repeat: int) -> None:
        self.conn, self.repeat = conn, repeat

    def __call__(self, run: Callable[[], Any], rows: int) -> list[float]:
        return timings(self.repeat, run, lambda: fill(self.conn, rows))


def line(label: str, times: list[float], due: int, plain: float, note: str = "") -> tuple[str, ...]:
    best = min(times)
    ratio = "1.00" if best == plain else f"{best / plain:.2f}× the DELETE"
    return (label, f"{best:.3f} s{spread(times)}", f"{best / due * 1e6:.2f} µs/row", ratio + note)


def main() -> None:
    p = parser(__doc__ or "")
    p.add_argument("--rows", type=int, default=400_000, help="rows in the table; half of them expired")
    p.add_argument("--sizes", default="10000,100000", help="expired rows per scaling line (comma-separated)")
    p.add_argument("--million", action="store_true", help="add a scaling line of 1 000 000 expired rows (slow)")
    p.add_argument("--tables", default="100000,2000000", help="(t) table sizes (comma-separated; empty: skip)")
    p.add_argument("--table-expired", type=int, default=10_000, help="(t) expired rows in each table")
    p.add_argument("--batch-sizes", default="", help="retention.batch_size values to compare (comma-separated)")
    p.add_argument("--window", type=float, default=5.0, help="seconds of writer throughput without a sweep")
    p.add_argument("--no-writers", action="store_true", help="skip (b), the writers")
    args = p.parse_args()
    rows = args.rows
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()] + ([1_000_000] if args.million else [])
    batch_sizes = [int(s) for s in args.batch_sizes.split(",") if s.strip()]
    tables = [int(s) for s in args.tables.split(",") if s.strip()]
    with bench_database(args.dsn, "memgov_bench_retention") as dsn, psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SET max_parallel_workers_per_gather = 0")
        conn.execute(SETUP)
        deploy(dsn, DEFAULT_POLICY)
        batch = use_policy(conn, DEFAULT_POLICY.read_text(encoding="utf-8"))
        timed = Timer(conn, args.repeat)
        results: list[tuple[str, ...]] = []

        # (a) the sweep vs one plain DELETE of the same rows
        fill(conn, rows)
        due = expired(conn, "memgov.long_term_memory_items")
        assert due == expired(conn, "bench.bare") == rows // 2, due
        plain_times = timed(lambda: plain_delete(conn), rows)
        plain = min(plain_times)
        default = timed(lambda: sweep(conn), rows)
        summary = conn.execute("SELECT summary FROM memgov.maintenance_runs ORDER BY run_id DESC LIMIT 1").fetchone()[0]
        assert summary["deleted"]["ttl"] == due, summary
        logged = conn.execute("SELECT coalesce(sum(memory_count), 0) FROM memgov.deletion_log").fetchone()[0]
        assert logged == due and expired(conn, "memgov.long_term_memory_items") == 0
        assert conn.execute("SELECT count(*) FROM memgov.long_term_memory_items").fetchone()[0] == rows - due
        use_policy(conn, policy_text(ttl_only=True))
        ttl_only = timed(lambda: sweep(conn), rows)
        use_policy(conn, DEFAULT_POLICY.read_text(encoding="utf-8"))
        # the profile: the parts on their own
        engine = timed(lambda: engine_delete(conn), rows)
        batched = timed(lambda: batched_delete(conn, "none", batch), rows)
        per_row = timed(lambda: batched_delete(conn, "row", batch), rows)
        per_batch = timed(lambda: batched_delete(conn, "batch", batch), rows)

        def wal_of(run: Any) -> int:
            fill(conn, rows)
            start = conn.execute("SELECT pg_current_wal_lsn()").fetchone()[0]
            run()
            return int(conn.execute("SELECT pg_current_wal_lsn() - %s::pg_lsn", (start,)).fetchone()[0])

        wal_plain, wal_sweep = wal_of(lambda: plain_delete(conn)), wal_of(lambda: sweep(conn))
        results += [
            line(f"(a) plain DELETE of {due} rows (bare copy)", plain_times, due, plain),
            line(f"(a) sweep, default policy, batch_size {batch} (TTL + auto_delete)", default, due, plain,
                 " (must ≤ 3.0, goal ≤ 2.0)"),
            line("(a) sweep, default policy minus auto_delete rules", ttl_only, due, plain),
            line("(a) profile: one DELETE on the governed table as memgov_owner", engine, due, plain),
            line(f"(a) profile: batched lock + DELETE by ctid, bare copy ({batch})", batched, due, plain),
            line("(a) profile: the same + a log row per deleted row (old shape)", per_row, due, plain),
            line("(a) profile: the same + a log row per batch with the ids (GIN)", per_batch, due, plain),
        ]  # fmt: skip

        # (s) how both scale
        for size in sizes:
            fill(conn, 2 * size)
            plain_s = timed(lambda: plain_delete(conn), 2 * size)
            sweep_s = timed(lambda: sweep(conn), 2 * size)
            results += [
                line(f"(s) {size} expired of {2 * size}: plain DELETE", plain_s, size, min(plain_s)),
                line(f"(s) {size} expired of {2 * size}: sweep", sweep_s, size, min(plain_s)),
            ]

        # (t) the same expired rows in tables of growing size
        smallest = None
        for size in tables:
            fill_table(conn, size, args.table_expired)
            took: list[float] = []
            for _ in range(args.repeat):
                if took:  # the last run swept them: the same number expired again
                    top_up(conn, args.table_expired)
                took += timings(1, lambda: sweep(conn))
            left = conn.execute("SELECT count(*) FROM memgov.long_term_memory_items").fetchone()[0]
            assert left == size - args.table_expired, left
            smallest = smallest or min(took)
            results.append((f"(t) {args.table_expired} expired in a table of {size}: sweep",
                            f"{min(took):.3f} s{spread(took)}", f"{min(took) / args.table_expired * 1e6:.2f} µs/row",
                            f"{min(took) / smallest:.2f}× the {tables[0]}-row table"
                            + (" (must ≤ 1.5, goal ≤ 1.2)" if size != tables[0] else "")))  # fmt: skip

        # (b) two writers with and without a sweep
        def writers_line(label: str, sweep_yield: str | None) -> tuple[tuple[str, ...], list[str]]:
            ratios, rates, seconds, waits = [], [], [], []
            for _ in range(args.repeat):
                quiet, during, took, waited = writer_rates(dsn, conn, rows, args.window, sweep_yield)
                ratios.append(during / quiet)
                rates.append((quiet, during))
                seconds.append(took)
                waits.append(waited)
            ratio = statistics.median(ratios)
            quiet = statistics.median(r[0] for r in rates)
            during = statistics.median(r[1] for r in rates)
            return (f"(b) {WRITERS} writers during a sweep, {label} ({statistics.median(seconds):.1f} s)",
                    f"{during:.0f} vs {quiet:.0f} inserts/s", "-",
                    f"{ratio:.2f} of the rate without{spread(ratios, 'x', 2)}"), waits  # fmt: skip

        yielding_waits: list[str] = []
        greedy_waits: list[str] = []
        if not args.no_writers:
            yielding, yielding_waits = writers_line("yielding (default maintenance_yield)", None)
            greedy, greedy_waits = writers_line("not yielding (maintenance_yield = 0)", "0")
            results += [(*yielding[:3], yielding[3] + " (must ≥ 0.8, goal ≥ 0.9)"), greedy]

        # (c) batch sizes
        for size in batch_sizes:
            use_policy(conn, policy_text(batch_size=size))
            swept = timed(lambda: sweep(conn), rows)
            results.append(line(f"(c) sweep, batch_size {size}", swept, due, plain))
            if not args.no_writers:
                row, _ = writers_line(f"batch_size {size}", None)
                results.append(row)
        if batch_sizes:
            use_policy(conn, DEFAULT_POLICY.read_text(encoding="utf-8"))

        settings = dict(conn.execute(
            "SELECT name, setting FROM pg_settings WHERE name IN ('fsync', 'synchronous_commit', 'full_page_writes')"
        ).fetchall())  # fmt: skip
    print(f"rows: {rows} ({rows // 2} expired); (a), (s), (c): best of {args.repeat} and the spread of the runs;")
    print(f"(b): median of {args.repeat}. {os.cpu_count()} CPUs, PostgreSQL and the writers on the same machine;",
          ", ".join(f"{k} = {v}" for k, v in sorted(settings.items())) + "\n")  # fmt: skip
    print(table(results, ("measurement", "time / rate", "per deleted row", "ratio")))
    print(f"\n(a) WAL written: plain DELETE {wal_plain / 2**20:.0f} MiB, sweep {wal_sweep / 2**20:.0f} MiB")
    if yielding_waits or greedy_waits:
        print("\n(b) what the writers' backends were doing during each sweep (pg_stat_activity samples):")
        for waited in yielding_waits:
            print(f"    yielding:     {waited}")
        for waited in greedy_waits:
            print(f"    not yielding: {waited}")


if __name__ == "__main__":
    main()

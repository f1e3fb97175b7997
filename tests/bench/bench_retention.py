"""The retention sweep vs. a plain DELETE, and writers during a sweep.

    python -m tests.bench.bench_retention [--dsn DSN] [--rows 400000] [--repeat 3]

(a) ``CALL memgov.run_maintenance()`` deleting the expired half (--rows / 2)
    of the governed table, vs. one plain ``DELETE ... WHERE expires_at <= now()``
    of the same rows from a bare copy of the table (same columns and indexes,
    no trigger, no log). Goal: the sweep takes at most 2.0x the DELETE.
    The sweep is timed twice: with the default policy (whose auto_delete
    rules make it also walk the surviving half) and with the same policy
    minus its auto_delete rules (TTL work only). Profile rows time the sweep's
    batching alone, and with a deletion log, on the bare copy; the WAL each
    side writes is printed below the table.
(b) Two writers doing single-row INSERTs through the governed table (as
    memgov_writer, memgov.org_id set, default policy deployed, one statement
    per transaction): inserts per second while a sweep runs vs. without one.
    Goal: at least 0.8. Measured with the sweep yielding to busy sessions (the
    default memgov.maintenance_yield) and without (maintenance_yield = 0);
    what the writers' backends waited on is printed below the table.

Every figure is measured in the same run on the same rows; the best of
--repeat counts for (a), the median for (b). Without --dsn the benchmark
starts its own durable cluster (fsync, full_page_writes and synchronous_commit
on), as a production server runs.
"""

from __future__ import annotations

import collections
import os
import statistics
import threading
import time
from pathlib import Path
from typing import Any

import psycopg

from memgov_pg.compiler import compile_policy
from memgov_pg.deploy import deploy
from memgov_pg.policy import load_policy
from tests.bench.common import bench_database, best_of, parser, table

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_POLICY = ROOT / "policies" / "default.yaml"
WRITERS = 2

SETUP = """
CREATE SCHEMA bench;
-- the bare copy: same columns, defaults, constraints and indexes; no trigger, no row security
CREATE TABLE bench.bare (LIKE memgov.long_term_memory_items INCLUDING ALL);
CREATE TABLE bench.bare_log (LIKE memgov.deletion_log INCLUDING ALL);

-- For the profile: the sweep's batching (lock a batch SKIP LOCKED, delete it by ctid, commit)
-- on the bare copy, without and with a deletion log shaped like memgov.deletion_log.
CREATE PROCEDURE bench.batched_delete(p_batch integer, p_log boolean)
LANGUAGE plpgsql AS $$
DECLARE
    v_n integer;
BEGIN
    LOOP
        IF p_log THEN
            WITH gone AS (
                DELETE FROM bench.bare m
                 WHERE m.ctid = ANY (ARRAY(
                       SELECT d.ctid FROM bench.bare d WHERE d.expires_at <= now()
                        ORDER BY d.expires_at LIMIT p_batch FOR UPDATE SKIP LOCKED))
                RETURNING m.memory_id, m.org_id)
            INSERT INTO bench.bare_log (memory_id, org_id, reason, policy_version, run_id)
            SELECT memory_id, org_id, 'ttl', '1.0.0', 1 FROM gone;
        ELSE
            DELETE FROM bench.bare m
             WHERE m.ctid = ANY (ARRAY(
                   SELECT d.ctid FROM bench.bare d WHERE d.expires_at <= now()
                    ORDER BY d.expires_at LIMIT p_batch FOR UPDATE SKIP LOCKED));
        END IF;
        GET DIAGNOSTICS v_n = ROW_COUNT;
        COMMIT;
        EXIT WHEN v_n < p_batch;
    END LOOP;
END
$$;
"""

# Half expired (ttl_7d, 8 days old), a quarter ttl_30d and a quarter permanent (fresh).
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
       CASE WHEN g %% 2 = 0 THEN 'ttl_7d' WHEN g %% 4 = 1 THEN 'ttl_30d' ELSE 'permanent_until_revoked' END,
       'mcp',
       CASE WHEN g %% 2 = 0 THEN now() - interval '8 days' ELSE now() - interval '1 day' END,
       now() - interval '1 day'
  FROM generate_series(1, %(rows)s) AS g
"""


APPEND_ONLY = ("decision_log", "decision_log_seals", "decision_log_archives")


def reset(conn: psycopg.Connection[Any]) -> None:
    """Empty the governed table and the logs (a superuser may TRUNCATE them; the append-only
    decision log and its seals once their guard trigger is lifted for the transaction)."""
    with conn.transaction():
        for table in APPEND_ONLY:
            conn.execute(f"ALTER TABLE memgov.{table} DISABLE TRIGGER refuse_truncate")
        conn.execute(
            "TRUNCATE memgov.long_term_memory_items, memgov.deletion_log, memgov.maintenance_runs,"
            " memgov.decision_log, memgov.decision_log_seals, memgov.decision_log_archives,"
            " bench.bare, bench.bare_log"
        )
        for table in APPEND_ONLY:
            conn.execute(f"ALTER TABLE memgov.{table} ENABLE ALWAYS TRIGGER refuse_truncate")


def fill(conn: psycopg.Connection[Any], rows: int) -> None:
    """The same rows in the governed table (engine's path: expires_at kept by the trigger) and the bare copy."""
    reset(conn)
    with conn.transaction():
        conn.execute("SET LOCAL ROLE memgov_owner")
        conn.execute(FILL, {"rows": rows})
    conn.execute("INSERT INTO bench.bare SELECT * FROM memgov.long_term_memory_items")
    conn.execute("VACUUM ANALYZE memgov.long_term_memory_items, bench.bare, memgov.deletion_log, bench.bare_log")
    conn.execute("CHECKPOINT")


def expired(conn: psycopg.Connection[Any], table_name: str) -> int:
    return int(conn.execute(f"SELECT count(*) FROM {table_name} WHERE expires_at <= now()").fetchone()[0])


def sweep(conn: psycopg.Connection[Any]) -> None:
    conn.execute("CALL memgov.run_maintenance()")


def plain_delete(conn: psycopg.Connection[Any]) -> None:
    conn.execute("DELETE FROM bench.bare WHERE expires_at <= now()")


def batched_delete(conn: psycopg.Connection[Any], log: bool) -> None:
    conn.execute("CALL bench.batched_delete(5000, %s)", (log,))
    assert expired(conn, "bench.bare") == 0


def ttl_only_policy() -> str:
    """The default policy without its auto_delete rules (and a version of its own)."""
    text = DEFAULT_POLICY.read_text(encoding="utf-8")
    head, _, _ = text.partition("  - id: forget-stale-low-confidence")
    return head.replace('version: "1.0.0"', 'version: "1.0.0-ttl-only"')


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


def main() -> None:
    p = parser(__doc__ or "")
    p.add_argument("--rows", type=int, default=400_000, help="rows in the table; half of them expired")
    p.add_argument("--window", type=float, default=5.0, help="seconds of writer throughput without a sweep")
    args = p.parse_args()
    rows = args.rows
    with bench_database(args.dsn, "memgov_bench_retention") as dsn, psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SET max_parallel_workers_per_gather = 0")
        conn.execute(SETUP)
        deploy(dsn, DEFAULT_POLICY)
        results: list[tuple[str, ...]] = []

        # (a) the sweep vs one plain DELETE of the same rows
        fill(conn, rows)
        due = expired(conn, "memgov.long_term_memory_items")
        assert due == expired(conn, "bench.bare") == rows // 2, due
        plain = best_of(args.repeat, lambda: plain_delete(conn), lambda: fill(conn, rows))
        default = best_of(args.repeat, lambda: sweep(conn), lambda: fill(conn, rows))
        summary = conn.execute("SELECT summary FROM memgov.maintenance_runs ORDER BY run_id DESC LIMIT 1").fetchone()[0]
        assert summary["deleted"]["ttl"] == due, summary
        logged = conn.execute("SELECT count(*) FROM memgov.deletion_log").fetchone()[0]
        assert logged == due and expired(conn, "memgov.long_term_memory_items") == 0
        assert conn.execute("SELECT count(*) FROM memgov.long_term_memory_items").fetchone()[0] == rows - due
        conn.execute(compile_policy(load_policy(ttl_only_policy())).install_sql())
        ttl_only = best_of(args.repeat, lambda: sweep(conn), lambda: fill(conn, rows))
        deploy(dsn, DEFAULT_POLICY)  # back to the default policy (re-activates 1.0.0)
        # the profile: what batching and logging cost without memgov's trigger
        batched = best_of(args.repeat, lambda: batched_delete(conn, False), lambda: fill(conn, rows))
        logged = best_of(args.repeat, lambda: batched_delete(conn, True), lambda: fill(conn, rows))

        def wal_of(run: Any) -> int:
            fill(conn, rows)
            start = conn.execute("SELECT pg_current_wal_lsn()").fetchone()[0]
            run()
            return int(conn.execute("SELECT pg_current_wal_lsn() - %s::pg_lsn", (start,)).fetchone()[0])

        wal_plain, wal_sweep = wal_of(lambda: plain_delete(conn)), wal_of(lambda: sweep(conn))

        def line(label: str, seconds: float, ratio: str | None = None) -> tuple[str, ...]:
            return (label, f"{seconds:.3f} s", f"{seconds / due * 1e6:.2f} µs/row",
                    ratio or f"{seconds / plain:.2f}× the DELETE")  # fmt: skip

        results += [
            line(f"(a) plain DELETE of {due} rows (bare copy)", plain, "1.00"),
            line("(a) sweep, default policy (TTL + auto_delete walk)", default,
                 f"{default / plain:.2f}× the DELETE (goal ≤ 2.0)"),
            line("(a) sweep, default policy minus auto_delete rules", ttl_only),
            line("(a) profile: batched lock + DELETE by ctid, bare copy", batched),
            line("(a) profile: the same + a deletion_log row per row", logged),
        ]  # fmt: skip

        # (b) two writers with and without a sweep
        quiet_rates, busy_rates, sweep_times, waits = [], [], [], []
        for _ in range(args.repeat):
            quiet, during, seconds, waited = writer_rates(dsn, conn, rows, args.window)
            quiet_rates.append(quiet)
            busy_rates.append(during)
            sweep_times.append(seconds)
            waits.append(waited)
        quiet, during = statistics.median(quiet_rates), statistics.median(busy_rates)
        # the same without the sweep's yielding (memgov.maintenance_yield = 0): full speed
        greedy_ratios, greedy_times, greedy_waits = [], [], []
        for _ in range(args.repeat):
            q, d, seconds, waited = writer_rates(dsn, conn, rows, args.window, sweep_yield="0")
            greedy_ratios.append(d / q)
            greedy_times.append(seconds)
            greedy_waits.append(waited)
        settings = dict(conn.execute(
            "SELECT name, setting FROM pg_settings WHERE name IN ('fsync', 'synchronous_commit', 'full_page_writes')"
        ).fetchall())  # fmt: skip
        results += [
            (f"(b) {WRITERS} writers, no sweep", f"{quiet:.0f} inserts/s", "-", "1.00"),
            (f"(b) {WRITERS} writers during a sweep ({statistics.median(sweep_times):.1f} s)",
             f"{during:.0f} inserts/s", "-", f"{during / quiet:.2f} of the rate without (goal ≥ 0.8)"),
            (f"(b) the same, sweep not yielding (maintenance_yield = 0, {statistics.median(greedy_times):.1f} s)",
             "-", "-", f"{statistics.median(greedy_ratios):.2f} of the rate without"),
        ]  # fmt: skip
    print(f"rows: {rows} ({rows // 2} expired), best of {args.repeat} for (a), median of {args.repeat} for (b),")
    print(f"{os.cpu_count()} CPUs, PostgreSQL and the writers on the same machine;",
          ", ".join(f"{k} = {v}" for k, v in sorted(settings.items())) + "\n")  # fmt: skip
    print(table(results, ("measurement", "time / rate", "per row", "ratio")))
    print(f"\n(a) WAL written: plain DELETE {wal_plain / 2**20:.0f} MiB, sweep {wal_sweep / 2**20:.0f} MiB")
    print("\n(b) what the writers' backends were doing during each sweep (pg_stat_activity samples):")
    for waited in waits:
        print(f"    yielding:     {waited}")
    for waited in greedy_waits:
        print(f"    not yielding: {waited}")


if __name__ == "__main__":
    main()

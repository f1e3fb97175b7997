"""Where a governed write's work goes, in CPU instructions (callgrind): the same on every run.

    python -m tests.bench.profile_write [--rows 200] [--bulk-rows 2000]

Timings on a shared 2-core machine move by ±10 % between runs; instruction
counts do not, so this profile says which part of the write path costs what,
and whether a change made it cheaper, without a quiet machine. It needs
valgrind, and builds its own cluster (the bench_write tables and
``policies/default.yaml``); each measurement runs ``postgres --single`` under
callgrind on a copy of that cluster's data directory, as an agent's role
(memgov_writer, memgov.org_id set).

Each layer adds one part of the write path to the one above it, the parts
below it replaced by stand-ins that cost (almost) nothing:

    bare copy of the table          bench.bare: no trigger, no row security
    governed table, trigger off     row security and the statement triggers (flush_inserted)
    + an empty write trigger        enforce_write() reduced to RETURN NEW
    + the trigger's own work        the engine columns and checks, a constant decision and its
                                    log row (the trigger and memgov.govern write it themselves)
    + the policy's decision         memgov.decide() as deployed: the write path as shipped

Columns: a single-row INSERT transaction that the policy stores, one that it
holds for approval (a request filed, reviewers notified), and a row of a bulk
INSERT ... SELECT. Instructions of --rows (--bulk-rows) writes minus those of
none, divided: the server's start and the first writes (plans, caches) cancel out.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import psycopg

from memgov_pg.cluster import LocalCluster, free_port
from memgov_pg.deploy import deploy
from memgov_pg.migrate import upgrade
from tests.bench.bench_write import COLUMNS, SETUP
from tests.bench.common import EMPTY_TRIGGER, enforce_write_header, table

ROOT = Path(__file__).resolve().parents[2]
ROLE = "memgov_bench_agent"
GOVERNED = "memgov.long_term_memory_items"
WARMUP = 20

# (label, SQL run as the superuser before the measured writes)
CONSTANT_DECISION = """
CREATE OR REPLACE FUNCTION memgov.decide(p_item memgov.long_term_memory_items, p_operation text, p_actor text)
RETURNS memgov.decision LANGUAGE plpgsql STABLE AS $body$
BEGIN
    RETURN ROW(CASE WHEN p_item.confidence <= 0.7 THEN 'require_approval' ELSE 'allow' END,
               ARRAY['CONSTANT']::text[], ARRAY['constant']::text[], '1.0.0', 'enforce', true,
               NULL, NULL)::memgov.decision;
END $body$"""
DISABLE_TRIGGER = f"ALTER TABLE {GOVERNED} DISABLE TRIGGER enforce_write"

LAYERS: list[tuple[str, str, list[str]]] = [
    ("bare copy of the table", "bench.bare", []),
    ("governed table, write trigger off", GOVERNED, [DISABLE_TRIGGER]),
    ("+ an empty write trigger", GOVERNED, [f"{{header}} AS $body$ {EMPTY_TRIGGER} $body$"]),
    ("+ the trigger's own work and log row", GOVERNED, [CONSTANT_DECISION]),
    ("+ the policy's decision (as shipped)", GOVERNED, []),
]

SINGLE = (
    "INSERT INTO {table} ("
    + COLUMNS
    + ") VALUES ('acme', 'p1', 'user_fact', 'The user mentioned fact ' || $1, 'agent_extracted', {confidence}, 'mcp')"
)
BULK = (
    "INSERT INTO {table} (" + COLUMNS + ") SELECT " + COLUMNS + " FROM bench.source WHERE i > {first} AND i <= {last}"
)


def one_line(statement: str) -> str:
    """``postgres --single`` reads a statement a line."""
    return " ".join(line.split("--")[0] for line in statement.splitlines()).strip() + ";"


def script(prefix: list[str], target: str, kind: str, rows: int) -> str:
    lines = [*(one_line(s) for s in prefix), "SET synchronous_commit = off;", "SET memgov.org_id = 'acme';",
             "SET client_min_messages = warning;", f"SET ROLE {ROLE};"]  # fmt: skip
    if kind == "bulk":
        lines.append(BULK.format(table=target, first=0, last=WARMUP) + ";")
        if rows:
            lines.append(BULK.format(table=target, first=WARMUP, last=WARMUP + rows) + ";")
        return "\n".join(lines) + "\n"
    confidence = "0.7" if kind == "held" else "0.9"
    lines.append(f"PREPARE w(int) AS {SINGLE.format(table=target, confidence=confidence)};")
    lines += [f"EXECUTE w({i});" for i in range(1, WARMUP + rows + 1)]
    return "\n".join(lines) + "\n"


def instructions(cluster: LocalCluster, pristine: Path, sql_script: str) -> int:
    """Instructions of one ``postgres --single`` run of ``sql_script`` on a copy of ``pristine``."""
    run_dir = Path(tempfile.mkdtemp(prefix="memgov-profile-", dir=cluster.base))
    datadir = run_dir / "data"
    shutil.copytree(pristine, datadir, symlinks=True)
    for path in (run_dir, datadir, *datadir.rglob("*")):
        cluster.os_user.own(path)
    out_file = run_dir / "callgrind.out"
    result = cluster.os_user.run(
        ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out_file}",
         str(cluster.bindir / "postgres"), "--single", "-c", "shared_preload_libraries=", "-D", str(datadir), "bench"],
        input=sql_script,
    )  # fmt: skip
    errors = [line for line in result.stdout.splitlines() + result.stderr.splitlines() if "ERROR" in line]
    if result.returncode != 0 or errors or not out_file.exists():
        raise SystemExit(f"profile: postgres --single failed: {(errors or result.stderr.splitlines())[-1:]}")
    summary = subprocess.run(["callgrind_annotate", str(out_file)], capture_output=True, text=True, check=True)
    shutil.rmtree(run_dir, ignore_errors=True)
    for line in summary.stdout.splitlines():
        if "PROGRAM TOTALS" in line:
            return int(line.split()[0].replace(",", ""))
    raise SystemExit("profile: callgrind_annotate printed no total")


Layer = tuple[str, str, list[str]]


def profile(rows: int, bulk_rows: int, layers: list[Layer] = LAYERS) -> list[tuple[str, list[float]]]:
    """Instructions per write of each layer: (label, [single-row stored, single-row held, bulk row]).

    Needs valgrind (the caller checks ``have_valgrind()``)."""
    base = Path(tempfile.mkdtemp(prefix="memgov-profile-"))
    cluster = LocalCluster(base, free_port(), durable=False)
    running = False
    out: list[tuple[str, list[float]]] = []
    try:
        cluster.init()
        cluster.start_on_a_free_port()
        running = True
        cluster.bootstrap()
        with psycopg.connect(cluster.dsn("postgres"), autocommit=True) as conn:
            conn.execute("CREATE DATABASE bench")
        dsn = cluster.dsn("bench")
        upgrade(dsn)
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(SETUP.replace("%(rows)s", str(WARMUP + max(rows, bulk_rows))))
            header = enforce_write_header(conn)
        deploy(dsn, ROOT / "policies" / "default.yaml")
        cluster.stop()
        running = False
        for label, target, prefix in layers:
            prefix = [s.format(header=header) if s.startswith("{header}") else s for s in prefix]
            cells = []
            for kind, n in (("stored", rows), ("held", rows), ("bulk", bulk_rows)):
                if kind == "held" and target == "bench.bare":
                    kind = "stored"  # nothing is held without the trigger: the same INSERT
                total = instructions(cluster, cluster.datadir, script(prefix, target, kind, n))
                empty = instructions(cluster, cluster.datadir, script(prefix, target, kind, 0))
                cells.append((total - empty) / n)
            out.append((label, cells))
            print(f"  {label}: done", file=sys.stderr, flush=True)
    finally:
        if running:
            cluster.stop()
        shutil.rmtree(base, ignore_errors=True)
    return out


def have_valgrind() -> bool:
    return shutil.which("valgrind") is not None and shutil.which("callgrind_annotate") is not None


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--rows", type=int, default=200, help="single-row INSERTs measured per cell")
    p.add_argument("--bulk-rows", type=int, default=2000, help="rows of the measured INSERT ... SELECT")
    args = p.parse_args()
    if not have_valgrind():
        print("profile: skipped: needs valgrind (Debian package valgrind)")
        return
    rows = [(label, *(f"{c / 1000:,.0f}k" for c in cells)) for label, cells in profile(args.rows, args.bulk_rows)]
    print("instructions per write (callgrind), each layer adding one part of the write path\n")
    print(table(rows, ("layer", "single-row, stored", "single-row, held", "bulk, per row")))


if __name__ == "__main__":
    main()

"""The monitoring views (sql/090_monitoring.sql, docs/monitoring.md) and the
postgres_exporter queries file that exposes them (deploy/postgres_exporter/queries.yaml),
read as a real login in pg_monitor after real writes: stored, held, quarantined and
denied ones. The exporter itself, when Debian's prometheus-postgres-exporter is
installed, is started against the test database and scraped on 127.0.0.1."""

from __future__ import annotations

import os
import re
import secrets
import shutil
import subprocess
import urllib.request
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from memgov_pg.cluster import free_port
from memgov_pg.compiler import compile_policy
from memgov_pg.deploy import pg_regex_checker
from memgov_pg.policy import load_policy
from memgov_pg.resources import exporter_queries
from tests import yaml_text
from tests.attack_helpers import ORG, POLICY, Logins, as_json, deploy_policies, insert, item, login_dsn
from tests.decision_cases import wipe
from tests.waiting import wait_for

QUERIES = exporter_queries()
VIEWS = ("monitor_decisions", "monitor_approvals", "monitor_quarantine", "monitor_sweep", "monitor_seal",
         "monitor_shadows", "monitor_policies")  # fmt: skip
EXPORTER = "prometheus-postgres-exporter"
# a shadow candidate (as tests/db/test_shadow.py's): uncertain preferences stored, untrusted PII refused
CANDIDATE = POLICY.replace(
    "    action: require_approval\n    reason_codes: [LOW_CONFIDENCE_PREFERENCE]",
    "    action: allow\n    reason_codes: [PREFERENCE_STORED]",
).replace("    action: quarantine\n", "    action: deny\n")


@pytest.fixture(scope="module")
def monitor(memgov_dsn: str) -> Iterator[str]:
    """A login in pg_monitor and nothing else, as postgres_exporter runs."""
    name = f"mon_{os.getpid()}_{secrets.token_hex(3)}"
    with psycopg.connect(memgov_dsn, autocommit=True) as su:
        su.execute(sql.SQL("CREATE ROLE {} LOGIN IN ROLE pg_monitor").format(sql.Identifier(name)))
    try:
        yield name
    finally:
        with psycopg.connect(memgov_dsn, autocommit=True) as su:
            su.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s", (name,))
            su.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(name)))


@pytest.fixture(scope="module")
def written(memgov_dsn: str, logins: Logins) -> dict[str, Any]:
    """The attack policy, then a writer's writes: two stored in one statement (one shared
    decision), then, with a shadow candidate running, one held, one quarantined, one denied
    (through memgov.remember, whose denial stays logged). The candidate stores the held one
    and denies the quarantined one."""
    with (
        psycopg.connect(memgov_dsn, autocommit=True) as su,
        psycopg.connect(login_dsn(memgov_dsn, logins.writer), autocommit=True) as writer,
    ):
        wipe(su)
        deploy_policies(su)
        writer.execute("SELECT set_config('memgov.org_id', %s, false)", (ORG,))
        writer.execute(
            "INSERT INTO memgov.long_term_memory_items (org_id, category, fact_text, source, confidence) "
            "VALUES (%(org_id)s, %(category)s, %(fact_text)s, %(source)s, %(confidence)s), "
            "(%(org_id)s, %(category)s, 'likes black tea', %(source)s, %(confidence)s)",
            item("allowed"),
        )
        candidate = load_policy(CANDIDATE.format(version="1.1.0", description="legal hold"),
                                regex_checker=pg_regex_checker(su))  # fmt: skip
        with su.transaction():
            su.execute(compile_policy(candidate, "*").stage_sql())
            su.execute("SELECT memgov.start_shadow('*', '1.1.0')")
        insert(writer, item("held"))
        insert(writer, item("quarantined"))
        denied = writer.execute("SELECT memgov.remember(%s)", (as_json(item("denied")),)).fetchone()
        assert denied is not None and denied[0]["action"] == "deny"
    return {"stored": 2, "held": 1, "quarantined": 1, "denied": 1}


def rows(dsn: str, role: str, view: str) -> list[dict[str, Any]]:
    with psycopg.connect(login_dsn(dsn, role), autocommit=True, row_factory=psycopg.rows.dict_row) as conn:
        return conn.execute(sql.SQL("SELECT * FROM memgov.{}").format(sql.Identifier(view))).fetchall()


def test_views_count_the_writes(memgov_dsn: str, monitor: str, written: dict[str, Any]) -> None:
    decisions = {
        (r["org_id"], r["operation"], r["action"]): r
        for r in rows(memgov_dsn, monitor, "monitor_decisions")
        if r["org_id"] == ORG
    }
    assert set(decisions) == {(ORG, "remember", a) for a in ("allow", "require_approval", "quarantine", "deny")}
    stored = decisions[(ORG, "remember", "allow")]
    # one statement, one shared decision, two memories
    assert (stored["decisions_last_hour"], stored["memories_last_hour"], stored["enforced"]) == (1, 2, True)
    assert stored["decisions_last_minute"] <= stored["decisions_last_hour"]
    for action in ("require_approval", "quarantine", "deny"):
        assert decisions[(ORG, "remember", action)]["decisions_last_hour"] == 1

    (approvals,) = rows(memgov_dsn, monitor, "monitor_approvals")
    assert (approvals["org_id"], approvals["pending"]) == (ORG, 1)
    assert approvals["oldest_age_seconds"] >= 0
    (quarantine,) = rows(memgov_dsn, monitor, "monitor_quarantine")
    assert (quarantine["org_id"], quarantine["held"]) == (ORG, 1)

    policies = {(r["org_id"], r["version"], r["mode"]) for r in rows(memgov_dsn, monitor, "monitor_policies")}
    assert policies == {("*", "1.0.0", "enforce"), ("globex", "7.0.0-globex", "enforce")}
    (shadow,) = rows(memgov_dsn, monitor, "monitor_shadows")
    assert (shadow["org_id"], shadow["version"], shadow["decisions"], shadow["divergences"]) == ("*", "1.1.0", 3, 2)


def test_seal_lag_and_sweep(memgov_dsn: str, monitor: str, written: dict[str, Any]) -> None:
    (seal,) = rows(memgov_dsn, monitor, "monitor_seal")
    with psycopg.connect(memgov_dsn, autocommit=True) as su:
        logged = su.execute("SELECT count(*) FROM memgov.decision_log").fetchone()
        assert logged is not None
        assert seal["unsealed_rows"] == logged[0] >= 4 and seal["oldest_unsealed_age_seconds"] >= 0
        (sweep,) = rows(memgov_dsn, monitor, "monitor_sweep")
        assert (sweep["schedule"], sweep["schedule_seconds"], sweep["interrupted_since"]) == ("*/10 * * * *", 600, 0)
        before = sweep["last_run_id"]
        su.execute("CALL memgov.run_maintenance()")  # seals the log at its end
    (sweep,) = rows(memgov_dsn, monitor, "monitor_sweep")
    assert sweep["last_run_id"] is not None and sweep["last_run_id"] != before
    assert sweep["last_duration_seconds"] >= 0 and sweep["running_since"] is None
    assert sweep["last_sealed"] == logged[0]
    (seal,) = rows(memgov_dsn, monitor, "monitor_seal")
    assert (seal["unsealed_rows"], seal["oldest_unsealed_age_seconds"]) == (0, 0)
    assert seal["last_seal_id"] >= 1


def test_only_admins_and_monitoring_roles_read_them(
    memgov_dsn: str, monitor: str, logins: Logins, written: dict[str, Any]
) -> None:
    for view in VIEWS:
        rows(memgov_dsn, logins.admin, view)
        rows(memgov_dsn, monitor, view)
    for role in (logins.writer, logins.reviewer, logins.nobody):
        with psycopg.connect(login_dsn(memgov_dsn, role), autocommit=True) as conn:
            for view in VIEWS:
                with pytest.raises(psycopg.errors.InsufficientPrivilege):
                    conn.execute(sql.SQL("SELECT * FROM memgov.{}").format(sql.Identifier(view)))
    # pg_monitor holds no right on the tables behind them
    with psycopg.connect(login_dsn(memgov_dsn, monitor), autocommit=True) as conn:
        for table in ("decision_log", "approval_requests", "quarantine", "long_term_memory_items"):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(sql.SQL("SELECT 1 FROM memgov.{} LIMIT 1").format(sql.Identifier(table)))


def test_views_are_read_by_index(db_conn: psycopg.Connection[Any], written: dict[str, Any]) -> None:
    """Each view has a plan without a sequential scan (so an index or a bounded range answers
    it on a large log), and none reads the memory table."""
    with db_conn.transaction():
        db_conn.execute("SET LOCAL enable_seqscan = off")
        for view in VIEWS:
            plan = "\n".join(r[0] for r in db_conn.execute(f"EXPLAIN SELECT * FROM memgov.{view}"))
            assert "Seq Scan" not in plan, f"{view}:\n{plan}"
            assert "long_term_memory_items" not in plan, f"{view}:\n{plan}"


def queries_file() -> dict[str, Any]:
    queries = yaml_text.safe_load(QUERIES.read_text(encoding="utf-8"))
    assert isinstance(queries, dict) and queries
    return queries


def test_exporter_queries_run_as_pg_monitor(memgov_dsn: str, monitor: str, written: dict[str, Any]) -> None:
    """Every query of queries.yaml runs as a pg_monitor login, returns every column its metrics
    name, labels as text and gauges as numbers; together they cover every view."""
    read: set[str] = set()
    with psycopg.connect(login_dsn(memgov_dsn, monitor), autocommit=True) as conn:
        for name, spec in queries_file().items():
            assert name.startswith("memgov_"), name
            read |= set(re.findall(r"memgov\.(monitor_\w+)", spec["query"]))
            cur = conn.execute(spec["query"])
            assert cur.description is not None
            columns = [c.name for c in cur.description]
            result = cur.fetchall()
            assert result, f"{name}: no rows after the writes"
            metrics = {k: v for m in spec["metrics"] for k, v in m.items()}
            assert set(metrics) == set(columns), name
            for row in result:
                for column, value in zip(columns, row, strict=True):
                    usage = metrics[column]["usage"]
                    assert metrics[column]["description"], (name, column)
                    if usage == "LABEL":
                        assert isinstance(value, str), (name, column, value)
                    else:
                        assert usage in ("GAUGE", "COUNTER"), (name, column, usage)
                        assert isinstance(value, int | float | Decimal) and not isinstance(value, bool), (
                            name,
                            column,
                            value,
                        )
    assert read == set(VIEWS)


def scrape(url: str) -> str:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return str(response.read().decode())
    except OSError:
        return ""


def sample(metrics: str, name: str, **labels: str) -> float:
    """The value of one sample of ``name`` whose labels include ``labels``."""
    for line in metrics.splitlines():
        match = re.match(rf"^{name}(?:\{{(.*)\}})? (\S+)$", line)
        if match and all(f'{k}="{v}"' in (match.group(1) or "") for k, v in labels.items()):
            return float(match.group(2))
    raise AssertionError(f"no sample {name} {labels} in the scrape")


@pytest.mark.slow
def test_the_exporter_scrapes_the_views(memgov_dsn: str, monitor: str, written: dict[str, Any], tmp_path: Path) -> None:
    binary = shutil.which(EXPORTER) or (f"/usr/bin/{EXPORTER}" if Path(f"/usr/bin/{EXPORTER}").exists() else None)
    if binary is None:
        pytest.skip(f"{EXPORTER} is not installed (Debian package {EXPORTER})")
    port = free_port()
    dsn = psycopg.conninfo.make_conninfo(login_dsn(memgov_dsn, monitor), sslmode="disable")
    log = (tmp_path / "exporter.log").open("w")
    exporter = subprocess.Popen(
        [
            binary,
            f"--web.listen-address=127.0.0.1:{port}",
            f"--extend.query-path={QUERIES}",
            "--disable-default-metrics",
            "--disable-settings-metrics",
        ],
        env=dict(os.environ, DATA_SOURCE_NAME=dsn),
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        url = f"http://127.0.0.1:{port}/metrics"
        metrics = wait_for(
            lambda: (m := scrape(url)) and "memgov_approvals_pending" in m and m, "the exporter's metrics"
        )
        assert isinstance(metrics, str)
        assert sample(metrics, "memgov_approvals_pending", org_id=ORG) == written["held"]
        assert sample(metrics, "memgov_quarantine_held", org_id=ORG) == written["quarantined"]
        decided = {"operation": "remember", "org_id": ORG}
        assert sample(metrics, "memgov_decisions_decisions_last_hour", action="deny", **decided) == written["denied"]
        assert sample(metrics, "memgov_decisions_memories_last_hour", action="allow", **decided) == written["stored"]
        assert sample(metrics, "memgov_decisions_decisions_last_hour", action="require_approval", **decided) == 1
        assert sample(metrics, "memgov_seal_unsealed_rows") >= 0
        assert sample(metrics, "memgov_sweep_schedule_seconds") == 600
        assert sample(metrics, "memgov_policy_activated_epoch", org_id="*", version="1.0.0") > 0
        print("scraped:", *sorted(line for line in metrics.splitlines() if line.startswith("memgov_")), sep="\n  ")
    finally:
        exporter.terminate()
        exporter.wait(timeout=30)
        log.close()

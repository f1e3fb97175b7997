"""`memgov status --check`: exit 0 healthy, 1 degraded (one line per problem), 2 unreachable."""

from __future__ import annotations

import datetime as dt
import json

from memgov_pg.cluster import free_port
from memgov_pg.retention import previous_firings
from tests.cli_helpers import run_memgov


def test_unreachable_exits_2():
    result = run_memgov("status", "--check", "--dsn", f"host=127.0.0.1 port={free_port()} dbname=x")
    assert result.returncode == 2, result.stderr
    assert result.stdout.startswith("unreachable: ")


def test_no_active_policy_is_degraded(memgov_dsn):
    result = run_memgov("status", "--check", "--json", "--dsn", memgov_dsn)
    assert result.returncode == 1, result.stderr
    data = json.loads(result.stdout)
    assert data["status"] == "degraded"
    assert any(p.startswith("no active policy") for p in data["problems"])


def test_previous_firings():
    now = dt.datetime(2026, 12, 1, 12, 30, 30, tzinfo=dt.UTC)
    assert previous_firings("0 * * * *", now) == [
        now.replace(minute=0, second=0),
        now.replace(hour=11, minute=0, second=0),
    ]
    assert previous_firings("@weird", now) is None

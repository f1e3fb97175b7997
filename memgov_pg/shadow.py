"""Shadow deployments and replays: what a candidate policy would decide, before it is
enforced (docs/changing-policies.md). The decisions are PostgreSQL's
(sql/035_shadow.sql); this module reads reports, promotes and stops shadows, and
stages a replay's candidate (``memgov deploy --shadow`` is memgov_pg.deploy's)."""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

from .compiler import compile_policy
from .db import connect
from .deploy import load, scope_of
from .policy.durations import Duration, parse_duration
from .resources import query

log = logging.getLogger("memgov_pg")

#: The short forms of a replay window: 30m, 12h, 7d, 2w.
_SHORT_UNITS = {"m": "minutes", "h": "hours", "d": "days", "w": "weeks"}
_SHORT_RE = re.compile(r"\s*(\d+)\s*([mhdw])\s*", re.IGNORECASE)


def parse_window(text: str) -> Duration:
    """A window such as ``7d``, ``12h`` or ``2 weeks``; ValueError (a user-facing message) when it is none."""
    short = _SHORT_RE.fullmatch(text)
    try:
        return parse_duration(f"{short.group(1)} {_SHORT_UNITS[short.group(2).lower()]}" if short else text)
    except ValueError as exc:
        raise ValueError(f"{exc} (or 30m, 12h, 7d, 2w)") from None


def report(dsn: str, tenant: str | None = None, examples: int = 3) -> dict[str, Any]:
    """The report of the running shadow of a scope (else its latest): memgov.shadow_report."""
    return ordered(_one(dsn, "shadow_report", {"org_id": scope_of(tenant), "examples": examples}))


def promote(dsn: str, tenant: str | None = None) -> str:
    """Activate the running shadow's candidate and end the shadow; returns the version now active."""
    version = _one(dsn, "promote_shadow", {"org_id": scope_of(tenant)})
    log.info("promoted shadow policy %s for %s", version, scope_of(tenant))
    return str(version)


def stop(dsn: str, tenant: str | None = None) -> str:
    """End the running shadow of a scope; returns the candidate's version."""
    return str(_one(dsn, "stop_shadow", {"org_id": scope_of(tenant)}))


def replay(
    dsn: str, path: str | Path, tenant: str | None = None, since: Duration | None = None, examples: int = 3
) -> dict[str, Any]:
    """Re-decide the writes of the last ``since`` (default 7 days) under a candidate.

    The candidate is installed in a transaction that is rolled back: nothing is deployed.
    """
    org_id = scope_of(tenant)
    window = since or Duration(7, "days")
    with connect(dsn) as conn:
        policy = load(path, conn)
        conn.execute(compile_policy(policy, org_id).stage_sql())
        row = conn.execute(
            query("replay"),
            {"org_id": org_id, "version": policy.version, "since": str(window), "examples": examples},
        ).fetchone()
        conn.rollback()
    assert row is not None
    return ordered(row[0])


#: The order of a report's keys in print (jsonb keeps its own): the report's, a divergence's, an example's.
_REPORT_KEYS = ("candidate", "tenant", "state", "since", "started_at", "ended_at", "decisions", "sources",
                "divergences")  # fmt: skip
_DIVERGENCE_KEYS = ("active", "candidate", "count", "sources", "examples")
_EXAMPLE_KEYS = ("decision_id", "operation", "memory_id", "source", "active_rule_ids", "candidate_rule_ids")


def ordered(report: dict[str, Any]) -> dict[str, Any]:
    """A shadow or replay report with its keys in reading order."""
    top = _reorder(report, _REPORT_KEYS)
    top["divergences"] = [
        _reorder(d, _DIVERGENCE_KEYS) | {"examples": [_reorder(e, _EXAMPLE_KEYS) for e in d["examples"]]}
        for d in top["divergences"]
    ]
    return top


def _reorder(data: dict[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    return {k: data[k] for k in keys if k in data} | {k: v for k, v in sorted(data.items()) if k not in keys}


def _one(dsn: str, name: str, params: dict[str, Any]) -> Any:
    with connect(dsn) as conn:
        row = conn.execute(query(name), params).fetchone()
        conn.commit()
    assert row is not None
    return row[0]

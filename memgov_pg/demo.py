"""``memgov demo``: a short story of agent writes, user feedback, approvals, a recall,
retention and a candidate policy shadowed then promoted, played against a real
database with policies/default.yaml.

Everything the story shows is decided by the database: the demo only sends
the writes an agent and a user-facing application would send, each as its
own role (memgov_writer, memgov_reviewer), and prints what was decided.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import yaml
from psycopg import sql
from psycopg.types.json import Jsonb
from rich.console import Console
from rich.table import Table

from . import shadow
from .db import connect
from .deploy import deploy, rollback
from .migrate import upgrade
from .resources import query

TENANT = "demo"
CANDIDATE_VERSION = "1.1.0-demo"


@dataclass
class Step:
    """One line of the demo's story: who did what, and what memgov decided."""

    actor: str
    what: str
    result: str


def default_policy() -> Path:
    """policies/default.yaml of the checkout, or the copy shipped inside the package."""
    here = Path(__file__).resolve().parent
    for candidate in (here.parent / "policies" / "default.yaml", here / "policies" / "default.yaml"):
        if candidate.is_file():
            return candidate
    raise FileNotFoundError("policies/default.yaml")


@contextmanager
def acting_as(conn: psycopg.Connection[Any], role: str) -> Iterator[psycopg.Connection[Any]]:
    """One transaction as ``role`` for the demo tenant."""
    with conn.transaction():
        conn.execute(sql.SQL("SET LOCAL ROLE {}").format(sql.Identifier(role)))
        conn.execute(query("set_tenant"), {"org_id": TENANT})
        yield conn


def one(conn: psycopg.Connection[Any], name: str, params: dict[str, Any]) -> Any:
    """The single value a named query returns."""
    row = conn.execute(query(name), params).fetchone()
    assert row is not None, name
    return row[0]


def fact(text: str, category: str, confidence: float, **extra: Any) -> dict[str, Any]:
    """A memory item of the demo tenant (``extra`` overrides or adds columns)."""
    return {"org_id": TENANT, "project_id": "atlas", "agent_id": "assistant-1", "subject_id": "olena",
            "category": category, "fact_text": text, "source": "agent_extracted", "confidence": confidence,
            "context_source": "mcp"} | extra  # fmt: skip


def describe(decision: dict[str, Any]) -> str:
    """A decision as one line: its action, the rules that matched, its reason codes."""
    rules = ", ".join(decision.get("matched_rule_ids") or []) or "no rule (on_policy_miss)"
    return f"{decision['action']} — {rules} [{', '.join(decision.get('reason_codes') or [])}]"


def play(conn: psycopg.Connection[Any]) -> list[Step]:
    """Play the story on ``conn`` (writes, feedback, a review, the retention sweep); return its steps."""
    steps: list[Step] = []
    ids: dict[str, dict[str, Any]] = {}

    def agent_remembers(key: str, item: dict[str, Any]) -> None:
        with acting_as(conn, "memgov_writer"):
            decision = one(conn, "remember", {"item": Jsonb(item)})
        ids[key] = decision
        steps.append(Step("agent", f"remember “{item['fact_text']}” ({item['category']}, {item['confidence']})",
                          describe(decision)))  # fmt: skip

    def user(name: str, params: dict[str, Any]) -> dict[str, Any]:
        with acting_as(conn, "memgov_reviewer"):
            result = one(conn, name, params)
        return dict(result)

    agent_remembers("name", fact("The user's name is Olena", "user_fact", 0.9))
    agent_remembers("dark", fact("Prefers dark mode in every editor", "preference", 0.85))
    agent_remembers("kyiv", fact("Probably lives in Kyiv", "assumption", 0.5))
    agent_remembers("key", fact("Her API key is sk-proj-Zx81hQ2mR7vT4kLp9sWq", "user_fact", 0.95))
    agent_remembers("tmp", fact("Currently debugging main.py line 42", "temporary_context", 0.9))
    agent_remembers("atlas", fact("Works on project Atlas, a billing rewrite", "project_fact", 0.6))
    agent_remembers("trip", fact("Is travelling to Lviv next week", "user_fact", 0.8, retention_policy="ttl_7d"))

    r = user("confirm", {"memory_id": ids["atlas"]["memory_id"]})
    steps.append(
        Step(
            "user",
            "confirms the Atlas fact",
            f"{r['outcome']}, confidence {r['confidence_before']} → {r['confidence_after']}",
        )
    )
    r = user("deny", {"request_id": ids["kyiv"]["request_id"], "note": "not true"})
    steps.append(Step("reviewer", "denies the Kyiv assumption", r["status"]))
    r = user("reject", {"memory_id": ids["dark"]["memory_id"]})
    steps.append(
        Step(
            "user",
            "rejects the dark-mode preference",
            f"{r['outcome']}, confidence {r['confidence_before']} → {r['confidence_after']}",
        )
    )
    r = user("edit", {"memory_id": ids["name"]["memory_id"], "new_text": "The user's name is Olena Koval"})
    steps.append(
        Step("user", "edits the name to “Olena Koval”", f"{r['action']}, confidence → {r['confidence_after']}")
    )
    try:
        user("edit", {"memory_id": ids["name"]["memory_id"], "new_text": "password: hunter2hunter2"})
    except psycopg.Error as exc:
        steps.append(Step("user", "edits the name to a password", f"refused [{exc.sqlstate}]; the old text stays"))

    with acting_as(conn, "memgov_writer"):
        recall = Jsonb({"text": "Olena", "project_id": "atlas"})
        found = conn.execute(query("demo_recall"), {"query": recall}).fetchall()
        outcome = one(conn, "last_recall", {})
    best = f"“{found[0][0]}”" if found else "nothing"
    steps.append(Step("agent", "recalls “Olena” (memgov.search)",
                      f"{outcome['returned']} found, {best}; {outcome['action']}"
                      f" [{', '.join(outcome['reason_codes'])}]"))  # fmt: skip

    # eight days pass for the trip (back-dated on the engine's own path), then the sweep runs
    with conn.transaction():
        conn.execute("SET LOCAL ROLE memgov_owner")
        conn.execute(query("demo_backdate"), {"memory_id": ids["trip"]["memory_id"]})
    conn.autocommit = True
    conn.execute(query("retention_run"))
    summary = one(conn, "last_maintenance_summary", {})
    conn.autocommit = False
    deleted = summary.get("deleted", {})
    steps.append(Step("pg_cron", "runs the retention sweep (8 days later)",
                      "deleted " + ", ".join(f"{k} {v}" for k, v in deleted.items())))  # fmt: skip
    return steps


def candidate_policy(default: Path) -> str:
    """The demo's candidate: policies/default.yaml storing agent facts above 0.5 (not 0.7)."""
    policy = yaml.safe_load(default.read_text(encoding="utf-8"))
    policy["version"] = CANDIDATE_VERSION
    policy["description"] = "the default policy, storing agent-extracted facts above 0.5"
    threshold = {"store-confident-agent-facts": {"gt": 0.5}, "confirm-uncertain-agent-facts": {"lte": 0.5}}
    for rule in policy["rules"]:
        if rule["id"] in threshold:
            rule["condition"]["confidence"] = threshold[rule["id"]]
    return yaml.safe_dump(policy, sort_keys=False)


def play_shadow(conn: psycopg.Connection[Any], target: str, default: Path, active: str) -> list[Step]:
    """Shadow the candidate, let the agent write, read the report, promote, roll back to ``active``."""
    steps: list[Step] = []
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "candidate.yaml"
        path.write_text(candidate_policy(default), encoding="utf-8")
        deploy(target, path, shadow=True)
    steps.append(Step("admin", f"memgov deploy candidate.yaml --shadow ({CANDIDATE_VERSION}: agent facts > 0.5)",
                      f"shadowing: decides beside {active}, unenforced"))  # fmt: skip
    for text, confidence in (("Speaks Ukrainian and English", 0.6), ("Her team uses PostgreSQL 15", 0.65),
                             ("Prefers short answers", 0.9)):  # fmt: skip
        with acting_as(conn, "memgov_writer"):
            decision = one(conn, "remember", {"item": Jsonb(fact(text, "user_fact", confidence))})
        steps.append(Step("agent", f"remember “{text}” (user_fact, {confidence})", describe(decision)))
    report = shadow.report(target)
    changes = "; ".join(f"{d['active']} → {d['candidate']}: {d['count']}" for d in report["divergences"])
    steps.append(Step("admin", "memgov shadow report", f"{report['decisions']} decisions; {changes or 'no change'}"))
    steps.append(Step("admin", "memgov shadow promote", f"active: {shadow.promote(target)}"))
    with acting_as(conn, "memgov_writer"):
        decision = one(conn, "remember", {"item": Jsonb(fact("Works from Lviv on Fridays", "user_fact", 0.6))})
    steps.append(Step("agent", "remember “Works from Lviv on Fridays” (user_fact, 0.6)", describe(decision)))
    steps.append(Step("admin", "memgov rollback (the demo leaves the default in force)",
                      f"active: {rollback(target, to=active)}"))  # fmt: skip
    return steps


def run_demo(target: str) -> None:
    """Migrate, deploy policies/default.yaml, reset the demo tenant, play the story and print it.

    ``target`` is the DSN the command line resolved (memgov_pg.cli.dsn).
    """
    console = Console()
    before, after = upgrade(target)
    console.print(f"[bold]memgov schema[/] {before or 'nothing'} → {after}")
    result = deploy(target, default_policy())
    console.print(f"[bold]policy[/] policies/default.yaml {result.version} deployed ({result.rules} rules)\n")
    with connect(target) as conn:
        with conn.transaction():
            conn.execute("SET LOCAL ROLE memgov_owner")  # the engine's path: a clean slate, undecided
            conn.execute(query("demo_reset"), {"org_id": TENANT})
            after = one(conn, "demo_last_decision", {"org_id": TENANT})  # the log keeps earlier runs'
        steps = play(conn)
        steps += play_shadow(conn, target, default_policy(), result.version)
        decisions = conn.execute(query("demo_decisions"), {"org_id": TENANT, "after": after}).fetchall()
        memories = conn.execute(query("demo_memories"), {"org_id": TENANT}).fetchall()

    story = Table(title="the story", show_lines=False)
    for column in ("who", "does", "memgov decides"):
        story.add_column(column)
    for step in steps:
        story.add_row(step.actor, step.what, step.result)
    console.print(story)

    log = Table(title=f"memgov.decision_log (tenant {TENANT})")
    for column in ("#", "operation", "action", "enforced", "rules", "reasons", "actor"):
        log.add_column(column)
    for row in decisions:
        log.add_row(*(", ".join(v) if isinstance(v, list) else str(v) for v in row))
    console.print(log)

    stored = Table(title="memgov.long_term_memory_items")
    for column in ("fact", "category", "confidence", "status", "retention"):
        stored.add_column(column)
    for row in memories:
        stored.add_row(*(str(v) for v in row))
    console.print(stored)
    console.print("Run it again any time; `memgov status` and `memgov evaluate --explain` work on the same database.")

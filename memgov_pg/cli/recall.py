"""``memgov search``: a governed recall, decided by the active policy as an agent's is."""

from __future__ import annotations

from typing import Any

import click

from .base import check_tenant, cli, dsn_option, emit, json_option
from .dsn import resolve_dsn


@cli.command()
@click.argument("text", required=False)
@click.option("--tenant", metavar="ORG", required=True, callback=check_tenant, help="The tenant to recall from.")
@click.option("--project", "project_id", metavar="ID", help="Only memories of this project.")
@click.option("--agent", "agent_id", metavar="ID", help="Only memories of this agent.")
@click.option("--subject", "subject_id", metavar="ID", help="Only memories about this subject.")
@click.option("--session", "session_id", metavar="ID", help="Only memories of this session.")
@click.option("--category", "categories", metavar="NAME", multiple=True, help="Only this category (repeatable).")
@click.option("--min-confidence", type=click.FloatRange(0, 1), help="Only memories at least this confident.")
@click.option("--context-source", metavar="NAME", help="The channel the recall comes from (the policy reads it).")
@click.option("--limit", type=click.IntRange(1, 1000), default=20, show_default=True, help="At most this many.")
@dsn_option
@json_option
def search(text: str | None, tenant: str, dsn: str | None, as_json: bool, **filters: Any) -> None:
    """Recall a tenant's memories that match TEXT (a web-search style query), best first.

    The search and every memory it finds are decided by the active policy (docs/recall.md):
    memories a get decision refuses are withheld and counted; a refused search exits 1.
    """
    from ..engine import SyncMemoryPolicyEngine

    given = {key: value for key, value in filters.items() if value not in (None, ())}
    with SyncMemoryPolicyEngine.connect(resolve_dsn(dsn), org_id=tenant, max_size=1) as engine:
        recall = engine.search(text, **given)
    data = {
        "decision": dict(recall.decision.raw),
        "returned": recall.returned,
        "withheld": recall.withheld,
        "withheld_disclosed": recall.withheld_disclosed,
        "memories": [m.as_dict() for m in recall.memories],
    }
    emit(data, as_json, _print)


def _print(data: dict[str, Any]) -> None:
    for memory in data["memories"]:
        click.echo(f"{memory['score']:.3f}  {memory['memory_id']}  {memory['category']:<17}  {memory['fact_text']}")
    decision = data["decision"]
    rules = ", ".join(decision.get("matched_rule_ids") or []) or ", ".join(decision.get("reason_codes") or [])
    withheld = f", {data['withheld']} withheld" if data["withheld_disclosed"] else ""
    click.echo(
        f"{data['returned']} returned{withheld}"
        f" (search: {decision.get('action')} by {rules or 'on_policy_miss'}, decision {decision.get('decision_id')})",
        err=True,
    )

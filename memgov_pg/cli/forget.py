"""``memgov forget``: erase the memories a filter names (an erasure request, GDPR Article 17),
each decided as a forget by the active policy (memgov.forget_where)."""

from __future__ import annotations

from typing import Any

import click

from ..errors import ExitCode, MemgovError, NotPermittedError
from .base import check_tenant, cli, dsn_option, emit, json_option
from .dsn import resolve_dsn

#: the roles that may call memgov.forget_where
FORGET_ROLES = "memgov_writer, memgov_reviewer or memgov_admin"


class ScopeNeeded(MemgovError):
    """A forget without a scope besides the tenant: a usage error (exit 2, like click's)."""

    exit_code = ExitCode.USAGE


@cli.command()
@click.option("--tenant", metavar="ORG", required=True, callback=check_tenant, help="The tenant to forget in.")
@click.option("--subject", "subject_id", metavar="ID", help="The memories about this subject (an erasure request).")
@click.option("--project", "project_id", metavar="ID", help="Only memories of this project.")
@click.option("--agent", "agent_id", metavar="ID", help="Only memories of this agent.")
@click.option("--session", "session_id", metavar="ID", help="Only memories of this session.")
@click.option("--category", "categories", metavar="NAME", multiple=True, help="Only this category (repeatable).")
@click.option("--created-before", metavar="TIMESTAMP", help="Only memories created before this (ISO 8601).")
@click.option("--created-after", metavar="TIMESTAMP", help="Only memories created after this (ISO 8601).")
@click.option("--dry-run", is_flag=True, help="Decide and count what would be forgotten; change nothing.")
@dsn_option
@json_option
def forget(tenant: str, dry_run: bool, dsn: str | None, as_json: bool, **filters: Any) -> None:
    """Forget a subject's memories (or those of a project, agent or session): each is decided
    as a `forget` by the active policy, as memgov.forget decides one. What it allows is
    deleted and logged (the decision log, the deletion log); a legal hold or another denial
    keeps the memory, a hold for approval or quarantine files it for a reviewer.

    \b
      memgov forget --tenant acme --subject user-42 --dry-run
      memgov forget --tenant acme --subject user-42

    Exit 0 when the request ran (what the policy keeps is counted, not an error).
    """
    from ..engine import SyncMemoryPolicyEngine

    where = {key: (list(value) if key == "categories" else value)
             for key, value in filters.items() if value not in (None, ())}  # fmt: skip
    if not where.keys() & {"subject_id", "project_id", "agent_id", "session_id"}:
        raise ScopeNeeded(
            "name a scope besides the tenant: --subject, --project, --agent or --session "
            "(a tenant, categories or times alone would forget every subject's memories)"
        )
    target = resolve_dsn(dsn)
    try:
        with SyncMemoryPolicyEngine.connect(target, org_id=tenant, max_size=1) as engine:
            counts = engine.forget_where(where, dry_run=dry_run)
    except NotPermittedError as exc:
        raise _wrong_role(target) or exc from None
    emit({"org_id": tenant, "filter": where} | counts, as_json, _print)


def _wrong_role(dsn: str) -> MemgovError | None:
    """The one-line error of a login that is none of the roles that may forget (else None)."""
    from ..db import connect
    from ..resources import query

    try:
        with connect(dsn) as conn:
            found = conn.execute(query("forget_caller")).fetchone()
    except Exception:
        return None
    if found is None or found[1]:
        return None
    return MemgovError(
        f"`memgov forget` needs a login in {FORGET_ROLES}, and {found[0]} is none; connect as such a login, "
        f"or have an administrator grant one: GRANT memgov_writer TO {found[0]}"
    )


def _print(data: dict[str, Any]) -> None:
    dry = data.get("dry_run")
    click.echo(f"{'dry run: nothing changed; ' if dry else ''}tenant {data['org_id']}")
    rows = (
        ("forgotten", "would be forgotten" if dry else "deleted"),
        ("held", "kept: the forget waits for a reviewer (approval request or quarantine)"),
        ("denied", "kept: the policy refuses the forget (a legal hold, or another denial)"),
        ("pending", "kept: the memory itself waits for approval; not decided"),
    )
    for key, what in rows:
        click.echo(f"  {key:10} {data.get(key, 0):>6}  {what}")

"""``memgov shadow`` and ``memgov replay``: a candidate policy decides beside the active
one, unenforced, live or over the past (docs/changing-policies.md)."""

from __future__ import annotations

from typing import Any

import click

from ..policy.durations import Duration
from .base import ADMIN, cli, dsn_option, emit, json_option, needs_role, tenant_option
from .dsn import resolve_dsn


def _window(ctx: click.Context, param: click.Parameter, value: str) -> Duration:
    """A click callback: ``--since`` as a Duration; anything else is a usage error (exit 2)."""
    from ..shadow import parse_window

    try:
        return parse_window(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


_examples_option = click.option(
    "--examples", default=3, show_default=True, type=click.IntRange(min=0), help="Examples shown per divergence."
)


@cli.group()
def shadow() -> None:
    """Report on, promote or stop a shadow deployment (start one: `memgov deploy CANDIDATE --shadow`)."""


@shadow.command(name="report")
@needs_role(ADMIN)
@tenant_option("The shadow of a tenant's override policy.")
@_examples_option
@dsn_option
@json_option
def shadow_report(tenant: str | None, examples: int, dsn: str | None, as_json: bool) -> None:
    """What the candidate decided otherwise than the active policy, per (active → candidate) action."""
    from ..shadow import report

    emit(report(resolve_dsn(dsn), tenant, examples), as_json, print_report)


@shadow.command(name="promote")
@needs_role(ADMIN)
@tenant_option("Promote the shadow of a tenant's override policy.")
@dsn_option
@json_option
def shadow_promote(tenant: str | None, dsn: str | None, as_json: bool) -> None:
    """Activate the shadow's candidate and end the shadow, in one transaction."""
    from ..shadow import promote

    version = promote(resolve_dsn(dsn), tenant)
    emit({"version": version, "tenant": tenant or "*"}, as_json, lambda d: click.echo(f"active: {d['version']}"))


@shadow.command(name="stop")
@needs_role(ADMIN)
@tenant_option("Stop the shadow of a tenant's override policy.")
@dsn_option
@json_option
def shadow_stop(tenant: str | None, dsn: str | None, as_json: bool) -> None:
    """End the shadow; the active policy stays, and the report stays until the next shadow."""
    from ..shadow import stop

    version = stop(resolve_dsn(dsn), tenant)
    emit({"stopped": version, "tenant": tenant or "*"}, as_json, lambda d: click.echo(f"stopped: {d['stopped']}"))


@cli.command()
@needs_role(ADMIN)
@click.argument("candidate", type=click.Path(dir_okay=False))
@click.option(
    "--since", default="7d", show_default=True, metavar="WINDOW", callback=_window, help="How far back: 30m, 7d, 2w."
)
@tenant_option("Replay one tenant's writes under CANDIDATE as its override policy.")
@_examples_option
@dsn_option
@json_option
def replay(candidate: str, since: Duration, tenant: str | None, examples: int, dsn: str | None, as_json: bool) -> None:
    """Re-decide recent writes under CANDIDATE and report what would change (deploys nothing).

    The writes are the payloads memgov keeps: approval requests, quarantine entries and
    the stored memories.
    """
    from ..shadow import replay as run_replay

    emit(run_replay(resolve_dsn(dsn), candidate, tenant, since, examples), as_json, print_report)


def print_report(report: dict[str, Any]) -> None:
    """A shadow or replay report as text: one line per divergence, then its examples."""
    scope = "global" if report["tenant"] == "*" else f"tenant {report['tenant']}"
    what = f"replay of the last {report['since']}" if "since" in report else f"shadow ({report['state']})"
    sources = report.get("sources") or {}
    per_source = f" ({', '.join(f'{k}: {v}' for k, v in sources.items())})" if sources else ""
    click.echo(f"{report['candidate']} ({scope}), {what}: {report['decisions']} decisions{per_source}")
    if not report["divergences"]:
        click.echo("  no divergence: the candidate decided every one as the active policy did")
    for d in report["divergences"]:
        counted = d.get("sources")
        suffix = f" ({', '.join(f'{k}: {v}' for k, v in counted.items())})" if counted else ""
        click.echo(f"  {d['active']} -> {d['candidate']}: {d['count']}{suffix}")
        for e in d["examples"]:
            active = ",".join(e["active_rule_ids"]) or "no rule"
            candidate = ",".join(e["candidate_rule_ids"]) or "no rule"
            click.echo(f"    decision {e['decision_id']} {e['operation']}: {active} -> {candidate}")

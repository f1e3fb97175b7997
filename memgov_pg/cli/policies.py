"""Commands for policies: validate, compile, deploy, rollback, evaluate."""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from ..errors import ExitCode
from ..policy import OPERATION_TYPES
from .base import ADMIN, cli, dsn_option, emit, json_option, needs_role, tenant_option
from .dsn import resolve_dsn


def print_warnings(warnings: Any) -> None:
    """Print each warning as one line on stderr."""
    for warning in warnings:
        click.echo(str(warning), err=True)


@cli.command()
@click.argument("policies", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option(
    "--override",
    "overrides",
    multiple=True,
    metavar="FILE",
    type=click.Path(dir_okay=False),
    help="A tenant override of POLICY (the global policy), checked against it; repeatable.",
)
@dsn_option
@json_option
def validate(policies: tuple[str, ...], overrides: tuple[str, ...], dsn: str | None, as_json: bool) -> None:
    """Check policy files; exit 1 with `file:line: rule-id: CODE message` lines on errors.

    Each valid policy also gets a line on which (category × source × operation)
    combinations fall to on_policy_miss. With --override, each FILE is checked
    too, and against POLICY: rules it shares by id but not by content, rules that
    decide otherwise on the same conditions, and global rules that refuse or hold
    writes with no counterpart in the override (warnings). Each finding has a stable
    code (MGP…, listed in docs/policy.md); --json gives each one under `findings`
    with its `code`.

    Regular expressions are checked by PostgreSQL when a database is configured
    (--dsn, MEMGOV_DSN or `memgov up`), otherwise offline.
    """
    from ..deploy import pg_regex_checker, read_policy
    from ..policy import analyze_policy
    from ..policy.coverage import coverage
    from ..policy.overrides import compare_override
    from .dsn import optional_connection

    if overrides and len(policies) != 1:
        raise click.UsageError("--override needs exactly one POLICY: the global policy it overrides")
    results: list[dict[str, Any]] = []
    with optional_connection(dsn) as conn:
        checker = pg_regex_checker(conn) if conn is not None else None
        reports = {}
        for path in policies + overrides:
            report = reports[path] = analyze_policy(read_policy(path), filename=path, regex_checker=checker)
            results.append(
                {
                    "file": path,
                    "ok": report.ok,
                    "version": report.policy.version if report.policy else None,
                    "errors": [str(e) for e in report.errors],
                    "warnings": [str(w) for w in report.warnings],
                    "findings": [f.as_json() for f in report.errors + report.warnings],
                    "on_policy_miss": coverage(report.policy).as_json() if report.policy else None,
                }
            )
    base = reports[policies[0]].policy
    for result in results[len(policies) :]:
        own = reports[result["file"]].policy
        if base is not None and own is not None:
            found = compare_override(base, own, policies[0], result["file"])
            result["override_of"] = policies[0]
            result["warnings"] += [str(w) for w in found]
            result["findings"] += [w.as_json() for w in found]
    if as_json:
        click.echo(json.dumps(results, indent=2))
    else:
        for result in results:
            for line in result["errors"] + result["warnings"]:
                click.echo(line, err=True)
            if result["ok"]:
                click.echo(f"{result['file']}: ok (version {result['version']})")
                click.echo(f"{result['file']}: {_miss_summary(result['on_policy_miss'])}")
    if not all(r["ok"] for r in results):
        sys.exit(ExitCode.FAILED)


@cli.command(name="compile")
@click.argument("policy", type=click.Path(dir_okay=False))
@tenant_option("Compile as the override policy of one tenant (org_id).")
@dsn_option
def compile_command(policy: str, tenant: str | None, dsn: str | None) -> None:
    """Print the SQL that `memgov deploy` would run (a psql script)."""
    from ..deploy import compile_file, scope_of
    from .dsn import optional_connection

    scope_of(tenant)  # a bad tenant id is refused before any connection
    with optional_connection(dsn) as conn:
        compiled = compile_file(policy, tenant, conn)
    print_warnings(compiled.policy.warnings)
    click.echo(compiled.script(), nl=False)


@cli.command()
@needs_role(ADMIN)
@click.argument("policy", type=click.Path(dir_okay=False))
@tenant_option("Deploy as the override policy of one tenant (org_id).")
@click.option(
    "--shadow",
    is_flag=True,
    help="Install without activating: the policy decides beside the active one, unenforced (`memgov shadow`).",
)
@dsn_option
@json_option
def deploy(policy: str, tenant: str | None, shadow: bool, dsn: str | None, as_json: bool) -> None:
    """Validate, compile and activate a policy in one transaction (--shadow: shadow it)."""
    from ..deploy import deploy as run_deploy

    result = run_deploy(resolve_dsn(dsn), policy, tenant, shadow=shadow)
    print_warnings(result.warnings)
    data = {"version": result.version, "tenant": result.org_id, "rules": result.rules, "shadow": shadow}
    scope = "global" if result.org_id == "*" else f"tenant {result.org_id}"
    done = "shadowing" if shadow else "deployed"
    emit(data, as_json, lambda d: click.echo(f"{done} {d['version']} ({scope}, {d['rules']} rules)"))


@cli.command()
@needs_role(ADMIN)
@click.option("--to", "to_version", metavar="VERSION", help="Version to re-activate (default: the previous one).")
@tenant_option("Roll back a tenant's override policy.")
@dsn_option
@json_option
def rollback(to_version: str | None, tenant: str | None, dsn: str | None, as_json: bool) -> None:
    """Re-activate an earlier policy version."""
    from ..deploy import rollback as run_rollback

    version = run_rollback(resolve_dsn(dsn), tenant, to_version)
    emit({"version": version, "tenant": tenant or "*"}, as_json, lambda d: click.echo(f"active: {d['version']}"))


@cli.command()
@click.option("--item", "item_json", required=True, metavar="JSON", help="The item, as a JSON object.")
@click.option(
    "--operation",
    default="remember",
    show_default=True,
    type=click.Choice(OPERATION_TYPES),
)
@click.option("--explain", is_flag=True, help="Also show every rule: matched or not, and the first failing condition.")
@dsn_option
@json_option
def evaluate(item_json: str, operation: str, explain: bool, dsn: str | None, as_json: bool) -> None:
    """Print the decision the active policy takes on an item (writes nothing)."""
    from ..deploy import evaluate as run_evaluate
    from ..deploy import parse_item

    item = parse_item(item_json)
    decision = run_evaluate(resolve_dsn(dsn), item, operation, explain)
    if as_json or not explain:
        click.echo(json.dumps(decision, indent=2))
        return
    rules = decision.pop("rules")
    click.echo(json.dumps(decision, indent=2))
    from rich.console import Console
    from rich.table import Table

    table = Table(title="rules in evaluation order")
    for column in ("rule", "priority", "action", "in scope", "matched", "first failing condition"):
        table.add_column(column)
    for rule in rules:
        failed = rule.get("first_failed_condition")
        table.add_row(
            rule["rule_id"], str(rule["priority"]), rule["action"], _yes(rule["in_scope"]), _yes(rule["matched"]),
            "" if not failed else f"{failed['field']} {failed['operator']} {json.dumps(failed['value'])}",
        )  # fmt: skip
    Console().print(table)


def _miss_summary(miss: dict[str, Any]) -> str:
    """One line: how many (category x source x operation) combinations fall to on_policy_miss."""
    listed = [f"{m['category']}/{m['source'] or '-'}/{m['operation']}" for m in miss["always"]]
    shown = ": " + ", ".join(listed[:5]) + (f" and {len(listed) - 5} more" if len(listed) > 5 else "") if listed else ""
    return (
        f"on_policy_miss ({miss['on_policy_miss']}) decides {len(listed)} of {miss['combinations']}"
        f" category/source/operation combinations{shown}; {len(miss['may'])} more depending on"
        " the other fields the rules read (--json lists them)"
    )


def _yes(value: object) -> str:
    return "yes" if value else "no"

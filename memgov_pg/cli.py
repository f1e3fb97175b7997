"""The ``memgov`` command line.

Errors a user can fix are one line on stderr and a non-zero exit; usage
mistakes exit 2 as with every click program.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import click
import psycopg

from . import __version__
from .db import connect, first_line, resolve_dsn
from .errors import MemgovError
from .policy import PolicyValidationError
from .resources import query

F = TypeVar("F", bound=Callable[..., Any])


def dsn_option(func: F) -> F:
    return click.option(
        "--dsn",
        envvar="MEMGOV_DSN",
        show_envvar=True,
        help="libpq connection string or URI; default: the embedded cluster of `memgov up`.",
    )(func)


def json_option(func: F) -> F:
    return click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON.")(func)


def emit(data: Any, as_json: bool, text: Callable[[Any], None]) -> None:
    if as_json:
        click.echo(json.dumps(data, indent=2, default=str))
    else:
        text(data)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="memgov")
def cli() -> None:
    """Govern AI agents' long-term memory inside PostgreSQL."""


# -- the embedded cluster ------------------------------------------------------


@cli.command()
@json_option
def up(as_json: bool) -> None:
    """Start the embedded local cluster (PostgreSQL + pg_cron) under .memgov/."""
    from .cluster import EMBEDDED_DB, EmbeddedCluster

    embedded = EmbeddedCluster()
    cluster = embedded.up()
    data = {"dsn": cluster.dsn(EMBEDDED_DB), "datadir": str(cluster.datadir), "port": cluster.port}
    emit(data, as_json, lambda d: click.echo(d["dsn"]))


@cli.command()
def down() -> None:
    """Stop the embedded local cluster."""
    from .cluster import EmbeddedCluster

    if EmbeddedCluster().down():
        click.echo("stopped")
    else:
        click.echo("not running")


# -- schema ---------------------------------------------------------------------


@cli.command()
@dsn_option
@click.option("--revision", default="head", show_default=True, help="Alembic revision to upgrade to.")
@json_option
def migrate(dsn: str | None, revision: str, as_json: bool) -> None:
    """Upgrade the memgov schema to head (Alembic)."""
    from .migrate import upgrade

    target = resolve_dsn(dsn)
    before, after = upgrade(target, revision)
    data = {"from": before, "to": after}

    def text(d: dict[str, Any]) -> None:
        if d["from"] == d["to"]:
            click.echo(f"memgov schema already at {d['to']}")
        else:
            click.echo(f"memgov schema upgraded from {d['from'] or 'nothing'} to {d['to']}")

    emit(data, as_json, text)


@cli.command()
@dsn_option
@json_option
def status(dsn: str | None, as_json: bool) -> None:
    """Show the server, the schema revision and the memgov objects."""
    from .migrate import current_revision, head_revision

    target = resolve_dsn(dsn)
    with connect(target) as conn:
        info = conn.execute(query("server_info")).fetchone()
        objects = conn.execute(query("schema_objects")).fetchall()
    assert info is not None
    data = {
        "server_version": info[0],
        "database": info[1],
        "user": info[2],
        "schema_revision": current_revision(target),
        "head_revision": head_revision(),
        "tables": [row[0] for row in objects],
    }

    def text(d: dict[str, Any]) -> None:
        for key in ("server_version", "database", "user", "schema_revision", "head_revision"):
            click.echo(f"{key:16} {d[key]}")
        click.echo(f"{'tables':16} {', '.join(d['tables']) or '(none: run `memgov migrate`)'}")

    emit(data, as_json, text)


# -- policies ---------------------------------------------------------------------


def print_warnings(warnings: Any) -> None:
    for warning in warnings:
        click.echo(str(warning), err=True)


@cli.command()
@click.argument("policies", nargs=-1, required=True, type=click.Path(dir_okay=False))
@dsn_option
@json_option
def validate(policies: tuple[str, ...], dsn: str | None, as_json: bool) -> None:
    """Check policy files; exit 1 with `file:line: rule-id: message` lines on errors.

    Regular expressions are checked by PostgreSQL when a database is configured
    (--dsn, MEMGOV_DSN or `memgov up`), otherwise offline.
    """
    from .deploy import optional_connection, pg_regex_checker, read_policy
    from .policy import analyze_policy

    results = []
    with optional_connection(dsn) as conn:
        checker = pg_regex_checker(conn) if conn is not None else None
        for path in policies:
            report = analyze_policy(read_policy(path), filename=path, regex_checker=checker)
            results.append(
                {
                    "file": path,
                    "ok": report.ok,
                    "version": report.policy.version if report.policy else None,
                    "errors": [str(e) for e in report.errors],
                    "warnings": [str(w) for w in report.warnings],
                }
            )
    if as_json:
        click.echo(json.dumps(results, indent=2))
    else:
        for result in results:
            for line in result["errors"] + result["warnings"]:
                click.echo(line, err=True)
            if result["ok"]:
                click.echo(f"{result['file']}: ok (version {result['version']})")
    if not all(r["ok"] for r in results):
        sys.exit(1)


@cli.command(name="compile")
@click.argument("policy", type=click.Path(dir_okay=False))
@click.option("--tenant", metavar="ORG", help="Compile as the override policy of one tenant (org_id).")
@dsn_option
def compile_command(policy: str, tenant: str | None, dsn: str | None) -> None:
    """Print the SQL that `memgov deploy` would run (a psql script)."""
    from .deploy import compile_file

    compiled = compile_file(policy, tenant, dsn)
    print_warnings(compiled.policy.warnings)
    click.echo(compiled.script(), nl=False)


@cli.command()
@click.argument("policy", type=click.Path(dir_okay=False))
@click.option("--tenant", metavar="ORG", help="Deploy as the override policy of one tenant (org_id).")
@dsn_option
@json_option
def deploy(policy: str, tenant: str | None, dsn: str | None, as_json: bool) -> None:
    """Validate, compile and activate a policy in one transaction."""
    from .deploy import deploy as run_deploy

    result = run_deploy(resolve_dsn(dsn), policy, tenant)
    print_warnings(result.warnings)
    data = {"version": result.version, "tenant": result.org_id, "rules": result.rules}
    scope = "global" if result.org_id == "*" else f"tenant {result.org_id}"
    emit(data, as_json, lambda d: click.echo(f"deployed {d['version']} ({scope}, {d['rules']} rules)"))


@cli.command()
@click.option("--to", "to_version", metavar="VERSION", help="Version to re-activate (default: the previous one).")
@click.option("--tenant", metavar="ORG", help="Roll back a tenant's override policy.")
@dsn_option
@json_option
def rollback(to_version: str | None, tenant: str | None, dsn: str | None, as_json: bool) -> None:
    """Re-activate an earlier policy version."""
    from .deploy import rollback as run_rollback

    version = run_rollback(resolve_dsn(dsn), tenant, to_version)
    emit({"version": version, "tenant": tenant or "*"}, as_json, lambda d: click.echo(f"active: {d['version']}"))


@cli.command()
@click.option("--item", "item_json", required=True, metavar="JSON", help="The item, as a JSON object.")
@click.option(
    "--operation",
    default="remember",
    show_default=True,
    type=click.Choice(["remember", "update", "forget", "search", "get"]),
)
@click.option("--explain", is_flag=True, help="Also show every rule: matched or not, and the first failing condition.")
@dsn_option
@json_option
def evaluate(item_json: str, operation: str, explain: bool, dsn: str | None, as_json: bool) -> None:
    """Print the decision the active policy takes on an item (writes nothing)."""
    from .deploy import evaluate as run_evaluate
    from .deploy import parse_item

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


def _yes(value: object) -> str:
    return "yes" if value else "no"


@cli.command()
@dsn_option
def demo(dsn: str | None) -> None:
    """Migrate the database and show what memgov created in it."""
    from .demo import run_demo

    run_demo(dsn)


def sql_error_line(exc: psycopg.Error) -> str:
    """An SQL error as one line: message, hint, SQLSTATE."""
    diag = exc.diag
    text = diag.message_primary or first_line(exc)
    if diag.message_hint:
        text += f" ({diag.message_hint})"
    if exc.sqlstate:
        text += f" [{exc.sqlstate}]"
    return text.replace("\n", " ")


def main(argv: list[str] | None = None) -> None:
    """Entry point: user mistakes become one line on stderr, never a traceback."""
    try:
        cli.main(args=argv, prog_name="memgov", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("memgov: aborted", err=True)
        sys.exit(130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except PolicyValidationError as exc:
        for error in exc.errors:  # file:line: rule-id: message, one per line
            click.echo(str(error), err=True)
        sys.exit(1)
    except MemgovError as exc:
        click.echo(f"memgov: error: {exc}", err=True)
        sys.exit(exc.exit_code)
    except psycopg.Error as exc:
        click.echo(f"memgov: error: {sql_error_line(exc)}", err=True)
        sys.exit(1)
    except KeyboardInterrupt:
        click.echo("memgov: interrupted", err=True)
        sys.exit(130)


if __name__ == "__main__":
    main()

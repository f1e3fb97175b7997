"""Commands for administrators: tenant binding, doctor, the sealed decision log."""

from __future__ import annotations

import sys
from typing import Any

import click

from ..errors import ExitCode
from .base import ADMIN, SUPERUSER, check_tenant, cli, dsn_option, emit, json_option, needs_role, to_json
from .dsn import resolve_dsn


@cli.group()
def tenant() -> None:
    """Bind login roles to tenants: a bound login acts only in its tenants (memgov_admin)."""


@tenant.command(name="grant")
@needs_role(ADMIN)
@click.argument("role")
@click.argument("org", callback=check_tenant)
@dsn_option
@json_option
def tenant_grant(role: str, org: str, dsn: str | None, as_json: bool) -> None:
    """Bind ROLE (a login, or a group role: every login in it) to tenant ORG."""
    from ..tenant_grants import grant

    result = grant(resolve_dsn(dsn), role, org)
    emit(result, as_json, lambda r: click.echo(
        f"bound {role} to tenant {org}" if r.get("granted", True) else f"{role} is already bound to tenant {org}"
    ))  # fmt: skip


@tenant.command(name="revoke")
@needs_role(ADMIN)
@click.argument("role")
@click.argument("org", callback=check_tenant)
@dsn_option
@json_option
def tenant_revoke(role: str, org: str, dsn: str | None, as_json: bool) -> None:
    """Remove tenant ORG from ROLE's grants (while any grant exists, a login with none acts in no tenant)."""
    from ..tenant_grants import revoke

    result = revoke(resolve_dsn(dsn), role, org)

    def text(r: dict[str, Any]) -> None:
        if not r.get("revoked", True):
            click.echo(f"{role} was not bound to tenant {org}")
        elif r.get("still_bound"):
            click.echo(f"unbound {role} from tenant {org} (it keeps its other tenants)")
        else:
            click.echo(f"unbound {role} from tenant {org}: it has no tenant now")

    emit(result, as_json, text)


@tenant.command(name="list")
@needs_role(ADMIN)
@click.option("--role", metavar="ROLE", help="Only this role's tenants.")
@dsn_option
@json_option
def tenant_list(role: str | None, dsn: str | None, as_json: bool) -> None:
    """The tenant grants: role, tenant, who granted it and when, the logins it binds."""
    from ..tenant_grants import list_grants

    rows = list_grants(resolve_dsn(dsn), role)
    if as_json:
        click.echo(to_json(rows))
        return
    if not rows:
        click.echo(f"no tenant grants for {role}" if role else "no tenant grants: tenant binding is not in use")
        return
    from rich.console import Console
    from rich.table import Table

    table = Table()
    for column in ("role", "tenant", "granted by", "granted at", "logins bound"):
        table.add_column(column)
    for r in rows:
        name = r["role"] if r["role_exists"] else f"{r['role']} (no such role)"
        table.add_row(name, r["org_id"], r["granted_by"], str(r["granted_at"]), ", ".join(r["logins"]))
    Console().print(table)


@cli.command()
@click.option(
    "--fail-on",
    type=click.Choice(["warning", "error"]),
    default="warning",
    show_default=True,
    help="Exit 1 on warnings and errors, or on errors only. Notes (info) never fail.",
)
@click.option(
    "--exporter-role",
    envvar="MEMGOV_EXPORTER_ROLE",
    metavar="ROLE",
    help="The login postgres_exporter uses, checked for pg_monitor. Default: the one login whose name says "
    "exporter or prometheus; none or several: not checked (a note).",
)
@dsn_option
@json_option
def doctor(fail_on: str, exporter_role: str | None, dsn: str | None, as_json: bool) -> None:
    """Check the database's roles and grants for ways around memgov; exit 1 on a finding.

    One finding per line: severity, check, what is wrong, and the fix. Run it as a superuser.
    """
    from ..doctor import diagnose

    report = diagnose(resolve_dsn(dsn), exporter_role)
    if as_json:
        click.echo(to_json(report.to_json(fail_on)))
    else:
        for finding in report.findings:
            click.echo(str(finding))
        click.echo(report.summary())
    if report.failed(fail_on):
        sys.exit(ExitCode.FAILED)


def check_anchor(ctx: click.Context, param: click.Parameter, value: str | None) -> Any:
    """A click callback: SEAL_ID:HASH passes; anything else is one line on stderr and exit 2."""
    from ..audit import parse_anchor

    return None if value is None else parse_anchor(value)


@cli.command(name="verify-log")
@needs_role(ADMIN)
@click.option(
    "--anchor",
    metavar="SEAL_ID:HASH",
    callback=check_anchor,
    help="A seal's hash kept outside the database (as printed before): a different one is a break.",
)
@dsn_option
@json_option
def verify_log(anchor: Any, dsn: str | None, as_json: bool) -> None:
    """Recompute the decision log's hash chain; exit 1 and name the first altered, missing or
    extra row on a break, or when the cluster's transaction counter is behind the chain (a
    pg_restore copy: it prints the pg_resetwal command that fixes it). Prints the last
    seal's hash: keep it outside the database."""
    from ..audit import report_lines, verify

    report = verify(resolve_dsn(dsn), anchor)
    emit(report, as_json, lambda r: click.echo("\n".join(report_lines(r))))
    if not report["ok"] or report.get("counter_behind"):
        sys.exit(ExitCode.FAILED)


@cli.group(name="standby-logger")
def standby_logger() -> None:
    """Governed reads on hot standbys, their decisions logged on the primary (run on the primary)."""


@standby_logger.command(name="setup")
@needs_role(SUPERUSER)
@click.option(
    "--primary-dsn",
    required=True,
    metavar="DSN",
    help="The primary as the standbys reach it: host, port and dbname (no user or password).",
)
@click.option("--login", default="memgov_standby_log", show_default=True, help="The login the standbys log reads as.")
@dsn_option
@json_option
def standby_logger_setup(primary_dsn: str, login: str, dsn: str | None, as_json: bool) -> None:
    """Let standbys serve memgov.search and memgov.get: each read's decision is logged on the primary.

    Creates (or moves) the foreign server memgov_primary, the login (a new random password) and
    memgov_owner's user mapping; they replicate to every standby. The primary's pg_hba.conf must
    ask that login for a password (scram-sha-256) from the standbys' addresses.
    """
    from ..standby_logger import setup

    result = setup(resolve_dsn(dsn), primary_dsn, login)
    emit(result, as_json, lambda r: click.echo(
        f"standby logger set up: standbys log their reads on {r['host']}:{r['port']}/{r['dbname']} as {r['login']}\n"
        f"pg_hba.conf of the primary needs: host {r['dbname']} {r['login']} STANDBY_ADDRESS/32 scram-sha-256"
    ))  # fmt: skip


@standby_logger.command(name="remove")
@needs_role(SUPERUSER)
@dsn_option
@json_option
def standby_logger_remove(dsn: str | None, as_json: bool) -> None:
    """Remove the foreign server memgov_primary: standbys refuse governed reads again (the login stays)."""
    from ..standby_logger import remove

    removed = remove(resolve_dsn(dsn))
    emit({"removed": removed}, as_json, lambda r: click.echo(
        "standby logger removed" if r["removed"] else "no standby logger was set up"
    ))  # fmt: skip

"""Commands for the database itself: the embedded cluster, migrations, status, the demo."""

from __future__ import annotations

import sys
from typing import Any, NoReturn

import click
import psycopg

from ..errors import CheckStatus
from .base import (
    SUPERUSER,
    F,
    cli,
    connection_gone,
    dsn_option,
    emit,
    json_option,
    needs_role,
    sql_error_line,
    to_json,
)
from .dsn import resolve_dsn


@cli.command()
@json_option
def up(as_json: bool) -> None:
    """Start the embedded local cluster (PostgreSQL + pg_cron) under .memgov/."""
    from ..cluster import EMBEDDED_DB, EmbeddedCluster

    embedded = EmbeddedCluster()
    cluster = embedded.up()
    data = {"dsn": cluster.dsn(EMBEDDED_DB), "datadir": str(cluster.datadir), "port": cluster.port}
    emit(data, as_json, lambda d: click.echo(d["dsn"]))


@cli.command()
def down() -> None:
    """Stop the embedded local cluster."""
    from ..cluster import EmbeddedCluster

    if EmbeddedCluster().down():
        click.echo("stopped")
    else:
        click.echo("not running")


def version_table_option(func: F) -> F:
    """The ``--version-table [SCHEMA.]TABLE`` option: where memgov's Alembic revision is recorded."""
    return click.option(
        "--version-table",
        metavar="[SCHEMA.]TABLE",
        help="Where memgov's revision is recorded: memgov's own public.memgov_alembic_version or a host "
        "project's Alembic table; default: look in both that and public.alembic_version.",
    )(func)


@cli.command()
@needs_role(SUPERUSER)
@dsn_option
@click.option("--revision", default="head", show_default=True, help="Alembic revision to upgrade to.")
@click.option(
    "--wait",
    metavar="SECONDS",
    type=click.FloatRange(min=0),
    default=0,
    help="Wait up to SECONDS for a server that is not listening yet or still starting up "
    "(a container just started); default: fail at once.",
)
@version_table_option
@json_option
def migrate(dsn: str | None, revision: str, wait: float, version_table: str | None, as_json: bool) -> None:
    """Upgrade the memgov schema to head (Alembic).

    memgov records its revision in its own table. When a host project's Alembic
    history records it instead (memgov's branch in the host's version_locations),
    the host owns it: this command then changes nothing and says so, and fails
    with one line if memgov is behind (run `alembic upgrade memgov@head` there).
    """
    from ..db import wait_for_server
    from ..migrate import migrate as run_migrate

    target = resolve_dsn(dsn)
    if wait:
        wait_for_server(target, wait)
    done = run_migrate(target, revision, version_table)
    data = {"from": done.before, "to": done.after, "version_table": done.version_table, "host_owned": done.host_owned}

    def text(d: dict[str, Any]) -> None:
        if d["host_owned"]:
            click.echo(
                f"memgov schema already at {d['to']}, recorded in {d['version_table']}: the host's Alembic "
                "history owns it (upgrade it there: alembic upgrade memgov@head)"
            )
        elif d["from"] == d["to"]:
            click.echo(f"memgov schema already at {d['to']}")
        else:
            click.echo(f"memgov schema upgraded from {d['from'] or 'nothing'} to {d['to']}")

    emit(data, as_json, text)


@cli.command()
@dsn_option
@version_table_option
@click.option(
    "--check",
    is_flag=True,
    help="For monitoring: print one line per problem; exit 0 healthy, 1 degraded, 2 unreachable.",
)
@json_option
def status(dsn: str | None, version_table: str | None, check: bool, as_json: bool) -> None:
    """Live policies, approvals, quarantine, the last sweep, decisions (24 h), the pg_cron job, the schema."""
    from ..errors import ConnectionFailed, MemgovError
    from ..status import health
    from ..status import status as read_status

    if not check:
        emit(read_status(resolve_dsn(dsn), version_table), as_json, _print_status)
        return
    # a probe always answers: its verdict on stdout (JSON with --json) and its exit status
    data: dict[str, Any] | None = None
    try:
        data = read_status(resolve_dsn(dsn), version_table)
        problems = health(data)
    except ConnectionFailed as exc:  # no server, or it refused the login
        _unreachable(str(exc), as_json)
    except (MemgovError, psycopg.Error) as exc:  # the server went away, or the check itself failed
        if isinstance(exc, psycopg.Error) and connection_gone(exc):
            _unreachable(f"connection lost: {sql_error_line(exc)}", as_json)
        problems = [f"the check failed: {exc if isinstance(exc, MemgovError) else sql_error_line(exc)}"]
    state = "degraded" if problems else "healthy"
    if as_json:
        click.echo(to_json({"status": state, "problems": problems}))
    else:
        for problem in problems:
            click.echo(problem)
        if data is not None and not problems:
            click.echo(f"healthy: {data['database']}")
    sys.exit(CheckStatus.DEGRADED if problems else CheckStatus.HEALTHY)


def _unreachable(message: str, as_json: bool) -> NoReturn:
    if as_json:
        click.echo(to_json({"status": "unreachable", "problems": [message]}))
    else:
        click.echo(f"unreachable: {message}")
    sys.exit(CheckStatus.UNREACHABLE)


def _print_status(d: dict[str, Any]) -> None:
    def line(key: str, value: object) -> None:
        click.echo(f"{key:18} {value}")

    line("database", f"{d['database']} (PostgreSQL {d['server_version']}, user {d['user']})")
    revision = d["schema_revision"] or (
        f"unknown: {d['revision_error']}" if d.get("revision_error") else
        "unknown" if d["implied_by"] else
        "none recorded, but schema memgov exists (a host's Alembic table? pass --version-table)"
        if d["schema_exists"] else "none: run `memgov migrate`"
    )  # fmt: skip
    behind = "" if d["schema_revision"] in (None, d["head_revision"]) else f" (head is {d['head_revision']})"
    where = ""
    if d["version_table"] is not None:
        own = d["version_table"] == "public.memgov_alembic_version"
        owner = "memgov's own" if own else "the host's Alembic history"
        implied = f", implied by {', '.join(d['implied_by'])} (depends_on)" if d["implied_by"] else ""
        where = f", in {d['version_table']} ({owner}{implied})"
    line("schema revision", f"{revision}{behind}{where}")
    if len(d["revision_records"]) > 1:
        twice = ", ".join(f"{r['revision']} in {r['table']}" for r in d["revision_records"])
        line("  conflict", f"recorded twice: {twice}")
    if d["policies"] is not None:
        policies = d["policies"]
        if isinstance(policies, dict):
            line("policies", policies["error"])
        else:
            line("policies", ", ".join(
                f"{'global' if p['org_id'] == '*' else p['org_id']} {p['version']} ({p['mode']})" for p in policies
            ) or "none deployed: every write is denied (NO_ACTIVE_POLICY); run `memgov deploy`")  # fmt: skip
        shadows = d["shadows"]
        if isinstance(shadows, dict):
            line("shadows", shadows["error"])
        elif shadows:
            line("shadows", ", ".join(
                f"{'global' if s['org_id'] == '*' else s['org_id']} {s['version']} ({s['decisions']} decisions)"
                for s in shadows
            ) + "; `memgov shadow report`")  # fmt: skip
        line("pending approvals", _count_line(d["pending_approvals"], "total"))
        line("quarantine", _count_line(d["quarantine"], "total", " held"))
        decisions = d["decisions_24h"]
        line("decisions (24 h)", decisions.get("error") if "error" in decisions else (
            ", ".join(f"{action} {n}" for action, n in decisions.items()) or "none"))  # fmt: skip
        line("last maintenance", _run_line(d["last_maintenance_run"]))
        line("settings changed", _setting_line(d.get("last_setting_change")))
    line("pg_cron", _cron_line(d["pg_cron"]))
    cron = d["pg_cron"]
    if cron.get("last_run"):
        last = cron["last_run"]
        message = (last.get("return_message") or "").strip()
        line("  last cron run", f"{last['status']} at {last['start_time']}" + (f": {message}" if message else ""))


def _setting_line(change: dict[str, Any] | None) -> str:
    if change is None:
        return "never (memgov.settings as installed)"
    if "error" in change:
        return str(change["error"])
    old = "unset" if change["old_value"] is None else change["old_value"]
    new = "unset" if change["new_value"] is None else change["new_value"]
    return f"{change['name']} {old} -> {new} at {change['changed_at']} by {change['login']}"


def _count_line(section: dict[str, Any], key: str, suffix: str = "") -> str:
    if "error" in section:
        return str(section["error"])
    tenants = ", ".join(f"{org} {n}" for org, n in section["by_tenant"].items())
    return f"{section[key]}{suffix}" + (f" ({tenants})" if tenants else "")


def _run_line(run: dict[str, Any] | None) -> str:
    if run is None:
        return "never run (`memgov retention run`, or schedule it: `memgov retention schedule`)"
    if "error" in run:
        return str(run["error"])
    c = run["counts"]
    return (f"run {run['run_id']} {run['status']}, started {run['started_at']}: deleted ttl {c['ttl']}, "
            f"confidence {c['confidence']}, auto_delete {c['auto_delete']}; "
            f"approvals expired {c['approvals_expired']}")  # fmt: skip


def _cron_line(cron: dict[str, Any]) -> str:
    if cron.get("error"):
        return f"{'not visible' if cron.get('denied') else 'unavailable'}: {cron['error']}"
    job = cron.get("job")
    if job is None and not cron.get("sees_all_jobs"):
        return (f"no job {cron['job_name']} of {cron['user']} (pg_cron shows a role only the jobs it scheduled; "
                "install it: `memgov retention schedule`)")  # fmt: skip
    if job is None:
        return f"no job {cron['job_name']} (install it: `memgov retention schedule`)"
    state = "active" if job["active"] else "inactive"
    return (f"job {job['jobid']} {job['jobname']} '{job['schedule']}' (GMT), {state}, "
            f"runs as {job['username']} from database {cron['cron_database']}")  # fmt: skip


@cli.command()
@dsn_option
def demo(dsn: str | None) -> None:
    """Migrate, deploy policies/default.yaml and play a short story of agent writes,
    approvals, feedback and retention, printing what the database decided."""
    from ..demo import run_demo

    run_demo(resolve_dsn(dsn))

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
from .db import first_line, resolve_dsn
from .errors import MemgovError
from .policy import PolicyValidationError

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


def check_tenant(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """A click callback: a tenant id passes; anything else is one line on stderr and exit 2."""
    from .tenants import check_tenant_id

    return None if value is None else check_tenant_id(value)


def tenant_option(help_text: str) -> Callable[[F], F]:
    return click.option("--tenant", metavar="ORG", callback=check_tenant, help=help_text)


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
    """Live policies, approvals, quarantine, the last sweep, decisions (24 h), the pg_cron job, the schema."""
    from .retention import status as read_status

    data = read_status(resolve_dsn(dsn))
    emit(data, as_json, _print_status)


def _print_status(d: dict[str, Any]) -> None:
    line = lambda key, value: click.echo(f"{key:18} {value}")  # noqa: E731
    line("database", f"{d['database']} (PostgreSQL {d['server_version']}, user {d['user']})")
    revision = d["schema_revision"] or "none: run `memgov migrate`"
    behind = "" if d["schema_revision"] in (None, d["head_revision"]) else f" (head is {d['head_revision']})"
    line("schema revision", f"{revision}{behind}")
    if d["policies"] is not None:
        policies = d["policies"]
        if isinstance(policies, dict):
            line("policies", policies["error"])
        else:
            line("policies", ", ".join(
                f"{'global' if p['org_id'] == '*' else p['org_id']} {p['version']} ({p['mode']})" for p in policies
            ) or "none deployed: every write is denied (NO_ACTIVE_POLICY); run `memgov deploy`")  # fmt: skip
        line("pending approvals", _count_line(d["pending_approvals"], "total"))
        line("quarantine", _count_line(d["quarantine"], "total", " held"))
        decisions = d["decisions_24h"]
        line("decisions (24 h)", decisions.get("error") if "error" in decisions else (
            ", ".join(f"{action} {n}" for action, n in decisions.items()) or "none"))  # fmt: skip
        line("last maintenance", _run_line(d["last_maintenance_run"]))
    line("pg_cron", _cron_line(d["pg_cron"]))
    cron = d["pg_cron"]
    if cron.get("last_run"):
        last = cron["last_run"]
        message = (last.get("return_message") or "").strip()
        line("  last cron run", f"{last['status']} at {last['start_time']}" + (f": {message}" if message else ""))


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
        return f"unavailable: {cron['error']}"
    job = cron.get("job")
    if job is None:
        return f"no job {cron['job_name']} (install it: `memgov retention schedule`)"
    state = "active" if job["active"] else "inactive"
    return (f"job {job['jobid']} {job['jobname']} '{job['schedule']}' (GMT), {state}, "
            f"runs as {job['username']} from database {cron['cron_database']}")  # fmt: skip


# -- retention --------------------------------------------------------------------


@cli.group()
def retention() -> None:
    """Run and schedule the retention sweep (memgov.run_maintenance)."""


@retention.command(name="run")
@click.option("--dry-run", is_flag=True, help="Count what would be deleted and expired; delete nothing.")
@dsn_option
@json_option
def retention_run(dry_run: bool, dsn: str | None, as_json: bool) -> None:
    """Run the maintenance sweep now, with a progress display; print what it did."""
    from .retention import counts
    from .retention import run as run_sweep

    target = resolve_dsn(dsn)
    with _SweepProgress(enabled=not as_json, dry_run=dry_run) as progress:
        summary = run_sweep(target, dry_run=dry_run, on_progress=progress.update)
        progress.finish(summary)
    if as_json:
        click.echo(json.dumps(summary, indent=2, default=str))
        return
    c = counts(summary)
    verb = "would delete" if dry_run else "deleted"
    what = "dry run" if dry_run else "maintenance run"
    seconds = f" in {summary['seconds']:.2f} s" if "seconds" in summary else ""
    click.echo(f"{what} {summary.get('run_id')} {summary.get('status')}{seconds}")
    for reason in ("ttl", "confidence", "auto_delete"):
        click.echo(f"  {verb:13} {reason:12} {c[reason]}")
    click.echo(f"  {'would expire' if dry_run else 'expired':13} {'approvals':12} {c['approvals_expired']}")
    if not dry_run and summary.get("cron_history_pruned"):
        click.echo(f"  pruned {summary['cron_history_pruned']} rows of pg_cron history")


class _SweepProgress:
    """A rich progress display on stderr (only on a terminal), fed by the run's summary."""

    def __init__(self, enabled: bool, dry_run: bool) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

        console = Console(stderr=True)
        self.progress = Progress(
            SpinnerColumn(),
            TextColumn("{task.description:<24}"),
            BarColumn(),
            TextColumn("{task.fields[count]:>10}"),
            TimeElapsedColumn(),
            console=console,
            disable=not (enabled and console.is_terminal),
        )
        self.dry_run = dry_run
        self.tasks: dict[str, Any] = {}

    def __enter__(self) -> _SweepProgress:
        self.progress.__enter__()
        if self.dry_run:
            self.tasks["preview"] = self.progress.add_task("counting what is due", total=None, count="")
            return self
        for key, label in (("ttl", "deleted: ttl"), ("confidence", "deleted: confidence"),
                           ("auto_delete", "deleted: auto_delete"), ("approvals", "expired: approvals")):  # fmt: skip
            self.tasks[key] = self.progress.add_task(label, total=None, count="0")
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.__exit__(None, None, None)

    def finish(self, summary: dict[str, Any]) -> None:
        """Fill every bar: the run is over."""
        from .retention import counts

        c = counts(summary)
        done = {"ttl": c["ttl"], "confidence": c["confidence"], "auto_delete": c["auto_delete"],
                "approvals": c["approvals_expired"], "preview": 0}  # fmt: skip
        for key, task in self.tasks.items():
            total = max(1, done[key])
            self.progress.update(task, total=total, completed=total, count=str(done[key]))

    def update(self, run: dict[str, Any]) -> None:
        from .retention import counts, walked

        if self.dry_run:
            return
        summary = run.get("summary") or {}
        c = counts(summary)
        due = run.get("ttl_due") or None
        self.progress.update(self.tasks["ttl"], total=due, completed=c["ttl"], count=str(c["ttl"]))
        self.progress.update(self.tasks["confidence"], completed=c["confidence"], count=str(c["confidence"]))
        fraction = walked(summary)
        self.progress.update(
            self.tasks["auto_delete"], total=1.0 if fraction is not None else None,
            completed=fraction or 0, count=str(c["auto_delete"]),
        )  # fmt: skip
        expired = c["approvals_expired"]
        self.progress.update(self.tasks["approvals"], completed=expired, count=str(expired))


@retention.command(name="schedule")
@click.argument("cron", required=False, metavar="[CRON]")
@dsn_option
@json_option
def retention_schedule(cron: str | None, dsn: str | None, as_json: bool) -> None:
    """Install or replace the pg_cron job that runs the sweep (CRON in GMT; default: the policy's
    retention.schedule). One job per governed database, created from pg_cron's own database."""
    from .retention import schedule

    job = schedule(resolve_dsn(dsn), cron)
    emit(job, as_json, lambda j: click.echo(
        f"{'replaced' if j['replaced'] else 'scheduled'} job {j['jobid']} {j['jobname']}: '{j['schedule']}' (GMT) "
        f"runs {j['command']} in database {j['database']} as {j['username']}"))  # fmt: skip


@retention.command(name="unschedule")
@dsn_option
@json_option
def retention_unschedule(dsn: str | None, as_json: bool) -> None:
    """Remove the pg_cron job of this database."""
    from .retention import unschedule

    result = unschedule(resolve_dsn(dsn))
    emit(result, as_json, lambda r: click.echo(
        f"unscheduled {r['job_name']}" if r["unscheduled"] else f"no job {r['job_name']} to unschedule"))  # fmt: skip


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

    results: list[dict[str, Any]] = []
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
@tenant_option("Compile as the override policy of one tenant (org_id).")
@dsn_option
def compile_command(policy: str, tenant: str | None, dsn: str | None) -> None:
    """Print the SQL that `memgov deploy` would run (a psql script)."""
    from .deploy import compile_file

    compiled = compile_file(policy, tenant, dsn)
    print_warnings(compiled.policy.warnings)
    click.echo(compiled.script(), nl=False)


@cli.command()
@click.argument("policy", type=click.Path(dir_okay=False))
@tenant_option("Deploy as the override policy of one tenant (org_id).")
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
@tenant_option("Roll back a tenant's override policy.")
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


# -- tenant binding -----------------------------------------------------------------


@cli.group()
def tenant() -> None:
    """Bind login roles to tenants: a bound login acts only in its tenants (memgov_admin)."""


@tenant.command(name="grant")
@click.argument("role")
@click.argument("org", callback=check_tenant)
@dsn_option
@json_option
def tenant_grant(role: str, org: str, dsn: str | None, as_json: bool) -> None:
    """Bind ROLE (a login, or a group role: every login in it) to tenant ORG."""
    from .tenants import grant

    result = grant(resolve_dsn(dsn), role, org)
    emit(result, as_json, lambda r: click.echo(
        f"bound {role} to tenant {org}" if r.get("granted", True) else f"{role} is already bound to tenant {org}"
    ))  # fmt: skip


@tenant.command(name="revoke")
@click.argument("role")
@click.argument("org", callback=check_tenant)
@dsn_option
@json_option
def tenant_revoke(role: str, org: str, dsn: str | None, as_json: bool) -> None:
    """Remove tenant ORG from ROLE's grants (while any grant exists, a login with none acts in no tenant)."""
    from .tenants import revoke

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
@click.option("--role", metavar="ROLE", help="Only this role's tenants.")
@dsn_option
@json_option
def tenant_list(role: str | None, dsn: str | None, as_json: bool) -> None:
    """The tenant grants: role, tenant, who granted it and when, the logins it binds."""
    from .tenants import list_grants

    rows = list_grants(resolve_dsn(dsn), role)
    if as_json:
        click.echo(json.dumps(rows, indent=2, default=str))
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


# -- doctor -------------------------------------------------------------------------


@cli.command()
@click.option(
    "--fail-on",
    type=click.Choice(["warning", "error"]),
    default="warning",
    show_default=True,
    help="Exit 1 on warnings and errors, or on errors only. Notes (info) never fail.",
)
@dsn_option
@json_option
def doctor(fail_on: str, dsn: str | None, as_json: bool) -> None:
    """Check the database's roles and grants for ways around memgov; exit 1 on a finding.

    One finding per line: severity, check, what is wrong, and the fix. Run it as a superuser.
    """
    from .doctor import diagnose

    report = diagnose(resolve_dsn(dsn))
    if as_json:
        click.echo(json.dumps(report.to_json(fail_on), indent=2))
    else:
        for finding in report.findings:
            click.echo(str(finding))
        click.echo(report.summary())
    if report.failed(fail_on):
        sys.exit(1)


# -- the decision log ----------------------------------------------------------------


def check_anchor(ctx: click.Context, param: click.Parameter, value: str | None) -> Any:
    """A click callback: SEAL_ID:HASH passes; anything else is one line on stderr and exit 2."""
    from .audit import parse_anchor

    return None if value is None else parse_anchor(value)


@cli.command(name="verify-log")
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
    extra row on a break. Prints the last seal's hash: keep it outside the database."""
    from .audit import report_lines, verify

    report = verify(resolve_dsn(dsn), anchor)
    emit(report, as_json, lambda r: click.echo("\n".join(report_lines(r))))
    if not report["ok"]:
        sys.exit(1)


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

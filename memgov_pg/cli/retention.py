"""``memgov retention``: run, schedule and unschedule the sweep."""

from __future__ import annotations

from typing import Any

import click

from .base import ADMIN, cli, dsn_option, emit, json_option, needs_role, to_json
from .dsn import resolve_dsn


@cli.group()
def retention() -> None:
    """Run and schedule the retention sweep (memgov.run_maintenance)."""


@retention.command(name="run")
@needs_role(ADMIN)
@click.option("--dry-run", is_flag=True, help="Count what would be deleted and expired; delete nothing.")
@dsn_option
@json_option
def retention_run(dry_run: bool, dsn: str | None, as_json: bool) -> None:
    """Run the maintenance sweep now, with a progress display; print what it did."""
    from ..retention import counts
    from ..retention import run as run_sweep

    target = resolve_dsn(dsn)
    with _SweepProgress(enabled=not as_json, dry_run=dry_run) as progress:
        summary = run_sweep(target, dry_run=dry_run, on_progress=progress.update)
        progress.finish(summary)
    if as_json:
        click.echo(to_json(summary))
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
        from ..retention import counts

        c = counts(summary)
        done = {"ttl": c["ttl"], "confidence": c["confidence"], "auto_delete": c["auto_delete"],
                "approvals": c["approvals_expired"], "preview": 0}  # fmt: skip
        for key, task in self.tasks.items():
            total = max(1, done[key])
            self.progress.update(task, total=total, completed=total, count=str(done[key]))

    def update(self, run: dict[str, Any]) -> None:
        from ..retention import counts, walked

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
@needs_role(ADMIN)
@click.argument("cron", required=False, metavar="[CRON]")
@dsn_option
@json_option
def retention_schedule(cron: str | None, dsn: str | None, as_json: bool) -> None:
    """Install or replace the pg_cron job that runs the sweep (CRON in GMT; default: the policy's
    retention.schedule). One job per governed database, created from pg_cron's own database."""
    from ..retention import schedule

    job = schedule(resolve_dsn(dsn), cron)
    emit(job, as_json, lambda j: click.echo(
        f"{'replaced' if j['replaced'] else 'scheduled'} job {j['jobid']} {j['jobname']}: '{j['schedule']}' (GMT) "
        f"runs {j['command']} in database {j['database']} as {j['username']}"))  # fmt: skip


@retention.command(name="unschedule")
@needs_role(ADMIN)
@dsn_option
@json_option
def retention_unschedule(dsn: str | None, as_json: bool) -> None:
    """Remove the pg_cron job of this database."""
    from ..retention import unschedule

    result = unschedule(resolve_dsn(dsn))
    emit(result, as_json, lambda r: click.echo(
        f"unscheduled {r['job_name']}" if r["unscheduled"] else f"no job {r['job_name']} to unschedule"))  # fmt: skip

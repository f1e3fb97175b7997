"""``memgov demo``: the main job on the embedded cluster."""

from __future__ import annotations

import click
from rich.console import Console
from rich.table import Table

from .db import connect, resolve_dsn
from .migrate import upgrade
from .resources import query


def run_demo(dsn: str | None) -> None:
    console = Console()
    target = resolve_dsn(dsn)
    before, after = upgrade(target)
    console.print(f"[bold]memgov schema[/] {before or 'nothing'} -> {after}")
    with connect(target) as conn:
        objects = conn.execute(query("schema_objects")).fetchall()
        roles = conn.execute(query("memgov_roles")).fetchall()
    table = Table(title="memgov objects")
    table.add_column("table")
    table.add_column("what it holds")
    for name, _kind, description in objects:
        table.add_row(f"memgov.{name}", description or "")
    console.print(table)
    click.echo("roles: " + ", ".join(f"{name} ({'LOGIN' if login else 'NOLOGIN'})" for name, login in roles))

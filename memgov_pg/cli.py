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


@cli.command()
@dsn_option
def demo(dsn: str | None) -> None:
    """Migrate the database and show what memgov created in it."""
    from .demo import run_demo

    run_demo(dsn)


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
    except MemgovError as exc:
        click.echo(f"memgov: error: {exc}", err=True)
        sys.exit(exc.exit_code)
    except psycopg.Error as exc:
        state = f" [{exc.sqlstate}]" if getattr(exc, "sqlstate", None) else ""
        click.echo(f"memgov: error: {first_line(exc)}{state}", err=True)
        sys.exit(1)
    except KeyboardInterrupt:
        click.echo("memgov: interrupted", err=True)
        sys.exit(130)


if __name__ == "__main__":
    main()

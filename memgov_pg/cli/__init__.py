"""The ``memgov`` command line.

Errors a user can fix are one line on stderr and a non-zero exit; usage
mistakes exit 2 as with every click program. Each module adds its commands to
the group of :mod:`.base`.
"""

from __future__ import annotations

import sys

import click
import psycopg

from ..db import first_line
from ..errors import MemgovError
from ..policy import PolicyValidationError
from . import admin, policies, retention, revision, server
from .base import cli

__all__ = ["admin", "cli", "main", "policies", "retention", "revision", "server"]


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

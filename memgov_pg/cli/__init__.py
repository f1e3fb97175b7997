"""The ``memgov`` command line.

Errors a user can fix are one line on stderr and a non-zero exit, from one
table (:class:`memgov_pg.errors.ExitCode`): 1 failed, 2 usage (as with every
click program), 3 busy, 130 interrupted. Each module adds its commands to the
group of :mod:`.base`.
"""

from __future__ import annotations

import logging
import sys

import click
import psycopg

from ..errors import BUSY_SQLSTATES, EngineError, ExitCode, MemgovError
from ..policy import PolicyValidationError
from . import admin, forget, policies, policy_tests, recall, retention, review, revision, server, shadow
from .base import cli, engine_error_line, sql_error_line

__all__ = [
    "admin", "cli", "forget", "main", "policies", "policy_tests", "recall", "retention", "review", "revision",
    "server", "shadow",
]  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    """Entry point: user mistakes become one line on stderr, never a traceback."""
    # psycopg logs what it ignores while a connection closes on an error (a rollback that
    # finds the interrupted query still running, on Ctrl-C): the command's own line says it
    logging.getLogger("psycopg").addHandler(logging.NullHandler())
    try:
        cli.main(args=argv, prog_name="memgov", standalone_mode=False)
    except click.exceptions.Abort as exc:  # click's form of Ctrl-C, or a declined prompt
        interrupted = isinstance(exc.__cause__, KeyboardInterrupt)
        click.echo(f"memgov: {'interrupted' if interrupted else 'aborted'}", err=True)
        sys.exit(ExitCode.INTERRUPTED)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except PolicyValidationError as exc:
        for error in exc.errors:  # file:line: rule-id: message, one per line
            click.echo(str(error), err=True)
        sys.exit(ExitCode.FAILED)
    except EngineError as exc:
        click.echo(f"memgov: error: {engine_error_line(exc)}", err=True)
        sys.exit(exc.exit_code)
    except MemgovError as exc:
        click.echo(f"memgov: error: {exc}", err=True)
        sys.exit(exc.exit_code)
    except psycopg.Error as exc:
        click.echo(f"memgov: error: {sql_error_line(exc)}", err=True)
        sys.exit(ExitCode.BUSY if exc.sqlstate in BUSY_SQLSTATES else ExitCode.FAILED)
    except KeyboardInterrupt:
        click.echo("memgov: interrupted", err=True)
        sys.exit(ExitCode.INTERRUPTED)

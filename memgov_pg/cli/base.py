"""What every ``memgov`` command shares: the group, the common options, output."""

from __future__ import annotations

import datetime as dt
import functools
import json
import logging
from collections.abc import Callable
from typing import Any, TypeVar

import click
import psycopg
from click.core import ParameterSource

from .. import __version__
from ..db import first_line
from ..errors import EngineError

F = TypeVar("F", bound=Callable[..., Any])


#: Where a command's database comes from, first found first (memgov_pg.cli.dsn.resolve_dsn).
DSN_ORDER = (
    "the command's --dsn, else memgov --dsn, else MEMGOV_DSN, else libpq's own PG* variables "
    "(PGHOST, PGPORT, PGDATABASE, PGUSER, PGSERVICE...) or service file, else the embedded cluster of `memgov up`"
)


def _dsn_from_group(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """A command's ``--dsn`` wins; without it, the group's (``memgov --dsn X COMMAND``) comes before MEMGOV_DSN."""
    if ctx.get_parameter_source(param.name or "dsn") is ParameterSource.COMMANDLINE:
        return value
    root = ctx.find_root()
    if root is not ctx and root.get_parameter_source("dsn") is ParameterSource.COMMANDLINE:
        return root.params.get("dsn")
    return value


def dsn_option(func: F) -> F:
    """The ``--dsn`` option (also ``MEMGOV_DSN``) of a command; the group's ``--dsn`` stands in for it."""
    return click.option(
        "--dsn",
        metavar="DSN",
        envvar="MEMGOV_DSN",
        show_envvar=True,
        callback=_dsn_from_group,
        help=f"libpq connection string or URI. Database: {DSN_ORDER}.",
    )(func)


def sql_error_line(exc: psycopg.Error) -> str:
    """An SQL error as one line: message, hint, SQLSTATE."""
    diag = exc.diag
    text = (diag.message_primary or first_line(exc)).removeprefix("memgov: ")
    if diag.message_hint:
        text += f" ({diag.message_hint})"
    if exc.sqlstate:
        text += f" [{exc.sqlstate}]"
    return text.replace("\n", " ")


def engine_error_line(exc: EngineError) -> str:
    """An engine error as one line, as :func:`sql_error_line` writes it: message, hint, SQLSTATE."""
    text = str(exc)
    if exc.hint:
        text += f" ({exc.hint})"
    if exc.sqlstate:
        text += f" [{exc.sqlstate}]"
    return text.replace("\n", " ")


#: SQLSTATEs of a connection gone: class 08, and the server shutting down or starting (57P01-57P03)
CONNECTION_GONE = ("08", "57P01", "57P02", "57P03")


def connection_gone(exc: psycopg.Error) -> bool:
    """Whether ``exc`` means the server went away (no SQLSTATE: libpq lost the connection)."""
    return exc.sqlstate is None or exc.sqlstate.startswith(CONNECTION_GONE)


#: who may run a command that needs more than a client role
SUPERUSER = "a superuser"
ADMIN = "memgov_admin"


def needs_role(role: str) -> Callable[[F], F]:
    """A command that needs ``role`` (:data:`ADMIN`, or :data:`SUPERUSER`): a permission error
    (42501) of a login without it becomes one line naming the role and how to get it."""

    def wrap(func: F) -> F:
        @functools.wraps(func)
        def run(*args: Any, **kwargs: Any) -> Any:
            try:
                return func(*args, **kwargs)
            except psycopg.errors.InsufficientPrivilege as exc:
                ctx = click.get_current_context()
                raise _wrong_role(exc, role, ctx.command_path, kwargs.get("dsn")) from None

        return run  # type: ignore[return-value]

    return wrap


def _wrong_role(exc: psycopg.Error, role: str, command: str, dsn: str | None) -> Exception:
    """``exc`` with the role ``command`` needs, when the login lacks it; else ``exc`` itself."""
    from ..db import connect
    from ..errors import MemgovError
    from ..resources import query
    from .dsn import resolve_dsn

    try:
        with connect(resolve_dsn(dsn)) as conn:
            found = conn.execute(query("login_roles")).fetchone()
    except (MemgovError, psycopg.Error):
        return exc  # cannot tell who the login is: the database's own words
    if found is None:
        return exc
    user, superuser, admin = found
    if role == SUPERUSER and not superuser:
        need = (
            f"`{command}` needs a superuser (it creates memgov's roles, schema and grants), and {user} is not one; "
            "run it as a superuser (--dsn with user=postgres, or PGUSER)"
        )
    elif role == ADMIN and not admin:
        need = (
            f"`{command}` needs a login in memgov_admin, and {user} is not one; connect as such a login, "
            f"or have a superuser grant it: GRANT memgov_admin TO {user}"
        )
    else:
        return exc  # the login has the role: the refusal is about something else
    return MemgovError(f"{sql_error_line(exc)}: {need}")


def json_option(func: F) -> F:
    """The ``--json`` flag of a command, passed as ``as_json``."""
    return click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON.")(func)


def check_tenant(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """A click callback: a tenant id passes; anything else is one line on stderr and exit 2."""
    from ..tenants import check_tenant_id

    return None if value is None else check_tenant_id(value)


def tenant_option(help_text: str) -> Callable[[F], F]:
    """A ``--tenant ORG`` option with ``help_text``, checked by :func:`check_tenant`."""
    return click.option("--tenant", metavar="ORG", callback=check_tenant, help=help_text)


def iso_timestamp(value: dt.datetime) -> str:
    """The one timestamp format of every ``--json`` output: ISO 8601 with ``T`` and an offset."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=dt.UTC)
    return value.isoformat(timespec="microseconds")


def _json_default(value: Any) -> Any:
    if isinstance(value, dt.datetime):
        return iso_timestamp(value)
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    if isinstance(value, set | frozenset):
        return sorted(value, key=str)
    return str(value)


def to_json(data: Any) -> str:
    """The JSON every command prints: indented, timestamps by :func:`iso_timestamp`."""
    return json.dumps(data, indent=2, default=_json_default)


def emit(data: Any, as_json: bool, text: Callable[[Any], None]) -> None:
    """Print ``data`` as JSON when ``as_json``, else through ``text``."""
    if as_json:
        click.echo(to_json(data))
    else:
        text(data)


def setup_logging(verbose: int, quiet: bool) -> None:
    """Logger ``memgov_pg`` to stderr: WARNING by default, INFO with -v, DEBUG with -vv, ERROR with --quiet."""
    if quiet:
        level = logging.ERROR
    else:
        level = {0: logging.WARNING, 1: logging.INFO}.get(verbose, logging.DEBUG)
    logger = logging.getLogger("memgov_pg")
    logger.setLevel(level)
    if not any(getattr(h, "_memgov_cli", False) for h in logger.handlers):
        handler = logging.StreamHandler()  # stderr
        handler.setFormatter(logging.Formatter("memgov: %(levelname)s: %(message)s"))
        handler._memgov_cli = True  # type: ignore[attr-defined]
        logger.addHandler(handler)
    logger.propagate = False


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="memgov")
@click.option(
    "-v", "--verbose", count=True, help="Log to stderr: -v connections, migrations, deploys, sweeps; -vv debug."
)
@click.option("-q", "--quiet", is_flag=True, help="Log errors only.")
@click.option(
    "--dsn",
    metavar="DSN",
    envvar="MEMGOV_DSN",
    show_envvar=True,
    help="libpq connection string or URI, for any command that connects (a command's own --dsn wins).",
)
def cli(verbose: int, quiet: bool, dsn: str | None) -> None:
    """Govern AI agents' long-term memory inside PostgreSQL.

    \b
    The database, first found first:
      1. the command's --dsn (memgov status --dsn X)
      2. memgov --dsn X COMMAND
      3. MEMGOV_DSN
      4. libpq's own environment: PGHOST, PGHOSTADDR, PGPORT, PGDATABASE,
         PGUSER, PGSERVICE, or PGSERVICEFILE naming a file (then libpq
         resolves the rest, ~/.pgpass included, as psql does)
      5. the embedded cluster of `memgov up`
    """
    setup_logging(verbose, quiet)

"""What every ``memgov`` command shares: the group, the common options, output."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, TypeVar

import click

from .. import __version__

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
    from ..tenants import check_tenant_id

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

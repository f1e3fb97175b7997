"""Helpers of the SQLAlchemy tests (tests/db/test_models.py, tests/db/test_sqlalchemy.py):
engines for real login roles of the test cluster, and a clean database with the attack policy."""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg import conninfo
from sqlalchemy import URL, Engine, create_engine

from tests.attack_helpers import deploy_policy
from tests.clean_slate import fresh


def sa_url(dsn: str, role: str | None = None) -> URL:
    """The SQLAlchemy URL (psycopg driver) of a libpq DSN, as the login ``role`` if given."""
    p = conninfo.conninfo_to_dict(dsn)
    port = p.get("port")
    return URL.create(
        "postgresql+psycopg",
        username=role or p.get("user"),  # type: ignore[arg-type]
        password=None if role else p.get("password"),  # type: ignore[arg-type]
        host=p.get("host"),  # type: ignore[arg-type]
        port=int(port) if port else None,  # type: ignore[arg-type]
        database=p.get("dbname"),  # type: ignore[arg-type]
    )


def login_engine(dsn: str, role: str, **kwargs: Any) -> Engine:
    return create_engine(sa_url(dsn, role), **kwargs)


def reset(su: psycopg.Connection[Any]) -> None:
    """memgov's tables emptied (tests/decision_cases.wipe), the attack policy active (global)."""
    fresh(su, deploy_policy)

"""Where the engine's SQL and the Alembic scripts are.

In a wheel they are package data (``memgov_pg/sql``, ``memgov_pg/alembic``);
in a source checkout (an editable install) they are the top-level ``sql/`` and
``alembic/`` directories of the repository.
"""

from __future__ import annotations

import re
from functools import cache
from importlib import resources
from pathlib import Path

_PACKAGE_DIR = Path(__file__).resolve().parent


def _find(name: str) -> Path:
    packaged = resources.files("memgov_pg") / name
    if packaged.is_dir():
        return Path(str(packaged))
    checkout = _PACKAGE_DIR.parent / name
    if checkout.is_dir():
        return checkout
    raise FileNotFoundError(f"memgov-pg is installed without its {name}/ directory")


def sql_dir() -> Path:
    """The directory of the engine's SQL files."""
    return _find("sql")


def alembic_dir() -> Path:
    """The directory of the Alembic environment and revisions."""
    return _find("alembic")


def exporter_queries() -> Path:
    """postgres_exporter's custom queries file for memgov's monitoring views (docs/monitoring.md)."""
    return _find("deploy") / "postgres_exporter" / "queries.yaml"


def policies_dir() -> Path:
    """The directory of the shipped policies (``default.yaml``, ``examples/``, ``schema/``)."""
    return _find("policies")


def docker_dir() -> Path:
    """The Docker build context of the PostgreSQL 15 + pg_cron image."""
    return _find("docker")


#: How a policy's unit tests are named, beside it (``default.test.yaml``: docs/policy-tests.md).
POLICY_TEST_SUFFIX = ".test.yaml"


def shipped_policy_files() -> list[Path]:
    """The shipped policies (not their test files), in name order; [] when none are found."""
    try:
        base = policies_dir()
    except FileNotFoundError:
        return []
    return sorted(p for p in base.rglob("*.yaml") if not p.name.endswith(POLICY_TEST_SUFFIX))


def shipped_policy_names() -> list[str]:
    """Names ``memgov deploy`` accepts for the shipped policies: ``default``, ``examples/<name>``."""
    base = policies_dir() if shipped_policy_files() else None
    return [p.relative_to(base).with_suffix("").as_posix() for p in shipped_policy_files()] if base else []


def shipped_policy(name: str) -> Path | None:
    """The file of a shipped policy by name (``default``, ``examples/memproof``), else None."""
    stem = name.removesuffix(".yaml")
    if stem not in shipped_policy_names():
        return None
    return policies_dir() / f"{stem}.yaml"


def sql_files() -> list[Path]:
    """The engine's SQL files in the order they are applied (numeric prefix)."""
    return sorted(p for p in sql_dir().glob("[0-9][0-9][0-9]_*.sql"))


_HEADER = re.compile(r"^--\s*name:\s*([a-z_][a-z0-9_]*)\s*$", re.MULTILINE)


def parse_queries(text: str, source: str = "queries") -> dict[str, str]:
    """Split a named-query file into {name: sql}; a block starts with ``-- name: x``."""
    parts = _HEADER.split(text)
    queries: dict[str, str] = {}
    for name, body in zip(parts[1::2], parts[2::2], strict=True):
        if name in queries:
            raise ValueError(f"{source}: query {name!r} is defined twice")
        queries[name] = body.strip()
    return queries


def query_files() -> list[Path]:
    """The named-query files, one per user (``sql/queries/*.sql``: the CLI, doctor, the engines)."""
    return sorted((sql_dir() / "queries").glob("*.sql"))


def merge_queries(files: dict[str, str]) -> dict[str, str]:
    """The queries of several files ({file name: text}); a name defined in two files is an error."""
    merged: dict[str, str] = {}
    defined_in: dict[str, str] = {}
    for source, text in files.items():
        for name, sql in parse_queries(text, source).items():
            if name in merged:
                raise ValueError(f"query {name!r} is defined twice: in {defined_in[name]} and in {source}")
            merged[name] = sql
            defined_in[name] = source
    return merged


@cache
def queries() -> dict[str, str]:
    """Every query the Python layer sends, from the files of ``sql/queries/``."""
    return merge_queries({p.name: p.read_text(encoding="utf-8") for p in query_files()})


def query(name: str) -> str:
    """The SQL of the named query in ``sql/queries/``; KeyError for an unknown name."""
    return queries()[name]

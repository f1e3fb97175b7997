"""Schema migrations (Alembic) and building the schema straight from ``sql/``.

memgov's revisions form the Alembic branch ``memgov``. A revision runs SQL
that is frozen: it can never change once written.

- The initial revision (before the first release) runs the ``sql/`` files
  themselves, each pinned by the SHA-256 digest that ``scripts/freeze-migration``
  wrote into the revision; if a file differs, the upgrade refuses to run.
- Every other revision, and the initial one once released, runs the
  ``-- migrate:upgrade`` / ``-- migrate:downgrade`` sections of the ``.sql``
  file of the same name beside it.

docs/development.md says when to write which.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Sequence
from pathlib import Path

from alembic.config import Config
from alembic.script import ScriptDirectory
from alembic.util import CommandError

from alembic import command

from .db import connect
from .errors import MemgovError
from .resources import alembic_dir, query, sql_dir, sql_files

VERSION_TABLE = "memgov_alembic_version"
BRANCH = "memgov"
MIGRATION_LOCK_SQL = "SELECT pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtext('memgov.migrate'))"

_SECTION = re.compile(r"^--\s*migrate:(upgrade|downgrade)\s*$", re.MULTILINE)

Frozen = Sequence[tuple[str, str]]
"""``(file name in sql/, "sha256:<hex>")`` pairs, in the order they run."""


class FrozenSqlError(MemgovError):
    """A revision's SQL is not the SQL it was frozen with."""


def digest(text: bytes) -> str:
    return "sha256:" + hashlib.sha256(text).hexdigest()


def frozen_manifest(directory: Path | None = None) -> list[tuple[str, str]]:
    """The ``(name, digest)`` pairs of the schema files as they are now, in order."""
    files = sql_files() if directory is None else sorted(directory.glob("[0-9][0-9][0-9]_*.sql"))
    return [(path.name, digest(path.read_bytes())) for path in files]


def frozen_files_sql(frozen: Frozen, directory: Path | None = None) -> str:
    """The text of the pinned ``sql/`` files, after checking every digest.

    Refuses (FrozenSqlError) when a file is missing, differs from its digest,
    or a schema file exists that the revision does not list.
    """
    directory = sql_dir() if directory is None else directory
    now = dict(frozen_manifest(directory))
    pinned = dict(frozen)
    problems = [f"sql/{n} has changed" for n, d in frozen if n in now and now[n] != d]
    problems += [f"sql/{n} is missing" for n in pinned if n not in now]
    problems += [f"sql/{n} is new" for n in now if n not in pinned]
    if problems:
        raise FrozenSqlError(
            f"the schema files are not the ones this revision froze ({'; '.join(problems)}): "
            "before the first release run scripts/freeze-migration; after it, "
            "write a new revision (docs/development.md)"
        )
    return "\n".join((directory / name).read_text(encoding="utf-8") for name, _ in frozen)


def revision_sql(revision_file: str | Path, direction: str) -> str:
    """The ``direction`` section of the ``.sql`` file that belongs to a revision."""
    path = Path(revision_file).with_suffix(".sql")
    parts = _SECTION.split(path.read_text(encoding="utf-8"))
    sections = dict(zip(parts[1::2], parts[2::2], strict=True))
    if direction not in sections:
        raise ValueError(f"{path.name} has no '-- migrate:{direction}' section")
    return sections[direction].strip() + "\n"


def execute_sql(sql_text: str) -> None:
    """Run (or, offline, print) SQL from inside a revision script."""
    from alembic import context, op

    if context.is_offline_mode():
        context.get_context().impl.static_output(sql_text)
        return
    # straight to psycopg: no bind-parameter parsing of ':' or '%' in PL/pgSQL bodies
    driver = op.get_bind().connection.driver_connection
    assert driver is not None
    with driver.cursor() as cur:
        cur.execute(sql_text)


def execute_revision_sql(revision_file: str, direction: str) -> None:
    """Run a revision's ``.sql`` section. Called from revision scripts."""
    execute_sql(revision_sql(revision_file, direction))


def has_section(revision_file: str | Path, direction: str) -> bool:
    path = Path(revision_file).with_suffix(".sql")
    return path.is_file() and direction in _SECTION.findall(path.read_text(encoding="utf-8"))


def execute_frozen(revision_file: str, frozen: Frozen) -> None:
    """Upgrade by an initial revision: its pinned ``sql/`` files, or, once released, its ``.sql``."""
    if has_section(revision_file, "upgrade"):
        if frozen:
            raise FrozenSqlError(f"{Path(revision_file).name} lists pinned files and has an upgrade section")
        execute_revision_sql(revision_file, "upgrade")
    else:
        execute_sql(frozen_files_sql(frozen))


_FROZEN_BLOCK = re.compile(r"(# frozen: written by scripts/freeze-migration, not by hand\n)(.*?)(# end frozen\n)", re.S)


def initial_revision() -> Path:
    return alembic_dir() / "versions" / "0001_initial.py"


def _frozen_block(frozen: Frozen) -> str:
    rows = "".join(f'    ("{name}", "{sha}"),\n' for name, sha in frozen)
    return f"FROZEN: Frozen = (\n{rows})\n" if rows else "FROZEN: Frozen = ()\n"


def freeze(revision_file: Path, *, check: bool = False, release: bool = False) -> str | None:
    """Pin the ``sql/`` files in an initial revision, or (``release``) copy them into its ``.sql``.

    Returns None when the revision is current (or was rewritten), else what is stale.
    """
    text = revision_file.read_text(encoding="utf-8")
    if not _FROZEN_BLOCK.search(text):
        raise FrozenSqlError(f"{revision_file.name} has no frozen block to rewrite")
    if has_section(revision_file, "upgrade"):
        if release:
            raise FrozenSqlError(f"{revision_file.name} is released already: write a new revision")
        return None  # released: nothing is pinned any more
    manifest = frozen_manifest()
    if release:
        sql_path = revision_file.with_suffix(".sql")
        head, downgrade = sql_path.read_text(encoding="utf-8").split("-- migrate:downgrade", 1)
        body = frozen_files_sql(manifest)
        sql_path.write_text(f"{head}-- migrate:upgrade\n{body}\n-- migrate:downgrade{downgrade}", encoding="utf-8")
        manifest = []
    new = _FROZEN_BLOCK.sub(lambda m: m[1] + _frozen_block(manifest) + m[3], text)
    if new == text:
        return None
    if check:
        return f"{revision_file.name} does not pin the sql/ files as they are now"
    revision_file.write_text(new, encoding="utf-8")
    return None


def freeze_main(argv: Sequence[str]) -> int:
    """``scripts/freeze-migration [--check | --release]``."""
    import argparse

    parser = argparse.ArgumentParser(prog="freeze-migration", description=freeze.__doc__)
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--check", action="store_true", help="exit 1 if the pinned digests are not current")
    group.add_argument("--release", action="store_true", help="copy the files into the revision's .sql for good")
    args = parser.parse_args(argv)
    try:
        stale = freeze(initial_revision(), check=args.check, release=args.release)
    except FrozenSqlError as exc:
        parser.exit(1, f"freeze-migration: {exc}\n")
    if stale:
        parser.exit(1, f"freeze-migration: {stale}; run scripts/freeze-migration\n")
    return 0


def alembic_config(dsn: str | None = None) -> Config:
    config = Config()
    config.set_main_option("script_location", str(alembic_dir()))
    if dsn is not None:
        config.attributes["dsn"] = dsn
    return config


def head_revision() -> str:
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert head is not None
    return head


def current_revision(dsn: str) -> str | None:
    """The revision the database is at; None before the first migration."""
    with connect(dsn) as conn:
        exists = conn.execute(query("version_table_exists")).fetchone()
        if not (exists and exists[0]):
            return None
        row = conn.execute(query("current_revision")).fetchone()
    return row[0] if row else None


def _alembic(run: Callable[[], None]) -> None:
    """Run an Alembic command; its errors (an unknown revision ...) become one MemgovError line."""
    try:
        run()
    except CommandError as exc:
        raise MemgovError(f"alembic: {exc}") from exc


def upgrade(dsn: str, revision: str = "head") -> tuple[str | None, str | None]:
    """Upgrade the memgov schema; returns (revision before, revision after)."""
    before = current_revision(dsn)  # also proves the DSN works, with a clear error
    _alembic(lambda: command.upgrade(alembic_config(dsn), revision))
    return before, current_revision(dsn)


def downgrade(dsn: str, revision: str) -> None:
    connect(dsn).close()
    _alembic(lambda: command.downgrade(alembic_config(dsn), revision))


def apply_sql_files(dsn: str) -> None:
    """Build the schema from the live ``sql/`` files, in order (tests, development)."""
    with connect(dsn) as conn:
        with conn.cursor() as cur:
            for path in sql_files():
                cur.execute(path.read_text(encoding="utf-8"))

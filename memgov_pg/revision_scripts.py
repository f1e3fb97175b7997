"""What a revision script calls: the frozen SQL of its ``.sql`` file, run as it is.

Every revision of memgov's branch runs the ``-- migrate:upgrade`` /
``-- migrate:downgrade`` sections of the ``.sql`` file of the same name beside it,
SQL that can never change once released. The initial one holds the whole schema
as first released; each later one only what changed (memgov_pg.revisions writes
the routines that changed). Running the migrations is memgov_pg.migrate.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from .errors import MemgovError

_SECTION = re.compile(r"^--\s*migrate:(upgrade|downgrade)\s*$", re.MULTILINE)

Frozen = Sequence[tuple[str, str]]
"""``(file name in sql/, "sha256:<hex>")`` pairs, in the order they run."""


class FrozenSqlError(MemgovError):
    """A revision's SQL is not the SQL it was frozen with."""


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


def execute_frozen(revision_file: str, frozen: Frozen) -> None:
    """The initial revision's upgrade: the ``-- migrate:upgrade`` section of its ``.sql``.

    Before the first release that revision ran the ``sql/`` files pinned in its
    ``FROZEN`` list; the release copied them into its ``.sql`` and emptied the list.
    """
    if frozen:
        raise FrozenSqlError(f"{Path(revision_file).name} still pins sql/ files: it was released without them")
    execute_revision_sql(revision_file, "upgrade")

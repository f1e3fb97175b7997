"""Writing a schema revision: the routines that changed since the previous one.

After the first release every schema change is a new Alembic revision that holds
only what changed (docs/development.md). Tables, indexes, triggers and row
security are written by hand in the revision's ``.sql``; routines are many and
long, and copying their bodies by hand is where mistakes hide, so this tool
writes them: it builds one database at the previous revision (Alembic) and one
from the live ``sql/`` files, compares every routine of schema ``memgov`` as
PostgreSQL itself prints it (``pg_get_functiondef``, its grants, its comment),
and writes what differs into the generated block of each section:

    -- migrate:upgrade
    ...hand-written: ALTER TABLE ...
    -- generated routines: begin (scripts/revision-sql; do not edit)
    -- generated routines: end
    ...hand-written: CREATE TRIGGER ...
    -- migrate:downgrade
    ...

``scripts/revision-sql`` rewrites the blocks of the newest revision;
``--check`` exits 1 when they are stale. The schema-equivalence test
(tests/db/test_migrations.py) then proves the revision builds what ``sql/``
builds, and the downgrade test that it restores the previous schema.
"""

from __future__ import annotations

import argparse
import re
import shutil
import sys
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from psycopg import sql

from .db import connect
from .migrate import alembic_config, apply_sql_files, upgrade
from .resources import query

OWNER = "memgov_owner"
#: the owners memgov_owner may act as (it is a member of memgov_policy); a routine of any
#: other owner (memgov_settings_reader's) is created, changed and dropped by the superuser
#: who migrates, outside SET ROLE
ACTS_AS = frozenset({OWNER, "memgov_policy"})
BEGIN = "-- generated routines: begin (scripts/revision-sql; do not edit)"
END = "-- generated routines: end"
_BLOCK = re.compile(re.escape(BEGIN) + r"\n.*?" + re.escape(END), re.S)


@dataclass(frozen=True)
class Routine:
    """One routine of schema memgov as PostgreSQL prints it."""

    signature: str  # memgov.name(argtypes): its identity
    kind: str  # FUNCTION or PROCEDURE
    definition: str  # pg_get_functiondef
    result: str  # pg_get_function_result: a change here needs DROP first
    arguments: str  # pg_get_function_arguments: names and defaults, same
    owner: str
    grantees: tuple[str, ...]  # roles with EXECUTE, besides the owner (PUBLIC included), in ACL order
    comment: str | None

    def replaceable_by(self, other: Routine) -> bool:
        """Whether ``CREATE OR REPLACE`` can turn this routine into ``other``."""
        return (self.result, self.arguments, self.kind) == (other.result, other.arguments, other.kind)


def routines(dsn: str) -> dict[str, Routine]:
    """The routines of schema memgov in ``dsn``, in creation order (compiled policies excluded)."""
    with connect(dsn) as conn:
        rows = conn.execute(query("schema_routines")).fetchall()
    return {row[0]: Routine(row[0], row[1], row[2], row[3], row[4], row[5], tuple(row[6]), row[7]) for row in rows}


def _literal(text: str | None) -> str:
    return "NULL" if text is None else sql.Literal(text).as_string(None)


def _grants(old: Routine | None, new: Routine) -> list[str]:
    before = set(old.grantees) if old else set()
    after = set(new.grantees)
    target = f"{new.kind} {new.signature}"
    out = []
    if old is None and "PUBLIC" not in after and new.owner != OWNER:
        # created under SET ROLE memgov_owner; another owner's default privileges differ
        out.append(f"REVOKE ALL ON {target} FROM PUBLIC;")
    if gone := sorted(before - after):
        out.append(f"REVOKE EXECUTE ON {target} FROM {', '.join(gone)};")
    # in the order of the routine's ACL, which pg_dump prints as it is
    if added := [g for g in new.grantees if g not in before]:
        out.append(f"GRANT EXECUTE ON {target} TO {', '.join(added)};")
    return out


def _create(old: Routine | None, new: Routine) -> list[str]:
    """Statements that turn ``old`` (None: absent) into ``new``."""
    out = []
    if old is not None and not old.replaceable_by(new):
        out.append(f"DROP {old.kind} {old.signature};")
        old = None
    if old is None or old.definition != new.definition:
        out.append(new.definition.rstrip() + ";")
    if new.owner != OWNER and (old is None or old.owner != new.owner):
        out.append(f"ALTER {new.kind} {new.signature} OWNER TO {new.owner};")
    out += _grants(old, new)
    if (old.comment if old else None) != new.comment:
        out.append(f"COMMENT ON {new.kind} {new.signature} IS {_literal(new.comment)};")
    return out


def _as_migrator(step: list[str], *owners: str) -> list[str]:
    """``step``, run as the superuser who migrates when memgov_owner cannot act as one of ``owners``."""
    if all(owner in ACTS_AS for owner in owners):
        return step
    return ["RESET ROLE;", *step, f"SET ROLE {OWNER};"]


def changes(before: dict[str, Routine], after: dict[str, Routine]) -> str:
    """The SQL that turns the routines ``before`` into ``after`` (empty when they agree)."""
    statements: list[str] = []
    for signature, new in after.items():  # creation order: a routine after what it calls
        old = before.get(signature)
        if step := _create(old, new):
            owners = (new.owner,) if old is None else (old.owner, new.owner)
            statements.append("\n".join(_as_migrator(step, *owners)))
    for signature, old in reversed(before.items()):
        if signature not in after:
            statements.append("\n".join(_as_migrator([f"DROP {old.kind} {signature};"], old.owner)))
    if not statements:
        return ""
    return f"SET ROLE {OWNER};\n\n" + "\n\n".join(statements) + "\n\nRESET ROLE;\n"


def write_block(text: str, section: str, body: str) -> str:
    """``text`` (a revision's .sql) with the generated block of ``section`` replaced by ``body``."""
    head, sep, tail = text.partition("-- migrate:downgrade")
    if not sep:
        raise ValueError("the revision has no '-- migrate:downgrade' section")
    part = head if section == "upgrade" else tail
    if len(_BLOCK.findall(part)) != 1:
        raise ValueError(f"the {section} section needs exactly one generated block ({BEGIN!r} ... {END!r})")
    block = f"{BEGIN}\n{body}{END}"
    part = _BLOCK.sub(lambda _: block, part)
    return part + sep + tail if section == "upgrade" else head + sep + part


def newest_revision() -> tuple[Path, str]:
    """The newest revision's ``.sql`` and the revision before it."""
    from alembic.script import ScriptDirectory

    script = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert script is not None
    revision = ScriptDirectory.from_config(alembic_config()).get_revision(script)
    assert revision is not None and isinstance(revision.down_revision, str), "the first revision has no previous"
    return Path(revision.path).with_suffix(".sql"), revision.down_revision


@contextmanager
def scratch_server(dsn: str | None) -> Iterator[Any]:
    """A superuser connection factory: ``dsn``'s server, or a throw-away local cluster."""
    if dsn:
        yield dsn
        return
    from .cluster import LocalCluster, free_port

    base = Path(tempfile.mkdtemp(prefix="memgov-revision-"))
    cluster = LocalCluster(base, free_port(), durable=False)
    try:
        cluster.init()
        cluster.start_on_a_free_port()
        cluster.bootstrap()
        yield cluster.dsn("postgres")
    finally:
        cluster.stop()
        shutil.rmtree(base, ignore_errors=True)


def generate(server_dsn: str) -> tuple[Path, str]:
    """The newest revision's ``.sql`` path and its text with both generated blocks current."""
    from psycopg import conninfo

    path, previous = newest_revision()
    names = {"before": f"memgov_rev_{previous}", "after": "memgov_rev_sql"}
    dsns = {}
    with connect(server_dsn, autocommit=True) as conn:
        for name in names.values():
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    params = conninfo.conninfo_to_dict(server_dsn)
    for key, name in names.items():
        dsns[key] = conninfo.make_conninfo(**{**params, "dbname": name})  # type: ignore[arg-type]
    try:
        upgrade(dsns["before"], previous)
        apply_sql_files(dsns["after"])
        before, after = routines(dsns["before"]), routines(dsns["after"])
    finally:
        with connect(server_dsn, autocommit=True) as conn:
            for name in names.values():
                conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
    text = path.read_text(encoding="utf-8")
    text = write_block(text, "upgrade", changes(before, after))
    text = write_block(text, "downgrade", changes(after, before))
    return path, text


def main(argv: Sequence[str] | None = None) -> int:
    """``scripts/revision-sql [--check] [--dsn SUPERUSER_DSN]``."""
    parser = argparse.ArgumentParser(prog="revision-sql", description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the generated blocks are stale")
    parser.add_argument("--dsn", help="a superuser DSN to build on (default: a throw-away local cluster)")
    args = parser.parse_args(argv)
    with scratch_server(args.dsn) as server:
        path, text = generate(server)
    if path.read_text(encoding="utf-8") == text:
        return 0
    if args.check:
        print(f"revision-sql: {path.name} is stale; run scripts/revision-sql", file=sys.stderr)
        return 1
    path.write_text(text, encoding="utf-8")
    print(f"revision-sql: wrote {path.name}")
    return 0

"""Every SQLSTATE the engine raises on purpose is listed once (``memgov_pg.errors.SQLSTATES``).

The SQL files and the migrations raise what the list holds, at the levels it holds, and
nothing else; ``errors.py``'s classes and mapping agree with it; docs/reference.md's
SQLSTATE table has a row for each code and level; ``memgov_pg/api.py`` names only listed
codes. No database: the SQL is read as text.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import NamedTuple

import psycopg.errors
import pytest

from memgov_pg import errors
from memgov_pg.api import CLIENT_FUNCTIONS
from memgov_pg.errors import BY_SQLSTATE, SQLSTATES

REPO = Path(__file__).resolve().parents[2]
SQL_FILES = sorted((REPO / "sql").glob("*.sql"))
MIGRATIONS = sorted((REPO / "alembic" / "versions").glob("*.sql"))

#: RAISE's level keyword → the severity a client sees
LEVELS = {
    "EXCEPTION": "ERROR",
    "WARNING": "WARNING",
    "NOTICE": "NOTICE",
    "INFO": "INFO",
    "LOG": "LOG",
    "DEBUG": "DEBUG",
}
#: the schema's constraints behind PostgreSQL's own codes (origin "constraint")
CONSTRAINTS = {
    "23502": r"\bNOT\s+NULL\b",
    "23505": r"\b(PRIMARY\s+KEY|UNIQUE)\b",
    "23514": r"\bCHECK\s*\(",
}


class Raise(NamedTuple):
    where: str  # file:line
    level: str  # ERROR, WARNING, NOTICE …
    code: str | None  # None: a notice without ERRCODE (00000)


def code_text(sql: str) -> tuple[str, list[str]]:
    """``sql`` without its comments, each string literal replaced by ``'#N'`` (N: its index in
    the list returned beside), lines kept: a RAISE in a comment or a message is not code,
    and a semicolon in a literal ends no statement. Dollar quotes are read through (a
    function body is code)."""
    out: list[str] = []
    literals: list[str] = []
    i, n = 0, len(sql)
    while i < n:
        if sql.startswith("--", i):
            end = sql.find("\n", i)
            i = n if end < 0 else end
        elif sql.startswith("/*", i):
            end = sql.find("*/", i + 2)
            end = n if end < 0 else end + 2
            out.append("\n" * sql.count("\n", i, end))
            i = end
        elif sql[i] == "'":
            escapes = i > 0 and sql[i - 1] in "eE" and not (i > 1 and (sql[i - 2].isalnum() or sql[i - 2] == "_"))
            j, value = i + 1, []
            while j < n:
                if escapes and sql[j] == "\\":
                    value.append(sql[j : j + 2])
                    j += 2
                elif sql.startswith("''", j):
                    value.append("'")
                    j += 2
                elif sql[j] == "'":
                    break
                else:
                    value.append(sql[j])
                    j += 1
            literals.append("".join(value))
            out.append(f"'#{len(literals) - 1}'" + "\n" * sql.count("\n", i, j))
            i = j + 1
        else:
            out.append(sql[i])
            i += 1
    return "".join(out), literals


_RAISE = re.compile(r"\bRAISE\b([^;]*);", re.IGNORECASE)
_LEVEL = re.compile(r"(EXCEPTION|WARNING|NOTICE|INFO|LOG|DEBUG)\b\s*", re.IGNORECASE)
_SQLSTATE = re.compile(r"SQLSTATE\s+'#(\d+)'", re.IGNORECASE)
_CONDITION = re.compile(r"([a-z_]\w*)", re.IGNORECASE)
_ERRCODE = re.compile(r"\bUSING\b.*\bERRCODE\s*=\s*(?:'#(\d+)'|([^\s,]+))", re.IGNORECASE | re.DOTALL)
_HANDLED = re.compile(r"\bWHEN\s+SQLSTATE\s+'#(\d+)'", re.IGNORECASE)


def sqlstate(name: str) -> str:
    """A five-character SQLSTATE as written, or the code of a condition name (``invalid_parameter_value``)."""
    if re.fullmatch(r"[0-9A-Z]{5}", name):
        return name
    try:
        return psycopg.errors.lookup(name.upper()).sqlstate or name
    except KeyError:
        pytest.fail(f"RAISE names an unknown condition {name!r}")


def raises(path: Path) -> list[Raise]:
    """The RAISE statements of a SQL file."""
    return raises_in(path.read_text(encoding="utf-8"), path.name)


def raises_in(sql: str, name: str) -> list[Raise]:
    """The RAISE statements of ``sql`` (a bare ``RAISE;`` re-raises: left out), every way a code
    is given: ``USING ERRCODE = '…'`` (a code or a condition name), ``RAISE SQLSTATE '…'``,
    ``RAISE [level] condition_name``."""
    text, literals = code_text(sql)
    found = []
    for statement in _RAISE.finditer(text):
        body = statement.group(1).strip()
        if not body:
            continue
        where = f"{name}:{text.count(chr(10), 0, statement.start()) + 1}"
        level_match = _LEVEL.match(body)
        level = LEVELS[level_match.group(1).upper()] if level_match else "ERROR"
        rest = body[level_match.end() :] if level_match else body
        code: str | None = None
        if given := _SQLSTATE.match(rest):
            code = literals[int(given.group(1))]
        elif (named := _CONDITION.match(rest)) and named.group(1).upper() != "USING":
            code = named.group(1)
        if errcode := _ERRCODE.search(rest):
            assert errcode.group(1) is not None, f"{where}: ERRCODE = {errcode.group(2)} is not a literal"
            code = literals[int(errcode.group(1))]
        found.append(Raise(where, level, sqlstate(code) if code else None))
    return found


def handled(path: Path) -> set[str]:
    """The codes an ``EXCEPTION WHEN SQLSTATE '…'`` of the file catches."""
    text, literals = code_text(path.read_text(encoding="utf-8"))
    return {literals[int(m.group(1))] for m in _HANDLED.finditer(text)}


ALL_RAISES = [r for path in (*SQL_FILES, *MIGRATIONS) for r in raises(path)]


def test_the_scanner_reads_every_form():
    sql = """
    -- RAISE EXCEPTION 'in a comment' USING ERRCODE = 'MG999';
    /* RAISE EXCEPTION USING ERRCODE = 'MG998'; */
    RAISE EXCEPTION 'a message; with RAISE EXCEPTION in it' USING ERRCODE = 'MG403', HINT = 'it''s; fine';
    RAISE NOTICE 'plain';
    RAISE WARNING E'esc\\'aped; %' , 1 USING ERRCODE = 'MG409';
    RAISE SQLSTATE '22004';
    RAISE division_by_zero;
    RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value';
    RAISE;
    """
    assert [(r.level, r.code) for r in raises_in(sql, "example.sql")] == [
        ("ERROR", "MG403"),
        ("NOTICE", None),
        ("WARNING", "MG409"),
        ("ERROR", "22004"),
        ("ERROR", "22012"),
        ("ERROR", "22023"),
    ]


def test_the_list_is_consistent():
    codes = [s.code for s in SQLSTATES]
    assert len(codes) == len(set(codes))
    for s in SQLSTATES:
        assert re.fullmatch(r"MG\d{3}|[0-9A-Z]{5}", s.code), s.code
        assert s.levels and len(set(s.levels)) == len(s.levels), s.code
        assert set(s.levels) <= {"ERROR", "WARNING", "NOTICE"}, s.code
        assert s.meaning, s.code
        if s.code.startswith("MG"):
            assert s.origin != "constraint", s.code
        else:
            # PostgreSQL's own codes: one it knows (not a made-up one that looks like them)
            assert psycopg.errors.lookup(s.code).sqlstate == s.code


def test_every_raise_names_a_code():
    # RAISE EXCEPTION without one is P0001, which no caller can tell from another
    silent = [r.where for r in ALL_RAISES if r.code is None and r.level in ("ERROR", "WARNING")]
    assert silent == []


def raised_in(files: list[Path]) -> dict[tuple[str, str], str]:
    """(code, level) → where first raised, in ``files``."""
    found: dict[tuple[str, str], str] = {}
    for path in files:
        for r in raises(path):
            if r.code is not None:
                found.setdefault((r.code, r.level), r.where)
    return found


def listed(*origins: str) -> set[tuple[str, str]]:
    return {(s.code, level) for s in SQLSTATES if s.origin in origins for level in s.levels}


@pytest.mark.slow(reason="reads every RAISE of sql/ and alembic/: 2-3 s")
def test_the_sql_raises_what_is_listed():
    raised = raised_in(SQL_FILES + MIGRATIONS)
    known = listed("raised", "migration", "internal")
    unlisted = sorted(
        f"{where}: {level} {code}" for (code, level), where in raised.items() if (code, level) not in known
    )
    assert unlisted == [], "add these to memgov_pg.errors.SQLSTATES (and docs/reference.md)"
    # the live schema raises each code listed as its own; a migration's steps, those listed as theirs
    assert sorted(listed("raised", "internal") - set(raised_in(SQL_FILES))) == [], "listed, raised nowhere in sql/"
    assert sorted(listed("migration") - set(raised_in(MIGRATIONS))) == [], "listed, raised by no migration"
    assert sorted(listed("migration") & set(raised_in(SQL_FILES))) == [], "raised in sql/: origin 'raised'"


def test_the_constraint_codes_have_their_constraints():
    listed = {s.code for s in SQLSTATES if s.origin == "constraint"}
    assert listed == set(CONSTRAINTS)
    schema = "".join(code_text(path.read_text(encoding="utf-8"))[0] for path in SQL_FILES)
    assert [code for code, pattern in CONSTRAINTS.items() if not re.search(pattern, schema, re.IGNORECASE)] == []


def test_internal_codes_are_caught_where_raised():
    for s in SQLSTATES:
        if s.origin != "internal":
            continue
        files = [p for p in SQL_FILES if any(r.code == s.code for r in raises(p))]
        assert files, s.code
        assert all(s.code in handled(p) for p in files), f"{s.code} escapes: no WHEN SQLSTATE '{s.code}'"


def test_errors_py_agrees():
    for s in SQLSTATES:
        if s.exception is not None:
            assert s.exception.sqlstate == s.code, (s.code, s.exception.__name__)
            assert s.exception.__name__ in errors.__all__
    # every class that stands for a SQLSTATE is in the list, under that code
    classes = [
        cls
        for cls in vars(errors).values()
        if isinstance(cls, type)
        and issubclass(cls, errors.EngineError)
        and isinstance(cls.__dict__.get("sqlstate"), str)
    ]
    classes = [cls for cls in classes if cls.__dict__["sqlstate"]]
    assert sorted(cls.__name__ for cls in classes) == sorted(s.exception.__name__ for s in SQLSTATES if s.exception)
    assert {cls.sqlstate: cls for cls in classes} == {s.code: s.exception for s in SQLSTATES if s.exception}
    assert errors.BUSY_SQLSTATES == {"55P03"}


def doc_rows() -> list[tuple[str, str, str]]:
    """docs/reference.md's SQLSTATE table: (code, level, the rest of the row)."""
    text = (REPO / "docs" / "reference.md").read_text(encoding="utf-8")
    section = text.split("\n## SQLSTATEs\n", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and len(cells) >= 3 and re.fullmatch(r"MG\d{3}|[0-9A-Z]{5}", cells[0]):
            rows.append((cells[0], cells[1], " | ".join(cells[2:])))
    return rows


def test_the_docs_table_is_the_list():
    rows = doc_rows()
    documented = [(code, level) for code, level, _ in rows]
    assert len(documented) == len(set(documented)), "a code and level documented twice"
    listed = [(s.code, level) for s in SQLSTATES if s.origin != "internal" for level in s.levels]
    assert sorted(set(documented) - set(listed)) == [], "documented, not in memgov_pg.errors.SQLSTATES"
    assert sorted(set(listed) - set(documented)) == [], "listed, no row in docs/reference.md's SQLSTATE table"
    assert documented == listed, "the table's order is the list's"
    # each exception is named in a row of its code
    for s in SQLSTATES:
        if s.exception is not None:
            assert any(code == s.code and f"`{s.exception.__name__}`" in rest for code, _, rest in rows), s.code


def test_the_api_names_listed_codes():
    named = {(f.name, code) for f in CLIENT_FUNCTIONS for code in f.errors}
    unknown = sorted(f"memgov.{name}: {code}" for name, code in named if code not in BY_SQLSTATE)
    assert unknown == []
    internal = sorted(f"memgov.{name}: {code}" for name, code in named if BY_SQLSTATE[code].origin == "internal")
    assert internal == []


def test_the_python_docs_agree():
    # docs/python.md's exception table: "`NotFoundError` (MG404)"
    text = (REPO / "docs" / "python.md").read_text(encoding="utf-8")
    named = dict(re.findall(r"`(\w+Error)` \((MG\d{3}|[0-9A-Z]{5})\)", text))
    assert named == {s.exception.__name__: s.code for s in SQLSTATES if s.exception is not None}
    # docs/models.md's table of what from_dbapi_error returns
    text = (REPO / "docs" / "models.md").read_text(encoding="utf-8")
    rows = dict(re.findall(r"^\| (MG\d{3}|[0-9A-Z]{5}) \| `(\w+Error)` \|", text, re.MULTILINE))
    assert rows == {code: cls.__name__ for code, cls in errors._BY_SQLSTATE.items()}

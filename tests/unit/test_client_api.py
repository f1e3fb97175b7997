"""Every surface of the client API against its one description (memgov_pg/api.py): the engines,
the SQLAlchemy statements, sql/queries/, doctor's allow-lists and docs/reference.md's function
table. A surface that lacks a described function fails here, unless the description says why.
(The catalog itself is held to the description by tests/db/test_client_api.py.)"""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

from memgov_pg import doctor
from memgov_pg import sqlalchemy as wrappers
from memgov_pg.api import CLIENT_FUNCTIONS, ROLES, WRITER, ClientFunction, signatures
from memgov_pg.engine import MemoryPolicyEngine, SyncMemoryPolicyEngine
from memgov_pg.resources import queries

DOCS = Path(__file__).resolve().parents[2] / "docs"
SHORT = {role: role.removeprefix("memgov_") for role in ROLES}


def ids(functions: tuple[ClientFunction, ...]) -> list[str]:
    return [f.name for f in functions]


CALLED = tuple(f for f in CLIENT_FUNCTIONS if f.engine)


def test_the_description_is_consistent():
    names = ids(CLIENT_FUNCTIONS)
    assert len(names) == len(set(names))
    for f in CLIENT_FUNCTIONS:
        assert f.roles and set(f.roles) <= set(ROLES) and f.roles == tuple(r for r in ROLES if r in f.roles), f.name
        left_out = [s for s in ("query", "engine", "wrapper") if getattr(f, s) is None]
        # a surface leaves a function out only with a reason, and a reason is never stale
        assert bool(left_out) == bool(f.omitted), (f.name, left_out, f.omitted)
        assert all(re.fullmatch(r"MG\d{3}|[0-9A-Z]{5}", code) for code in f.errors), f.name


@pytest.mark.parametrize("f", CALLED, ids=ids(CALLED))
def test_both_engines_carry_it_alike(f):
    assert f.engine is not None
    method = getattr(MemoryPolicyEngine, f.engine, None)
    sync = getattr(SyncMemoryPolicyEngine, f.engine, None)
    assert method is not None, f"MemoryPolicyEngine lacks {f.engine}() for memgov.{f.name}"
    assert sync is not None, f"SyncMemoryPolicyEngine lacks {f.engine}() for memgov.{f.name}"
    assert inspect.iscoroutinefunction(method) and not inspect.iscoroutinefunction(sync)
    assert list(inspect.signature(method).parameters) == list(inspect.signature(sync).parameters)
    assert method.__doc__ and sync.__doc__


@pytest.mark.parametrize("f", CALLED, ids=ids(CALLED))
def test_the_sqlalchemy_statements_carry_it(f):
    assert f.wrapper is not None
    assert callable(getattr(wrappers, f.wrapper, None)), f"memgov_pg.sqlalchemy lacks {f.wrapper}()"
    assert f.wrapper in wrappers.__all__


@pytest.mark.parametrize(
    "f", [f for f in CLIENT_FUNCTIONS if f.query], ids=ids(tuple(f for f in CLIENT_FUNCTIONS if f.query))
)
def test_its_named_query_calls_it(f):
    assert f.query is not None
    text = queries().get(f.query)
    assert text is not None, f"sql/queries/ has no query named {f.query}"
    assert f"memgov.{f.name}(" in text


def test_doctors_allow_lists_are_the_description():
    public = set(doctor.PUBLIC_API)
    assert set(doctor.WRITER_API) == public | set(signatures(WRITER))
    assert set(doctor.REVIEWER_API) == public | {f.signature for f in CLIENT_FUNCTIONS}


def function_table() -> dict[str, tuple[str, str, str]]:
    """docs/reference.md's function table: for each function a row names, the arguments it
    shows ("…": left out), the result after "→" ("": none shown) and the roles cell."""
    text = (DOCS / "reference.md").read_text()
    section = text.split("\n## Functions\n", 1)[1].split("\n## ", 1)[0]
    rows: dict[str, tuple[str, str, str]] = {}
    for line in section.splitlines():
        if line.startswith("| `"):
            function, roles = (c.strip() for c in line.strip("|").split(" | ")[:2])
            result = function.split("→", 1)[1] if "→" in function else ""
            for name, args in re.findall(r"`(?:PROCEDURE )?(\w+)\(([^)]*)\)", function):
                rows[name] = (args, re.sub(r"[`\s]|memgov\.", "", result), roles)
    return rows


@pytest.mark.parametrize("f", CLIENT_FUNCTIONS, ids=ids(CLIENT_FUNCTIONS))
def test_the_reference_lists_it_as_described(f):
    rows = function_table()
    assert f.name in rows, f"docs/reference.md's function table lacks memgov.{f.name}"
    args, result, roles = rows[f.name]
    assert roles == ", ".join(SHORT[r] for r in f.roles)
    if args != "…":
        shown = [a.split(" DEFAULT ")[0] for a in args.split(", ") if a]
        assert shown == [f"{a.name} {a.type.removeprefix('memgov.')}" for a in f.args]
    if result:
        assert result == re.sub(r"\s|memgov\.", "", f.result)


def test_the_errors_are_documented_sqlstates():
    documented = (DOCS / "reference.md").read_text() + (DOCS / "security.md").read_text()
    missing = sorted({c for f in CLIENT_FUNCTIONS for c in f.errors if c not in documented})
    assert missing == []


def test_the_python_reference_lists_each_engine_method():
    text = (DOCS / "python.md").read_text()
    missing = [f.engine for f in CALLED if f"`{f.engine}(" not in text and f"`{f.engine}`" not in text]
    assert missing == []

"""Locating the engine's SQL and the named queries."""

from __future__ import annotations

import re

import pytest

from memgov_pg.resources import merge_queries, parse_queries, queries, query_files, sql_files


def test_sql_files_apply_in_numeric_order():
    names = [p.name for p in sql_files()]
    assert names == sorted(names)
    assert names[0].startswith("000_")
    assert all(re.match(r"^\d{3}_[a-z_]+\.sql$", n) for n in names)


def test_named_queries_parse():
    parsed = parse_queries("-- name: a\nSELECT 1;\n\n-- name: b_2\n-- what b does\nSELECT 2;\n")
    assert parsed == {"a": "SELECT 1;", "b_2": "-- what b does\nSELECT 2;"}


def test_a_query_defined_twice_is_an_error():
    with pytest.raises(ValueError, match="defined twice"):
        parse_queries("-- name: a\nSELECT 1;\n-- name: a\nSELECT 2;\n")


def test_queries_file_has_every_query_python_uses():
    import pathlib

    package = pathlib.Path(__file__).resolve().parents[2] / "memgov_pg"
    used = set()
    for module in package.glob("*.py"):
        used |= set(re.findall(r"query\(\"([a-z_0-9]+)\"", module.read_text()))
    assert used, "no named queries used?"
    assert used <= set(queries()), sorted(used - set(queries()))


def test_a_query_defined_in_two_files_is_an_error():
    with pytest.raises(ValueError, match=r"'a' is defined twice: in cli.sql and in doctor.sql"):
        merge_queries(
            {"cli.sql": "-- name: a\nSELECT 1;\n", "doctor.sql": "-- name: b\nSELECT 2;\n-- name: a\nSELECT 3;\n"}
        )


def test_query_files_each_name_is_unique_and_none_is_applied_as_schema():
    files = query_files()
    assert [p.name for p in files] == ["cli.sql", "doctor.sql", "engine.sql"]
    seen: dict[str, str] = {}
    for path in files:
        for name in parse_queries(path.read_text(encoding="utf-8"), path.name):
            assert name not in seen, f"{name} is in {seen.get(name)} and {path.name}"
            seen[name] = path.name
    assert set(seen) == set(queries())
    # the schema files are applied by name; a query file must never be one of them
    assert not set(files) & set(sql_files())

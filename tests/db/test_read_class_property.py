"""Property test: a read class decides a read exactly as the get decision does.

The random policies and items of ``test_compiler_property`` (every operator, NULL-able
fields, ``metadata.<key>``, category scopes, rules scoped to operations, ``match: all`` and
``any``, every ``on_policy_miss``, ``context.actor`` tests), each made to govern reads and
checked in every mode. For each item and each reader (``postgres``, ``memgov_admin``,
``memgov_writer`` and a role no rule names), the decision row level security takes from the
read class (``memgov.read_class`` of the row, ``memgov.policy_<h>_read`` of the reader) must
equal the compiled policy's get decision (``memgov.decide``: allowed when not enforced or an
allow). A policy whose reads cannot be decided ahead (a rule on ``now()``, more than two
``context.actor`` conditions) has no read class function: counted, not checked.

Reproducible as its model: ``derandomize=True``; ``MEMGOV_PROPERTY_EXAMPLES=N`` tries N
policies instead of 40.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, Phase, given, note, settings
from hypothesis import strategies as st
from psycopg.types.json import Jsonb

from memgov_pg.compiler import compile_policy
from tests.db.test_compiler_property import ITEM, materialize, policy_doc, valid_policy
from tests.decision_cases import reset_policies

READERS = ["postgres", "memgov_admin", "memgov_writer", "someone_no_rule_names"]
GOVERN_READS = {
    "id": "zz-govern-reads",
    "priority": -100,  # first: a rule before it that matches everything would leave it unreached
    "when": [{"field": "operation_type", "operator": "eq", "value": "search"}],
    "action": "allow",
}
SEEN: Counter[str] = Counter()

DECIDED = """
SELECT t.n, r.reader,
       d.enforced IS NOT TRUE OR d.action = 'allow' AS slow,
       (memgov.read_class(i) >> 32) = %(epoch)s AS current,
       ((memgov.read_class(i) & 4294967295) >> {read}(NULL, r.reader)) & 1 = 1 AS fast
  FROM jsonb_array_elements(%(items)s::jsonb) WITH ORDINALITY AS t(x, n)
 CROSS JOIN LATERAL memgov.item_from_json(t.x) AS i
 CROSS JOIN unnest(%(readers)s::text[]) AS r(reader)
 CROSS JOIN LATERAL memgov.decide(i, 'get', r.reader) AS d
 ORDER BY t.n, r.reader
"""


@pytest.fixture(scope="module")
def conn(memgov_dsn: str) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(memgov_dsn, autocommit=True) as c:
        c.execute("SET TIME ZONE 'UTC'")
        yield c


@pytest.mark.slow(reason="40 random policies with 15-30 writes each: 12-20 s")
@settings(
    max_examples=int(os.environ.get("MEMGOV_PROPERTY_EXAMPLES", "40")),
    deadline=None,
    derandomize=os.environ.get("MEMGOV_PROPERTY_RANDOM") != "1",
    database=None,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example],
)
@given(doc=policy_doc(), specs=st.lists(ITEM, min_size=15, max_size=30))
def test_a_read_class_decides_like_the_get_decision(
    conn: psycopg.Connection[Any], doc: dict[str, Any], specs: list[dict[str, Any]]
) -> None:
    for mode in (None, "monitor", "strict"):
        moded = {"version": doc["version"], **({"mode": mode} if mode else {}), **doc}
        moded["rules"] = [GOVERN_READS, *doc["rules"]]
        check(conn, moded, specs)


def check(conn: psycopg.Connection[Any], doc: dict[str, Any], specs: list[dict[str, Any]]) -> None:
    text, policy = valid_policy(doc)
    note(f"policy:\n{text}")
    compiled = compile_policy(policy)
    reset_policies(conn)
    with conn.transaction():
        conn.execute(compiled.install_sql())
    SEEN["policies"] += 1
    if compiled.read_body is None:
        SEEN["no read class"] += 1
        return
    if any(c.field == "context.actor" for r in policy.write_rules for c in r.conditions):
        SEEN["reader-dependent"] += 1
    (epoch,) = conn.execute("SELECT read_epoch FROM memgov.policy_versions WHERE active").fetchone()  # type: ignore[misc]
    with conn.transaction():
        now = conn.execute("SELECT now()").fetchone()[0]  # type: ignore[index]
        items = [materialize(spec, now)[0] for spec in specs]
        rows = conn.execute(
            DECIDED.format(read=f"memgov.{compiled.function_name}_read"),
            {"items": Jsonb(items), "readers": READERS, "epoch": epoch},
        ).fetchall()
    mismatches = []
    for n, reader, slow, current, fast in rows:
        SEEN[f"allowed:{slow}"] += 1
        if not current or fast is not slow:
            mismatches.append(f"item {items[n - 1]}, reader {reader}: get decision {slow}, read class {fast}")
    assert not mismatches, f"policy:\n{text}\n" + "\n".join(mismatches[:5])


@pytest.mark.slow(reason="reads what the slow property test above recorded: skipped without it")
def test_the_read_class_property_test_is_not_vacuous() -> None:
    if not SEEN:
        pytest.skip("the property test did not run in this session")
    checked = SEEN["policies"] - SEEN["no read class"]
    assert checked >= SEEN["policies"] // 4, SEEN
    assert SEEN["reader-dependent"] > 0 and SEEN["allowed:True"] > 0 and SEEN["allowed:False"] > 0, SEEN

"""Read classes: row level security decides a row from what the write trigger stored.

A policy whose reads can be decided ahead gives every row a read class at write time
(``read_class``: the deciding version's epoch and a mask of the reader classes that may read
it) and row level security compares it with the querying role's classes (sql/060_recall.sql).
The slow path is the get decision per row (``memgov.readable``), which a row without a class
of the tenant's current epoch still takes. What is checked here, with real logins:

* the same rows are visible either way, under every shipped policy and the corpus policies
  of tests/cases/decisions (made to govern reads), for a writer and a reviewer;
* a reader-dependent rule (``context.actor``) splits readers into classes;
* a deploy, a rollback and a tenant override recompute the classes; a class of another
  epoch is never trusted; an UPDATE that changes a row's fields computes it again;
* a writer cannot set ``read_class``, nor call what computes it.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import psycopg
import pytest
import yaml
from psycopg.types.json import Jsonb

from memgov_pg.compiler import compile_policy
from memgov_pg.deploy import pg_regex_checker
from memgov_pg.policy import load_policy
from tests import yaml_text
from tests.attack_helpers import OTHER, Logins, insert, item, refused, seed, unchanged
from tests.decision_cases import ROOT, load_groups, policy_text, reset_policies, resolve_times

SHIPPED = sorted(
    p.relative_to(ROOT).as_posix()
    for p in [ROOT / "policies" / "default.yaml", *(ROOT / "policies" / "examples").glob("*.yaml")]
    if not p.name.endswith(".test.yaml")
)

#: A rule that governs reads and decides no get: appended to a corpus policy that does not
#: govern reads, so that its get decisions are what row level security asks.
GOVERN_READS = {
    "id": "zz-govern-reads",
    "priority": 100000,
    "when": [{"field": "operation_type", "operator": "eq", "value": "search"}],
    "action": "allow",
}

# A policy whose get decision depends on the reader: the writer login may not read a
# secret-tier note, a reviewer may; nobody reads a sensitive memory.
READER_POLICY = """
version: "{version}"
defaults: {{on_policy_miss: allow}}
rules:
  - id: withhold-secret-tier-from-the-writer
    priority: 10
    when:
      - {{field: operation_type, operator: eq, value: get}}
      - {{field: metadata.tier, operator: eq, value: secret}}
      - {{field: context.actor, operator: eq, value: {writer}}}
    action: deny
  - id: withhold-sensitive
    priority: 20
    when:
      - {{field: operation_type, operator: eq, value: get}}
      - {{field: is_sensitive, operator: eq, value: true}}
    action: deny
  - id: withhold-{withheld}
    priority: 30
    when:
      - {{field: operation_type, operator: eq, value: get}}
      - {{field: category, operator: eq, value: {withheld}}}
    action: deny
"""


def deploy(su: psycopg.Connection[Any], text: str, tenant: str = "*", filename: str = "<inline>") -> None:
    policy = load_policy(text, filename=filename, regex_checker=pg_regex_checker(su))
    with su.transaction():
        su.execute(compile_policy(policy, tenant).install_sql())


def reader_policy(logins: Logins, version: str = "1.0.0", withheld: str = "assumption") -> str:
    return READER_POLICY.format(version=version, writer=logins.writer, withheld=withheld)


def governing_reads(text: str) -> str:
    """The policy text, with a rule that makes it govern reads when it does not."""
    doc = yaml_text.safe_load(text)
    if not load_policy(text).governs_reads:
        doc["rules"] = [*doc.get("rules", []), GOVERN_READS]
    return yaml.safe_dump(doc, sort_keys=False, allow_unicode=True)


def visible(conn: psycopg.Connection[Any]) -> set[uuid.UUID]:
    return {r[0] for r in conn.execute("SELECT memory_id FROM memgov.long_term_memory_items").fetchall()}


def classes(su: psycopg.Connection[Any]) -> dict[uuid.UUID, int | None]:
    rows = su.execute("SELECT memory_id, read_class FROM memgov.long_term_memory_items").fetchall()
    return {r[0]: r[1] for r in rows}


def set_classes(su: psycopg.Connection[Any], value: str, where: str = "true") -> None:
    """Write read_class around the trigger (the superuser, to stand for a stale or forged
    class: no client can)."""
    with su.transaction():
        su.execute("ALTER TABLE memgov.long_term_memory_items DISABLE TRIGGER enforce_write")
        su.execute(f"UPDATE memgov.long_term_memory_items SET read_class = {value} WHERE {where}")
        su.execute("ALTER TABLE memgov.long_term_memory_items ENABLE ALWAYS TRIGGER enforce_write")


def slow_visible(su: psycopg.Connection[Any], *readers: psycopg.Connection[Any]) -> list[set[uuid.UUID]]:
    """What each reader sees when no row has a class: every row decided by its get decision."""
    set_classes(su, "NULL")
    return [visible(r) for r in readers]


def epoch(su: psycopg.Connection[Any], tenant: str = "*") -> int:
    row = su.execute("SELECT read_epoch FROM memgov.policy_versions WHERE org_id = %s AND active", (tenant,))
    return row.fetchone()[0]  # type: ignore[index]


def stored_row(su: psycopg.Connection[Any], fields: dict[str, Any]) -> uuid.UUID | None:
    """A corpus item stored on the engine's own path (the trigger gives it its class); None
    for one the table cannot hold."""
    row = {"org_id": "acme", "category": "user_fact", "fact_text": "", "source": "agent_extracted",
           "confidence": 0.5} | {k: v for k, v in fields.items() if v is not None}  # fmt: skip
    if "metadata" in row:
        row["metadata"] = Jsonb(row["metadata"])
    try:
        with su.transaction():
            su.execute("SET LOCAL ROLE memgov_owner")
            got = insert(su, row).fetchone()
    except psycopg.Error:
        return None
    return got[0] if got else None


# -- the same rows as the slow path ----------------------------------------------------------


@pytest.mark.parametrize("path", SHIPPED)
def test_under_a_shipped_policy_a_reader_sees_what_the_slow_path_shows(su, login, logins, path):
    reset_policies(su)
    text = (ROOT / path).read_text(encoding="utf-8")
    deploy(su, governing_reads(text), tenant="acme" if "tenant" in Path(path).name else "*", filename=path)
    if "tenant" in Path(path).name:
        deploy(su, governing_reads((ROOT / "policies" / "default.yaml").read_text(encoding="utf-8")))
    for kind in ("allowed", "held", "quarantined", "denied", "legal"):
        for extra in ({}, {"is_sensitive": True}, {"source": "user_confirmed"}, {"context_source": "langgraph"},
                      {"project_id": "p1", "confidence": 0.95}, {"category": "assumption"}):  # fmt: skip
            seed(su, kind, **extra)
    assert all(c is not None for c in classes(su).values()), "every row of a policy with read classes has one"
    writer, reviewer = login(logins.writer), login(logins.reviewer)
    fast = [visible(writer), visible(reviewer)]
    assert fast == slow_visible(su, writer, reviewer)


CORPUS = [(name, group) for name, group in load_groups()]


@pytest.mark.parametrize(("name", "group"), CORPUS, ids=[n for n, _ in CORPUS])
def test_under_a_corpus_policy_a_reader_sees_what_the_slow_path_shows(su, login, logins, name, group):
    reset_policies(su)
    for extra in group.get("also_deploy", []):
        text, filename = policy_text(extra["policy"])
        deploy(su, governing_reads(text), extra.get("tenant") or "*", filename)
    text, filename = policy_text(group["policy"])
    deploy(su, governing_reads(text), group.get("tenant") or "*", filename)
    now = su.execute("SELECT now()").fetchone()[0]  # type: ignore[index]
    stored = [stored_row(su, resolve_times(case["item"], now)) for case in group["cases"]]
    orgs = {o for (o,) in su.execute("SELECT DISTINCT org_id FROM memgov.long_term_memory_items").fetchall()}
    readers = [login(role, org) for org in sorted(orgs) for role in (logins.writer, logins.reviewer)]
    fast = [visible(r) for r in readers]
    assert fast == slow_visible(su, *readers), [s for s in stored if s]


# -- classes of readers --------------------------------------------------------------------


def test_a_rule_on_the_reader_splits_readers_into_classes(su, login, logins):
    reset_policies(su)
    deploy(su, reader_policy(logins))
    plain = seed(su, "allowed")
    secret = seed(su, "allowed", metadata=Jsonb({"tier": "secret"}))
    sensitive = seed(su, "allowed", is_sensitive=True)
    assumed = seed(su, "allowed", category="assumption")
    writer, reviewer = login(logins.writer), login(logins.reviewer)
    assert visible(writer) == {plain}
    assert visible(reviewer) == {plain, secret}
    assert all(c is not None and c >> 32 == epoch(su) for c in classes(su).values())
    assert [visible(writer), visible(reviewer)] == slow_visible(su, writer, reviewer)
    assert sensitive not in visible(reviewer) and assumed not in visible(reviewer)


def test_a_class_of_the_current_epoch_decides_without_asking_the_policy(su, login, logins):
    """White box: the stored class is what row level security reads (here a forged one, which
    only the superuser could write, shows a row the policy withholds)."""
    reset_policies(su)
    deploy(su, reader_policy(logins))
    sensitive = seed(su, "allowed", is_sensitive=True)
    writer = login(logins.writer)
    assert visible(writer) == set()
    set_classes(su, f"{epoch(su)}::bigint << 32 | 15")
    assert visible(writer) == {sensitive}


def test_a_class_of_another_epoch_is_never_trusted(su, login, logins):
    reset_policies(su)
    deploy(su, reader_policy(logins))
    sensitive = seed(su, "allowed", is_sensitive=True)
    plain = seed(su, "allowed")
    writer = login(logins.writer)
    for forged in (f"({epoch(su)} + 1)::bigint << 32 | 15", f"({epoch(su)} - 1)::bigint << 32 | 15",
                   "15", "-1", "(1::bigint << 62) | 15"):  # fmt: skip
        set_classes(su, forged)
        assert visible(writer) == {plain}, forged
    assert sensitive not in visible(writer)


# -- a policy change recomputes --------------------------------------------------------------


def test_a_deploy_and_a_rollback_recompute_every_class(su, login, logins):
    reset_policies(su)
    deploy(su, reader_policy(logins, "1.0.0", withheld="assumption"))
    first = epoch(su)
    assumed = seed(su, "allowed", category="assumption")
    plain = seed(su, "allowed")
    prefs = seed(su, "held")  # category preference
    writer = login(logins.writer)
    assert visible(writer) == {plain, prefs}
    before = classes(su)

    deploy(su, reader_policy(logins, "2.0.0", withheld="preference"))
    assert epoch(su) != first
    assert all(c >> 32 == epoch(su) for c in classes(su).values())  # type: ignore[operator]
    assert visible(writer) == {plain, assumed}

    with su.transaction():
        su.execute("SELECT memgov.rollback_policy('*')")
    assert epoch(su) == first
    assert classes(su) == before
    assert visible(writer) == {plain, prefs}
    # updated_at is the memory's: a recomputed class is no change of it
    assert su.execute("SELECT count(*) FROM memgov.long_term_memory_items WHERE updated_at <> created_at"
                      ).fetchone() == (0,)  # fmt: skip


def test_a_tenant_override_recomputes_its_tenant_only(su, login, logins):
    reset_policies(su)
    deploy(su, reader_policy(logins, "1.0.0", withheld="assumption"))
    acme = seed(su, "allowed", category="assumption")
    globex = seed(su, "allowed", org=OTHER, category="assumption")
    acme_class = classes(su)[acme]
    deploy(su, reader_policy(logins, "9.0.0-globex", withheld="preference"), tenant=OTHER)
    now = classes(su)
    assert now[acme] == acme_class
    assert now[globex] is not None and now[globex] >> 32 == epoch(su, OTHER)
    assert visible(login(logins.gwriter, OTHER)) == {globex}
    assert visible(login(logins.writer)) == set()


def test_a_policy_without_read_classes_leaves_every_row_to_the_slow_path(su, login, logins):
    """A rule that compares a time with now() cannot be decided ahead: no class, same rows."""
    reset_policies(su)
    text = reader_policy(logins) + (
        "  - id: withhold-old\n    priority: 40\n    when:\n"
        "      - {field: operation_type, operator: eq, value: get}\n"
        '      - {field: created_at, operator: lt, value: "now() - 1 day"}\n    action: deny\n'
    )
    deploy(su, text)
    plain = seed(su, "allowed")
    sensitive = seed(su, "allowed", is_sensitive=True)
    assert classes(su) == {plain: None, sensitive: None}
    assert visible(login(logins.writer)) == {plain}


# -- attacks as real logins ------------------------------------------------------------------


def test_x_a_writer_cannot_write_a_read_class(su, login, logins):
    reset_policies(su)
    deploy(su, reader_policy(logins))
    writer = login(logins.writer)
    mine = insert(writer, item("allowed")).fetchone()[0]  # type: ignore[index]
    forged = f"{epoch(su)}::bigint << 32 | 15"
    with refused(su, "42501"):
        insert(writer, item("allowed", is_sensitive=True, read_class=2**36 | 15))
    with refused(su, "42501"):
        writer.execute(f"UPDATE memgov.long_term_memory_items SET read_class = {forged} WHERE memory_id = %s",
                       (mine,))  # fmt: skip
    with refused(su, "42501"):
        writer.execute(
            "INSERT INTO memgov.long_term_memory_items (memory_id, org_id, category, fact_text, source, confidence)"
            " VALUES (%s, 'acme', 'user_fact', 'x', 'agent_extracted', 0.9)"
            f" ON CONFLICT (memory_id, org_id) DO UPDATE SET read_class = {forged}",
            (mine,),
        )
    with unchanged(su):
        for call in ("SELECT memgov.read_class(m) FROM memgov.long_term_memory_items m",
                     "SELECT memgov.read_epoch('acme')"):  # fmt: skip
            with pytest.raises(psycopg.Error) as info:
                writer.execute(call)
            assert info.value.sqlstate == "42501", call
        name = su.execute("SELECT function_name FROM memgov.policy_versions WHERE active").fetchone()[0]  # type: ignore[index]
        with pytest.raises(psycopg.Error) as info:
            writer.execute(f"SELECT memgov.{name}_read(NULL, 'memgov_admin')")
        assert info.value.sqlstate == "42501"


def test_x_an_update_that_makes_a_memory_sensitive_withholds_it(su, login, logins):
    """The class follows the row: a writer's UPDATE computes it again, so a field changed
    into one a read rule withholds is withheld at once (and the reverse)."""
    reset_policies(su)
    deploy(su, reader_policy(logins))
    writer, reviewer = login(logins.writer), login(logins.reviewer)
    mine = insert(writer, item("allowed")).fetchone()[0]  # type: ignore[index]
    assert mine in visible(reviewer)
    writer.execute("UPDATE memgov.long_term_memory_items SET metadata = %s WHERE memory_id = %s",
                   (Jsonb({"tier": "secret"}), mine))  # fmt: skip
    assert mine not in visible(writer) and mine in visible(reviewer)
    reviewer_both = login(logins.both)
    reviewer_both.execute("UPDATE memgov.long_term_memory_items SET is_sensitive = true WHERE memory_id = %s", (mine,))
    assert mine not in visible(reviewer)
    assert [visible(writer), visible(reviewer)] == slow_visible(su, writer, reviewer)


def test_x_a_reader_cannot_borrow_another_readers_class(su, login, logins):
    """The reader's class is the querying role's, looked up by the engine: a setting the
    client controls (the tenant) changes which rows exist for it, never their classes."""
    reset_policies(su)
    deploy(su, reader_policy(logins))
    secret = seed(su, "allowed", metadata=Jsonb({"tier": "secret"}))
    writer: psycopg.Connection[Any] = login(logins.writer)
    with unchanged(su):
        got = writer.execute("SELECT memgov.read_classes(true), memgov.read_classes(false)").fetchone()
        assert got is not None and all(c >> 32 == epoch(su) for c in got[0] + got[1])
        writer.execute("SELECT set_config('memgov.org_id', 'globex', false)")
        assert visible(writer) == set()
        writer.execute("SELECT set_config('memgov.org_id', 'acme', false)")
        assert secret not in visible(writer)


def test_a_shadow_changes_no_class_and_its_promotion_recomputes_them(su, login, logins):
    """A shadow decides beside the active policy and is never enforced: the classes stay the
    active version's until the shadow is promoted, which activates it."""
    reset_policies(su)
    deploy(su, reader_policy(logins, "1.0.0", withheld="assumption"))
    assumed = seed(su, "allowed", category="assumption")
    prefs = seed(su, "held")
    writer = login(logins.writer)
    before = classes(su)
    candidate = load_policy(reader_policy(logins, "2.0.0", withheld="preference"))
    with su.transaction():
        su.execute(compile_policy(candidate).stage_sql())
        su.execute("SELECT memgov.start_shadow('*', '2.0.0')")
    assert classes(su) == before
    assert visible(writer) == {prefs}
    with su.transaction():
        su.execute("SELECT memgov.promote_shadow('*')")
    assert all(c >> 32 == epoch(su) for c in classes(su).values())  # type: ignore[operator]
    assert visible(writer) == {assumed}

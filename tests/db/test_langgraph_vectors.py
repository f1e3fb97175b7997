"""Semantic search of the LangGraph store without pgvector (memgov_pg.langgraph_index,
sql/066_vectors.sql), as real memgov_writer logins use it: rankings against a Python
computation of each distance, vectors kept as real[] outside the memory row, tenants that
never see each other's vectors, a writer that cannot attach vectors to a memory it may not
write, held writes whose vectors rank nothing until approved, and vectors that go with their
memory."""

from __future__ import annotations

import asyncio
import math
import random
import struct
import uuid
from pathlib import Path
from typing import Any

import psycopg
import pytest

pytest.importorskip("langgraph.store.base")

from langchain_core.embeddings import Embeddings

from memgov_pg.deploy import deploy
from memgov_pg.langgraph import AsyncMemgovStore, MemgovStore
from tests.attack_helpers import Logins, login_dsn, refused, unchanged

ORG = "lgv-acme"
OTHER = "lgv-globex"
STRICT = "lgv-strict"  # withholds reads of preferences

STRICT_POLICY = """\
version: "1.0.0-lgv"
defaults: {on_policy_miss: allow}
rules:
  - id: withhold-preferences
    priority: 1
    category: preference
    condition: {operation_type: [get, search]}
    action: deny
  - {id: recall, priority: 2, condition: {operation_type: [get, search]}, action: allow}
"""


class Chars(Embeddings):
    """Deterministic embeddings: each character a random projection, the text their mean
    (not normalised, so that the three distances rank differently)."""

    def __init__(self, dims: int = 16, seed: int = 7) -> None:
        self.dims = dims
        self.rng = random.Random(seed)
        self.chars: dict[str, list[float]] = {}

    def _one(self, text: str) -> list[float]:
        out = [0.0] * self.dims
        for ch in text:
            proj = self.chars.setdefault(ch, [self.rng.gauss(0, 1) for _ in range(self.dims)])
            for i, x in enumerate(proj):
                out[i] += x / max(len(text), 1)
        return out

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self._one(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._one(text)


def f32(v: list[float]) -> list[float]:
    """A vector as real[] keeps it."""
    return [struct.unpack("f", struct.pack("f", x))[0] for x in v]


def similarity(distance: str, q: list[float], v: list[float]) -> float:
    """The score PostgresStore reports for a stored vector v and a query vector q."""
    dot = sum(a * b for a, b in zip(q, v, strict=True))
    if distance == "inner_product":
        return dot
    if distance == "l2":
        return -math.sqrt(sum((a - b) ** 2 for a, b in zip(q, v, strict=True)))
    nq, nv = math.sqrt(sum(a * a for a in q)), math.sqrt(sum(b * b for b in v))
    return dot / (nq * nv) if nq and nv else 0.0


@pytest.fixture(scope="module")
def policies(memgov_dsn: str, tmp_path_factory: pytest.TempPathFactory) -> None:
    deploy(memgov_dsn, Path(__file__).resolve().parents[2] / "policies" / "default.yaml")
    strict = tmp_path_factory.mktemp("lgv") / "strict.yaml"
    strict.write_text(STRICT_POLICY)
    deploy(memgov_dsn, strict, tenant=STRICT)


@pytest.fixture(scope="module")
def writer_dsn(memgov_dsn: str, logins: Logins, policies: None) -> str:
    return login_dsn(memgov_dsn, logins.writer)


@pytest.fixture(scope="module")
def su(memgov_dsn: str) -> Any:
    with psycopg.connect(memgov_dsn, autocommit=True) as conn:
        yield conn


def index(distance: str = "cosine", fields: list[str] | None = None, dims: int = 16) -> dict[str, Any]:
    return {"dims": dims, "embed": Chars(dims), "fields": fields or ["text"], "distance_type": distance}


def memory_id(su: Any, org: str, namespace: str, key: str) -> uuid.UUID:
    return su.execute(
        "SELECT memory_id FROM memgov.long_term_memory_items WHERE org_id = %s AND namespace = %s AND item_key = %s",
        (org, namespace, key),
    ).fetchone()[0]


def vector_rows(su: Any, org: str, namespace: str) -> list[tuple[str, str, int]]:
    return su.execute(
        "SELECT m.item_key, v.path, cardinality(v.vector) FROM memgov.memory_vectors v"
        " JOIN memgov.long_term_memory_items m USING (memory_id, org_id)"
        " WHERE v.org_id = %s AND m.namespace = %s ORDER BY 1, 2",
        (org, namespace),
    ).fetchall()


def writer_conn(writer_dsn: str, org: str | None) -> psycopg.Connection[Any]:
    conn = psycopg.connect(writer_dsn, autocommit=True)
    if org is not None:
        conn.execute("SELECT set_config('memgov.org_id', %s, false)", (org,))
    return conn


DOCS = {
    "apple": {"text": "red apple pie", "tags": ["fruit", "sweet"], "n": 1},
    "car": {"text": "a fast red car", "tags": ["vehicle"], "n": 2},
    "zebra": {"text": "zany zebra Xerxes", "n": 3},
    "dogs": {"text": "something about dogs", "tags": ["pets", "loud", "dogs"], "n": 4},
    "birds": {"text": "text about birds and bees", "n": 5},
    "empty": {"other": "no text field at all", "n": 6},
    "long": {"text": "the longest text document of them all, with many letters", "n": 7},
}


@pytest.mark.parametrize("distance", ["cosine", "inner_product", "l2"])
def test_ranking_matches_a_python_computation_of_each_distance(writer_dsn, su, distance):
    ns = f"rank-{distance}"
    config = index(distance, ["text", "tags[*]"])
    embed = config["embed"]
    with MemgovStore.from_conn_string(writer_dsn, org_id=ORG, index=config) as store:
        for key, value in DOCS.items():
            store.put((ns, "docs"), key, value)
        store.put((ns, "docs"), "skipped", {"text": "red apple pie"}, index=False)
        store.put((f"{ns}x",), "elsewhere", {"text": "red apple pie"})  # not under the prefix
        # one vector per indexed path, as real[] of the index's dims; tags[*] one per element
        assert vector_rows(su, ORG, f"{ns}.docs")[:4] == [
            ("apple", "tags[*].0", 16), ("apple", "tags[*].1", 16), ("apple", "text", 16), ("birds", "text", 16)
        ]  # fmt: skip
        for query in ["red apple", "dogs", "zzz", "the longest text"]:
            q = embed.embed_query(query)
            expected = {}
            for key, value in DOCS.items():
                texts = [value["text"]] if "text" in value else []
                texts += value.get("tags", [])
                if texts:
                    expected[key] = max(similarity(distance, q, f32(embed.embed_query(t))) for t in texts)
            ranked = sorted(expected, key=lambda k: -expected[k])
            results = store.search((ns,), query=query, limit=20)
            assert [r.key for r in results] == ranked, query
            for r in results:
                assert r.namespace == (ns, "docs")
                assert r.score == pytest.approx(expected[r.key], rel=1e-5, abs=1e-6)
                assert r.value == DOCS[r.key]
            page = store.search((ns,), query=query, limit=2, offset=2)
            assert [r.key for r in page] == ranked[2:4]
            filtered = store.search((ns,), query=query, filter={"n": {"$gte": 4}})
            assert [r.key for r in filtered] == [k for k in ranked if DOCS[k]["n"] >= 4]
        # without a query: every item, newest first, no score (index=False ones too)
        plain = store.search((ns,), limit=20)
        assert plain[0].key == "skipped" and all(r.score is None for r in plain) and len(plain) == 8


def test_a_500_dimension_vector_lives_outside_metadata(writer_dsn, su):
    config = index("cosine", ["$"], dims=500)
    with MemgovStore.from_conn_string(writer_dsn, org_id=ORG, index=config) as store:
        store.put(("big",), "k", {"text": "a long memory"})
        store.put(("big",), "k2", {"text": "another one"})
        assert store.search(("big",), query="a long memory")[0].key == "k"
    mid = memory_id(su, ORG, "big", "k")
    assert su.execute(
        "SELECT pg_typeof(v.vector)::text, cardinality(v.vector), m.metadata = '{}'"
        "  FROM memgov.memory_vectors v JOIN memgov.long_term_memory_items m USING (memory_id, org_id)"
        " WHERE v.memory_id = %s",
        (mid,),
    ).fetchall() == [("real[]", 500, True)]


def test_another_tenants_vectors_are_never_ranked_read_or_written(writer_dsn, su):
    config = index("inner_product")
    with (
        MemgovStore.from_conn_string(writer_dsn, org_id=ORG, index=config) as acme,
        MemgovStore.from_conn_string(writer_dsn, org_id=OTHER, index=config) as globex,
    ):
        acme.put(("tenants",), "secret", {"text": "acme launch plan"})
        assert globex.search(("tenants",), query="acme launch plan") == []
        assert globex.search((), query="acme launch plan") == []
        globex.put(("tenants",), "own", {"text": "globex notes"})
        assert [r.key for r in globex.search((), query="acme launch plan")] == ["own"]
        assert [r.key for r in acme.search(("tenants",), query="globex notes")] == ["secret"]
    acme_memory = memory_id(su, ORG, "tenants", "secret")
    q = [1.0] * 16
    with writer_conn(writer_dsn, OTHER) as attacker:
        # reading: the function and the table show the session's tenant only
        found = attacker.execute("SELECT key FROM memgov.store_vector_search('', %s::float8[], 'l2')", (q,)).fetchall()
        assert ("secret",) not in found and ("own",) in found
        assert attacker.execute(
            "SELECT count(*) FROM memgov.memory_vectors WHERE memory_id = %s", (acme_memory,)
        ).fetchone() == (0,)
        # writing: another tenant's memory is not found, and nothing changes
        with unchanged(su, "vectors for another tenant's memory"), refused(su, "MG404"):
            attacker.execute(
                "SELECT memgov.store_vectors(%s, %s, ARRAY['text'], %s::real[])",
                (acme_memory, '{"text":"acme launch plan"}', [[9.0] * 16]),
            )
        # nor by naming the tenant in a row of its own: the function takes no tenant
        attacker.execute("SELECT set_config('memgov.org_id', %s, false)", (ORG + "'--",))
        with unchanged(su, "vectors with a forged tenant"), refused(su, "MG404"):
            attacker.execute(
                "SELECT memgov.store_vectors(%s, %s, ARRAY['text'], %s::real[])",
                (acme_memory, '{"text":"acme launch plan"}', [[9.0] * 16]),
            )
    with writer_conn(writer_dsn, None) as nobody:
        assert nobody.execute("SELECT count(*) FROM memgov.memory_vectors").fetchone() == (0,)
        assert nobody.execute("SELECT count(*) FROM memgov.store_vector_search('', %s::float8[])", (q,)).fetchone() == (
            0,
        )
        with unchanged(su, "vectors without a tenant"), refused(su, "MG404"):
            nobody.execute(
                "SELECT memgov.store_vectors(%s, %s, ARRAY['text'], %s::real[])",
                (acme_memory, '{"text":"acme launch plan"}', [[9.0] * 16]),
            )


def test_a_writer_cannot_attach_vectors_to_a_memory_it_may_not_write(writer_dsn, su):
    describe = lambda ns, key, value: {"category": "preference" if key == "hidden" else "user_fact"}  # noqa: E731
    with MemgovStore.from_conn_string(writer_dsn, org_id=STRICT, index=index(), describe=describe) as store:
        store.put(("strict",), "hidden", {"text": "withheld preference"})
        store.put(("strict",), "open", {"text": "an open fact"})
        # the get rules withhold the preference from searches by vector too
        assert [r.key for r in store.search(("strict",), query="withheld preference")] == ["open"]
    hidden = memory_id(su, STRICT, "strict", "hidden")
    opened = memory_id(su, STRICT, "strict", "open")
    with writer_conn(writer_dsn, STRICT) as writer:
        assert writer.execute(
            "SELECT count(*) FROM memgov.memory_vectors WHERE memory_id = %s", (hidden,)
        ).fetchone() == (0,)
        with unchanged(su, "vectors for a withheld memory"), refused(su, "MG404"):
            writer.execute(
                "SELECT memgov.store_vectors(%s, %s, ARRAY['text'], %s::real[])",
                (hidden, '{"text":"withheld preference"}', [[5.0] * 16]),
            )
        # a text the memory does not hold (nor waits for): no vectors that would rank it falsely
        with unchanged(su, "vectors of another text"), refused(su, "42501"):
            writer.execute(
                "SELECT memgov.store_vectors(%s, %s, ARRAY['text'], %s::real[])",
                (opened, '{"text":"something else"}', [[5.0] * 16]),
            )
        # its own text, but outside the put's transaction: vectors are part of the decided
        # write, so a writer cannot re-rank a memory without a write the policy decides
        with unchanged(su, "vectors without a decided write"), refused(su, "42501"):
            writer.execute(
                "SELECT memgov.store_vectors(%s, %s, ARRAY['text'], %s::real[])",
                (opened, '{"text":"an open fact"}', [[5.0] * 16]),
            )
        # malformed vectors
        malformed = [
            (["text"], [[float("nan")] * 16]),  # not a number
            (["a", "a"], [[1.0] * 16, [2.0] * 16]),  # a path twice
            (["a", "b"], [[1.0] * 16]),  # a path without its vector
        ]
        for paths, vectors in malformed:
            with unchanged(su, "malformed vectors"), refused(su, "22023", "2202E"):
                writer.execute(
                    "SELECT memgov.store_vectors(%s, %s, %s::text[], %s::real[])",
                    (opened, '{"text":"an open fact"}', paths, vectors),
                )
        # and no client writes the table itself
        with unchanged(su, "a direct write"), refused(su, "42501"):
            writer.execute("DELETE FROM memgov.memory_vectors")


def test_held_writes_vectors_rank_nothing_until_approved(writer_dsn, memgov_dsn, logins, su):
    config = index("cosine")
    embed = config["embed"]
    sensitive = {"value": False}
    describe = lambda ns, key, value: {"is_sensitive": sensitive["value"]}  # noqa: E731

    def approve(namespace: str) -> None:
        with writer_conn(login_dsn(memgov_dsn, logins.reviewer), ORG) as reviewer:
            (request_id,) = reviewer.execute(
                "SELECT r.request_id FROM memgov.approval_requests r"
                " JOIN memgov.long_term_memory_items m ON m.memory_id = r.memory_id"
                " WHERE m.namespace = %s AND r.status = 'pending'",
                (namespace,),
            ).fetchone()
            reviewer.execute("SELECT memgov.approve(%s)", (request_id,))

    with MemgovStore.from_conn_string(writer_dsn, org_id=ORG, index=config, describe=describe) as store:
        sensitive["value"] = True
        store.put(("held-new",), "k", {"text": "diagnosis flu"})  # a held INSERT
        assert store.search(("held-new",), query="diagnosis flu") == []
        assert vector_rows(su, ORG, "held-new") == [("k", "text", 16)]  # stored, unreadable
        with writer_conn(writer_dsn, ORG) as writer:
            mid = memory_id(su, ORG, "held-new", "k")
            assert writer.execute(
                "SELECT count(*) FROM memgov.memory_vectors WHERE memory_id = %s", (mid,)
            ).fetchone() == (0,)
        approve("held-new")
        assert [r.key for r in store.search(("held-new",), query="diagnosis flu")] == ["k"]

        sensitive["value"] = False
        store.put(("held-upd",), "k", {"text": "old words"})
        sensitive["value"] = True
        store.put(("held-upd",), "k", {"text": "brand new secret"})  # a held UPDATE
        q = embed.embed_query("brand new secret")
        old = similarity("cosine", q, f32(embed.embed_query("old words")))
        new = similarity("cosine", q, f32(embed.embed_query("brand new secret")))
        (hit,) = store.search(("held-upd",), query="brand new secret")
        assert hit.value == {"text": "old words"} and hit.score == pytest.approx(old, abs=1e-6)
        with writer_conn(writer_dsn, ORG) as writer:  # the held text's vectors: no one's to read
            mid = memory_id(su, ORG, "held-upd", "k")
            assert writer.execute(
                "SELECT count(*) FROM memgov.memory_vectors WHERE memory_id = %s", (mid,)
            ).fetchone() == (1,)
        approve("held-upd")
        (hit,) = store.search(("held-upd",), query="brand new secret")
        assert hit.value == {"text": "brand new secret"} and hit.score == pytest.approx(new, abs=1e-6)


def test_vectors_go_with_their_memory(writer_dsn, memgov_dsn, logins, su):
    subject = lambda ns, key, value: {"subject_id": "gone-subject"}  # noqa: E731
    with MemgovStore.from_conn_string(writer_dsn, org_id=ORG, index=index("l2"), describe=subject) as store:
        store.put(("gone",), "a", {"text": "first"})
        store.put(("gone",), "b", {"text": "second"})
        store.put(("gone",), "c", {"text": "third"})
        assert len(vector_rows(su, ORG, "gone")) == 3
        store.delete(("gone",), "a")  # memgov.forget
        assert [k for k, _, _ in vector_rows(su, ORG, "gone")] == ["b", "c"]
        assert [r.key for r in store.search(("gone",), query="first")] != []
        store.put(("gone",), "b", {"text": "second, changed"})  # the old text's vectors go
        assert su.execute(
            "SELECT count(*) FROM memgov.memory_vectors WHERE memory_id = %s", (memory_id(su, ORG, "gone", "b"),)
        ).fetchone() == (1,)
    with writer_conn(writer_dsn, ORG) as writer:  # an erasure request
        writer.execute("""SELECT memgov.forget_where('{"subject_id": "gone-subject"}'::jsonb)""")
    assert vector_rows(su, ORG, "gone") == []
    # a held INSERT a reviewer denies: its pending row and its vectors go
    describe = lambda ns, key, value: {"is_sensitive": True}  # noqa: E731
    with MemgovStore.from_conn_string(writer_dsn, org_id=ORG, index=index(), describe=describe) as store:
        store.put(("denied",), "k", {"text": "never approved"})
    assert len(vector_rows(su, ORG, "denied")) == 1
    with writer_conn(login_dsn(memgov_dsn, logins.reviewer), ORG) as reviewer:
        (request_id,) = reviewer.execute(
            "SELECT request_id FROM memgov.approval_requests WHERE memory_id = %s AND status = 'pending'",
            (memory_id(su, ORG, "denied", "k"),),
        ).fetchone()
        reviewer.execute("SELECT memgov.deny(%s)", (request_id,))
    assert vector_rows(su, ORG, "denied") == []


def test_the_async_store_ranks_alike(writer_dsn):
    async def run() -> list[str]:
        async with AsyncMemgovStore.from_conn_string(writer_dsn, org_id=ORG, index=index("cosine")) as store:
            await store.aput(("async",), "x", {"text": "xylophone"})
            await store.aput(("async",), "y", {"text": "yellow"})
            return [r.key for r in await store.asearch(("async",), query="xylophone")]

    assert asyncio.run(run()) == ["x", "y"]


def test_the_sweep_takes_an_expired_items_vectors(writer_dsn, su):
    with MemgovStore.from_conn_string(writer_dsn, org_id=ORG, index=index()) as store:
        store.put(("swept",), "old", {"text": "expired memory"})
        store.put(("swept",), "new", {"text": "live memory"})
    with su.transaction():  # let it expire (as the engine: memgov_owner)
        su.execute("SET LOCAL ROLE memgov_owner")
        su.execute(
            "UPDATE memgov.long_term_memory_items"
            " SET retention_policy = 'ttl_7d', created_at = now() - interval '8 days'"
            " WHERE org_id = %s AND namespace = 'swept' AND item_key = 'old'",
            (ORG,),
        )
    with MemgovStore.from_conn_string(writer_dsn, org_id=ORG, index=index()) as store:
        # expired, not swept yet: never returned, its vectors rank nothing
        assert [r.key for r in store.search(("swept",), query="expired memory")] == ["new"]
    su.execute("CALL memgov.run_maintenance()")
    assert vector_rows(su, ORG, "swept") == [("new", "text", 16)]
    assert su.execute(
        "SELECT count(*) FROM memgov.memory_vectors v WHERE NOT EXISTS"
        " (SELECT FROM memgov.long_term_memory_items m WHERE m.memory_id = v.memory_id AND m.org_id = v.org_id)"
    ).fetchone() == (0,)


@pytest.mark.parametrize(
    "function",
    [
        "memgov.store_vectors(uuid, text, text[], real[])",
        "memgov.store_vector_search(text, double precision[], text, jsonb, integer, integer)",
    ],
)
def test_the_vector_functions_pass_plpgsql_check(db_conn, plpgsql_check, function):
    problems = db_conn.execute(
        "SELECT level, message, lineno FROM plpgsql_check_function_tb(%s::regprocedure) WHERE level = 'error'",
        (function,),
    ).fetchall()
    assert problems == []


def test_a_truncate_of_the_memories_takes_the_vectors(writer_dsn, su):
    with MemgovStore.from_conn_string(writer_dsn, org_id=ORG, index=index()) as store:
        store.put(("truncated",), "k", {"text": "to be truncated"})
    with su.transaction():
        su.execute("TRUNCATE memgov.long_term_memory_items")  # a superuser's (memgov_admin's)
        assert su.execute("SELECT count(*) FROM memgov.memory_vectors").fetchone() == (0,)
        raise psycopg.Rollback
    assert vector_rows(su, ORG, "truncated") == [("k", "text", 16)]

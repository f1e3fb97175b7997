"""Semantic search for :mod:`memgov_pg.langgraph`, without pgvector (docs/langgraph.md).

A store built with ``index={"dims", "embed", "fields", "distance_type"}`` (PostgresStore's
index configuration) embeds the indexed fields of each put in the client, with its
``embed`` model, and keeps one vector per indexed path in ``memgov.memory_vectors`` as
``real[]`` (``memgov.store_vectors``, in the put's transaction, for the text it wrote). A
search with ``query`` embeds the query and ranks the tenant's items under the namespace prefix
by the configured distance, computed in SQL (``memgov.store_vector_search``), with the scores
PostgresStore reports: cosine similarity, inner product, or minus the L2 distance.

Fields are LangGraph's paths (``tokenize_path`` / ``get_text_at_path``): ``"$"`` (the default)
is the whole value, ``"a.b"`` a nested field, ``"list[*].c"`` each element apart (a path with
several texts is stored as ``path.0``, ``path.1`` …). A put's ``index=`` overrides the fields,
``index=False`` stores no vector.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from langgraph.store.base import Op, PutOp, SearchOp
from langgraph.store.base.embed import ensure_embeddings, get_text_at_path, tokenize_path

__all__ = [
    "DISTANCES",
    "Vectors",
    "aembed_put",
    "aembed_queries",
    "embed_put",
    "embed_queries",
    "ensure_index",
    "texts_to_embed",
    "vector_search_params",
    "vectors_params",
]

#: The distances a store may rank by (PostgresStore's ``distance_type``), cosine by default.
DISTANCES = ("cosine", "inner_product", "l2")

#: What a put stores: the (path, vector) pairs of its value's indexed texts.
Vectors = list[tuple[str, list[float]]]


def ensure_index(index: Mapping[str, Any] | None) -> tuple[Any, dict[str, Any] | None]:
    """The embeddings and the completed configuration of ``index`` (None: no semantic search),
    as PostgresStore completes it: fields default to ``["$"]``, each tokenized once."""
    if not index:
        return None, None
    config = dict(index)
    if not isinstance(config.get("dims"), int) or config["dims"] < 1 or config["dims"] > 16000:
        raise ValueError(f"index dims must be an integer from 1 to 16000, not {config.get('dims')!r}")
    distance = config.setdefault("distance_type", "cosine")
    if distance not in DISTANCES:
        raise ValueError(f"index distance_type must be one of {DISTANCES}, not {distance!r}")
    fields = config.get("fields") or ["$"]
    if isinstance(fields, str):
        fields = [fields]
    if not isinstance(fields, list):
        raise ValueError(f"Text fields must be a list or a string. Got {fields}")
    config["__tokenized_fields"] = [(p, "$" if p == "$" else tokenize_path(p)) for p in fields]
    return ensure_embeddings(config.get("embed")), config


def texts_to_embed(config: Mapping[str, Any] | None, op: PutOp) -> list[tuple[str, str]]:
    """The (path, text) pairs a put stores vectors of: none without an index, for a delete,
    or with ``index=False``; else each text at the put's fields (its ``index=`` or the store's)."""
    if not config or op.value is None or op.index is False:
        return []
    paths = config["__tokenized_fields"] if op.index is None else [(p, tokenize_path(p)) for p in op.index]
    pairs: list[tuple[str, str]] = []
    seen: set[str] = set()
    for path, tokens in paths:
        texts = get_text_at_path(op.value, tokens)
        for i, text in enumerate(texts):
            name = f"{path}.{i}" if len(texts) > 1 else path
            if name not in seen:
                seen.add(name)
                pairs.append((name, text))
    return pairs


def _checked(vectors: Sequence[Sequence[float]], count: int, dims: int) -> list[list[float]]:
    rows = [[float(x) for x in v] for v in vectors]
    if len(rows) != count or any(len(v) != dims for v in rows):
        raise ValueError(f"the embeddings returned {len(rows)} vectors for {count} texts, not all of {dims} dims")
    return rows


def embed_put(embeddings: Any, config: Mapping[str, Any] | None, op: PutOp) -> Vectors:
    """The vectors of a put (an empty list when it stores none)."""
    pairs = texts_to_embed(config, op)
    if not pairs:
        return []
    assert config is not None
    vectors = embeddings.embed_documents([text for _, text in pairs])
    return list(zip([p for p, _ in pairs], _checked(vectors, len(pairs), config["dims"]), strict=True))


async def aembed_put(embeddings: Any, config: Mapping[str, Any] | None, op: PutOp) -> Vectors:
    """:func:`embed_put` for asyncio."""
    pairs = texts_to_embed(config, op)
    if not pairs:
        return []
    assert config is not None
    vectors = await embeddings.aembed_documents([text for _, text in pairs])
    return list(zip([p for p, _ in pairs], _checked(vectors, len(pairs), config["dims"]), strict=True))


def _queries(config: Mapping[str, Any] | None, ops: Iterable[tuple[int, Op]]) -> list[tuple[int, str]]:
    if not config:
        return []
    return [(idx, op.query) for idx, op in ops if isinstance(op, SearchOp) and op.query]


def embed_queries(
    embeddings: Any, config: Mapping[str, Any] | None, ops: Iterable[tuple[int, Op]]
) -> dict[int, list[float]]:
    """The query vector of each search with a query, by its position (none without an index),
    embedded as PostgresStore does (``embed_documents``), before any transaction opens."""
    asked = _queries(config, ops)
    if not asked:
        return {}
    assert config is not None
    vectors = _checked(embeddings.embed_documents([q for _, q in asked]), len(asked), config["dims"])
    return {idx: v for (idx, _), v in zip(asked, vectors, strict=True)}


async def aembed_queries(
    embeddings: Any, config: Mapping[str, Any] | None, ops: Iterable[tuple[int, Op]]
) -> dict[int, list[float]]:
    """:func:`embed_queries` for asyncio."""
    asked = _queries(config, ops)
    if not asked:
        return {}
    assert config is not None
    vectors = _checked(await embeddings.aembed_documents([q for _, q in asked]), len(asked), config["dims"])
    return {idx: v for (idx, _), v in zip(asked, vectors, strict=True)}


def vectors_params(memory_id: Any, fact_text: str, vectors: Vectors) -> dict[str, Any]:
    """The named query ``store_vectors``'s parameters: a put's vectors, of the text it wrote."""
    return {
        "memory_id": memory_id,
        "fact_text": fact_text,
        "paths": [p for p, _ in vectors],
        "vectors": [v for _, v in vectors],
    }


def vector_search_params(
    search: Mapping[str, Any], vector: Sequence[float], config: Mapping[str, Any]
) -> dict[str, Any]:
    """The named query ``store_vector_search``'s parameters, from a full-text search's
    (prefix, filters, limit, offset) and the query's vector."""
    return {
        "org_id": search["org_id"],
        "prefix": search["prefix"],
        "vector": list(vector),
        "distance": config["distance_type"],
        "filters": search["filters"],
        "limit": search["limit"],
        "offset": search["offset"],
    }

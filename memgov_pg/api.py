"""The client API, described once: each ``memgov.*`` function a writer or a reviewer may call.

One :class:`ClientFunction` per function: its name, arguments and result as PostgreSQL
prints them, the roles granted EXECUTE, the SQLSTATEs it raises, and where the Python
surfaces carry it (the named query of ``sql/queries/``, the method of both engines,
the SQLAlchemy wrapper). A surface that leaves a function out says why in ``omitted``.

The tests hold every other place to this description: tests/db/test_client_api.py reads the
live catalog (a function granted to a writer or reviewer that is not here, or whose
arguments, result or roles differ, fails), and tests/unit/test_client_api.py checks the
engines, the wrappers, ``sql/queries/`` and docs/reference.md's function table.
``memgov doctor``'s allow-lists are built from it (:func:`signatures`).

Not here: the detectors every role may call (``memgov_pg.doctor.PUBLIC_API``) and the
functions only ``memgov_admin`` may call (deploy, sweep, log: the ``memgov`` command's).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

WRITER: Final = "memgov_writer"
REVIEWER: Final = "memgov_reviewer"
ADMIN: Final = "memgov_admin"
ROLES: Final = (WRITER, REVIEWER, ADMIN)

_ALL: Final = (WRITER, REVIEWER, ADMIN)
_REVIEW: Final = (REVIEWER, ADMIN)
_CLIENTS: Final = (WRITER, REVIEWER)


@dataclass(frozen=True)
class Arg:
    """One argument: its name, its type and its default as PostgreSQL prints them."""

    name: str
    type: str
    default: str | None = None

    def __str__(self) -> str:
        return f"{self.name} {self.type}" + ("" if self.default is None else f" DEFAULT {self.default}")


@dataclass(frozen=True)
class ClientFunction:
    """A client function of schema memgov and the surfaces that carry it."""

    name: str
    args: tuple[Arg, ...]
    result: str  # as pg_get_function_result prints it (search_path pg_catalog)
    roles: tuple[str, ...]  # granted EXECUTE, in the order of ROLES
    errors: tuple[str, ...]  # the SQLSTATEs it raises (docs/reference.md, SQLSTATEs)
    does: str
    query: str | None = None  # its named query in sql/queries/
    engine: str | None = None  # the method of MemoryPolicyEngine and SyncMemoryPolicyEngine
    wrapper: str | None = None  # the statement of memgov_pg.sqlalchemy
    omitted: str = ""  # why a surface above is None

    @property
    def signature(self) -> str:
        """``memgov.name(type,type)``: the function's regprocedure, as doctor names it."""
        return f"memgov.{self.name}({','.join(a.type for a in self.args)})"

    @property
    def arguments(self) -> str:
        """The arguments as ``pg_get_function_arguments`` prints them."""
        return ", ".join(str(a) for a in self.args)


def _called(name: str, args: tuple[Arg, ...], result: str, roles: tuple[str, ...], errors: tuple[str, ...],
            does: str, *, engine: str | None = None) -> ClientFunction:  # fmt: skip
    """A function every Python surface carries: its query and wrapper are named after it."""
    return ClientFunction(name, args, result, roles, errors, does, name, engine or name, f"memgov_{name}")


def _plumbing(name: str, args: tuple[Arg, ...], result: str, roles: tuple[str, ...], errors: tuple[str, ...],
              does: str, *, caller: str) -> ClientFunction:  # fmt: skip
    """A function no client calls: PostgreSQL calls it as the client's role, so the role holds it."""
    why = f"no client calls it: {caller} calls it as the client's role, which therefore holds it"
    return ClientFunction(name, args, result, roles, errors, does, omitted=why)


_ITEM: Final = Arg("item", "jsonb")
_OPERATION: Final = Arg("operation", "text", "'remember'::text")
_MEMORY: Final = (Arg("memory_id", "uuid"),)
_REQUEST: Final = (Arg("request_id", "uuid"), Arg("note", "text", "NULL::text"))
_QUARANTINE: Final = (Arg("quarantine_id", "uuid"),)
_ROW: Final = "memgov.long_term_memory_items"
_RECALLED: Final = "SETOF memgov.recalled"
_TENANT: Final = (Arg("p_org_id", "text"),)

_IN_PYTHON: Final = (
    "Python has it already: an engine's tenant is its org_id (for_tenant()), a session's is set_tenant()'s, "
    "and both check a tenant id (check_tenant_id) before they connect"
)
_RLS: Final = "row level security's read test"
_STORE_TTL: Final = "the LangGraph store's (memgov_pg.langgraph: refresh_ttl on reads, its TTL sweeper)"
_SESSION_TENANT: Final = "session_tenant(), inlined into its callers' queries,"
_STORE: Final = (
    "the LangGraph store's (memgov_pg.langgraph with an index, docs/langgraph.md): it embeds in the client "
    "and calls it through its named query; no engine method or statement of its own"
)
_VECTOR_HIT: Final = (
    "TABLE(namespace text, key text, value text, created_at timestamp with time zone, "
    "updated_at timestamp with time zone, score double precision)"
)

CLIENT_FUNCTIONS: Final[tuple[ClientFunction, ...]] = (
    # -- decisions without writing
    _called("evaluate", (_ITEM, _OPERATION), "jsonb", _ALL, ("22023", "42501"),
            "dry run: the decision, nothing written"),
    _called("explain", (_ITEM, _OPERATION), "jsonb", _ALL, ("22023", "42501"),
            "dry run with every rule's outcome"),
    # -- writes
    _called("remember", (_ITEM,), "jsonb", (WRITER, ADMIN), ("22023", "42501", "54000", "23505"),
            "governed INSERT that returns the decision and logs a denial instead of raising"),
    _called("forget", _MEMORY, "jsonb", _ALL, ("MG403", "MG404", "MG409"),
            "governed delete, decided as forget"),
    _called("forget_where", (Arg("filter", "jsonb"), Arg("dry_run", "boolean", "false")), "jsonb", _ALL,
            ("22023", "42501"), "forgets every memory of a tenant that a filter matches (an erasure request)"),
    _called("apply_retention", _MEMORY, "jsonb", _ALL, ("MG404", "MG409"),
            "the sweep's rules applied to one memory now", engine="apply_retention_policy"),
    ClientFunction("refresh_ttl", (Arg("memory_ids", "uuid[]"),), "integer", (WRITER, ADMIN), ("22023", "42501"),
                   "starts the TTL of the session tenant's live, readable memories again",
                   query="store_refresh_ttl", omitted=_STORE_TTL),
    ClientFunction("sweep_expired", (Arg("batch_size", "integer", "1000"),), "integer", (WRITER, ADMIN),
                   ("22023", "42501"), "deletes and logs a batch of the session tenant's expired memories",
                   query="store_sweep_expired", omitted=_STORE_TTL),
    # -- governed reads
    _called("search", (Arg("query", "jsonb", "'{}'::jsonb"),), _RECALLED, _ALL, ("MG403", "22023", "42501", "25006"),
            "the session tenant's memories that match a query, best first"),
    _called("get", _MEMORY, _RECALLED, _ALL, ("MG403", "42501", "25006"),
            "one active memory of the session's tenant, decided as a get"),
    # -- the LangGraph store's semantic search (sql/066_vectors.sql)
    ClientFunction("store_vectors", (*_MEMORY, Arg("fact_text", "text"), Arg("paths", "text[]"),
                                     Arg("vectors", "real[]")), "integer", (WRITER,), ("MG404", "22023", "42501"),
                   "stores the vectors of a store item's text, one per indexed path", query="store_vectors",
                   omitted=_STORE),
    ClientFunction("store_vector_search", (Arg("prefix", "text"), Arg("query", "double precision[]"),
                                           Arg("distance", "text", "'cosine'::text"),
                                           Arg("filters", "jsonb", "'[]'::jsonb"), Arg('"limit"', "integer", "10"),
                                           Arg('"offset"', "integer", "0")), _VECTOR_HIT, _ALL, ("22023",),
                   "the session tenant's store items under a namespace prefix, ranked by vector distance",
                   query="store_vector_search", omitted=_STORE),
    # -- feedback and review
    _called("confirm", _MEMORY, "jsonb", _REVIEW, ("MG404", "MG409"),
            "the user confirms a memory"),
    _called("reject", _MEMORY, "jsonb", _REVIEW, ("MG404", "MG409"),
            "the user rejects a memory"),
    _called("edit", (*_MEMORY, Arg("new_text", "text")), "jsonb", _REVIEW,
            ("MG403", "MG404", "MG409", "22004", "54000"), "the user corrects a memory's text, decided as update"),
    _called("approve", _REQUEST, "jsonb", _REVIEW, ("MG404", "MG409", "42501"),
            "applies a held write, re-decided first"),
    _called("deny", _REQUEST, "jsonb", _REVIEW, ("MG404", "MG409", "42501"),
            "drops a held write"),
    _called("release_quarantine", _QUARANTINE, "jsonb", _REVIEW, ("MG403", "MG404", "MG409", "42501"),
            "applies a quarantined write"),
    _called("purge_quarantine", _QUARANTINE, "jsonb", _REVIEW, ("MG404", "MG409", "42501"),
            "erases a quarantined payload (four eyes)"),
    # -- the session's tenant
    ClientFunction("session_tenant", (), "text", _ALL, (), "the tenant this session acts in, NULL for none",
                   query="session_tenant", omitted=_IN_PYTHON),
    ClientFunction("is_tenant_id", _TENANT, "boolean", _ALL, (), "whether a text is a valid tenant id",
                   omitted=_IN_PYTHON),
    ClientFunction("approval_channel", (), "text", _REVIEW, ("42501",),
                   "the LISTEN channel of the session's tenant's new requests",
                   omitted="LISTEN needs a connection that stays open, and the engines lend a pooled one per "
                           "call: LISTEN on a connection of your own (docs/review.md)"),
    # -- what PostgreSQL calls as the client's role
    _plumbing("binding_on", (), "boolean", _ALL, (),
              "whether any tenant is bound to a role", caller=_SESSION_TENANT),
    _plumbing("login_bound_to", _TENANT, "boolean", _ALL, (),
              "whether the session's login may act in a tenant", caller=_SESSION_TENANT),
    _plumbing("item_from_json", (Arg("p_item", "jsonb"),), _ROW, (WRITER, ADMIN), ("22023",),
              "the row remember inserts", caller="remember, which runs with its caller's rights,"),
    _plumbing("readable", (Arg("p_status", "text"), Arg("p_org_id", "text"), Arg("p_item", _ROW)), "boolean",
              _CLIENTS, (), "whether the reading role may read a row", caller=_RLS),
    _plumbing("reads_governed", _TENANT, "boolean", _CLIENTS, (),
              "whether a tenant's policy has read rules", caller=_RLS),
    _plumbing("get_allowed", (Arg("p_item", _ROW),), "boolean", _CLIENTS, (),
              "whether a get decision allows a row", caller=_RLS),
    _plumbing("written_here", (Arg("p_item", _ROW),), "boolean", _CLIENTS, (),
              "whether this transaction wrote a held row", caller=_RLS),
    _plumbing("read_allowed", (Arg("p_status", "text"), Arg("p_org_id", "text"), Arg("p_read_class", "bigint"),
                               Arg("p_item", _ROW), Arg("p_tenant", "text"), Arg("p_allowed", "bigint[]"),
                               Arg("p_refused", "bigint[]")), "boolean",
              _CLIENTS, (), "whether the reading role may read a row, by its read class first", caller=_RLS),
    _plumbing("read_classes", (Arg("p_allowed", "boolean"),), "bigint[]", _CLIENTS, (),
              "the read classes the reading role may (or may not) read in its tenant", caller=_RLS),
    _plumbing("list_shared", (Arg("p_shared", "memgov.shared_decision[]"),), "void", (WRITER, ADMIN), ("0A000",),
              "lists a bulk statement's memories on the decisions they share", caller="a bulk statement's end"),
)  # fmt: skip

BY_NAME: Final = {f.name: f for f in CLIENT_FUNCTIONS}


def signatures(role: str) -> tuple[str, ...]:
    """The signatures of the client functions granted to ``role``, in the description's order."""
    return tuple(f.signature for f in CLIENT_FUNCTIONS if role in f.roles)


__all__ = ["ADMIN", "BY_NAME", "CLIENT_FUNCTIONS", "REVIEWER", "ROLES", "WRITER", "Arg", "ClientFunction", "signatures"]

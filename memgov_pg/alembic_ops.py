"""memgov policies as Alembic revisions.

``import memgov_pg.alembic_ops`` (a revision written by ``memgov revision`` does it
itself) registers two operations::

    op.deploy_memory_policy(yaml_text_or_path, tenant=None)
    op.undeploy_memory_policy(version, tenant=None)

Online they run on the migration's own connection, inside its transaction: a
later revision that fails rolls the deploy back, and a schema created earlier in
the same run is visible. The SQL goes straight to the psycopg connection (as
:func:`memgov_pg.revision_scripts.execute_sql` does), so ``:`` and ``%`` in the compiled
PL/pgSQL bodies are never taken for bind parameters. Offline (``alembic upgrade
--sql``) they print the statements that do the same when ``psql`` runs them: the
compiler's ``memgov.stage_policy(...)`` call with every body as a literal (the
policy's regexes are then checked by Python, not by PostgreSQL) and the activation,
and ``memgov.undeploy_policy(...)``.

Each deploy is an activation of its own in ``memgov.policy_activations``, even of
the version active already. Undeploy undoes the latest activation of ``version``
that nothing has undone: it re-activates the version that was active right before
it (the same one, for a deploy of the version active already), or leaves the scope
with no active policy, where every write is denied. Downgrading revisions in the
order Alembic does restores, revision by revision, the version each scope had before.
When ``version`` is not the active one nothing changes and PostgreSQL says so in a
NOTICE.

:func:`version_location` is the directory of memgov's own revisions (the branch
``memgov``), for a host project's ``version_locations``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psycopg
from alembic.operations import MigrateOperation, Operations

from .compiler import compile_policy
from .deploy import Deployed, deploy_on, scope_of, undeploy_on
from .errors import MemgovError
from .policy import load_policy
from .resources import alembic_dir, query
from .sql_literals import literal

__all__ = ["DeployMemoryPolicyOp", "UndeployMemoryPolicyOp", "version_location"]


def version_location() -> str:
    """The absolute path of memgov's revision scripts (wheel or editable install)."""
    return str((alembic_dir() / "versions").resolve())


PolicySource = str | Path


@Operations.register_operation("deploy_memory_policy")
class DeployMemoryPolicyOp(MigrateOperation):
    """Deploy (install and activate) a memgov policy in the migration's transaction."""

    def __init__(self, policy: PolicySource, tenant: str | None = None) -> None:
        self.policy = policy
        self.tenant = tenant

    @classmethod
    def deploy_memory_policy(
        cls, operations: Operations, policy: PolicySource, tenant: str | None = None
    ) -> Deployed | None:
        """Deploy a policy: YAML text, or the path of a policy file. Returns what was
        deployed (None offline)."""
        result: Deployed | None = operations.invoke(cls(policy, tenant))
        return result

    def reverse(self) -> MigrateOperation:
        """The operation that undoes this one: undeploy the policy's version in the same tenant."""
        version = load_policy(self.policy).version
        return UndeployMemoryPolicyOp(version, self.tenant)


@Operations.register_operation("undeploy_memory_policy")
class UndeployMemoryPolicyOp(MigrateOperation):
    """Undo the latest activation of a policy version in the migration's transaction."""

    def __init__(self, version: str, tenant: str | None = None) -> None:
        self.version = version
        self.tenant = tenant

    @classmethod
    def undeploy_memory_policy(cls, operations: Operations, version: str, tenant: str | None = None) -> str | None:
        """Re-activate the version active before ``version`` was (or none). Returns the
        version active afterwards (None: none, or offline)."""
        result: str | None = operations.invoke(cls(version, tenant))
        return result


def _offline(operations: Operations) -> bool:
    return bool(operations.get_context().as_sql)


def _driver(operations: Operations) -> psycopg.Connection[Any]:
    driver = operations.get_bind().connection.driver_connection
    if not isinstance(driver, psycopg.Connection):
        raise MemgovError(
            f"memgov's Alembic operations need the psycopg driver (postgresql+psycopg://), not {type(driver).__name__}"
        )
    return driver


def _check_schema(conn: psycopg.Connection[Any]) -> None:
    row = conn.execute(query("memgov_policy_engine_installed")).fetchone()
    if not (row and row[0]):
        raise MemgovError(
            "the memgov schema is not in this database yet: run memgov's revisions first "
            "(`alembic upgrade memgov@head`, or depends_on memgov's head in this revision)"
        )


def _source(policy: PolicySource) -> PolicySource:
    if not isinstance(policy, str | Path):
        raise MemgovError(f"deploy_memory_policy takes YAML text or a path, not {type(policy).__name__}")
    return policy


@Operations.implementation_for(DeployMemoryPolicyOp)
def deploy_memory_policy(operations: Operations, operation: DeployMemoryPolicyOp) -> Deployed | None:
    source = _source(operation.policy)
    if _offline(operations):
        # no database to ask: regexes are checked by Python; psql runs the same statement
        compiled = compile_policy(load_policy(source), scope_of(operation.tenant))
        operations.get_context().impl.static_output(compiled.revision_sql())
        return None
    conn = _driver(operations)
    _check_schema(conn)
    return deploy_on(conn, source, operation.tenant)


@Operations.implementation_for(UndeployMemoryPolicyOp)
def undeploy_memory_policy(operations: Operations, operation: UndeployMemoryPolicyOp) -> str | None:
    if not isinstance(operation.version, str) or not operation.version:
        raise MemgovError("undeploy_memory_policy takes the policy's version (a non-empty string)")
    if _offline(operations):
        org_id = scope_of(operation.tenant)
        statement = f"SELECT memgov.undeploy_policy({literal(org_id)}, {literal(operation.version)});\n"
        operations.get_context().impl.static_output(statement)
        return None
    conn = _driver(operations)
    _check_schema(conn)
    return undeploy_on(conn, operation.version, operation.tenant)

"""memgov-pg: governance of AI agents' long-term memory inside PostgreSQL.

The public API, importable from ``memgov_pg``: the engines (:class:`MemoryPolicyEngine`,
:class:`SyncMemoryPolicyEngine`), their typed results (:class:`Decision`,
:class:`FeedbackResult`, :class:`QuarantineResult`, :class:`Recall` and its
:class:`RecalledMemory` rows, :class:`ReviewResult`, the review queues' :class:`ApprovalRecord`
and :class:`QuarantineRecord`) and the exceptions, all subclasses of :class:`MemgovError`.
Importing the package loads neither SQLAlchemy nor Alembic: ``memgov_pg.sqlalchemy`` and
``memgov_pg.alembic_ops`` do.
"""

from __future__ import annotations

from .decisions import Decision, FeedbackResult, QuarantineResult, Recall, RecalledMemory, ReviewResult
from .engine import Item, MemoryPolicyEngine, SyncMemoryPolicyEngine
from .errors import (
    BusyError,
    ClusterError,
    ConflictError,
    ConnectionFailed,
    EngineError,
    HeldForApprovalError,
    MemgovError,
    NotFoundError,
    NotPermittedError,
    PolicyDeniedError,
    QuarantinedError,
    RecallHeldError,
    RecallQuarantinedError,
    RecallRefusedError,
    SQLError,
    TenantRequiredError,
)
from .policy import PolicyValidationError
from .review import ApprovalRecord, QuarantineRecord
from .tenants import InvalidTenantId

__version__ = "0.2.0.dev0"

__all__ = [
    "ApprovalRecord",
    "BusyError",
    "ClusterError",
    "ConflictError",
    "ConnectionFailed",
    "Decision",
    "EngineError",
    "FeedbackResult",
    "HeldForApprovalError",
    "InvalidTenantId",
    "Item",
    "MemgovError",
    "MemoryPolicyEngine",
    "NotFoundError",
    "NotPermittedError",
    "PolicyDeniedError",
    "PolicyValidationError",
    "QuarantineRecord",
    "QuarantineResult",
    "QuarantinedError",
    "Recall",
    "RecallHeldError",
    "RecallQuarantinedError",
    "RecallRefusedError",
    "RecalledMemory",
    "ReviewResult",
    "SQLError",
    "SyncMemoryPolicyEngine",
    "TenantRequiredError",
    "__version__",
]

"""memgov-pg: governance of AI agents' long-term memory inside PostgreSQL."""

from __future__ import annotations

from .engine import MemoryPolicyEngine, PolicyDeniedError, QuarantinedError, SyncMemoryPolicyEngine
from .errors import ClusterError, ConnectionFailed, MemgovError
from .policy import PolicyValidationError

__version__ = "0.1.0"

__all__ = [
    "ClusterError",
    "ConnectionFailed",
    "MemgovError",
    "MemoryPolicyEngine",
    "PolicyDeniedError",
    "PolicyValidationError",
    "QuarantinedError",
    "SyncMemoryPolicyEngine",
    "__version__",
]

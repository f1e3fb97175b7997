"""memgov-pg: governance of AI agents' long-term memory inside PostgreSQL."""

from __future__ import annotations

from .errors import ClusterError, ConnectionFailed, MemgovError

__version__ = "0.1.0"

__all__ = [
    "ClusterError",
    "ConnectionFailed",
    "MemgovError",
    "__version__",
]

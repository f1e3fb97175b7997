"""Exceptions. ``MemgovError`` and its subclasses are user-facing: the CLI
prints their message as one line and exits non-zero."""

from __future__ import annotations


class MemgovError(Exception):
    """A mistake the user can fix: the message says what to do next."""

    exit_code = 1


class ConnectionFailed(MemgovError):
    """The database could not be reached or refused the login."""


class ClusterError(MemgovError):
    """The embedded or test PostgreSQL cluster could not be set up, started or stopped."""

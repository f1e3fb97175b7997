"""Waiting for a state, never for a length of time: each wait polls a condition until it
holds, and fails only after a deadline far beyond what a slow, loaded machine needs."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

import psycopg

#: seconds a condition may take to hold before the test fails
DEADLINE = 120.0

T = TypeVar("T")


def wait_for(predicate: Callable[[], T], what: str, timeout: float = DEADLINE, interval: float = 0.01) -> T:
    """Poll ``predicate`` until it returns something true, and return that; AssertionError
    naming ``what`` once ``timeout`` seconds have passed without it."""
    deadline = time.monotonic() + timeout
    while True:
        if value := predicate():
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"waited {timeout:.0f} s for {what}")
        time.sleep(interval)


def blockers(conn: psycopg.Connection[Any], pid: int) -> list[int]:
    """The backends that backend ``pid`` waits for, for a lock they hold or are queued for
    ahead of it (``pg_blocking_pids``); empty when it waits for no lock."""
    row = conn.execute("SELECT pg_blocking_pids(%s)", (pid,)).fetchone()
    return list(row[0]) if row and row[0] else []


def blocked_by(conn: psycopg.Connection[Any], pid: int, blocker: int | None = None) -> bool:
    """Whether backend ``pid`` waits for a lock (``blocker``'s, when given)."""
    found = blockers(conn, pid)
    return bool(found) and (blocker is None or blocker in found)


def join(thread: threading.Thread, what: str, timeout: float = DEADLINE) -> None:
    """Join ``thread``; AssertionError naming ``what`` when it is still running after ``timeout``."""
    thread.join(timeout)
    assert not thread.is_alive(), f"{what} did not end within {timeout:.0f} s"

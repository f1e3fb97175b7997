"""TTL for the governed LangGraph store (:mod:`memgov_pg.langgraph`, docs/langgraph.md).

A put's ``ttl`` (minutes, as LangGraph gives it) becomes the memory's ``ttl_minutes``, whole
minutes rounded up; the engine, not the store, sets ``expires_at`` from it at each write and
each refresh, never past the memory's retention policy. A read with ``refresh_ttl`` calls
``memgov.refresh_ttl`` on what it returned; the sweeper calls ``memgov.sweep_expired``, which
deletes the store's tenant's expired memories as the sweep would and logs them. memgov never
returns an expired memory, swept or not: ``omit_expired`` is accepted and always holds.

The sweeper is a thread (:class:`SyncTTL`) or a task (:class:`AsyncTTL`) that runs as the
store's own login: ``memgov_writer`` is enough.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import math
import threading
from collections.abc import Mapping
from contextlib import AbstractAsyncContextManager, AbstractContextManager
from typing import Any, cast

import psycopg
from langgraph.store.base import TTLConfig

from .resources import query

__all__ = ["SWEEP_BATCH", "TTL_KEYS", "AsyncTTL", "SyncTTL", "check_ttl_config", "ttl_minutes"]

logger = logging.getLogger(__name__)

#: The keys of LangGraph's ``TTLConfig``.
TTL_KEYS = frozenset({"default_ttl", "refresh_on_read", "sweep_interval_minutes", "omit_expired"})
#: How many expired memories one ``memgov.sweep_expired`` call deletes (one transaction).
SWEEP_BATCH = 1000
#: The sweeper's interval when neither the call nor the config names one, as PostgresStore's.
DEFAULT_SWEEP_MINUTES = 5.0
_MAX_MINUTES = 2**31 - 1


def ttl_minutes(ttl: float | None) -> int | None:
    """A ttl in minutes as memgov keeps it: whole minutes, rounded up (never shorter than
    asked); ``None`` for none. ``ValueError`` for anything but a positive finite number."""
    if ttl is None:
        return None
    if isinstance(ttl, bool) or not isinstance(ttl, int | float) or not math.isfinite(ttl) or ttl <= 0:
        raise ValueError(f"a ttl is a positive number of minutes, got {ttl!r}")
    minutes = math.ceil(ttl)
    if minutes > _MAX_MINUTES:
        raise ValueError(f"a ttl is at most {_MAX_MINUTES} minutes, got {ttl!r}")
    return minutes


def check_ttl_config(ttl: Mapping[str, Any] | None) -> TTLConfig | None:
    """LangGraph's ``TTLConfig``, checked; a dict of its own (tests change it in place)."""
    if ttl is None:
        return None
    if not isinstance(ttl, Mapping):
        raise TypeError(f"ttl= is a TTLConfig mapping, got {type(ttl).__name__}")
    unknown = sorted(set(ttl) - TTL_KEYS)
    if unknown:
        raise ValueError(f"unknown TTLConfig keys {unknown}: the keys are {sorted(TTL_KEYS)}")
    ttl_minutes(ttl.get("default_ttl"))
    interval = ttl.get("sweep_interval_minutes")
    if interval is not None and (isinstance(interval, bool) or not isinstance(interval, int | float) or interval <= 0):
        raise ValueError(f"sweep_interval_minutes is a positive number of minutes, got {interval!r}")
    return cast(TTLConfig, dict(ttl))


def _interval(config: TTLConfig | None, given: float | None) -> float:
    """The sweeper's interval in seconds."""
    minutes = given or (config or {}).get("sweep_interval_minutes") or DEFAULT_SWEEP_MINUTES
    if minutes <= 0:
        raise ValueError(f"sweep_interval_minutes is a positive number of minutes, got {minutes!r}")
    return float(minutes) * 60


class SyncTTL:
    """The sweeper of :class:`~memgov_pg.langgraph.MemgovStore`: a daemon thread."""

    ttl_config: TTLConfig | None
    _ttl_sweeper_thread: threading.Thread | None = None
    _ttl_stop_event: threading.Event | None = None

    def _transaction(self) -> AbstractContextManager[psycopg.Cursor[Any]]:
        raise NotImplementedError  # the store's

    def sweep_ttl(self) -> int:
        """Delete the store's tenant's expired memories (``memgov.sweep_expired``, a batch a
        transaction, logged as the sweep logs); returns how many."""
        total = 0
        while True:
            with self._transaction() as cur:
                row = cur.execute(query("store_sweep_expired"), {"batch_size": SWEEP_BATCH}).fetchone()
            deleted = int(row["deleted"]) if row else 0
            total += deleted
            if deleted < SWEEP_BATCH:
                return total

    def start_ttl_sweeper(self, sweep_interval_minutes: float | None = None) -> concurrent.futures.Future[None]:
        """Sweep every ``sweep_interval_minutes`` (else the config's, else 5) in a daemon thread
        until :meth:`stop_ttl_sweeper`; the future is done when it stops (cancel it to stop).
        Without a ttl config there is nothing to sweep: a done future."""
        future: concurrent.futures.Future[None] = concurrent.futures.Future()
        if not self.ttl_config:
            future.set_result(None)
            return future
        thread = self._ttl_sweeper_thread
        running = self._ttl_stop_event
        if thread is not None and thread.is_alive() and running is not None:
            future.add_done_callback(lambda f: running.set() if f.cancelled() else None)
            return future
        seconds = _interval(self.ttl_config, sweep_interval_minutes)
        stop = self._ttl_stop_event = threading.Event()

        def loop() -> None:
            try:
                while not stop.wait(seconds):
                    try:
                        swept = self.sweep_ttl()
                        if swept:
                            logger.info("memgov store swept %d expired items", swept)
                    except Exception:  # a failed sweep is retried at the next interval
                        logger.exception("memgov store TTL sweep failed")
                if not future.done():
                    future.set_result(None)
            except BaseException as exc:  # pragma: no cover - the loop itself catches
                if not future.done():
                    future.set_exception(exc)

        self._ttl_sweeper_thread = threading.Thread(target=loop, daemon=True, name="memgov-ttl-sweeper")
        self._ttl_sweeper_thread.start()
        future.add_done_callback(lambda f: stop.set() if f.cancelled() else None)
        return future

    def stop_ttl_sweeper(self, timeout: float | None = None) -> bool:
        """Stop the sweeper; whether it stopped within ``timeout`` seconds (None: waits)."""
        thread = self._ttl_sweeper_thread
        if thread is None or not thread.is_alive():
            return True
        if self._ttl_stop_event is not None:
            self._ttl_stop_event.set()
        thread.join(timeout)
        if thread.is_alive():
            logger.warning("memgov store TTL sweeper did not stop within %s s", timeout)
            return False
        self._ttl_sweeper_thread = None
        return True


class AsyncTTL:
    """The sweeper of :class:`~memgov_pg.langgraph.AsyncMemgovStore`: an asyncio task."""

    ttl_config: TTLConfig | None
    _ttl_sweeper_task: asyncio.Task[None] | None = None
    _ttl_stop: asyncio.Event | None = None

    def _transaction(self) -> AbstractAsyncContextManager[psycopg.AsyncCursor[Any]]:
        raise NotImplementedError  # the store's

    async def sweep_ttl(self) -> int:
        """Like :meth:`SyncTTL.sweep_ttl`."""
        total = 0
        while True:
            async with self._transaction() as cur:
                await cur.execute(query("store_sweep_expired"), {"batch_size": SWEEP_BATCH})
                row = await cur.fetchone()
            deleted = int(row["deleted"]) if row else 0
            total += deleted
            if deleted < SWEEP_BATCH:
                return total

    async def start_ttl_sweeper(self, sweep_interval_minutes: float | None = None) -> asyncio.Task[None]:
        """Like :meth:`SyncTTL.start_ttl_sweeper`, as a task on the running loop."""
        if not self.ttl_config:
            return asyncio.create_task(asyncio.sleep(0))
        if self._ttl_sweeper_task is not None and not self._ttl_sweeper_task.done():
            return self._ttl_sweeper_task
        seconds = _interval(self.ttl_config, sweep_interval_minutes)
        stop = self._ttl_stop = asyncio.Event()

        async def loop() -> None:
            while not stop.is_set():
                try:
                    await asyncio.wait_for(stop.wait(), timeout=seconds)
                    return
                except TimeoutError:
                    pass
                try:
                    swept = await self.sweep_ttl()
                    if swept:
                        logger.info("memgov store swept %d expired items", swept)
                except asyncio.CancelledError:
                    return
                except Exception:  # a failed sweep is retried at the next interval
                    logger.exception("memgov store TTL sweep failed")

        self._ttl_sweeper_task = asyncio.create_task(loop(), name="memgov-ttl-sweeper")
        return self._ttl_sweeper_task

    async def stop_ttl_sweeper(self, timeout: float | None = None) -> bool:
        """Like :meth:`SyncTTL.stop_ttl_sweeper`."""
        task = self._ttl_sweeper_task
        if task is None or task.done():
            return True
        if self._ttl_stop is not None:
            self._ttl_stop.set()
        try:
            await asyncio.wait_for(asyncio.shield(task), timeout=timeout)
        except TimeoutError:
            logger.warning("memgov store TTL sweeper did not stop within %s s", timeout)
            return False
        self._ttl_sweeper_task = None
        return True

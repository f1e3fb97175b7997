"""Concurrent calls to an async store, collected into one batch per loop tick (docs/langgraph.md).

LangGraph's ``AsyncBatchedBaseStore`` queues the operations that concurrent tasks ask for
(``aget``, ``aput``, ``asearch``, ``adelete``, ``alist_namespaces``) and runs all those of one
loop tick as one ``abatch``. Its runner does two things a governed store may not: it merges the
puts of one key into the last (each put is a decision of its own here, with its own log row),
and an error of the batch reaches every caller in it. :class:`BatchedStore` keeps its queue and
its methods and runs each batch itself:

- reads (gets, searches, listings) share one transaction; identical reads of one batch are
  read once and their callers share the result (one get decision for the item). When the
  shared transaction fails, each read runs again alone, so an error reaches only its caller;
- each put and delete runs alone, in its own transaction, in the order the calls came, and
  its outcome (``None`` or its error) reaches only its caller. Over a pool, the puts of
  different items run on up to ``max_size`` connections at once; those of one item run one
  after another, in order.

A batch's reads run before its puts, as ``abatch`` orders them. A task waits for each call,
so a caller has at most one call in a batch, and its calls run in the order it made them.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Iterable, Sequence
from typing import Any

from langgraph.store.base import GetOp, ListNamespacesOp, Op, PutOp, Result, SearchOp, validate_op_namespace
from langgraph.store.base.batch import AsyncBatchedBaseStore

__all__ = ["BatchedStore"]

Call = tuple["asyncio.Future[Any]", Op]
READS = (GetOp, SearchOp, ListNamespacesOp)


def _settle(futures: Iterable[asyncio.Future[Any]], result: Any = None, error: BaseException | None = None) -> None:
    """Gives each future still waiting its result, or its error."""
    for fut in futures:
        if not fut.done():
            if error is None:
                fut.set_result(result)
            else:
                fut.set_exception(error)


def _dedupe(reads: Sequence[Call]) -> list[tuple[Op, list[asyncio.Future[Any]]]]:
    """The distinct reads, in order, each with the futures of the calls that asked for it."""
    unique: list[tuple[Op, list[asyncio.Future[Any]]]] = []
    seen: dict[Op, int] = {}
    for fut, op in reads:
        try:
            ix = seen.setdefault(op, len(unique))
        except TypeError:  # a search with a filter holds a dict: compared, not hashed
            ix = next((i for i, (other, _) in enumerate(unique) if other == op), len(unique))
        if ix == len(unique):
            unique.append((op, []))
        unique[ix][1].append(fut)
    return unique


class BatchedStore(AsyncBatchedBaseStore):
    """``AsyncBatchedBaseStore`` with a runner that keeps each put apart and each error to its
    caller (see the module). A subclass gives :meth:`_read_batch` and :meth:`_put`."""

    async def _read_batch(self, ops: Sequence[Op]) -> list[Result]:
        """The results of reads ``ops``, in one transaction; raises if any fails."""
        raise NotImplementedError

    async def _put(self, op: PutOp) -> None:
        """One put or delete, in its own transaction; raises what its decision says."""
        raise NotImplementedError

    def _put_workers(self) -> int:
        """How many puts of different items may run at once (1: one after another)."""
        return 1

    def _ensure_task(self) -> None:
        if self._task is None or self._task.done():
            self._task = self._loop.create_task(_run(self._aqueue, weakref.ref(self)))

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """:meth:`abatch` on the store's event loop, from another thread."""
        try:
            if asyncio.get_running_loop() is self._loop:
                raise asyncio.InvalidStateError(
                    f"synchronous calls to {type(self).__name__} are for other threads: use the a-methods"
                    " (aget, aput ...)"
                )
        except RuntimeError:
            pass
        return asyncio.run_coroutine_threadsafe(self.abatch(ops), self._loop).result()

    async def _run_calls(self, calls: Sequence[Call]) -> None:
        """Runs one batch of calls: their reads together, then each put alone."""
        reads: list[Call] = []
        puts: list[Call] = []
        for fut, op in calls:
            try:
                validate_op_namespace(op)
                if not isinstance(op, (PutOp, *READS)):
                    raise ValueError(f"unknown operation type: {type(op).__name__}")
            except Exception as exc:
                _settle([fut], error=exc)
                continue
            (puts if isinstance(op, PutOp) else reads).append((fut, op))
        if reads:
            await self._run_reads(_dedupe(reads))
        if puts:
            await self._run_puts(puts)

    async def _run_reads(self, unique: list[tuple[Op, list[asyncio.Future[Any]]]]) -> None:
        unique = [(op, futs) for op, futs in unique if not all(f.done() for f in futs)]
        if not unique:
            return
        try:
            results = await self._read_batch([op for op, _ in unique])
        except Exception as exc:
            if len(unique) == 1:
                _settle(unique[0][1], error=exc)
                return
            for op, futs in unique:  # one by one, so that an error reaches only its callers
                try:
                    (result,) = await self._read_batch([op])
                except Exception as exc:
                    _settle(futs, error=exc)
                else:
                    _settle(futs, result)
            return
        for (_, futs), result in zip(unique, results, strict=True):
            _settle(futs, result)

    async def _put_one(self, fut: asyncio.Future[Any], op: PutOp) -> None:
        if fut.done():  # its caller was cancelled before it ran
            return
        try:
            await self._put(op)
        except Exception as exc:
            _settle([fut], error=exc)
        else:
            _settle([fut])

    async def _run_puts(self, puts: Sequence[Call]) -> None:
        workers = self._put_workers()
        if workers <= 1:
            for fut, op in puts:
                assert isinstance(op, PutOp)
                await self._put_one(fut, op)
            return
        chains: dict[tuple[tuple[str, ...], str], list[Call]] = {}
        for fut, op in puts:
            assert isinstance(op, PutOp)
            chains.setdefault((op.namespace, op.key), []).append((fut, op))
        pending = iter(list(chains.values()))

        async def worker() -> None:  # takes the next item's puts and runs them in order
            for chain in pending:
                for fut, op in chain:
                    assert isinstance(op, PutOp)
                    await self._put_one(fut, op)

        await asyncio.gather(*(worker() for _ in range(min(workers, len(chains)))))


async def _run(queue: asyncio.Queue[Call], ref: weakref.ReferenceType[BatchedStore]) -> None:
    """The store's runner: takes every call queued by the time it wakes, runs them as one batch."""
    while True:
        calls = [await queue.get()]
        try:
            while True:
                calls.append(queue.get_nowait())
        except asyncio.QueueEmpty:
            pass
        calls = [(fut, op) for fut, op in calls if not fut.done()]
        store = ref()
        if store is None:
            _settle((fut for fut, _ in calls), error=RuntimeError("the store is gone"))
            return
        try:
            await store._run_calls(calls)
        except asyncio.CancelledError:
            for fut, _ in calls:
                fut.cancel()
            raise
        except Exception as exc:
            _settle((fut for fut, _ in calls), error=exc)
        finally:
            del store

"""What a handler gets: ``JobContext`` (thread worker) and
``AsyncJobContext`` (asyncio worker), which share everything but the
waiting and the database calls."""

from __future__ import annotations

import asyncio
import threading
from typing import Any, Callable, ContextManager, Generic, Optional, Tuple, TypeVar

import psycopg

from . import protocol
from .jobs import Job, JobSpec

A = TypeVar("A")


class BaseContext(Generic[A]):
    """The job, its args and how the handler learns that it should stop."""

    def __init__(self, job: Job, worker_id: str, stopping: Callable[[], bool],
                 on_progress: Callable[[], None]) -> None:
        self.job = job
        self.worker_id = worker_id
        # The payload as the handler's args type (the payload itself without one).
        self.args: A = job.payload
        # Why the handler should stop: "cancelled", "lease lost" or "released".
        self.stop_reason: Optional[str] = None
        self._stopping = stopping
        self._progress: Tuple[int, Any] = (0, None)  # (reports so far, the last one): one tuple, swapped whole
        self._on_progress = on_progress

    @property
    def payload(self) -> Any:
        return self.job.payload

    @property
    def stopping(self) -> bool:
        """The worker is shutting down: a long handler may wrap up early."""
        return self._stopping()

    @property
    def lease_lost(self) -> bool:
        """The job is no longer this handler's (cancelled, reaped, picked up
        again, or released at shutdown): stop, its outcome will be dropped."""
        return self.stop_reason is not None

    @property
    def cancelled(self) -> bool:
        """An operator cancelled the job (pqrun.cancel) while it ran."""
        return self.stop_reason == "cancelled"

    def progress(self, value: Any) -> None:
        """Report how far the job got: a JSON value of at most 8 kB, stored in
        ``pqrun.jobs.progress`` within about a second (only the latest report
        counts) and kept after the job ends. A retry or a released job's next
        attempt finds it in ``ctx.job.progress``, to resume from there."""
        self._progress = (self._progress[0] + 1, value)
        self._on_progress()

    def heartbeat(self) -> None:
        """Renew the lease now rather than at the next heartbeat (the worker
        heartbeats on its own; at most one a second, as progress reports)."""
        self._progress = (self._progress[0] + 1, self._progress[1])
        self._on_progress()

    def _lose(self, reason: str) -> None:
        self.stop_reason = self.stop_reason or reason
        self._stopped()

    def _stopped(self) -> None:
        raise NotImplementedError


class JobContext(BaseContext[A]):
    """The context of a handler of the thread worker (``Worker``)."""

    def __init__(self, job: Job, worker_id: str, conn: psycopg.Connection[Any], stopping: Callable[[], bool],
                 on_progress: Callable[[], None]) -> None:
        super().__init__(job, worker_id, stopping, on_progress)
        self._conn = conn
        self._tx: Optional[ContextManager[Any]] = None
        self._stop = threading.Event()

    def _stopped(self) -> None:
        self._stop.set()

    def wait(self, seconds: float) -> bool:
        """Sleep up to ``seconds``; True, at once, when the handler should stop (``lease_lost``)."""
        return self._stop.wait(seconds)

    @property
    def conn(self) -> psycopg.Connection[Any]:
        """A connection inside the job's transaction, which commits together
        with mark_done (and rolls back if the handler raises or the job is
        lost). Opened on first use: do the database work at the end of a
        long handler."""
        if self._tx is None:
            tx = self._conn.transaction()
            tx.__enter__()
            self._tx = tx
        return self._conn

    def enqueue(self, job_type: str, payload: Any = None, **options: Any) -> int:
        """Enqueue a follow-up job in the job's transaction: it exists iff
        this job ends DONE. Options as ``pqrun.enqueue``'s."""
        return protocol.execute(self.conn, protocol.enqueue(JobSpec.of({"job_type": job_type, "payload": payload,
                                                                         **options})))

    def _end(self, exc: Optional[BaseException] = None) -> None:
        """Commit the job's transaction, or roll it back when exc is given."""
        tx, self._tx = self._tx, None
        if tx is not None:
            tx.__exit__(type(exc) if exc else None, exc, exc.__traceback__ if exc else None)


class AsyncJobContext(BaseContext[A]):
    """The context of a handler of the asyncio worker (``AsyncWorker``)."""

    def __init__(self, job: Job, worker_id: str, conn: psycopg.AsyncConnection[Any],
                 stopping: Callable[[], bool], on_progress: Callable[[], None]) -> None:
        super().__init__(job, worker_id, stopping, on_progress)
        self._conn = conn
        self._tx: Any = None
        self._stop = asyncio.Event()

    def _stopped(self) -> None:
        self._stop.set()

    async def wait(self, seconds: float) -> bool:
        """Sleep up to ``seconds``; True, at once, when the handler should stop (``lease_lost``)."""
        try:
            await asyncio.wait_for(self._stop.wait(), seconds)
        except asyncio.TimeoutError:
            pass
        return self._stop.is_set()

    async def connection(self) -> psycopg.AsyncConnection[Any]:
        """A connection inside the job's transaction, which commits together
        with mark_done (and rolls back if the handler raises or the job is
        lost). Opened on first call."""
        if self._tx is None:
            tx = self._conn.transaction()
            await tx.__aenter__()
            self._tx = tx
        return self._conn

    async def enqueue(self, job_type: str, payload: Any = None, **options: Any) -> int:
        """Enqueue a follow-up job in the job's transaction: it exists iff
        this job ends DONE. Options as ``pqrun.aio.enqueue``'s."""
        conn = await self.connection()
        return await protocol.execute_async(conn, protocol.enqueue(JobSpec.of({"job_type": job_type,
                                                                                "payload": payload, **options})))

    async def _end(self, exc: Optional[BaseException] = None) -> None:
        """Commit the job's transaction, or roll it back when exc is given."""
        tx, self._tx = self._tx, None
        if tx is not None:
            await tx.__aexit__(type(exc) if exc else None, exc, exc.__traceback__ if exc else None)

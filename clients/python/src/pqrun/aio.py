"""The asyncio API: producer calls on an ``AsyncConnection`` (the same as
``pqrun.producer``'s, awaited) and ``AsyncWorker``."""

from __future__ import annotations

from typing import Any, List, Mapping, Optional, Sequence, Union

import psycopg

from . import protocol
from .async_worker import AsyncJobContext, AsyncWorker
from .jobs import Delay, Job, JobSpec

__all__ = ["AsyncJobContext", "AsyncWorker", "cancel", "enqueue", "enqueue_batch", "get_job", "retry"]


async def enqueue(conn: psycopg.AsyncConnection[Any], job_type: str, payload: Any = None, *,
                  priority: Optional[int] = None, run_after: Optional[Delay] = None,
                  max_attempts: Optional[int] = None, timeout_seconds: Optional[int] = None,
                  dedupe_key: Optional[str] = None, queue: Optional[str] = None,
                  depends_on: Optional[Sequence[int]] = None, fifo_key: Optional[str] = None,
                  concurrency_key: Optional[str] = None, rate_weight: Optional[int] = None) -> int:
    """``pqrun.enqueue`` on an AsyncConnection (see ``pqrun.enqueue``)."""
    spec = JobSpec(job_type, payload, priority=priority, run_after=run_after, max_attempts=max_attempts,
                   timeout_seconds=timeout_seconds, dedupe_key=dedupe_key, queue=queue, depends_on=depends_on,
                   fifo_key=fifo_key, concurrency_key=concurrency_key, rate_weight=rate_weight)
    return await protocol.execute_async(conn, protocol.enqueue(spec))


async def enqueue_batch(conn: psycopg.AsyncConnection[Any],
                        jobs: Sequence[Union[JobSpec, Mapping[str, Any]]]) -> List[int]:
    """``pqrun.enqueue_batch`` on an AsyncConnection (see ``pqrun.enqueue_batch``)."""
    specs = [JobSpec.of(j) for j in jobs]
    return await protocol.execute_async(conn, protocol.enqueue_batch(specs)) if specs else []


async def cancel(conn: psycopg.AsyncConnection[Any], job_id: int, reason: Optional[str] = None, *,
                 queue: Optional[str] = None) -> bool:
    """``pqrun.cancel`` on an AsyncConnection."""
    return await protocol.execute_async(conn, protocol.cancel(job_id, reason, queue))


async def retry(conn: psycopg.AsyncConnection[Any], job_id: int, *, queue: Optional[str] = None) -> bool:
    """``pqrun.retry`` on an AsyncConnection."""
    return await protocol.execute_async(conn, protocol.retry(job_id, queue))


async def get_job(conn: psycopg.AsyncConnection[Any], job_id: int) -> Optional[Job]:
    """The job's row in ``pqrun.jobs``, or None."""
    return await protocol.execute_async(conn, protocol.get_job(job_id))

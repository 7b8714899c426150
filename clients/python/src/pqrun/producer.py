"""Producer calls on the caller's connection.

Each function runs one pqrun call on ``conn``, inside whatever transaction
is open on it: an enqueue commits or rolls back with the caller's own
writes. On an autocommit connection outside a transaction block, it
commits at once. ``pqrun.aio`` has the same functions for an
``AsyncConnection``.
"""

from __future__ import annotations

from typing import Any, List, Mapping, Optional, Sequence, Union

import psycopg

from . import protocol
from .jobs import Delay, Job, JobSpec


def enqueue(conn: psycopg.Connection[Any], job_type: str, payload: Any = None, *, priority: Optional[int] = None,
            run_after: Optional[Delay] = None, max_attempts: Optional[int] = None,
            timeout_seconds: Optional[int] = None, dedupe_key: Optional[str] = None, queue: Optional[str] = None,
            depends_on: Optional[Sequence[int]] = None, fifo_key: Optional[str] = None,
            concurrency_key: Optional[str] = None, rate_weight: Optional[int] = None) -> int:
    """``pqrun.enqueue``: the new job's id; with a ``dedupe_key`` that an
    unfinished job holds, that job's id (nothing is created). ``payload`` is
    any JSON value, or a dataclass (an args object). Options left None take
    pqrun's defaults; ``run_after`` is a datetime or a delay (timedelta)."""
    spec = JobSpec(job_type, payload, priority=priority, run_after=run_after, max_attempts=max_attempts,
                   timeout_seconds=timeout_seconds, dedupe_key=dedupe_key, queue=queue, depends_on=depends_on,
                   fifo_key=fifo_key, concurrency_key=concurrency_key, rate_weight=rate_weight)
    return protocol.execute(conn, protocol.enqueue(spec))


def enqueue_batch(conn: psycopg.Connection[Any], jobs: Sequence[Union[JobSpec, Mapping[str, Any]]]) -> List[int]:
    """``pqrun.enqueue_batch``: one statement for many jobs (JobSpecs, or
    mappings keyed by enqueue's argument names); one id per job, in order."""
    specs = [JobSpec.of(j) for j in jobs]
    return protocol.execute(conn, protocol.enqueue_batch(specs)) if specs else []


def cancel(conn: psycopg.Connection[Any], job_id: int, reason: Optional[str] = None, *,
           queue: Optional[str] = None) -> bool:
    """``pqrun.cancel``: BLOCKED, READY or RUNNING -> CANCELLED (and its
    dependents); False when the job had already finished."""
    return protocol.execute(conn, protocol.cancel(job_id, reason, queue))


def retry(conn: psycopg.Connection[Any], job_id: int, *, queue: Optional[str] = None) -> bool:
    """``pqrun.retry``: FAILED or CANCELLED -> READY now, attempts kept;
    False otherwise. ``DuplicateJob`` while another unfinished job holds its
    dedupe_key."""
    return protocol.execute(conn, protocol.retry(job_id, queue))


def get_job(conn: psycopg.Connection[Any], job_id: int) -> Optional[Job]:
    """The job's row in ``pqrun.jobs``, or None."""
    return protocol.execute(conn, protocol.get_job(job_id))

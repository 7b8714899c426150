"""Helpers of the tests: waiting for a condition, reading the database,
running a worker for the length of a block."""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any, AsyncIterator, Awaitable, Callable, Iterator, List

import psycopg

import pqrun


def wait_for(predicate: Callable[[], Any], timeout: float = 10.0, what: str = "the condition") -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {timeout}s for {what}")
        time.sleep(0.05)


def scalar(conn: psycopg.Connection[Any], query: str, *params: Any) -> Any:
    row = conn.execute(query, params).fetchone()
    return None if row is None else row[0]


def rows(conn: psycopg.Connection[Any], query: str, *params: Any) -> List[Any]:
    return conn.execute(query, params).fetchall()


def status(conn: psycopg.Connection[Any], job_id: int) -> str:
    return scalar(conn, "SELECT status::text FROM pqrun.jobs WHERE id = %s", job_id)


@contextlib.contextmanager
def running(worker: pqrun.Worker) -> Iterator[pqrun.Worker]:
    """The worker serves for the length of the block, then shuts down."""
    worker.start()
    try:
        yield worker
    finally:
        worker.shutdown()


def waiting_pickups(conn: psycopg.Connection[Any], application_name: str) -> int:
    """Pickups of the connections named so that are running now (waiting, when idle)."""
    return scalar(conn, "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                        " AND application_name = %s AND state = 'active' AND query LIKE '%%pqrun.pickup(%%'",
                  application_name)


@contextlib.asynccontextmanager
async def running_async(worker: pqrun.AsyncWorker) -> AsyncIterator[pqrun.AsyncWorker]:
    """The asyncio worker serves for the length of the block, then shuts down."""
    await worker.start()
    try:
        yield worker
    finally:
        await worker.shutdown()


async def await_for(predicate: Callable[[], Awaitable[Any]], timeout: float = 10.0, what: str = "the condition") -> Any:
    """``wait_for`` inside an event loop (its checks must not block the loop)."""
    deadline = time.monotonic() + timeout
    while True:
        value = await predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {timeout}s for {what}")
        await asyncio.sleep(0.05)


async def ascalar(conn: psycopg.AsyncConnection[Any], query: str, *params: Any) -> Any:
    cur = await conn.execute(query, params)
    row = await cur.fetchone()
    return None if row is None else row[0]

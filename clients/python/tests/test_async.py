"""The asyncio API: producer calls on an AsyncConnection, and the
AsyncWorker (typed args, slots, finish-and-claim, heartbeats with
progress, a cancel reaching the handler, snooze, errors, handler chains, a
shutdown that releases and cancels what outlives its grace period)."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import time
from typing import Any, Awaitable, Callable, Dict, List, TypeVar

import psycopg
import pytest
from helpers import ascalar, await_for, running_async

import pqrun
import pqrun.aio

T = TypeVar("T")


def run(dsn: str, body: Callable[[psycopg.AsyncConnection[Any]], Awaitable[T]]) -> T:
    """Runs ``body(aconn)`` in a new event loop, on an autocommit AsyncConnection."""
    async def main() -> T:
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as aconn:
            return await body(aconn)
    return asyncio.run(main())


def worker(dsn: str, registry: pqrun.Registry, queue: str, **options: Any) -> pqrun.AsyncWorker:
    settings: Dict[str, Any] = dict(queues=[queue], worker_id=f"w-{queue}", poll_wait=2.0, heartbeat_interval=0.5,
                                    grace_period=2.0, connect_kwargs={"application_name": f"w-{queue}"})
    settings.update(options)
    return pqrun.AsyncWorker(registry, dsn, **settings)


async def job_status(aconn: psycopg.AsyncConnection[Any], job_id: int) -> str:
    return await ascalar(aconn, "SELECT status::text FROM pqrun.jobs WHERE id = %s", job_id)


async def all_done(aconn: psycopg.AsyncConnection[Any], ids: List[int], timeout: float = 10.0) -> None:
    async def check() -> bool:
        return await ascalar(aconn, "SELECT count(*) FROM pqrun.jobs WHERE id = ANY(%s) AND status = 'DONE'",
                             ids) == len(ids)
    await await_for(check, timeout, f"jobs {ids} DONE")


def test_async_producer(dsn, queue):
    async def body(aconn: psycopg.AsyncConnection[Any]) -> None:
        with pytest.raises(RuntimeError):
            async with aconn.transaction():
                await pqrun.aio.enqueue(aconn, "x", {"n": 0}, queue=queue)
                raise RuntimeError("rolled back")
        async with aconn.transaction():
            one = await pqrun.aio.enqueue(aconn, "x", {"n": 1}, queue=queue, priority=3,
                                          run_after=dt.timedelta(minutes=10))
            batch = await pqrun.aio.enqueue_batch(aconn, [pqrun.JobSpec("x", {"n": 2}, queue=queue),
                                                          {"job_type": "x", "payload": {"n": 3}, "queue": queue,
                                                           "depends_on": [one]}])
        assert await ascalar(aconn, "SELECT string_agg(payload->>'n' || status, ',' ORDER BY id) FROM pqrun.jobs"
                                    " WHERE queue = %s", queue) == "1READY,2READY,3BLOCKED"
        job = await pqrun.aio.get_job(aconn, one)
        assert job is not None and job.priority == 3 and job.run_after > dt.datetime.now(dt.timezone.utc)
        assert await pqrun.aio.cancel(aconn, one) is True
        assert await job_status(aconn, batch[1]) == "CANCELLED"  # its dependency was cancelled
        assert await pqrun.aio.retry(aconn, one) is True
        with pytest.raises(pqrun.JobNotFound):
            await pqrun.aio.cancel(aconn, -1)
        with pytest.raises(pqrun.InvalidArgument):
            await pqrun.aio.enqueue(aconn, "", queue=queue)
    run(dsn, body)


def test_async_worker_takes_async_handlers_only(dsn, queue):
    registry = pqrun.Registry()
    registry.add("sync", lambda ctx: None)
    with pytest.raises(ValueError, match="not async: sync"):
        worker(dsn, registry, queue)


@dataclasses.dataclass
class Add:
    a: int
    b: int


def test_async_worker_runs_jobs(dsn, queue):
    """Typed args, three slots at once, finish-and-claim, a handler chain,
    a long poll woken by a commit, snooze, retryable and terminal errors."""
    registry = pqrun.Registry()
    active: List[int] = []
    most: List[int] = []

    @registry.handler("add", args=Add)
    async def add(ctx: pqrun.AsyncJobContext[Add]) -> dict:
        follow_up = await ctx.enqueue("noted", {"sum": ctx.args.a + ctx.args.b}, queue=f"{queue}-next")
        conn = await ctx.connection()
        await conn.execute("SELECT 1")
        return {"sum": ctx.args.a + ctx.args.b, "follow_up": follow_up}

    @registry.handler("meet")
    async def meet(ctx: pqrun.AsyncJobContext) -> None:
        active.append(ctx.job.id)
        most.append(len(active))
        await asyncio.sleep(0.5)
        active.remove(ctx.job.id)

    @registry.handler("nap")
    async def nap(ctx: pqrun.AsyncJobContext) -> dict:
        if ctx.job.snoozes == 0:
            raise pqrun.Snooze(0.3)
        return {"snoozes": ctx.job.snoozes}

    @registry.handler("fail")
    async def fail(ctx: pqrun.AsyncJobContext) -> None:
        if ctx.payload.get("terminal"):
            raise pqrun.TerminalError("bad input")
        if ctx.job.attempts == 1:
            raise ConnectionError("try again")

    async def body(aconn: psycopg.AsyncConnection[Any]) -> None:
        w = worker(dsn, registry, queue, concurrency=3)
        async with running_async(w):
            async def polling() -> bool:
                return await ascalar(aconn, "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s"
                                            " AND state = 'active' AND query LIKE '%%pqrun.pickup(%%'",
                                     f"w-{queue}") == 1
            await await_for(polling, what="a waiting pickup")
            start = time.monotonic()
            added = await pqrun.aio.enqueue(aconn, "add", {"a": 2, "b": 3}, queue=queue)
            await all_done(aconn, [added], 5)
            assert time.monotonic() - start < 1.5
            group = await pqrun.aio.enqueue_batch(aconn, [{"job_type": "meet", "queue": queue}] * 3)
            await all_done(aconn, group)
            assert max(most) == 3  # the three slots ran them at once
            chain = await pqrun.aio.enqueue_batch(aconn, [{"job_type": "add", "payload": {"a": i, "b": i},
                                                           "queue": queue} for i in range(6)])
            bad = await pqrun.aio.enqueue(aconn, "add", {"a": "one", "b": 2}, queue=queue)
            snoozed = await pqrun.aio.enqueue(aconn, "nap", queue=queue)
            retried = await pqrun.aio.enqueue(aconn, "fail", queue=queue)
            terminal = await pqrun.aio.enqueue(aconn, "fail", {"terminal": True}, queue=queue)
            await all_done(aconn, group + chain + [snoozed, retried])

            async def failed() -> bool:
                return await job_status(aconn, bad) == "FAILED" and await job_status(aconn, terminal) == "FAILED"
            await await_for(failed)
        assert await ascalar(aconn, "SELECT result FROM pqrun.jobs WHERE id = %s", added) == {
            "sum": 5, "follow_up": await ascalar(aconn, "SELECT min(id) FROM pqrun.jobs WHERE queue = %s",
                                                 f"{queue}-next")}
        # With 3 slots, at most 3 pickups' worth of claims; the rest came with a mark_done.
        assert await ascalar(aconn, "SELECT count(*) FROM pqrun.jobs n WHERE id = ANY(%s) AND EXISTS (SELECT"
                                    " FROM pqrun.jobs p WHERE p.queue = %s AND p.finished_at = n.locked_at)",
                             chain, queue) >= 3
        assert await ascalar(aconn, "SELECT last_error LIKE '%%invalid args for job type ''add'' (Add): a: expected"
                                    " integer, got string ''one''%%' AND attempts = 1 FROM pqrun.jobs WHERE id = %s",
                             bad)
        assert await ascalar(aconn, "SELECT attempts || ' ' || snoozes FROM pqrun.jobs WHERE id = %s",
                             snoozed) == "1 1"
        assert await ascalar(aconn, "SELECT string_agg(outcome, ',' ORDER BY attempt) FROM pqrun.job_attempts"
                                    " WHERE job_id = %s", retried) == "retry,done"
        assert await ascalar(aconn, "SELECT attempts || ' ' || (last_error LIKE '%%TerminalError: bad input%%')"
                                    " FROM pqrun.jobs WHERE id = %s", terminal) == "1 true"
    run(dsn, body)


def test_async_heartbeats_progress_cancel_and_shutdown(dsn, queue):
    registry = pqrun.Registry()
    seen: Dict[int, Any] = {}

    @registry.handler("steps")
    async def steps(ctx: pqrun.AsyncJobContext) -> dict:
        for step in range(1, int(ctx.payload["steps"]) + 1):
            if await ctx.wait(0.3):
                seen[ctx.job.id] = ctx.stop_reason
                return {"stopped": step}
            ctx.progress({"step": step})
        return {"steps": step}

    @registry.handler("stubborn")
    async def stubborn(ctx: pqrun.AsyncJobContext) -> None:
        try:
            await asyncio.sleep(600)  # never looks at ctx
        except asyncio.CancelledError:
            seen[ctx.job.id] = "task cancelled"
            raise

    async def body(aconn: psycopg.AsyncConnection[Any]) -> None:
        # Heartbeats every 0.5 s keep a 3 s job with a 2 s timeout.
        w = worker(dsn, registry, queue, concurrency=3, grace_period=1.0)
        long = await pqrun.aio.enqueue(aconn, "steps", {"steps": 10}, queue=queue, timeout_seconds=2)
        async with running_async(w):
            async def progressing() -> bool:
                return await ascalar(aconn, "SELECT status = 'RUNNING' AND (progress->>'step')::int >= 2"
                                            " FROM pqrun.jobs WHERE id = %s", long)
            await await_for(progressing, what="progress while running")
            await all_done(aconn, [long])
        assert await ascalar(aconn, "SELECT attempts || ' ' || progress::text || ' ' || (duration_ms > 2900)"
                                    " FROM pqrun.jobs WHERE id = %s", long) == '1 {"step": 10} true'

        # Heartbeats that wait 30 s: a cancel still reaches the handler at once.
        w = worker(dsn, registry, queue, concurrency=3, heartbeat_interval=30, grace_period=1.0)
        cancelled = await pqrun.aio.enqueue(aconn, "steps", {"steps": 1000}, queue=queue)
        released = await pqrun.aio.enqueue(aconn, "steps", {"steps": 1000}, queue=queue)
        ignored = await pqrun.aio.enqueue(aconn, "stubborn", queue=queue)
        async with running_async(w):
            async def three_running() -> bool:
                return await ascalar(aconn, "SELECT count(*) FROM pqrun.jobs WHERE id = ANY(%s)"
                                            " AND status = 'RUNNING'", [cancelled, released, ignored]) == 3
            await await_for(three_running)
            await asyncio.sleep(1.3)  # the first heartbeats start a second into the jobs
            at = time.monotonic()
            assert await pqrun.aio.cancel(aconn, cancelled)

            async def stopped() -> bool:
                return cancelled in seen
            await await_for(stopped, 3, "the cancelled handler to stop")
            assert time.monotonic() - at < 2.0 and seen[cancelled] == "cancelled"
            shutdown_at = time.monotonic()
        assert time.monotonic() - shutdown_at < 4
        assert seen == {cancelled: "cancelled", released: "released", ignored: "task cancelled"}
        assert await ascalar(aconn, "SELECT string_agg(status || ' ' || attempts, ',' ORDER BY id) FROM pqrun.jobs"
                                    " WHERE id = ANY(%s)", [cancelled, released, ignored]) == (
            "CANCELLED 1,READY 0,READY 0")
        assert await ascalar(aconn, "SELECT (progress->>'step')::int > 0 FROM pqrun.jobs WHERE id = %s", released)
    run(dsn, body)

"""The thread worker against the server: the registry, slots, the long
poll, finish-and-claim, claims in batches of free slots, heartbeats with
progress, a cancel reaching the handler, snooze, errors, typed args,
handler chains and a graceful shutdown on SIGTERM."""

from __future__ import annotations

import dataclasses
import os
import signal
import threading
import time
from typing import Any, Dict, List, TypedDict

import pytest
from helpers import rows, running, scalar, status, wait_for, waiting_pickups

import pqrun


def worker(dsn: str, registry: pqrun.Registry, queue: str, **options: Any) -> pqrun.Worker:
    """A worker of the test's queue, named after it in pg_stat_activity."""
    settings: Dict[str, Any] = dict(queues=[queue], worker_id=f"w-{queue}", poll_wait=2.0, heartbeat_interval=0.5,
                                    grace_period=2.0, connect_kwargs={"application_name": f"w-{queue}"})
    settings.update(options)
    return pqrun.Worker(registry, dsn, **settings)


def done(conn: Any, ids: List[int], timeout: float = 10.0) -> None:
    wait_for(lambda: scalar(conn, "SELECT count(*) FROM pqrun.jobs WHERE id = ANY(%s) AND status = 'DONE'", ids)
             == len(ids), timeout, f"jobs {ids} DONE")


def test_registry(dsn, conn, queue):
    registry = pqrun.Registry()

    @registry.handler("a")
    def a(ctx: pqrun.JobContext) -> dict:
        return {"ran": ctx.job.job_type}

    with pytest.raises(ValueError, match="already registered"):
        registry.add("a", a)
    assert list(registry) == ["a"] and registry["a"] is a and pqrun.Registry.of({"b": a})["b"] is a
    with pytest.raises(ValueError, match="no handler for job type"):
        worker(dsn, registry, queue, job_types=["a", "b"])
    with pytest.raises(ValueError, match="none registered"):
        worker(dsn, pqrun.Registry(), queue)

    other = pqrun.enqueue(conn, "b", queue=queue)
    mine = pqrun.enqueue(conn, "a", queue=queue)
    with running(worker(dsn, registry, queue)):
        done(conn, [mine])
    assert pqrun.get_job(conn, mine).result == {"ran": "a"}
    assert status(conn, other) == "READY"  # the worker claims only the types it has handlers for


def test_slots_run_jobs_at_once(dsn, conn, queue):
    registry = pqrun.Registry()
    barrier = threading.Barrier(3, timeout=5)
    threads = set()

    @registry.handler("meet")
    def meet(ctx: pqrun.JobContext) -> None:
        threads.add(threading.current_thread().name)
        barrier.wait()  # breaks (and the job fails) unless 3 handlers run at once

    ids = pqrun.enqueue_batch(conn, [{"job_type": "meet", "queue": queue}] * 3)
    with running(worker(dsn, registry, queue, concurrency=3)):
        done(conn, ids)
    assert threads == {"pqrun-slot-1", "pqrun-slot-2", "pqrun-slot-3"}
    assert scalar(conn, "SELECT max(attempts) FROM pqrun.jobs WHERE id = ANY(%s)", ids) == 1


def test_long_poll_wakes_at_the_commit(dsn, conn, queue):
    registry = pqrun.Registry()
    registry.add("ping", lambda ctx: None)
    with running(worker(dsn, registry, queue, concurrency=2, poll_wait=30)):
        wait_for(lambda: waiting_pickups(conn, f"w-{queue}") == 1, what="a waiting pickup")
        time.sleep(0.3)
        assert waiting_pickups(conn, f"w-{queue}") == 1  # one waiter for the two slots
        start = time.monotonic()
        job_id = pqrun.enqueue(conn, "ping", queue=queue)
        done(conn, [job_id], 5)
        assert time.monotonic() - start < 1.5  # not at the end of the 30 s wait


def test_finish_and_claim_in_batches_of_free_slots(dsn, conn, queue):
    registry = pqrun.Registry()

    @registry.handler("work")
    def work(ctx: pqrun.JobContext) -> None:
        ctx.wait(ctx.payload.get("seconds", 0.2))

    with running(worker(dsn, registry, queue, concurrency=4, poll_wait=1)):
        # Once the 4 slots and the poller are connected, the next pickup is for 4.
        wait_for(lambda: scalar(conn, "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s",
                                f"w-{queue}") == 5, what="5 connections")
        time.sleep(1.5)
        wait_for(lambda: waiting_pickups(conn, f"w-{queue}") == 1, what="a waiting pickup")
        burst = pqrun.enqueue_batch(conn, [{"job_type": "work", "queue": queue}] * 12)
        done(conn, burst)
        # One pickup claimed 4 (one per free slot); each slot took its next
        # job with the mark_done of its last.
        claims = [n for (n,) in rows(conn, "SELECT count(*) FROM pqrun.jobs WHERE id = ANY(%s) GROUP BY locked_at"
                                           " ORDER BY 1 DESC", burst)]
        assert claims == [4] + [1] * 8
        assert scalar(conn, "SELECT count(*) FROM pqrun.jobs n WHERE id = ANY(%s) AND EXISTS (SELECT FROM pqrun.jobs p"
                            " WHERE p.id = ANY(%s) AND p.finished_at = n.locked_at)", burst, burst) == 8
        assert scalar(conn, "SELECT string_agg(DISTINCT locked_by, ',') FROM pqrun.jobs WHERE id = ANY(%s)",
                      burst) == f"w-{queue}"

        # Two slots busy: the pickup asks for the other two.
        wait_for(lambda: waiting_pickups(conn, f"w-{queue}") == 1, what="a waiting pickup")
        busy = pqrun.enqueue_batch(conn, [{"job_type": "work", "payload": {"seconds": 2}, "queue": queue}] * 2)
        wait_for(lambda: scalar(conn, "SELECT count(*) FROM pqrun.jobs WHERE id = ANY(%s) AND status = 'RUNNING'",
                                busy) == 2)
        wait_for(lambda: waiting_pickups(conn, f"w-{queue}") == 1, what="a waiting pickup")
        quick = pqrun.enqueue_batch(conn, [{"job_type": "work", "payload": {"seconds": 0.05}, "queue": queue}] * 6)
        done(conn, quick)
        claims = [n for (n,) in rows(conn, "SELECT count(*) FROM pqrun.jobs WHERE id = ANY(%s) GROUP BY locked_at"
                                           " ORDER BY 1 DESC", quick)]
        assert claims == [2, 1, 1, 1, 1]
        done(conn, busy)


def test_heartbeats_keep_a_long_job_and_carry_progress(dsn, conn, queue):
    registry = pqrun.Registry()

    @registry.handler("long")
    def long(ctx: pqrun.JobContext) -> dict:
        for step in range(1, 7):
            ctx.wait(0.5)
            ctx.progress({"step": step})
        return {"steps": 6}

    job_id = pqrun.enqueue(conn, "long", queue=queue, timeout_seconds=2)  # reaped after 2 s without heartbeats
    with running(worker(dsn, registry, queue)):
        wait_for(lambda: scalar(conn, "SELECT status = 'RUNNING' AND (progress->>'step')::int >= 2"
                                      " FROM pqrun.jobs WHERE id = %s", job_id), what="progress while running")
        done(conn, [job_id])
    assert scalar(conn, "SELECT duration_ms > 2500 AND attempts = 1 AND progress = '{\"step\": 6}'"
                        " FROM pqrun.jobs WHERE id = %s", job_id)
    assert rows(conn, "SELECT outcome FROM pqrun.job_attempts WHERE job_id = %s", job_id) == [("done",)]


def test_cancel_reaches_the_running_handler(dsn, conn, queue):
    registry = pqrun.Registry()
    seen: Dict[str, Any] = {}

    @registry.handler("endless")
    def endless(ctx: pqrun.JobContext) -> dict:
        while not ctx.wait(10):
            pass
        seen.update(at=time.monotonic(), cancelled=ctx.cancelled, reason=ctx.stop_reason)
        return {"never": "stored"}

    job_id = pqrun.enqueue(conn, "endless", queue=queue)
    # Heartbeats wait 30 s in the server: only the cancel ends the wait early.
    with running(worker(dsn, registry, queue, heartbeat_interval=30)):
        wait_for(lambda: status(conn, job_id) == "RUNNING")
        time.sleep(1.3)  # the first heartbeat starts a second into the job
        cancelled_at = time.monotonic()
        assert pqrun.cancel(conn, job_id, "no longer wanted")
        wait_for(lambda: seen, 5, "the handler to stop")
        assert seen["at"] - cancelled_at < 2.0  # not at the end of the 30 s wait
        assert seen["cancelled"] and seen["reason"] == "cancelled"
    job = pqrun.get_job(conn, job_id)
    assert (job.status, job.result, job.last_error) == ("CANCELLED", None, "no longer wanted")


def test_snooze(dsn, conn, queue):
    registry = pqrun.Registry()

    @registry.handler("nap")
    def nap(ctx: pqrun.JobContext) -> dict:
        if ctx.job.snoozes == 0:
            raise pqrun.Snooze(0.5)
        return {"snoozes": ctx.job.snoozes}

    job_id = pqrun.enqueue(conn, "nap", queue=queue)
    with running(worker(dsn, registry, queue)):
        done(conn, [job_id])
    assert scalar(conn, "SELECT attempts || ' ' || snoozes || ' ' || (finished_at - created_at >= '0.5 s')"
                        " FROM pqrun.jobs WHERE id = %s", job_id) == "1 1 true"
    assert rows(conn, "SELECT outcome FROM pqrun.job_attempts WHERE job_id = %s", job_id) == [("done",)]


def test_retryable_and_terminal_errors(dsn, conn, queue):
    registry = pqrun.Registry()

    @registry.handler("flaky")
    def flaky(ctx: pqrun.JobContext) -> dict:
        if ctx.job.attempts == 1:
            raise ConnectionError("upstream down")
        return {"attempt": ctx.job.attempts}

    @registry.handler("later")
    def later(ctx: pqrun.JobContext) -> None:
        raise pqrun.RetryLater("rate limited", after=3600)

    @registry.handler("bad")
    def bad(ctx: pqrun.JobContext) -> None:
        raise pqrun.TerminalError("no such customer")

    flaky_id, once_id, later_id, bad_id = (
        pqrun.enqueue(conn, "flaky", queue=queue), pqrun.enqueue(conn, "flaky", queue=queue, max_attempts=1),
        pqrun.enqueue(conn, "later", queue=queue), pqrun.enqueue(conn, "bad", queue=queue))
    with running(worker(dsn, registry, queue, concurrency=2)):
        done(conn, [flaky_id])  # retried after the database's pqrun.backoff of 1 s
        wait_for(lambda: status(conn, bad_id) == "FAILED" and status(conn, once_id) == "FAILED")
        wait_for(lambda: pqrun.get_job(conn, later_id).attempts == 1 and status(conn, later_id) == "READY")
    assert rows(conn, "SELECT outcome FROM pqrun.job_attempts WHERE job_id = %s ORDER BY attempt", flaky_id) == [
        ("retry",), ("done",)]
    assert scalar(conn, "SELECT error LIKE 'Traceback%%ConnectionError: upstream down%%' FROM pqrun.job_attempts"
                        " WHERE job_id = %s AND attempt = 1", flaky_id)
    assert scalar(conn, "SELECT attempts || ' ' || (last_error LIKE '%%TerminalError: no such customer%%')"
                        " FROM pqrun.jobs WHERE id = %s", bad_id) == "1 true"
    assert scalar(conn, "SELECT run_after > now() + interval '50 minutes' FROM pqrun.jobs WHERE id = %s", later_id)
    pqrun.cancel(conn, later_id)


@dataclasses.dataclass
class Resize:
    image: str
    width: int
    height: int = 0


class Tag(TypedDict):
    name: str
    weight: float


def test_args_are_checked_before_the_handler_runs(dsn, conn, queue):
    registry = pqrun.Registry()
    calls: List[Any] = []

    @registry.handler("resize", args=Resize)
    def resize(ctx: pqrun.JobContext[Resize]) -> dict:
        calls.append(ctx.args)
        return {"area": ctx.args.width * (ctx.args.height or ctx.args.width)}

    @registry.handler("tag", args=Tag)
    def tag(ctx: pqrun.JobContext[Tag]) -> dict:
        calls.append(ctx.args)
        return {"weight": ctx.args["weight"]}

    ok = pqrun.enqueue(conn, "resize", Resize("a.png", 10), queue=queue)
    ok_tag = pqrun.enqueue(conn, "tag", {"name": "x", "weight": 2}, queue=queue)
    wrong_type = pqrun.enqueue(conn, "resize", {"image": "b.png", "width": "wide"}, queue=queue)
    missing = pqrun.enqueue(conn, "resize", {"width": 3}, queue=queue)
    unknown = pqrun.enqueue(conn, "tag", {"name": "x", "weight": 1, "colour": "red"}, queue=queue)
    with running(worker(dsn, registry, queue)):
        done(conn, [ok, ok_tag])
        wait_for(lambda: all(status(conn, i) == "FAILED" for i in (wrong_type, missing, unknown)))
    assert calls == [Resize("a.png", 10, 0), {"name": "x", "weight": 2.0}]
    assert pqrun.get_job(conn, ok).result == {"area": 100}
    errors = {i: pqrun.get_job(conn, i) for i in (wrong_type, missing, unknown)}
    assert all(j.attempts == 1 and j.max_attempts == 5 for j in errors.values())  # terminal: no retries
    assert "InvalidArgs: invalid args for job type 'resize' (Resize): width: expected integer, got string 'wide'" \
        in errors[wrong_type].last_error
    assert "missing required field(s) 'image' for Resize" in errors[missing].last_error
    assert "unknown field(s) 'colour' for Tag" in errors[unknown].last_error


def test_handler_chain_commits_with_its_job(dsn, conn, queue):
    conn.execute(f"CREATE TABLE chain_{queue} (job_id bigint)")
    registry = pqrun.Registry()

    @registry.handler("first")
    def first(ctx: pqrun.JobContext) -> dict:
        ctx.conn.execute(f"INSERT INTO chain_{queue} VALUES (%s)", [ctx.job.id])
        follow_up = ctx.enqueue("second", {"after": ctx.job.id}, queue=f"{queue}-next")
        if ctx.payload.get("fail"):
            raise RuntimeError("crashed after the follow-up")
        return {"follow_up": follow_up}

    ok = pqrun.enqueue(conn, "first", queue=queue)
    failing = pqrun.enqueue(conn, "first", {"fail": True}, queue=queue, max_attempts=1)
    with running(worker(dsn, registry, queue)):
        done(conn, [ok])
        wait_for(lambda: status(conn, failing) == "FAILED")
    follow_up = pqrun.get_job(conn, ok).result["follow_up"]
    assert pqrun.get_job(conn, follow_up).payload == {"after": ok}
    assert rows(conn, "SELECT payload FROM pqrun.jobs WHERE queue = %s", f"{queue}-next") == [({"after": ok},)]
    assert rows(conn, f"SELECT job_id FROM chain_{queue}") == [(ok,)]


def test_sigterm_finishes_or_releases_the_jobs_in_flight(dsn, conn, queue):
    registry = pqrun.Registry()
    stopped: Dict[int, Any] = {}

    @registry.handler("job")
    def job(ctx: pqrun.JobContext) -> dict:
        for step in range(int(ctx.payload["steps"])):
            if ctx.wait(0.1):
                stopped[ctx.job.id] = ctx.stop_reason
                return {"stopped": step}
            ctx.progress({"step": step + 1})
        return {"steps": ctx.payload["steps"]}

    short = pqrun.enqueue(conn, "job", {"steps": 8}, queue=queue)
    long = pqrun.enqueue(conn, "job", {"steps": 1000}, queue=queue)
    w = worker(dsn, registry, queue, concurrency=2, grace_period=1.5)
    late: List[int] = []

    def terminate() -> None:
        wait_for(lambda: scalar(conn2, "SELECT count(*) FROM pqrun.jobs WHERE queue = %s AND status = 'RUNNING'",
                                queue) == 2)
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.3)
        late.append(pqrun.enqueue(conn2, "job", {"steps": 1}, queue=queue))

    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn2:
        killer = threading.Thread(target=terminate)
        killer.start()
        started = time.monotonic()
        assert w.run() == 0  # serves in this (the main) thread until the SIGTERM
        killer.join()
    assert time.monotonic() - started < 6 and w.stragglers == 0
    assert status(conn, short) == "DONE"
    released = pqrun.get_job(conn, long)
    assert (released.status, released.attempts, released.last_error) == ("READY", 0, None)
    assert released.progress["step"] > 5  # kept for the next attempt
    assert stopped == {long: "released"}
    assert rows(conn, "SELECT count(*) FROM pqrun.job_attempts WHERE job_id = %s", long) == [(0,)]
    assert status(conn, late[0]) == "READY"  # nothing claimed after the SIGTERM

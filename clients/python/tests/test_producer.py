"""The producer calls on the caller's connection: enqueue and
enqueue_batch in the caller's transaction, their options, cancel, retry,
and pqrun's SQLSTATEs as exceptions."""

from __future__ import annotations

import dataclasses
import datetime as dt
import uuid
from typing import Any

import psycopg
import pytest
from helpers import rows, scalar, status

import pqrun
from pqrun import protocol


def pick(conn: psycopg.Connection[Any], queue: str, n: int = 10) -> list:
    return protocol.execute(conn, protocol.pickup("tests", queues=[queue], batch_size=n))


def test_enqueue_commits_with_the_callers_transaction(conn, queue):
    conn.execute("CREATE TABLE orders (id int)")
    with conn.transaction():
        conn.execute("INSERT INTO orders VALUES (1)")
        kept = pqrun.enqueue(conn, "receipt", {"order_id": 1}, queue=queue)
    with pytest.raises(RuntimeError):
        with conn.transaction():
            conn.execute("INSERT INTO orders VALUES (2)")
            gone = pqrun.enqueue(conn, "receipt", {"order_id": 2}, queue=queue)
            raise RuntimeError("the order failed")
    assert isinstance(kept, int) and gone > kept
    assert rows(conn, "SELECT id, payload FROM pqrun.jobs WHERE queue = %s", queue) == [(kept, {"order_id": 1})]
    assert scalar(conn, "SELECT count(*) FROM orders") == 1
    conn.execute("DROP TABLE orders")


def test_enqueue_options_reach_the_row(conn, queue):
    @dataclasses.dataclass
    class Report:
        day: dt.date
        pages: int

    job_id = pqrun.enqueue(conn, "report", Report(dt.date(2024, 5, 1), 3), queue=queue, priority=7, max_attempts=2,
                           timeout_seconds=60, dedupe_key=f"report:{queue}", concurrency_key="tenant-1",
                           fifo_key=f"fifo:{queue}", rate_weight=3)
    job = pqrun.get_job(conn, job_id)
    assert job is not None
    assert (job.job_type, job.payload, job.status, job.queue, job.priority, job.max_attempts, job.timeout_seconds,
            job.dedupe_key, job.concurrency_key, job.fifo_key, job.rate_weight) == (
        "report", {"day": "2024-05-01", "pages": 3}, "READY", queue, 7, 2, 60, f"report:{queue}", "tenant-1",
        f"fifo:{queue}", 3)
    default = pqrun.get_job(conn, pqrun.enqueue(conn, "report"))
    assert default is not None and (default.queue, default.priority, default.max_attempts, default.payload) == (
        "default", 0, 5, {})
    assert pqrun.cancel(conn, default.id)
    assert pqrun.get_job(conn, -1) is None


def test_delays_by_moment_and_by_timedelta(conn, queue):
    soon = pqrun.enqueue(conn, "later", queue=queue, run_after=dt.timedelta(seconds=0.5))
    hour = pqrun.enqueue(conn, "later", queue=queue, run_after=dt.timedelta(hours=1))
    moment = dt.datetime(2030, 1, 2, 3, 4, 5, tzinfo=dt.timezone.utc)
    fixed = pqrun.enqueue(conn, "later", queue=queue, run_after=moment)
    assert scalar(conn, "SELECT run_after - now() BETWEEN '55 min' AND '61 min' FROM pqrun.jobs WHERE id = %s", hour)
    assert pqrun.get_job(conn, fixed).run_after == moment
    assert pick(conn, queue) == []  # none is due yet
    waited = protocol.execute(conn, protocol.pickup("tests", queues=[queue], wait=5))
    assert [j.id for j in waited] == [soon]


def test_enqueue_batch(conn, queue):
    with pytest.raises(RuntimeError), conn.transaction():
        pqrun.enqueue_batch(conn, [{"job_type": "b", "queue": queue}] * 3)
        raise RuntimeError("rolled back")
    assert scalar(conn, "SELECT count(*) FROM pqrun.jobs WHERE queue = %s", queue) == 0
    assert pqrun.enqueue_batch(conn, []) == []
    first = pqrun.enqueue(conn, "b", queue=queue)
    ids = pqrun.enqueue_batch(conn, [
        pqrun.JobSpec("b", {"n": 1}, queue=queue, priority=5),
        {"job_type": "b", "payload": {"n": 2}, "queue": queue, "depends_on": [first]},
        pqrun.JobSpec("b", {"n": 3}, queue=queue, run_after=dt.timedelta(hours=2)),
        {"job_type": "b", "payload": {"n": 4}, "queue": queue, "dedupe_key": f"d:{queue}"},
        {"job_type": "b", "payload": {"n": 5}, "queue": queue, "dedupe_key": f"d:{queue}"},
    ])
    assert len(ids) == 5 and ids[:4] == sorted(ids[:4]) and ids[4] == ids[3]
    got = rows(conn, "SELECT payload->>'n', status::text, priority, run_after > now() + interval '1 hour'"
                     " FROM pqrun.jobs WHERE id = ANY(%s) ORDER BY id", ids)
    assert got == [("1", "READY", 5, False), ("2", "BLOCKED", 0, False), ("3", "READY", 0, True),
                   ("4", "READY", 0, False)]
    with pytest.raises(TypeError, match="unknown enqueue option"):
        pqrun.enqueue_batch(conn, [{"job_type": "b", "prio": 1}])


def test_dedupe_key(conn, queue):
    key = f"welcome:{queue}"
    a = pqrun.enqueue(conn, "welcome", {"user": 1}, queue=queue, dedupe_key=key)
    assert pqrun.enqueue(conn, "welcome", {"user": 1}, queue=queue, dedupe_key=key) == a
    [job] = pick(conn, queue)
    assert pqrun.enqueue(conn, "welcome", queue=queue, dedupe_key=key) == a  # RUNNING still holds it
    protocol.execute(conn, protocol.mark_done(job))
    assert pqrun.enqueue(conn, "welcome", queue=queue, dedupe_key=key) != a


def test_dependencies(conn, queue):
    parent = pqrun.enqueue(conn, "parent", queue=queue)
    child = pqrun.enqueue(conn, "child", queue=queue, depends_on=[parent])
    other = pqrun.enqueue(conn, "parent", queue=queue)
    orphan = pqrun.enqueue(conn, "child", queue=queue, depends_on=(other,))
    assert status(conn, child) == "BLOCKED"
    jobs = {j.id: j for j in pick(conn, queue)}
    assert set(jobs) == {parent, other}
    protocol.execute(conn, protocol.mark_done(jobs[parent]))
    assert status(conn, child) == "READY"
    assert pqrun.cancel(conn, other, "not needed")
    assert status(conn, orphan) == "CANCELLED"


def test_fifo_groups_run_one_at_a_time(conn, queue):
    key = f"account:{queue}"
    a, b = (pqrun.enqueue(conn, "step", {"n": n}, queue=queue, fifo_key=key) for n in (1, 2))
    [first] = pick(conn, queue)
    assert first.id == a and pick(conn, queue) == []
    protocol.execute(conn, protocol.mark_done(first))
    assert [j.id for j in pick(conn, queue)] == [b]


def test_concurrency_keys(conn, queue):
    conn.execute("SELECT pqrun.set_key_limit(%s, 1)", [queue])
    t1 = [pqrun.enqueue(conn, "render", queue=queue, concurrency_key="tenant-1") for _ in range(3)]
    t2 = pqrun.enqueue(conn, "render", queue=queue, concurrency_key="tenant-2")
    claimed = sorted(j.id for j in pick(conn, queue))
    assert claimed == [t1[0], t2]  # one per key at a time
    assert pick(conn, queue) == []


def test_cancel_and_retry(conn, queue):
    key = f"k:{queue}"
    job_id = pqrun.enqueue(conn, "x", queue=queue, dedupe_key=key)
    assert pqrun.cancel(conn, job_id, "operator", queue=queue) is True
    assert pqrun.cancel(conn, job_id) is False
    assert pqrun.get_job(conn, job_id).last_error == "operator"
    assert pqrun.retry(conn, job_id) is True
    assert status(conn, job_id) == "READY"
    assert pqrun.retry(conn, job_id) is False
    pqrun.cancel(conn, job_id)
    newer = pqrun.enqueue(conn, "x", queue=queue, dedupe_key=key)
    with pytest.raises(pqrun.DuplicateJob) as err:
        pqrun.retry(conn, job_id)
    assert err.value.sqlstate == "23505" and newer != job_id


def test_errors_are_mapped(conn, queue):
    with pytest.raises(pqrun.InvalidArgument) as invalid:
        pqrun.enqueue(conn, "x", max_attempts=0)
    assert invalid.value.sqlstate == "22023" and isinstance(invalid.value, psycopg.Error)
    assert isinstance(invalid.value.__cause__, psycopg.Error) and "max_attempts" in str(invalid.value)
    with pytest.raises(pqrun.InvalidArgument):
        pqrun.enqueue(conn, "x", depends_on=[-5])
    with pytest.raises(pqrun.JobNotFound):
        pqrun.cancel(conn, -5)
    with pytest.raises(pqrun.JobNotFound):
        pqrun.retry(conn, pqrun.enqueue(conn, "x"), queue=f"{queue}-not-its-queue")
    conn.execute("SET pqrun.max_payload_bytes = 100")
    with pytest.raises(pqrun.PayloadTooLarge) as large:
        pqrun.enqueue(conn, "x", {"blob": "x" * 200})
    assert large.value.sqlstate == "54000"
    conn.execute("RESET pqrun.max_payload_bytes")

    job_id = pqrun.enqueue(conn, "x", queue=queue)
    [job] = pick(conn, queue)
    with pytest.raises(pqrun.LeaseLost) as lost:
        protocol.execute(conn, protocol.mark_done(dataclasses.replace(job, lease_token=uuid.uuid4())))
    assert not lost.value.cancelled
    pqrun.cancel(conn, job_id)
    with pytest.raises(pqrun.JobCancelled) as cancelled:
        protocol.execute(conn, protocol.heartbeat(job))
    assert cancelled.value.cancelled and cancelled.value.sqlstate == "55000"

    with pytest.raises(pqrun.NotSupported), conn.transaction():
        conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        protocol.execute(conn, protocol.pickup("tests", queues=[queue], wait=1))
    with pytest.raises(psycopg.errors.UndefinedTable):  # PostgreSQL's own SQLSTATEs stay psycopg's
        conn.execute("SELECT * FROM no_such_table")


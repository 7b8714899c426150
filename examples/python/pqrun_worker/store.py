"""PgJobStore: the thin layer between Python and pqrun's SQL API.

Every method is one call of a pqrun function. Each takes an optional
``conn``: pass your own connection to run the call inside your transaction
(an enqueue that commits together with your business write, a mark_done that
commits together with a follow-up job). Without ``conn`` the call runs on a
connection the store keeps per thread, in autocommit mode.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import json
import threading
import uuid
from typing import Any, Iterator, Optional, Sequence

import psycopg
from psycopg import sql
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

# SQLSTATE 55000: the job is no longer RUNNING under our lease (it was reaped,
# cancelled, re-picked or released meanwhile); the call changed nothing.
LEASE_LOST = "55000"
# The detail pqrun gives with 55000 when an operator cancelled the job.
CANCELLED_DETAIL = "Its status is CANCELLED."

_ENQUEUE_OPTIONS = ("priority", "run_after", "max_attempts", "timeout_seconds",
                    "dedupe_key", "queue", "depends_on", "fifo_key")
_CASTS = {"depends_on": "::bigint[]"}


@dataclasses.dataclass(frozen=True)
class Job:
    """A row of ``pqrun.jobs`` (the columns of the original design)."""

    id: int
    job_type: str
    payload: Any
    status: str
    priority: int
    attempts: int
    max_attempts: int
    run_after: dt.datetime
    timeout_seconds: Optional[int]
    locked_at: Optional[dt.datetime]
    locked_by: Optional[str]
    dedupe_key: Optional[str]
    last_error: Optional[str]
    finished_at: Optional[dt.datetime]
    duration_ms: Optional[int]
    result: Any
    created_at: dt.datetime
    updated_at: dt.datetime
    queue: str = "default"
    lease_token: Optional[uuid.UUID] = None
    fifo_key: Optional[str] = None
    depends_on: Optional[list] = None
    progress: Any = None
    snoozes: int = 0

    @classmethod
    def from_row(cls, row: dict) -> "Job":
        return cls(**{f.name: row.get(f.name) for f in dataclasses.fields(cls)})


def _interval(seconds: Optional[float]) -> Optional[dt.timedelta]:
    return None if seconds is None else dt.timedelta(seconds=seconds)


def _json_default(value: Any) -> Any:
    if isinstance(value, (dt.datetime, dt.date)):
        return value.isoformat()
    if isinstance(value, dt.timedelta):
        return f"{value.total_seconds()} seconds"
    if isinstance(value, uuid.UUID):
        return str(value)
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def jsonb(value: Any) -> Jsonb:
    return Jsonb(value, dumps=lambda v: json.dumps(v, default=_json_default))


class PgJobStore:
    def __init__(self, dsn: str = "", **connect_kwargs: Any) -> None:
        self.dsn = dsn
        self.connect_kwargs = connect_kwargs
        self._local = threading.local()

    # -- connections --------------------------------------------------------

    def connect(self, **overrides: Any) -> psycopg.Connection:
        """A new autocommit connection whose rows are dicts."""
        kwargs = {"autocommit": True, "row_factory": dict_row, **self.connect_kwargs, **overrides}
        return psycopg.connect(self.dsn, **kwargs)

    def connection(self) -> psycopg.Connection:
        """This thread's connection (opened on first use, reopened if broken)."""
        conn = getattr(self._local, "conn", None)
        if conn is None or conn.closed or conn.broken:
            conn = self._local.conn = self.connect()
        return conn

    @contextlib.contextmanager
    def transaction(self, conn: Optional[psycopg.Connection] = None) -> Iterator[psycopg.Connection]:
        """``with store.transaction() as conn:`` commits on success, rolls back on error."""
        conn = conn or self.connection()
        with conn.transaction():
            yield conn

    def close(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None

    def _execute(self, conn: Optional[psycopg.Connection], query: Any, params: Any = None) -> psycopg.Cursor:
        return (conn or self.connection()).execute(query, params)

    # -- producing ----------------------------------------------------------

    def enqueue(self, job_type: str, payload: Any = None, *, conn: Optional[psycopg.Connection] = None,
                **options: Any) -> int:
        """pqrun.enqueue; options are its argument names (priority, run_after,
        max_attempts, timeout_seconds, dedupe_key, queue, depends_on, fifo_key).
        Options left out or None take pqrun's defaults. Returns the job id (with
        a dedupe_key held by an unfinished job: that job's id)."""
        unknown = set(options) - set(_ENQUEUE_OPTIONS)
        if unknown:
            raise TypeError(f"unknown enqueue option(s): {', '.join(sorted(unknown))}")
        args = [sql.SQL("{}, {}").format(sql.Placeholder("job_type"), sql.Placeholder("payload"))]
        params = {"job_type": job_type, "payload": jsonb({} if payload is None else payload)}
        for name in _ENQUEUE_OPTIONS:
            if options.get(name) is not None:
                args.append(sql.SQL("{} => {}" + _CASTS.get(name, "")).format(
                    sql.Identifier(name), sql.Placeholder(name)))
                params[name] = options[name]
        query = sql.SQL("SELECT pqrun.enqueue({}) AS id").format(sql.SQL(", ").join(args))
        return self._execute(conn, query, params).fetchone()["id"]

    def enqueue_batch(self, jobs: Sequence[dict], *, conn: Optional[psycopg.Connection] = None) -> list[int]:
        """pqrun.enqueue_batch: one id per element, in order."""
        rows = self._execute(conn, "SELECT id FROM pqrun.enqueue_batch(%s) AS id", [jsonb(list(jobs))]).fetchall()
        return [r["id"] for r in rows]

    # -- consuming ----------------------------------------------------------

    def pickup(self, worker_id: str, job_types: Optional[Sequence[str]] = None,
               queues: Optional[Sequence[str]] = None, batch_size: int = 1, wait: float = 0.0,
               *, conn: Optional[psycopg.Connection] = None) -> list[Job]:
        """pqrun.pickup: claim up to batch_size jobs; with wait > 0 (seconds)
        sleep in the server until a matching job is committed or wait ends."""
        rows = self._execute(
            conn,
            "SELECT * FROM pqrun.pickup(%s, job_types => %s::text[], queues => %s::text[],"
            " batch_size => %s, wait => %s)",
            [worker_id, list(job_types) if job_types else None, list(queues) if queues else None,
             batch_size, _interval(wait)],
        ).fetchall()
        return [Job.from_row(r) for r in rows]

    def mark_done(self, job: Job, result: Any = None, *, conn: Optional[psycopg.Connection] = None) -> None:
        self._execute(conn, "SELECT pqrun.mark_done(%s, %s, lease_token => %s)",
                      [job.id, None if result is None else jsonb(result), job.lease_token])

    def mark_done_and_pickup(self, job: Job, result: Any, worker_id: str, job_types: Optional[Sequence[str]] = None,
                             queues: Optional[Sequence[str]] = None, batch_size: int = 1,
                             *, conn: Optional[psycopg.Connection] = None) -> list[Job]:
        """pqrun.mark_done_and_pickup: mark_done and a pickup that never waits,
        in one statement. The jobs it answers are claimed only once the
        transaction commits; none means: go back to a waiting pickup."""
        rows = self._execute(
            conn,
            "SELECT * FROM pqrun.mark_done_and_pickup(%s, ARRAY[%s]::bigint[], ARRAY[%s]::uuid[], ARRAY[%s]::jsonb[],"
            " job_types => %s::text[], queues => %s::text[], batch_size => %s)",
            [worker_id, job.id, job.lease_token, None if result is None else jsonb(result),
             list(job_types) if job_types else None, list(queues) if queues else None, batch_size],
        ).fetchall()
        return [Job.from_row(r) for r in rows]

    def mark_error(self, job: Job, error: str, terminal: bool = False, retry_after: Optional[float] = None,
                   *, conn: Optional[psycopg.Connection] = None) -> str:
        """Returns the job's new status: 'READY' (retried) or 'FAILED'."""
        row = self._execute(
            conn,
            "SELECT pqrun.mark_error(%s, %s, terminal => %s, lease_token => %s, retry_after => %s)::text AS status",
            [job.id, error, terminal, job.lease_token, _interval(retry_after)],
        ).fetchone()
        return row["status"]

    def heartbeat(self, job: Job, progress: Any = None, wait: float = 0.0,
                  *, conn: Optional[psycopg.Connection] = None) -> None:
        """pqrun.heartbeat: renew the lease and store ``progress`` unless None.
        With wait > 0 (seconds) it first sleeps in the server until the job is
        no longer ours (55000: at once when it is cancelled) or wait ends, so
        give it a connection of its own."""
        self._execute(conn, "SELECT pqrun.heartbeat(%s, lease_token => %s, progress => %s, wait => %s)",
                      [job.id, job.lease_token, None if progress is None else jsonb(progress), _interval(wait)])

    def release(self, job: Job, *, conn: Optional[psycopg.Connection] = None) -> None:
        """pqrun.release: READY again at once, the attempt not used up."""
        self._execute(conn, "SELECT pqrun.release(%s, lease_token => %s)", [job.id, job.lease_token])

    def snooze(self, job: Job, seconds: float, *, conn: Optional[psycopg.Connection] = None) -> None:
        """pqrun.snooze: READY again after ``seconds``, the attempt not used up."""
        self._execute(conn, "SELECT pqrun.snooze(%s, %s, lease_token => %s)",
                      [job.id, _interval(seconds), job.lease_token])

    # -- operating (owner or granted roles) --------------------------------------

    def cancel(self, job_id: int, reason: Optional[str] = None, *, conn: Optional[psycopg.Connection] = None) -> bool:
        return self._execute(conn, "SELECT pqrun.cancel(%s, %s) AS ok", [job_id, reason]).fetchone()["ok"]

    def reap_stale(self, default_stale_after: float = 1200.0, *, conn: Optional[psycopg.Connection] = None) -> int:
        return self._execute(conn, "SELECT pqrun.reap_stale(%s) AS n",
                             [_interval(default_stale_after)]).fetchone()["n"]

    def get(self, job_id: int, *, conn: Optional[psycopg.Connection] = None) -> Optional[Job]:
        row = self._execute(conn, "SELECT * FROM pqrun.jobs WHERE id = %s", [job_id]).fetchone()
        return Job.from_row(row) if row else None


def lease_lost(exc: BaseException) -> bool:
    """True for pqrun's fencing error: the job is not RUNNING under our lease."""
    return isinstance(exc, psycopg.Error) and exc.sqlstate == LEASE_LOST


def job_cancelled(exc: BaseException) -> bool:
    """True for the fencing error of a job that an operator cancelled (pqrun.cancel)."""
    return lease_lost(exc) and exc.diag.message_detail == CANCELLED_DETAIL

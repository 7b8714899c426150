"""Worker: runs handlers for pqrun jobs.

``concurrency`` loops, each a thread with its own connection, long-poll
``pqrun.pickup`` (the server wakes them when a job is committed), call the
handler registered for the job's type and report the outcome:

- the handler returns (a dict or None)  -> mark_done(result), as
  ``pqrun.mark_done_and_pickup``: the same statement claims the loop's next
  job, so a busy loop commits once per job; only when it gets none does the
  loop go back to a waiting pickup
- it raises TerminalError                -> mark_error(terminal => true): FAILED
- it raises anything else                -> mark_error(traceback): READY again
  with backoff (pqrun.backoff, or RetryLater(after=...)), FAILED when out of
  attempts.

A handler's database work through ``ctx.conn`` and ``ctx.enqueue`` runs in
the transaction that marks its job done: the follow-up job and the handler's
writes exist exactly when the job is DONE (the design's "handler chain").
If the lease was lost meanwhile (the job was reaped or cancelled), pqrun
refuses mark_done and all of it rolls back.

A heartbeat thread keeps long jobs alive: every job running longer than
``heartbeat_interval`` gets a ``pqrun.heartbeat`` each interval.

Shutdown (SIGTERM, SIGINT or ``stop()``): stop picking up, let in-flight jobs
finish within ``grace_period`` seconds, then release the rest back to READY
(``mark_error(..., retry_after => '0')``) and return. A second signal skips
the rest of the grace period.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import logging
import os
import signal
import socket
import threading
import time
import traceback
from typing import Any, Callable, Mapping, Optional, Sequence

import psycopg

from .store import Job, PgJobStore, lease_lost

log = logging.getLogger("pqrun")

MAX_ERROR_CHARS = 10_000


class TerminalError(Exception):
    """Raise from a handler to fail the job now, without retries (bad payload,
    a business rule that will never pass)."""


class RetryLater(Exception):
    """Raise from a handler to retry after ``after`` seconds (e.g. a rate limit's
    Retry-After) instead of the backoff schedule."""

    def __init__(self, message: str = "", after: Optional[float] = None) -> None:
        super().__init__(message)
        self.after = after


@dataclasses.dataclass(frozen=True)
class BackoffPolicy:
    """Client-side retry delays by attempt number (the last one repeats). The
    worker uses none by default: the server's ``pqrun.backoff`` setting
    (1 min, 5 min, 30 min, 2 h, 6 h) applies, so all languages agree."""

    delays: Sequence[float] = (60, 300, 1800, 7200, 21600)

    def delay(self, attempt: int) -> float:
        return self.delays[min(max(attempt, 1), len(self.delays)) - 1]


@dataclasses.dataclass(frozen=True)
class LoopErrorPolicy:
    """Sleep after consecutive infrastructure errors (database down): 1, 2, 5, 10 s."""

    delays: Sequence[float] = (1, 2, 5, 10)

    def delay(self, consecutive_errors: int) -> float:
        return self.delays[min(max(consecutive_errors, 1), len(self.delays)) - 1]


Handler = Callable[["JobContext"], Any]


class Registry(dict):
    """job_type -> handler. ``@registry.handler("summarize")`` registers a function."""

    def handler(self, job_type: str) -> Callable[[Handler], Handler]:
        def register(fn: Handler) -> Handler:
            if job_type in self:
                raise ValueError(f"a handler for {job_type!r} is already registered")
            self[job_type] = fn
            return fn
        return register


class JobContext:
    """What a handler gets: the job, the store, and the job's transaction."""

    def __init__(self, job: Job, store: PgJobStore, worker_id: str, conn: psycopg.Connection,
                 stopping: threading.Event) -> None:
        self.job = job
        self.store = store
        self.worker_id = worker_id
        self.lease_lost = False  # set when a heartbeat found the job reaped or cancelled
        self._conn = conn
        self._tx: Optional[psycopg.Transaction] = None
        self._stopping = stopping

    @property
    def payload(self) -> Any:
        return self.job.payload

    @property
    def stopping(self) -> bool:
        """The worker is shutting down: a long handler may wrap up early."""
        return self._stopping.is_set()

    @property
    def conn(self) -> psycopg.Connection:
        """A connection inside the job's transaction, which commits together with
        mark_done (and rolls back if the handler raises). Opened on first use:
        do the database work at the end of a long handler."""
        if self._tx is None:
            self._tx = self._conn.transaction()
            self._tx.__enter__()
        return self._conn

    def enqueue(self, job_type: str, payload: Any = None, **options: Any) -> int:
        """Enqueue a follow-up job in the job's transaction: it exists iff this job ends DONE."""
        return self.store.enqueue(job_type, payload, conn=self.conn, **options)

    def heartbeat(self) -> None:
        """Prove the job is alive now (the worker also does it on its own)."""
        self.store.heartbeat(self.job)

    def _end(self, exc: Optional[BaseException] = None) -> None:
        """Commit the job's transaction, or roll it back when exc is given."""
        tx, self._tx = self._tx, None
        if tx is not None:
            tx.__exit__(type(exc) if exc else None, exc, exc.__traceback__ if exc else None)


@dataclasses.dataclass
class _InFlight:
    job: Job
    ctx: JobContext
    started: float
    last_beat: float
    released: bool = False


def format_error(exc: BaseException) -> str:
    """The traceback, cut to pqrun's 10,000 characters; the end (the exception
    and the innermost frames) is the part worth keeping."""
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    if len(text) > MAX_ERROR_CHARS:
        text = "...\n" + text[-(MAX_ERROR_CHARS - 4):]
    return text


class Worker:
    def __init__(self, store: PgJobStore, handlers: Mapping[str, Handler], *, concurrency: int = 1,
                 job_types: Optional[Sequence[str]] = None, queues: Optional[Sequence[str]] = None,
                 worker_id: Optional[str] = None, poll_wait: float = 5.0, heartbeat_interval: float = 30.0,
                 grace_period: float = 30.0, backoff: Optional[BackoffPolicy] = None,
                 loop_error_policy: LoopErrorPolicy = LoopErrorPolicy()) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        self.store = store
        self.handlers = dict(handlers)
        self.job_types = list(job_types) if job_types else sorted(self.handlers)
        missing = [t for t in self.job_types if t not in self.handlers]
        if missing or not self.job_types:
            raise ValueError(f"no handler for job type(s): {', '.join(missing) or '(none registered)'}")
        self.queues = list(queues) if queues else None
        self.concurrency = concurrency
        self.worker_id = worker_id or f"{socket.gethostname()}-{os.getpid()}"
        self.poll_wait = poll_wait
        self.heartbeat_interval = heartbeat_interval
        self.grace_period = grace_period
        self.backoff = backoff
        self.loop_error_policy = loop_error_policy

        self._stop = threading.Event()       # loops: no more pickups
        self._beats_stop = threading.Event()  # heartbeat thread: exit
        self._stop_requests = 0               # signals received (plain int: signal-safe)
        self._lock = threading.Lock()
        self._polling: dict[int, psycopg.Connection] = {}  # loops inside a long-poll pickup
        self._inflight: dict[int, _InFlight] = {}
        self._loops: list[threading.Thread] = []
        self._beats: Optional[threading.Thread] = None

    # -- lifecycle ----------------------------------------------------------------

    def start(self) -> None:
        log.info("worker %s: %d loop(s), job types %s, queues %s", self.worker_id, self.concurrency,
                 ",".join(self.job_types), ",".join(self.queues) if self.queues else "(all)")
        self._beats = threading.Thread(target=self._heartbeat_loop, name="pqrun-heartbeat", daemon=True)
        self._beats.start()
        for n in range(1, self.concurrency + 1):
            t = threading.Thread(target=self._loop, args=(n,), name=f"pqrun-loop-{n}", daemon=True)
            t.start()
            self._loops.append(t)

    def stop(self) -> None:
        """Ask run() to shut down (as SIGTERM does)."""
        self._stop_requests += 1

    def run(self) -> int:
        """Start, serve until SIGTERM/SIGINT or stop(), shut down gracefully. Returns 0."""
        previous = {}
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGINT):
                previous[sig] = signal.signal(sig, lambda signum, frame: self.stop())
        try:
            self.start()
            while not self._stop_requests:
                time.sleep(0.1)
            return self.shutdown()
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def shutdown(self) -> int:
        self._stop.set()
        with self._lock:
            log.info("shutting down: %d job(s) in flight, grace period %gs", len(self._inflight), self.grace_period)
            # Wake loops sleeping in pickup(wait => ...). A loop whose pickup
            # committed just before the cancel may still see an error; the job
            # it claimed goes back to READY when this process's connections
            # close (orphan rescue) or at its stale timeout.
            for conn in self._polling.values():
                try:
                    conn.cancel()
                except psycopg.Error:
                    pass
        deadline = time.monotonic() + self.grace_period
        while (any(t.is_alive() for t in self._loops) and time.monotonic() < deadline
               and self._stop_requests < 2):
            time.sleep(0.05)
        with self._lock:
            unfinished = [f for f in self._inflight.values() if not f.released]
            for f in unfinished:
                f.released = True
        if unfinished:
            self._release(unfinished)
        self._beats_stop.set()
        if self._beats:
            self._beats.join(timeout=2)
        for t in self._loops:
            t.join(timeout=0.2)
        log.info("worker %s stopped", self.worker_id)
        return 0

    @property
    def stragglers(self) -> int:
        """Handler threads still running after shutdown (their jobs were released)."""
        return sum(t.is_alive() for t in self._loops)

    def _release(self, flights: list[_InFlight]) -> None:
        try:
            conn = self.store.connect(connect_timeout=5)
            conn.execute("SET statement_timeout = '5s'")
        except psycopg.Error as exc:
            log.error("cannot release %d job(s), they return at their stale timeout: %s", len(flights), exc)
            return
        with conn:
            for f in flights:
                reason = (f"released: worker {self.worker_id} shut down before the job finished "
                          f"(ran {time.monotonic() - f.started:.1f}s, grace period {self.grace_period:g}s)")
                try:
                    status = self.store.mark_error(f.job, reason, retry_after=0, conn=conn)
                    log.warning("job %s (%s) released -> %s", f.job.id, f.job.job_type, status)
                except psycopg.Error as exc:
                    if lease_lost(exc):
                        log.info("job %s finished or lost its lease meanwhile", f.job.id)
                    else:
                        log.error("job %s: release failed: %s", f.job.id, exc)

    # -- the loops ----------------------------------------------------------------

    def _loop(self, n: int) -> None:
        worker_id = f"{self.worker_id}/{n}"
        conn: Optional[psycopg.Connection] = None
        errors = 0
        claimed: list[Job] = []  # claimed with the last job's mark_done: ours already
        while claimed or not self._stop.is_set():
            if claimed:
                jobs, claimed = claimed, []
            else:
                try:
                    if conn is None or conn.closed or conn.broken:
                        conn = self.store.connect()
                    with self._lock:
                        if self._stop.is_set():
                            break
                        self._polling[n] = conn
                    try:
                        jobs = self.store.pickup(worker_id, self.job_types, self.queues, wait=self.poll_wait, conn=conn)
                    finally:
                        with self._lock:
                            self._polling.pop(n, None)
                    errors = 0
                except psycopg.Error as exc:
                    if self._stop.is_set():
                        break  # our own cancel at shutdown
                    errors += 1
                    delay = self.loop_error_policy.delay(errors)
                    log.warning("%s: pickup failed (%s); retrying in %gs", worker_id, exc, delay)
                    if conn is not None and conn.broken:
                        conn.close()
                    self._stop.wait(delay)
                    continue
            for i, job in enumerate(jobs):
                try:
                    claimed = self._run(job, conn, worker_id, n, claim_next=i == len(jobs) - 1)
                except Exception:  # a broken connection: the server rescues the job
                    log.exception("%s: job %s: could not report its outcome", worker_id, job.id)
        if conn is not None:
            conn.close()
        self.store.close()

    def _run(self, job: Job, conn: psycopg.Connection, worker_id: str, n: int, claim_next: bool = False) -> list[Job]:
        """Runs `job` and reports its outcome. With `claim_next`, a job that
        ends DONE is marked done by mark_done_and_pickup, which claims the
        next job in the same transaction (one commit per job instead of two):
        answered once that transaction committed."""
        ctx = JobContext(job, self.store, worker_id, conn, self._stop)
        claimed: list[Job] = []
        now = time.monotonic()
        flight = _InFlight(job, ctx, started=now, last_beat=now)
        with self._lock:
            self._inflight[n] = flight
        log.info("job %s (%s) attempt %d/%d started", job.id, job.job_type, job.attempts, job.max_attempts)
        try:
            try:
                handler = self.handlers.get(job.job_type)
                if handler is None:
                    raise TerminalError(f"no handler registered for job type {job.job_type!r}")
                result = handler(ctx)
                if inspect.isawaitable(result):
                    result = asyncio.run(result)
            except Exception as exc:
                ctx._end(exc)  # the handler's writes and follow-ups roll back
                self._fail(ctx, exc, conn)
                return []
            try:
                ctx.conn  # mark_done joins the job's transaction
                if claim_next and not self._stop.is_set():
                    claimed = self.store.mark_done_and_pickup(job, result, worker_id, self.job_types, self.queues,
                                                              conn=conn)
                else:
                    self.store.mark_done(job, result, conn=conn)
            except Exception as exc:
                ctx._end(exc)
                if lease_lost(exc):
                    self._lease_lost(flight)
                else:  # e.g. the handler left the transaction aborted, or a result that is not JSON
                    self._fail(ctx, exc, conn)
                return []
            ctx._end()  # the claims count only once this commit returned
            log.info("job %s (%s) done in %.0f ms", job.id, job.job_type, (time.monotonic() - now) * 1000)
            return claimed
        finally:
            with self._lock:
                self._inflight.pop(n, None)

    def _fail(self, ctx: JobContext, exc: Exception, conn: psycopg.Connection) -> None:
        job = ctx.job
        terminal = isinstance(exc, TerminalError)
        retry_after = getattr(exc, "after", None)
        if retry_after is None and self.backoff and not terminal:
            retry_after = self.backoff.delay(job.attempts)
        try:
            status = self.store.mark_error(job, format_error(exc), terminal=terminal,
                                           retry_after=retry_after, conn=conn)
        except psycopg.Error as mark_exc:
            if lease_lost(mark_exc):
                self._lease_lost(self._flight_of(job))
            else:
                log.error("job %s: mark_error failed (%s); the server rescues it later", job.id, mark_exc)
            return
        message = str(exc) if len(str(exc)) <= 200 else str(exc)[:200] + "..."
        log.log(logging.ERROR if status == "FAILED" else logging.WARNING,
                "job %s (%s) attempt %d/%d: %s: %s -> %s", job.id, job.job_type, job.attempts,
                job.max_attempts, type(exc).__name__, message, status)

    def _flight_of(self, job: Job) -> Optional[_InFlight]:
        with self._lock:
            return next((f for f in self._inflight.values() if f.job.id == job.id), None)

    def _lease_lost(self, flight: Optional[_InFlight]) -> None:
        if flight is None:
            return
        if flight.released:
            log.info("job %s finished after it was released at shutdown; outcome discarded", flight.job.id)
        else:
            log.warning("job %s lost its lease (reaped, cancelled or re-picked); its outcome and "
                        "writes were rolled back", flight.job.id)

    # -- heartbeats -----------------------------------------------------------------

    def _heartbeat_loop(self) -> None:
        conn: Optional[psycopg.Connection] = None
        tick = min(max(self.heartbeat_interval / 4, 0.05), 5.0)
        while not self._beats_stop.wait(tick):
            now = time.monotonic()
            with self._lock:
                due = [f for f in self._inflight.values() if not f.released and not f.ctx.lease_lost
                       and now - f.last_beat >= self.heartbeat_interval]
            for f in due:
                try:
                    if conn is None or conn.closed or conn.broken:
                        conn = self.store.connect()
                    self.store.heartbeat(f.job, conn=conn)
                    f.last_beat = now
                    log.debug("job %s heartbeat after %.1fs", f.job.id, now - f.started)
                except psycopg.Error as exc:
                    if lease_lost(exc):
                        f.ctx.lease_lost = True
                        log.warning("job %s: heartbeat refused, the job was reaped or cancelled", f.job.id)
                    else:
                        log.warning("job %s: heartbeat failed: %s", f.job.id, exc)
        if conn is not None:
            conn.close()

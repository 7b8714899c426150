"""Worker: runs handlers for pqrun jobs.

A worker has ``concurrency`` slots, each a thread that runs one job at a
time on a connection of its own, and one poller, a thread with a connection
of its own that claims jobs for the slots that are free:

- The poller long-polls ``pqrun.pickup(worker_id, ..., batch_size => <free
  slots>, wait => poll_wait)`` while at least one slot is free (the server
  wakes it when a matching job is committed) and hands each job it gets to a
  free slot. A burst of jobs is claimed in batches of up to the free slots,
  and however many slots a worker has, at most one of its connections waits
  in a pickup.
- A slot calls the handler registered for the job's type and reports the
  outcome:

  - the handler returns (a dict or None)  -> mark_done(result), as
    ``pqrun.mark_done_and_pickup`` (one job, no wait): the same statement
    claims the slot's next job, so a busy slot commits once per job; only
    when it gets none is the slot free again, for the poller to fill
  - it raises TerminalError                -> mark_error(terminal => true): FAILED
  - it raises Snooze(seconds)              -> pqrun.snooze: READY again after
    `seconds`, the attempt not used up
  - it raises anything else                -> mark_error(traceback): READY again
    with backoff (pqrun.backoff, or RetryLater(after=...)), FAILED when out of
    attempts.

Every claim is made under ``worker_id`` (default ``hostname-pid``), the
poller's and the slots' alike, so ``pqrun.workers`` shows one row per
worker process; the log names the slot (thread ``pqrun-slot-N``).

A handler's database work through ``ctx.conn`` and ``ctx.enqueue`` runs in
the transaction that marks its job done, on the slot's connection: the
follow-up job and the handler's writes exist exactly when the job is DONE
(the design's "handler chain"). If the lease was lost meanwhile (the job was
reaped or cancelled), pqrun refuses mark_done and all of it rolls back. The
lease token makes the finish work from the slot's connection whichever
connection claimed the job.

Each slot has a heartbeat thread with a connection of its own. A job that
runs longer than a second (or half of ``heartbeat_interval``, if less) gets
``pqrun.heartbeat(..., wait => heartbeat_interval)`` over and over: it sleeps
in the server and renews the lease at its end, and it fails (55000) the
moment an operator cancels the job, so the handler hears of it at once
(``ctx.cancelled``, ``ctx.wait()``) and the worker drops its outcome. The
handler's ``ctx.progress(...)`` reports go out with a heartbeat of their own,
at most one a second (a report cancels a waiting heartbeat to get out now),
and the last one at the latest with the job's outcome.

The jobs a worker claims are held by the session that claimed them as well
as by their leases (``hold="session"``, ``SET pqrun.claim_hold = session`` on
every connection of the worker): by the poller's session, or by the slot's
for a job that mark_done_and_pickup claimed; each renewal of the lease by a
heartbeat moves the hold to the slot's heartbeat connection. All of them
live as long as the worker, so if the process dies, a maintenance round
gives all its jobs back within a second or two instead of after their stale
window (the poller's backend, which may be waiting in a pickup, looks once a
second whether the worker is still connected). Behind a pooler in
transaction mode, whose server connections are not the worker's, pass
``hold="lease"``: the jobs then wait for their stale window.

Shutdown (SIGTERM, SIGINT or ``stop()``): stop claiming (the poller's waiting
pickup is cancelled) and give the jobs the poller claimed for no slot yet
back with ``pqrun.release`` at once, let in-flight jobs finish within
``grace_period`` seconds, then give the rest back too (READY at once, the
attempt not used up), tell their handlers to stop, and return. A second
signal skips the rest of the grace period.
"""

from __future__ import annotations

import asyncio
import collections
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
import psycopg.conninfo

from .store import Job, PgJobStore, job_cancelled, lease_lost

log = logging.getLogger("pqrun")

MAX_ERROR_CHARS = 10_000
PROGRESS_EVERY = 1.0  # seconds: at most one progress write per job this often
QUERY_CANCELED = "57014"


class TerminalError(Exception):
    """Raise from a handler to fail the job now, without retries (bad payload,
    a business rule that will never pass)."""


class RetryLater(Exception):
    """Raise from a handler to retry after ``after`` seconds (e.g. a rate limit's
    Retry-After) instead of the backoff schedule."""

    def __init__(self, message: str = "", after: Optional[float] = None) -> None:
        super().__init__(message)
        self.after = after


class Snooze(Exception):
    """Raise from a handler to put the job back for ``seconds`` (pqrun.snooze):
    READY again after them, the attempt not used up, ``jobs.snoozes`` one
    more. For "not yet" (a resource is busy, an upstream is not ready)
    rather than for errors."""

    def __init__(self, seconds: float, message: str = "") -> None:
        super().__init__(message or f"snoozed for {seconds:g}s")
        self.seconds = seconds


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
                 stopping: threading.Event, on_progress: Callable[[], None]) -> None:
        self.job = job
        self.store = store
        self.worker_id = worker_id
        # Why the handler should stop: "cancelled", "lease lost" or "released".
        self.stop_reason: Optional[str] = None
        self._conn = conn
        self._tx: Optional[psycopg.Transaction] = None
        self._stopping = stopping
        self._stop = threading.Event()
        self._progress: tuple[int, Any] = (0, None)  # (reports so far, the last one): one tuple, swapped whole
        self._on_progress = on_progress

    @property
    def payload(self) -> Any:
        return self.job.payload

    @property
    def stopping(self) -> bool:
        """The worker is shutting down: a long handler may wrap up early."""
        return self._stopping.is_set()

    @property
    def lease_lost(self) -> bool:
        """The job is no longer this handler's (cancelled, reaped, picked up
        again, or released at shutdown): stop, its outcome will be dropped."""
        return self.stop_reason is not None

    @property
    def cancelled(self) -> bool:
        """An operator cancelled the job (pqrun.cancel) while it ran."""
        return self.stop_reason == "cancelled"

    def wait(self, seconds: float) -> bool:
        """Sleep up to ``seconds``; True, at once, when the handler should stop (``lease_lost``)."""
        return self._stop.wait(seconds)

    def progress(self, value: Any) -> None:
        """Report how far the job got: a JSON value of at most 8 kB, stored in
        ``pqrun.jobs.progress`` within about a second (only the latest report
        counts) and kept after the job ends. A retry or a released job's next
        attempt finds it in ``ctx.job.progress``, to resume from there."""
        self._progress = (self._progress[0] + 1, value)
        self._on_progress()

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

    def _lose(self, reason: str) -> None:
        self.stop_reason = self.stop_reason or reason
        self._stop.set()

    def _end(self, exc: Optional[BaseException] = None) -> None:
        """Commit the job's transaction, or roll it back when exc is given."""
        tx, self._tx = self._tx, None
        if tx is not None:
            tx.__exit__(type(exc) if exc else None, exc, exc.__traceback__ if exc else None)


@dataclasses.dataclass
class _InFlight:
    job: Job
    ctx: JobContext
    n: int  # the slot running it
    started: float
    settled: bool = False  # the handler returned: its heartbeats' errors no longer matter
    progress_sent: int = 0  # reports stored so far (ctx._progress[0] when none is pending)
    next_report: float = 0.0  # monotonic time before which no report is written
    waiting_on: Optional[psycopg.Connection] = None  # the heartbeat connection, while it waits a full period
    cut_at: float = 0.0  # when a report last cancelled that wait


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
                 loop_error_policy: LoopErrorPolicy = LoopErrorPolicy(), hold: str = "session") -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        if heartbeat_interval <= 0:
            raise ValueError("heartbeat_interval must be positive")
        if hold not in ("session", "lease"):
            raise ValueError("hold must be 'session' or 'lease'")
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
        self.hold = hold

        self._stop = threading.Event()       # the poller and the slots: claim nothing more
        self._beats_stop = threading.Event()  # heartbeat threads: exit
        self._stop_requests = 0               # signals received (plain int: signal-safe)
        self._lock = threading.Lock()
        # The handoff from the poller to the slots, under _lock: _idle slots
        # wait on _ready for a job of _handoff; the poller waits on it for
        # _idle to exceed len(_handoff), the slots no job is meant for yet.
        self._ready = threading.Condition(self._lock)
        self._handoff: collections.deque[Job] = collections.deque()
        self._idle = 0
        self._poller: Optional[threading.Thread] = None
        self._poll_conn: Optional[psycopg.Connection] = None
        self._polling = False  # the poller is inside its long-poll pickup
        self._inflight: dict[int, _InFlight] = {}
        self._slots: list[threading.Thread] = []
        self._beats: list[threading.Thread] = []
        self._beat_wake = {n: threading.Event() for n in range(1, concurrency + 1)}
        self._beat_conns: dict[int, psycopg.Connection] = {}

    def _named(self, **overrides: Any) -> dict:
        """Connection options that name the connection ``pqrun-worker`` in
        pg_stat_activity, unless the DSN, the store's options or PGAPPNAME
        name it."""
        if ("application_name" not in psycopg.conninfo.conninfo_to_dict(self.store.dsn)
                and "application_name" not in self.store.connect_kwargs and not os.environ.get("PGAPPNAME")):
            overrides["application_name"] = "pqrun-worker"
        return overrides

    def _connect(self, poller: bool = False) -> psycopg.Connection:
        """A connection of the poller, a slot or a slot's heartbeats, whose
        claims are held as ``hold`` says."""
        conn = self.store.connect(**self._named())
        if self.hold == "session":
            conn.execute("SET pqrun.claim_hold = session")
            if poller:
                # The poller's session holds jobs while it waits in a pickup,
                # and a waiting backend notices that its client died only
                # when it looks: once a second, not at the end of the wait.
                try:
                    conn.execute("SET client_connection_check_interval = '1s'")
                except psycopg.Error as exc:  # a platform without the check
                    log.debug("poller: client_connection_check_interval not set: %s", exc)
        return conn

    # -- lifecycle ----------------------------------------------------------------

    def start(self) -> None:
        log.info("worker %s: %d slot(s), job types %s, queues %s", self.worker_id, self.concurrency,
                 ",".join(self.job_types), ",".join(self.queues) if self.queues else "(all)")
        for n in range(1, self.concurrency + 1):
            b = threading.Thread(target=self._beat_loop, args=(n,), name=f"pqrun-beat-{n}", daemon=True)
            b.start()
            self._beats.append(b)
            t = threading.Thread(target=self._slot, args=(n,), name=f"pqrun-slot-{n}", daemon=True)
            t.start()
            self._slots.append(t)
        self._poller = threading.Thread(target=self._poll, name="pqrun-poller", daemon=True)
        self._poller.start()

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
        with self._ready:
            self._stop.set()
            self._ready.notify_all()  # free slots and a poller waiting for one
            log.info("shutting down: %d job(s) in flight, grace period %gs", len(self._inflight), self.grace_period)
        self._cancel_poll()
        poller = self._poller
        deadline = time.monotonic() + self.grace_period
        recancel = time.monotonic() + 1.0
        handed_back = False
        while ((poller is not None and poller.is_alive()) or any(t.is_alive() for t in self._slots)) \
                and time.monotonic() < deadline and self._stop_requests < 2:
            if not handed_back and (poller is None or not poller.is_alive()):
                handed_back = True
                self._release_unassigned()
            if time.monotonic() >= recancel:
                # A cancel that reaches the backend before the pickup starts
                # is ignored: repeat it while the poller still waits.
                recancel = time.monotonic() + 1.0
                self._cancel_poll()
            time.sleep(0.05)
        self._release_unassigned()
        with self._lock:
            unfinished = [f for f in self._inflight.values() if not f.settled and not f.ctx.lease_lost]
            for f in unfinished:
                f.ctx._lose("released")
        if unfinished:
            self._release(unfinished)
        with self._lock:
            beat_conns = list(self._beat_conns.values())
        for conn in beat_conns:  # a heartbeat still waiting for a job that ended
            try:
                conn.cancel()
            except psycopg.Error:
                pass
        self._beats_stop.set()
        for wake in self._beat_wake.values():
            wake.set()
        for b in self._beats:
            b.join(timeout=2)
        for t in self._slots:
            t.join(timeout=0.2)
        # The poller's session holds the jobs it claimed: it closes only now
        # that they are finished or given back (a poller still inside its
        # pickup keeps its connection, which ends with the process).
        if poller is not None and not poller.is_alive() and self._poll_conn is not None:
            self._poll_conn.close()
        log.info("worker %s stopped", self.worker_id)
        return 0

    @property
    def stragglers(self) -> int:
        """Handler threads still running after shutdown (their jobs were released)."""
        return sum(t.is_alive() for t in self._slots)

    def _cancel_poll(self) -> None:
        """Cancels the poller's waiting pickup. Under _lock, so the cancel can
        only reach that pickup: the poller clears _polling under _lock
        before its connection runs anything else."""
        with self._lock:
            if self._polling and self._poll_conn is not None:
                try:
                    self._poll_conn.cancel()
                except psycopg.Error:
                    pass

    def _side_connection(self, what: str) -> Optional[psycopg.Connection]:
        """A short-lived connection for a release or a late report, bounded in time."""
        try:
            conn = self.store.connect(**self._named(connect_timeout=5))
            conn.execute("SET statement_timeout = '5s'")
            return conn
        except psycopg.Error as exc:
            log.error("cannot %s, the server gives the job(s) back later: %s", what, exc)
            return None

    def _release_unassigned(self) -> None:
        """Gives back, with pqrun.release, the jobs the poller claimed for no slot yet."""
        with self._lock:
            jobs = list(self._handoff)
            self._handoff.clear()
        if not jobs:
            return
        conn = self._side_connection(f"release {len(jobs)} unstarted job(s)")
        if conn is None:
            return
        with conn:
            for job in jobs:
                try:
                    self.store.release(job, conn=conn)
                    log.info("job %s (%s) released unstarted -> READY, attempt not counted", job.id, job.job_type)
                except psycopg.Error as exc:
                    log.warning("job %s: release failed: %s", job.id, exc)

    def _release(self, flights: list[_InFlight]) -> None:
        conn = self._side_connection(f"release {len(flights)} job(s)")
        if conn is None:
            return
        with conn:
            for f in flights:
                self._flush_progress(f, conn)
                try:
                    self.store.release(f.job, conn=conn)
                    log.warning("job %s (%s) released -> READY, attempt not counted (ran %.1fs, grace period %gs)",
                                f.job.id, f.job.job_type, time.monotonic() - f.started, self.grace_period)
                except psycopg.Error as exc:
                    if lease_lost(exc):
                        log.info("job %s finished or lost its lease meanwhile", f.job.id)
                    else:
                        log.error("job %s: release failed: %s", f.job.id, exc)

    # -- the poller and the slots ------------------------------------------------------

    def _poll(self) -> None:
        """Claims jobs for the free slots: one long-poll pickup at a time, for
        as many jobs as slots are free, and only while one is."""
        errors = 0
        while True:
            with self._ready:
                while not self._stop.is_set() and self._idle <= len(self._handoff):
                    self._ready.wait()
                if self._stop.is_set():
                    break
                free = self._idle - len(self._handoff)
            try:
                conn = self._poll_conn
                if conn is None or conn.closed or conn.broken:
                    if conn is not None:
                        conn.close()
                    conn = self._poll_conn = self._connect(poller=True)
                with self._lock:
                    if self._stop.is_set():
                        break
                    self._polling = True
                try:
                    jobs = self.store.pickup(self.worker_id, self.job_types, self.queues, batch_size=free,
                                             wait=self.poll_wait, conn=conn)
                finally:
                    with self._lock:
                        self._polling = False
                errors = 0
            except psycopg.Error as exc:
                if self._stop.is_set():
                    break  # our own cancel at shutdown
                errors += 1
                delay = self.loop_error_policy.delay(errors)
                log.warning("poller: pickup failed (%s); retrying in %gs", exc, delay)
                self._stop.wait(delay)
                continue
            if jobs:
                log.debug("poller: claimed %d job(s) for %d free slot(s)", len(jobs), free)
                with self._ready:
                    # After a stop no slot takes them: shutdown releases them.
                    self._handoff.extend(jobs)
                    self._ready.notify_all()

    def _next_job(self) -> Optional[Job]:
        """Waits, as a free slot, for a job from the poller; None at shutdown."""
        with self._ready:
            self._idle += 1
            self._ready.notify_all()  # one more free slot for the poller
            try:
                while not self._handoff and not self._stop.is_set():
                    self._ready.wait()
                if self._stop.is_set():
                    return None
                return self._handoff.popleft()
            finally:
                self._idle -= 1

    def _slot(self, n: int) -> None:
        conn: Optional[psycopg.Connection] = None
        errors = 0
        job: Optional[Job] = None  # claimed with the last job's mark_done: ours already
        while job is not None or not self._stop.is_set():
            if job is None:
                # A slot counts as free only with a connection to run its job on.
                if conn is None or conn.closed or conn.broken:
                    if conn is not None:
                        conn.close()
                    try:
                        conn = self._connect()
                        errors = 0
                    except psycopg.Error as exc:
                        errors += 1
                        delay = self.loop_error_policy.delay(errors)
                        log.warning("slot %d: cannot connect (%s); retrying in %gs", n, exc, delay)
                        conn = None
                        self._stop.wait(delay)
                        continue
                job = self._next_job()
                if job is None:
                    break
            try:
                job = self._run(job, conn, n)
            except Exception as exc:  # the connection broke, or the commit failed
                log.exception("slot %d: job %s: could not report its outcome", n, job.id)
                self._report_lost(job, exc)
                job = None
        if conn is not None:
            conn.close()
        self.store.close()

    def _report_lost(self, job: Job, exc: Exception) -> None:
        """Records a failed attempt of `job`, whose outcome its slot could not
        report, from a new connection: the job may be held by the poller's
        session, which lives on, and would otherwise wait for its stale
        window. If the report did commit, the lease token makes pqrun refuse
        this one (55000)."""
        conn = self._side_connection(f"record the lost outcome of job {job.id}")
        if conn is None:
            return
        with conn:
            try:
                status = self.store.mark_error(job, f"the worker could not report the outcome: {exc}", conn=conn)
                log.warning("job %s (%s): outcome lost -> %s", job.id, job.job_type, status)
            except psycopg.Error as mark_exc:
                if not lease_lost(mark_exc):
                    log.error("job %s: mark_error failed (%s); the server rescues it later", job.id, mark_exc)

    def _run(self, job: Job, conn: psycopg.Connection, n: int) -> Optional[Job]:
        """Runs `job` on slot n and reports its outcome. A job that ends DONE
        is marked done by mark_done_and_pickup, which claims the slot's next
        job in the same transaction (one commit per job instead of two),
        unless the worker is stopping: returned once that transaction
        committed."""
        ctx = JobContext(job, self.store, self.worker_id, conn, self._stop,
                         on_progress=lambda: self._progress_reported(flight))
        claimed: list[Job] = []
        flight = _InFlight(job, ctx, n, started=time.monotonic())
        with self._lock:
            self._inflight[n] = flight
        self._beat_wake[n].set()
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
                flight.settled = True
                ctx._end(exc)  # the handler's writes and follow-ups roll back
                if not self._dropped(flight):
                    self._flush_progress(flight, conn)
                    if isinstance(exc, Snooze):
                        self._snooze(ctx, exc, conn)
                    else:
                        self._fail(ctx, exc, conn)
                return None
            flight.settled = True
            if self._dropped(flight):
                ctx._end(psycopg.Rollback())
                return None
            try:
                ctx.conn  # mark_done joins the job's transaction
                self._flush_progress(flight, conn)
                if not self._stop.is_set():
                    claimed = self.store.mark_done_and_pickup(job, result, self.worker_id, self.job_types,
                                                              self.queues, conn=conn)
                else:
                    self.store.mark_done(job, result, conn=conn)
            except Exception as exc:
                ctx._end(exc)
                if lease_lost(exc):
                    self._lease_lost(flight)
                else:  # e.g. the handler left the transaction aborted, or a result that is not JSON
                    self._fail(ctx, exc, conn)
                return None
            ctx._end()  # the claim counts only once this commit returned
            log.info("job %s (%s) done in %.0f ms", job.id, job.job_type, (time.monotonic() - flight.started) * 1000)
            return claimed[0] if claimed else None
        finally:
            with self._lock:
                self._inflight.pop(n, None)

    def _dropped(self, flight: _InFlight) -> bool:
        """The handler returned after its job stopped being ours: nothing to report."""
        if not flight.ctx.lease_lost:
            return False
        log.warning("job %s (%s) handler stopped (%s) after %.1fs; outcome dropped", flight.job.id,
                    flight.job.job_type, flight.ctx.stop_reason, time.monotonic() - flight.started)
        return True

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
            elif conn.broken:
                raise  # the slot records the attempt from a new connection
            else:
                log.error("job %s: mark_error failed (%s); the server rescues it later", job.id, mark_exc)
            return
        message = str(exc) if len(str(exc)) <= 200 else str(exc)[:200] + "..."
        log.log(logging.ERROR if status == "FAILED" else logging.WARNING,
                "job %s (%s) attempt %d/%d: %s: %s -> %s", job.id, job.job_type, job.attempts,
                job.max_attempts, type(exc).__name__, message, status)

    def _snooze(self, ctx: JobContext, snooze: Snooze, conn: psycopg.Connection) -> None:
        try:
            self.store.snooze(ctx.job, snooze.seconds, conn=conn)
        except psycopg.Error as exc:
            if lease_lost(exc):
                self._lease_lost(self._flight_of(ctx.job))
            else:  # a delay pqrun refuses (negative, over 100 years) fails the attempt
                self._fail(ctx, exc, conn)
            return
        log.info("job %s (%s) snoozed for %gs", ctx.job.id, ctx.job.job_type, snooze.seconds)

    def _flight_of(self, job: Job) -> Optional[_InFlight]:
        with self._lock:
            return next((f for f in self._inflight.values() if f.job.id == job.id), None)

    def _lease_lost(self, flight: Optional[_InFlight]) -> None:
        if flight is None:
            return
        if flight.ctx.stop_reason == "released":
            log.info("job %s finished after it was released at shutdown; outcome discarded", flight.job.id)
        else:
            log.warning("job %s lost its lease (reaped, cancelled or re-picked); its outcome and "
                        "writes were rolled back", flight.job.id)

    # -- heartbeats and progress ----------------------------------------------------

    def _beat_loop(self, n: int) -> None:
        """Slot n's heartbeats. A waiting heartbeat sleeps inside its
        statement, so it has a connection of its own: on the slot's, the
        job's mark_done would queue behind it."""
        conn: Optional[psycopg.Connection] = None
        wake = self._beat_wake[n]
        # Jobs shorter than this cost no heartbeat; half the interval keeps
        # the first renewal well inside a timeout of four intervals.
        first = min(1.0, self.heartbeat_interval / 2)
        while not self._beats_stop.is_set():
            wake.clear()
            with self._lock:
                f = self._inflight.get(n)
            if f is None or f.settled or f.ctx.lease_lost:
                wake.wait()
                continue
            if f.ctx._progress[0] == f.progress_sent and time.monotonic() < f.started + first:
                wake.wait(f.started + first - time.monotonic())
                continue
            try:
                if conn is None or conn.closed:
                    conn = self._connect()
                    with self._lock:
                        self._beat_conns[n] = conn
                self._heartbeat(f, conn)
            except psycopg.Error as exc:
                if f.settled or f.ctx.lease_lost:
                    continue  # the job ended during the wait, so the heartbeat failed
                if lease_lost(exc):
                    reason = "cancelled" if job_cancelled(exc) else "lease lost"
                    f.ctx._lose(reason)
                    log.warning("job %s (%s) %s while running (%s); its handler is told to stop",
                                f.job.id, f.job.job_type, reason, exc.diag.message_detail or exc)
                elif exc.sqlstate != QUERY_CANCELED:  # not a progress report cutting the wait short
                    log.warning("job %s: heartbeat failed: %s", f.job.id, exc)
                    if conn is not None and conn.broken:
                        conn.close()
                    self._beats_stop.wait(1.0)
        if conn is not None:
            conn.close()

    def _heartbeat(self, f: _InFlight, conn: psycopg.Connection) -> None:
        """One heartbeat of f's job: the pending progress report if it is due;
        within a second of the last report a wait until the next one is due
        (a handler that reports once usually reports again); else a wait of
        heartbeat_interval, which a new report cuts short."""
        now = time.monotonic()
        with self._lock:  # with _progress_reported: a report comes before this (sent) or cuts the wait
            seq, value = f.ctx._progress
            due = now >= f.next_report
            report = due and seq != f.progress_sent
            f.waiting_on = conn if due and not report else None
        wait = 0.0 if report else self.heartbeat_interval if due else f.next_report - now
        try:
            self.store.heartbeat(f.job, progress=value if report else None, wait=wait, conn=conn)
        except (psycopg.Error, TypeError) as exc:
            if not report or lease_lost(exc) or isinstance(exc, psycopg.OperationalError):
                raise
            log.error("job %s: progress report dropped: %s", f.job.id, exc)  # not JSON, or over 8 kB
        finally:
            with self._lock:
                f.waiting_on = None
        if report:
            f.progress_sent = seq
            f.next_report = time.monotonic() + PROGRESS_EVERY
        log.debug("job %s heartbeat after %.1fs", f.job.id, time.monotonic() - f.started)

    def _progress_reported(self, f: _InFlight) -> None:
        now = time.monotonic()
        with self._lock:
            # Once a second at most: a cancel that reached the server before
            # the statement did is ignored, and the next report tries again.
            conn = f.waiting_on if now - f.cut_at >= PROGRESS_EVERY else None
            if conn is not None:
                f.cut_at = now
        if conn is not None:
            try:
                conn.cancel()
            except psycopg.Error:
                pass
        self._beat_wake[f.n].set()

    def _flush_progress(self, f: _InFlight, conn: psycopg.Connection) -> None:
        """Stores the handler's last progress report if no heartbeat carried it yet."""
        seq, value = f.ctx._progress
        if seq == f.progress_sent:
            return
        f.progress_sent = seq
        try:
            # Inside the job's transaction a savepoint: a refused report must not undo the job's work.
            with conn.transaction():
                self.store.heartbeat(f.job, progress=value, conn=conn)
        except (psycopg.Error, TypeError) as exc:
            log.warning("job %s: last progress report not stored: %s", f.job.id, exc)

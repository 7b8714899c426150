"""Worker: runs handlers for pqrun jobs, in threads.

A worker has ``concurrency`` slots, each a thread that runs one job at a
time on a connection of its own, and one poller, a thread with a connection
of its own that claims jobs for the slots that are free:

- The poller long-polls ``pqrun.pickup(worker_id, ..., batch_size => <free
  slots>, wait => poll_wait)`` while at least one slot is free (the server
  wakes it when a matching job is committed) and hands each job it gets to a
  free slot. A burst of jobs is claimed in batches of up to the free slots,
  and however many slots a worker has, at most one of its connections waits
  in a pickup.
- A slot checks the job's args, calls the handler registered for its type
  and reports the outcome:

  - the handler returns (a JSON value or None) -> mark_done(result), as
    ``pqrun.mark_done_and_pickup`` (one job, no wait): the same statement
    claims the slot's next job, so a busy slot commits once per job; only
    when it gets none is the slot free again, for the poller to fill
  - it raises TerminalError (or the args do not fit) -> mark_error(terminal
    => true): FAILED
  - it raises Snooze(seconds) -> pqrun.snooze: READY again after `seconds`,
    the attempt not used up
  - it raises anything else -> mark_error(traceback): READY again with
    backoff (pqrun.backoff, or RetryLater(after=...)), FAILED when out of
    attempts.

Every claim is made under ``worker_id`` (default ``hostname-pid``), the
poller's and the slots' alike, so ``pqrun.workers`` shows one row per
worker process; the log names the slot (thread ``pqrun-slot-N``).

A handler's database work through ``ctx.conn`` and ``ctx.enqueue`` runs in
the transaction that marks its job done, on the slot's connection: the
follow-up job and the handler's writes exist exactly when the job is DONE.
If the lease was lost meanwhile (the job was reaped or cancelled), pqrun
refuses mark_done and all of it rolls back.

Each slot has a heartbeat thread with a connection of its own. A job that
runs longer than a second (or half of ``heartbeat_interval``, if less) gets
``pqrun.heartbeat(..., wait => heartbeat_interval)`` over and over: it sleeps
in the server and renews the lease at its end, and it fails (55000) the
moment an operator cancels the job, so the handler hears of it at once
(``ctx.cancelled``, ``ctx.wait()``) and the worker drops its outcome. The
handler's ``ctx.progress(...)`` reports go out with a heartbeat of their own,
at most one a second (a report cancels a waiting heartbeat to get out now),
and the last one at the latest with the job's outcome.

With ``hold="session"`` (the default) every connection of the worker runs
``SET pqrun.claim_hold = session``: a job is held by the session that
claimed it (the poller's, or the slot's for a job mark_done_and_pickup
claimed) until a heartbeat moves the hold to the slot's heartbeat
connection. All of them live as long as the worker, so if the process dies
a maintenance round gives its jobs back within a second or two. Behind a
pooler in transaction mode pass ``hold="lease"``: the jobs then wait for
their stale window.

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
import signal
import threading
import time
from typing import Any, Dict, List, Optional

import psycopg

from . import protocol
from .context import JobContext
from .core import QUERY_CANCELED, Flight, WorkerBase, log
from .errors import LeaseLost, Snooze, TerminalError
from .jobs import Job
from .protocol import execute


class Worker(WorkerBase):
    """``Worker(registry, "dbname=app", concurrency=4).run()`` serves until
    SIGTERM or SIGINT. Sync handlers run in the slots' threads; an ``async
    def`` handler runs there too, with ``asyncio.run``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._stop = threading.Event()        # the poller and the slots: claim nothing more
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
        self._poll_conn: Optional[psycopg.Connection[Any]] = None
        self._polling = False  # the poller is inside its long-poll pickup
        self._inflight: Dict[int, Flight] = {}
        self._slots: List[threading.Thread] = []
        self._beats: List[threading.Thread] = []
        self._beat_wake = {n: threading.Event() for n in range(1, self.concurrency + 1)}
        self._beat_conns: Dict[int, psycopg.Connection[Any]] = {}

    def _connect(self, poller: bool = False, **overrides: Any) -> psycopg.Connection[Any]:
        conn = psycopg.connect(self.conninfo, **self._connect_options(**overrides))
        for call, optional in self._session_setup(poller):
            try:
                execute(conn, call)
            except psycopg.Error as exc:
                if not optional:
                    conn.close()
                    raise
                log.debug("poller: %s not set: %s", call.query, exc)
        return conn

    # -- lifecycle ----------------------------------------------------------------

    def start(self) -> None:
        """Starts the slots, their heartbeat threads and the poller."""
        self._describe()
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
        """Ask run() to shut down (as SIGTERM does); a second call skips the grace period."""
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
        """Stops claiming, waits up to grace_period for the jobs in flight,
        releases the rest. Returns 0."""
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
            unfinished = [f for f in self._inflight.values() if not f.idle]
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

    def _side_connection(self, what: str) -> Optional[psycopg.Connection[Any]]:
        """A short-lived connection for a release or a late report, bounded in time."""
        try:
            conn = psycopg.connect(self.conninfo, **self._connect_options(connect_timeout=5))
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
                    execute(conn, protocol.release(job))
                    log.info("job %s (%s) released unstarted -> READY, attempt not counted", job.id, job.job_type)
                except psycopg.Error as exc:
                    log.warning("job %s: release failed: %s", job.id, exc)

    def _release(self, flights: List[Flight]) -> None:
        conn = self._side_connection(f"release {len(flights)} job(s)")
        if conn is None:
            return
        with conn:
            for f in flights:
                self._flush_progress(f, conn)
                try:
                    execute(conn, protocol.release(f.job))
                    self._released(f)
                except LeaseLost:
                    log.info("job %s finished or lost its lease meanwhile", f.job.id)
                except psycopg.Error as exc:
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
                    jobs = execute(conn, protocol.pickup(self.worker_id, self.job_types, self.queues,
                                                         batch_size=free, wait=self.poll_wait))
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
        conn: Optional[psycopg.Connection[Any]] = None
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
            assert conn is not None
            current, job = job, None
            try:
                job = self._run(current, conn, n)
            except Exception as exc:  # the connection broke, or the commit failed
                log.exception("slot %d: job %s: could not report its outcome", n, current.id)
                self._report_lost(current, exc)
        if conn is not None:
            conn.close()

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
                status = execute(conn, protocol.mark_error(job, f"the worker could not report the outcome: {exc}"))
                log.warning("job %s (%s): outcome lost -> %s", job.id, job.job_type, status)
            except LeaseLost:
                pass
            except psycopg.Error as mark_exc:
                log.error("job %s: mark_error failed (%s); the server rescues it later", job.id, mark_exc)

    def _run(self, job: Job, conn: psycopg.Connection[Any], n: int) -> Optional[Job]:
        """Runs `job` on slot n and reports its outcome. A job that ends DONE
        is marked done by mark_done_and_pickup, which claims the slot's next
        job in the same transaction (one commit per job instead of two),
        unless the worker is stopping: returned once that transaction
        committed."""
        ctx: JobContext[Any] = JobContext(job, self.worker_id, conn, self._stop.is_set,
                                          on_progress=lambda: self._progress_reported(flight))
        claimed: List[Job] = []
        flight = Flight(job, ctx, n, started=time.monotonic())
        with self._lock:
            self._inflight[n] = flight
        self._beat_wake[n].set()
        self._started(job)
        try:
            try:
                spec = self.registry.spec(job.job_type)
                if spec is None:
                    raise TerminalError(f"no handler registered for job type {job.job_type!r}")
                ctx.args = spec.args(job.payload)
                result = spec.fn(ctx)
                if asyncio.iscoroutine(result):
                    result = asyncio.run(result)
            except Exception as exc:
                flight.settled = True
                ctx._end(exc)  # the handler's writes and follow-ups roll back
                if not self._dropped(flight):
                    self._flush_progress(flight, conn)
                    if isinstance(exc, Snooze):
                        self._snooze(flight, exc, conn)
                    else:
                        self._fail(flight, exc, conn)
                return None
            flight.settled = True
            if self._dropped(flight):
                ctx._end(psycopg.Rollback())
                return None
            try:
                ctx.conn  # mark_done joins the job's transaction
                self._flush_progress(flight, conn)
                if not self._stop.is_set():
                    claimed = execute(conn, protocol.mark_done_and_pickup(job, result, self.worker_id, self.job_types,
                                                                          self.queues))
                else:
                    execute(conn, protocol.mark_done(job, result))
            except Exception as exc:
                ctx._end(exc)
                if isinstance(exc, LeaseLost):
                    self._lease_lost(flight)
                else:  # e.g. the handler left the transaction aborted, or a result that is not JSON
                    self._fail(flight, exc, conn)
                return None
            ctx._end()  # the claim counts only once this commit returned
            self._done(flight)
            return claimed[0] if claimed else None
        finally:
            with self._lock:
                self._inflight.pop(n, None)

    def _fail(self, f: Flight, exc: Exception, conn: psycopg.Connection[Any]) -> None:
        try:
            status = execute(conn, self._error_call(f.job, exc))
        except LeaseLost:
            self._lease_lost(f)
            return
        except psycopg.Error as mark_exc:
            if conn.broken:
                raise  # the slot records the attempt from a new connection
            log.error("job %s: mark_error failed (%s); the server rescues it later", f.job.id, mark_exc)
            return
        self._failed(f.job, exc, status)

    def _snooze(self, f: Flight, snooze: Snooze, conn: psycopg.Connection[Any]) -> None:
        try:
            execute(conn, protocol.snooze(f.job, snooze.seconds))
        except LeaseLost:
            self._lease_lost(f)
            return
        except psycopg.Error as exc:  # a delay pqrun refuses (negative, over 100 years) fails the attempt
            self._fail(f, exc, conn)
            return
        self._snoozed(f.job, snooze)

    # -- heartbeats and progress ----------------------------------------------------

    def _beat_loop(self, n: int) -> None:
        """Slot n's heartbeats. A waiting heartbeat sleeps inside its
        statement, so it has a connection of its own: on the slot's, the
        job's mark_done would queue behind it."""
        conn: Optional[psycopg.Connection[Any]] = None
        wake = self._beat_wake[n]
        while not self._beats_stop.is_set():
            wake.clear()
            with self._lock:
                f = self._inflight.get(n)
            if f is None or f.idle:
                wake.wait()
                continue
            first = f.first_beat(self.heartbeat_interval)
            if first is not None:
                wake.wait(first)
                continue
            try:
                if conn is None or conn.closed:
                    conn = self._connect()
                    with self._lock:
                        self._beat_conns[n] = conn
                self._heartbeat(f, conn)
            except psycopg.Error as exc:
                if f.idle:
                    continue  # the job ended during the wait, so the heartbeat failed
                if isinstance(exc, LeaseLost):
                    self._lost_while_running(f, exc)
                elif exc.sqlstate != QUERY_CANCELED:  # not a progress report cutting the wait short
                    log.warning("job %s: heartbeat failed: %s", f.job.id, exc)
                    if conn is not None and conn.broken:
                        conn.close()
                    self._beats_stop.wait(1.0)
        if conn is not None:
            conn.close()

    def _heartbeat(self, f: Flight, conn: psycopg.Connection[Any]) -> None:
        """One heartbeat of f's job (``Flight.plan_beat``)."""
        with self._lock:  # with _progress_reported: a report comes before this (sent) or cuts the wait
            beat = f.plan_beat(self.heartbeat_interval)
            f.waiting_on = conn if beat.full else None
        try:
            execute(conn, protocol.heartbeat(f.job, progress=beat.value, wait=beat.wait))
        except (psycopg.Error, TypeError) as exc:
            if not beat.report or isinstance(exc, (LeaseLost, psycopg.OperationalError)):
                raise
            log.error("job %s: progress report dropped: %s", f.job.id, exc)  # not JSON, or over 8 kB
        finally:
            with self._lock:
                f.waiting_on = None
        if beat.report:
            f.reported(beat.seq)
        log.debug("job %s heartbeat after %.1fs", f.job.id, time.monotonic() - f.started)

    def _progress_reported(self, f: Flight) -> None:
        with self._lock:
            conn = f.cut()
        if conn is not None:
            try:
                conn.cancel()
            except psycopg.Error:
                pass
        self._beat_wake[f.n].set()

    def _flush_progress(self, f: Flight, conn: psycopg.Connection[Any]) -> None:
        """Stores the handler's last progress report if no heartbeat carried it yet."""
        unsent = f.unsent()
        if unsent is None:
            return
        f.progress_sent = unsent[0]
        try:
            # Inside the job's transaction a savepoint: a refused report must not undo the job's work.
            with conn.transaction():
                execute(conn, protocol.heartbeat(f.job, progress=unsent[1]))
        except (psycopg.Error, TypeError) as exc:
            log.warning("job %s: last progress report not stored: %s", f.job.id, exc)

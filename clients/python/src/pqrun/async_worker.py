"""AsyncWorker: the worker of ``worker.py`` on asyncio and psycopg's
``AsyncConnection``, for ``async def`` handlers.

The same shape and the same calls (``protocol``): ``concurrency`` slots,
tasks with a connection each, one poller task that long-polls pickups for
the free slots, finish-and-claim with ``mark_done_and_pickup``, a heartbeat
task per slot on a connection of its own whose waiting heartbeat hears of a
cancel at once, progress reports that cut that wait short, snooze, and a
graceful shutdown that releases what is still running when the grace
period ends. Handlers share the event loop: one that blocks it (CPU-bound
work, a blocking library) holds up every slot and the heartbeats, so give
such work to ``asyncio.to_thread`` or use the thread ``Worker``. A handler
still running after its job was released at shutdown is cancelled.
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
from .context import AsyncJobContext
from .core import QUERY_CANCELED, Flight, WorkerBase, log
from .errors import LeaseLost, Snooze, TerminalError
from .jobs import Job
from .protocol import execute_async

__all__ = ["AsyncJobContext", "AsyncWorker"]


class AsyncWorker(WorkerBase):
    """``await AsyncWorker(registry, "dbname=app", concurrency=20).run()``
    serves until SIGTERM or SIGINT (or ``stop()``). Every handler must be an
    ``async def`` taking an ``AsyncJobContext``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        sync = [t for t in self.job_types if not self.registry.spec(t).is_async]  # type: ignore[union-attr]
        if sync:
            raise ValueError(f"AsyncWorker runs async def handlers only; not async: {', '.join(sync)}")
        self._stop_requests = 0  # stop() calls and signals (plain int: safe from any thread)
        self._stopping = False   # the poller and the slots: claim nothing more
        self._beats_stopping = False
        self._ready: Optional[asyncio.Condition] = None  # made in start(), in the running loop
        self._handoff: collections.deque[Job] = collections.deque()
        self._idle = 0
        self._poller: Optional[asyncio.Task[None]] = None
        self._poll_conn: Optional[psycopg.AsyncConnection[Any]] = None
        self._polling = False
        self._inflight: Dict[int, Flight] = {}
        self._slots: List[asyncio.Task[None]] = []
        self._beats: List[asyncio.Task[None]] = []
        self._beat_wake: Dict[int, asyncio.Event] = {}
        self._beat_conns: Dict[int, psycopg.AsyncConnection[Any]] = {}

    async def _connect(self, poller: bool = False, **overrides: Any) -> psycopg.AsyncConnection[Any]:
        conn: psycopg.AsyncConnection[Any] = await psycopg.AsyncConnection.connect(
            self.conninfo, **self._connect_options(**overrides))
        for call, optional in self._session_setup(poller):
            try:
                await execute_async(conn, call)
            except psycopg.Error as exc:
                if not optional:
                    await conn.close()
                    raise
                log.debug("poller: %s not set: %s", call.query, exc)
        return conn

    # -- lifecycle ----------------------------------------------------------------

    async def start(self) -> None:
        """Starts the slots, their heartbeat tasks and the poller."""
        self._describe()
        self._ready = asyncio.Condition()
        for n in range(1, self.concurrency + 1):
            self._beat_wake[n] = asyncio.Event()
            self._beats.append(asyncio.create_task(self._beat_loop(n), name=f"pqrun-beat-{n}"))
            self._slots.append(asyncio.create_task(self._slot(n), name=f"pqrun-slot-{n}"))
        self._poller = asyncio.create_task(self._poll(), name="pqrun-poller")

    def stop(self) -> None:
        """Ask run() to shut down (as SIGTERM does), from any thread; a second
        call skips the grace period."""
        self._stop_requests += 1

    async def run(self) -> int:
        """Start, serve until SIGTERM/SIGINT or stop(), shut down gracefully. Returns 0."""
        loop = asyncio.get_running_loop()
        signals = []
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(sig, self.stop)
                signals.append(sig)
        try:
            await self.start()
            while not self._stop_requests:
                await asyncio.sleep(0.1)
            return await self.shutdown()
        finally:
            for sig in signals:
                loop.remove_signal_handler(sig)

    async def shutdown(self) -> int:
        """Stops claiming, waits up to grace_period for the jobs in flight,
        releases the rest and cancels their handlers. Returns 0."""
        assert self._ready is not None, "start() first"
        async with self._ready:
            self._stopping = True
            self._ready.notify_all()
        log.info("shutting down: %d job(s) in flight, grace period %gs", len(self._inflight), self.grace_period)
        self._cancel_poll()
        poller = self._poller
        deadline = time.monotonic() + self.grace_period
        recancel = time.monotonic() + 1.0
        handed_back = False
        while ((poller is not None and not poller.done()) or any(not t.done() for t in self._slots)) \
                and time.monotonic() < deadline and self._stop_requests < 2:
            if not handed_back and (poller is None or poller.done()):
                handed_back = True
                await self._release_unassigned()
            if time.monotonic() >= recancel:
                recancel = time.monotonic() + 1.0  # a cancel that came before the pickup began
                self._cancel_poll()
            await asyncio.sleep(0.05)
        await self._release_unassigned()
        unfinished = [f for f in self._inflight.values() if not f.idle]
        for f in unfinished:
            f.ctx._lose("released")
        if unfinished:
            await self._release(unfinished)
        for conn in list(self._beat_conns.values()):  # a heartbeat still waiting for a job that ended
            _cancel(conn)
        self._beats_stopping = True
        for wake in self._beat_wake.values():
            wake.set()
        await asyncio.wait(self._beats, timeout=2)
        # Handlers whose jobs were released: their outcome is dropped anyway.
        for t in self._slots:
            if not t.done():
                t.cancel()
        if self._slots:
            await asyncio.wait(self._slots, timeout=2)
        if poller is not None and not poller.done():
            poller.cancel()
            await asyncio.wait([poller], timeout=2)
        # The poller's session holds the jobs it claimed: it closes only now
        # that they are finished or given back.
        if self._poll_conn is not None:
            await self._poll_conn.close()
        log.info("worker %s stopped", self.worker_id)
        return 0

    def _cancel_poll(self) -> None:
        """Cancels the poller's waiting pickup (the loop runs nothing else meanwhile)."""
        if self._polling and self._poll_conn is not None:
            _cancel(self._poll_conn)

    async def _side_connection(self, what: str) -> Optional[psycopg.AsyncConnection[Any]]:
        """A short-lived connection for a release or a late report, bounded in time."""
        try:
            conn: psycopg.AsyncConnection[Any] = await psycopg.AsyncConnection.connect(
                self.conninfo, **self._connect_options(connect_timeout=5))
            await conn.execute("SET statement_timeout = '5s'")
            return conn
        except psycopg.Error as exc:
            log.error("cannot %s, the server gives the job(s) back later: %s", what, exc)
            return None

    async def _release_unassigned(self) -> None:
        """Gives back, with pqrun.release, the jobs the poller claimed for no slot yet."""
        jobs = list(self._handoff)
        self._handoff.clear()
        if not jobs:
            return
        conn = await self._side_connection(f"release {len(jobs)} unstarted job(s)")
        if conn is None:
            return
        async with conn:
            for job in jobs:
                try:
                    await execute_async(conn, protocol.release(job))
                    log.info("job %s (%s) released unstarted -> READY, attempt not counted", job.id, job.job_type)
                except psycopg.Error as exc:
                    log.warning("job %s: release failed: %s", job.id, exc)

    async def _release(self, flights: List[Flight]) -> None:
        conn = await self._side_connection(f"release {len(flights)} job(s)")
        if conn is None:
            return
        async with conn:
            for f in flights:
                await self._flush_progress(f, conn)
                try:
                    await execute_async(conn, protocol.release(f.job))
                    self._released(f)
                except LeaseLost:
                    log.info("job %s finished or lost its lease meanwhile", f.job.id)
                except psycopg.Error as exc:
                    log.error("job %s: release failed: %s", f.job.id, exc)

    # -- the poller and the slots ------------------------------------------------------

    async def _poll(self) -> None:
        """Claims jobs for the free slots: one long-poll pickup at a time, for
        as many jobs as slots are free, and only while one is."""
        assert self._ready is not None
        errors = 0
        while True:
            async with self._ready:
                while not self._stopping and self._idle <= len(self._handoff):
                    await self._ready.wait()
                if self._stopping:
                    break
                free = self._idle - len(self._handoff)
            try:
                conn = self._poll_conn
                if conn is None or conn.closed or conn.broken:
                    if conn is not None:
                        await conn.close()
                    conn = self._poll_conn = await self._connect(poller=True)
                if self._stopping:
                    break
                self._polling = True
                try:
                    jobs = await execute_async(conn, protocol.pickup(self.worker_id, self.job_types, self.queues,
                                                                     batch_size=free, wait=self.poll_wait))
                finally:
                    self._polling = False
                errors = 0
            except psycopg.Error as exc:
                if self._stopping:
                    break  # our own cancel at shutdown
                errors += 1
                delay = self.loop_error_policy.delay(errors)
                log.warning("poller: pickup failed (%s); retrying in %gs", exc, delay)
                await self._sleep_unless_stopping(delay)
                continue
            if jobs:
                log.debug("poller: claimed %d job(s) for %d free slot(s)", len(jobs), free)
                async with self._ready:
                    self._handoff.extend(jobs)  # after a stop no slot takes them: shutdown releases them
                    self._ready.notify_all()

    async def _sleep_unless_stopping(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        while not self._stopping and time.monotonic() < end:
            await asyncio.sleep(min(0.1, end - time.monotonic()))

    async def _next_job(self) -> Optional[Job]:
        """Waits, as a free slot, for a job from the poller; None at shutdown."""
        assert self._ready is not None
        async with self._ready:
            self._idle += 1
            self._ready.notify_all()  # one more free slot for the poller
            try:
                while not self._handoff and not self._stopping:
                    await self._ready.wait()
                if self._stopping:
                    return None
                return self._handoff.popleft()
            finally:
                self._idle -= 1

    async def _slot(self, n: int) -> None:
        conn: Optional[psycopg.AsyncConnection[Any]] = None
        errors = 0
        job: Optional[Job] = None  # claimed with the last job's mark_done: ours already
        try:
            while job is not None or not self._stopping:
                if job is None:
                    if conn is None or conn.closed or conn.broken:
                        if conn is not None:
                            await conn.close()
                        try:
                            conn = await self._connect()
                            errors = 0
                        except psycopg.Error as exc:
                            errors += 1
                            delay = self.loop_error_policy.delay(errors)
                            log.warning("slot %d: cannot connect (%s); retrying in %gs", n, exc, delay)
                            conn = None
                            await self._sleep_unless_stopping(delay)
                            continue
                    job = await self._next_job()
                    if job is None:
                        break
                assert conn is not None
                current, job = job, None
                try:
                    job = await self._run(current, conn, n)
                except Exception as exc:  # the connection broke, or the commit failed
                    log.exception("slot %d: job %s: could not report its outcome", n, current.id)
                    await self._report_lost(current, exc)
        finally:
            if conn is not None:
                await conn.close()

    async def _report_lost(self, job: Job, exc: Exception) -> None:
        """As ``Worker._report_lost``: a failed attempt, from a new connection."""
        conn = await self._side_connection(f"record the lost outcome of job {job.id}")
        if conn is None:
            return
        async with conn:
            try:
                status = await execute_async(conn, protocol.mark_error(
                    job, f"the worker could not report the outcome: {exc}"))
                log.warning("job %s (%s): outcome lost -> %s", job.id, job.job_type, status)
            except LeaseLost:
                pass
            except psycopg.Error as mark_exc:
                log.error("job %s: mark_error failed (%s); the server rescues it later", job.id, mark_exc)

    async def _run(self, job: Job, conn: psycopg.AsyncConnection[Any], n: int) -> Optional[Job]:
        """As ``Worker._run``: runs `job` and reports its outcome; returns the
        job mark_done_and_pickup claimed for this slot, if any."""
        ctx: AsyncJobContext[Any] = AsyncJobContext(job, self.worker_id, conn, lambda: self._stopping,
                                                    on_progress=lambda: self._progress_reported(flight))
        claimed: List[Job] = []
        flight = Flight(job, ctx, n, started=time.monotonic())
        self._inflight[n] = flight
        self._beat_wake[n].set()
        self._started(job)
        try:
            try:
                spec = self.registry.spec(job.job_type)
                if spec is None:
                    raise TerminalError(f"no handler registered for job type {job.job_type!r}")
                ctx.args = spec.args(job.payload)
                result = await spec.fn(ctx)
            except Exception as exc:
                flight.settled = True
                await ctx._end(exc)
                if not self._dropped(flight):
                    await self._flush_progress(flight, conn)
                    if isinstance(exc, Snooze):
                        await self._snooze(flight, exc, conn)
                    else:
                        await self._fail(flight, exc, conn)
                return None
            flight.settled = True
            if self._dropped(flight):
                await ctx._end(psycopg.Rollback())
                return None
            try:
                await ctx.connection()  # mark_done joins the job's transaction
                await self._flush_progress(flight, conn)
                if not self._stopping:
                    claimed = await execute_async(conn, protocol.mark_done_and_pickup(
                        job, result, self.worker_id, self.job_types, self.queues))
                else:
                    await execute_async(conn, protocol.mark_done(job, result))
            except Exception as exc:
                await ctx._end(exc)
                if isinstance(exc, LeaseLost):
                    self._lease_lost(flight)
                else:
                    await self._fail(flight, exc, conn)
                return None
            await ctx._end()
            self._done(flight)
            return claimed[0] if claimed else None
        finally:
            self._inflight.pop(n, None)

    async def _fail(self, f: Flight, exc: Exception, conn: psycopg.AsyncConnection[Any]) -> None:
        try:
            status = await execute_async(conn, self._error_call(f.job, exc))
        except LeaseLost:
            self._lease_lost(f)
            return
        except psycopg.Error as mark_exc:
            if conn.broken:
                raise
            log.error("job %s: mark_error failed (%s); the server rescues it later", f.job.id, mark_exc)
            return
        self._failed(f.job, exc, status)

    async def _snooze(self, f: Flight, snooze: Snooze, conn: psycopg.AsyncConnection[Any]) -> None:
        try:
            await execute_async(conn, protocol.snooze(f.job, snooze.seconds))
        except LeaseLost:
            self._lease_lost(f)
            return
        except psycopg.Error as exc:
            await self._fail(f, exc, conn)
            return
        self._snoozed(f.job, snooze)

    # -- heartbeats and progress ----------------------------------------------------

    async def _beat_loop(self, n: int) -> None:
        """Slot n's heartbeats, on a connection of their own (see ``Worker._beat_loop``)."""
        conn: Optional[psycopg.AsyncConnection[Any]] = None
        wake = self._beat_wake[n]
        try:
            while not self._beats_stopping:
                wake.clear()
                f = self._inflight.get(n)
                if f is None or f.idle:
                    await wake.wait()
                    continue
                first = f.first_beat(self.heartbeat_interval)
                if first is not None:
                    try:
                        await asyncio.wait_for(wake.wait(), first)
                    except asyncio.TimeoutError:
                        pass
                    continue
                try:
                    if conn is None or conn.closed:
                        conn = self._beat_conns[n] = await self._connect()
                    await self._heartbeat(f, conn)
                except psycopg.Error as exc:
                    if f.idle:
                        continue
                    if isinstance(exc, LeaseLost):
                        self._lost_while_running(f, exc)
                    elif exc.sqlstate != QUERY_CANCELED:
                        log.warning("job %s: heartbeat failed: %s", f.job.id, exc)
                        if conn is not None and conn.broken:
                            await conn.close()
                        await asyncio.sleep(1.0)
        finally:
            if conn is not None:
                await conn.close()

    async def _heartbeat(self, f: Flight, conn: psycopg.AsyncConnection[Any]) -> None:
        beat = f.plan_beat(self.heartbeat_interval)
        f.waiting_on = conn if beat.full else None
        try:
            await execute_async(conn, protocol.heartbeat(f.job, progress=beat.value, wait=beat.wait))
        except (psycopg.Error, TypeError) as exc:
            if not beat.report or isinstance(exc, (LeaseLost, psycopg.OperationalError)):
                raise
            log.error("job %s: progress report dropped: %s", f.job.id, exc)
        finally:
            f.waiting_on = None
        if beat.report:
            f.reported(beat.seq)
        log.debug("job %s heartbeat after %.1fs", f.job.id, time.monotonic() - f.started)

    def _progress_reported(self, f: Flight) -> None:
        conn = f.cut()
        if conn is not None:
            _cancel(conn)
        self._beat_wake[f.n].set()

    async def _flush_progress(self, f: Flight, conn: psycopg.AsyncConnection[Any]) -> None:
        unsent = f.unsent()
        if unsent is None:
            return
        f.progress_sent = unsent[0]
        try:
            async with conn.transaction():
                await execute_async(conn, protocol.heartbeat(f.job, progress=unsent[1]))
        except (psycopg.Error, TypeError) as exc:
            log.warning("job %s: last progress report not stored: %s", f.job.id, exc)


def _cancel(conn: psycopg.AsyncConnection[Any]) -> None:
    """Cancels the statement conn runs (a protocol cancel request; it blocks
    the loop for a round trip to the server)."""
    try:
        conn.cancel()
    except psycopg.Error:
        pass

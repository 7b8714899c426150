"""What the thread worker and the asyncio worker share: their settings,
how a connection of theirs is set up, a job in flight (its heartbeats and
progress reports), what a handler's exception makes of its job, and the
log lines. The two workers differ only in how they wait (threads and
locks, or tasks and events); the SQL they run is ``protocol``'s.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import socket
import time
import traceback
from typing import Any, Dict, List, Mapping, NamedTuple, Optional, Sequence, Tuple, Union

import psycopg.conninfo

from . import protocol
from .context import BaseContext
from .errors import RetryLater, Snooze, TerminalError
from .jobs import Job
from .registry import Handler, Registry

log = logging.getLogger("pqrun")

MAX_ERROR_CHARS = 10_000
PROGRESS_EVERY = 1.0  # seconds: at most one progress write per job this often
QUERY_CANCELED = "57014"


@dataclasses.dataclass(frozen=True)
class BackoffPolicy:
    """Client-side retry delays by attempt number (the last one repeats). The
    workers use none by default: the server's ``pqrun.backoff`` setting
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


def format_error(exc: BaseException) -> str:
    """The traceback, cut to pqrun's 10,000 characters; the end (the exception
    and the innermost frames) is the part worth keeping."""
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    if len(text) > MAX_ERROR_CHARS:
        text = "...\n" + text[-(MAX_ERROR_CHARS - 4):]
    return text


class Beat(NamedTuple):
    report: bool  # it carries progress report number `seq`, `value`
    seq: int
    value: Any
    wait: float  # seconds it waits in the server first
    full: bool  # a full heartbeat_interval, which a new report should cut short


@dataclasses.dataclass
class Flight:
    """A job running in slot ``n``, and the state of its heartbeats."""

    job: Job
    ctx: BaseContext[Any]
    n: int
    started: float
    settled: bool = False  # the handler returned: its heartbeats' errors no longer matter
    progress_sent: int = 0  # reports stored so far (ctx._progress[0] when none is pending)
    next_report: float = 0.0  # monotonic time before which no report is written
    waiting_on: Any = None  # the heartbeat connection, while it waits a full period
    cut_at: float = 0.0  # when a report last cancelled that wait

    @property
    def idle(self) -> bool:
        """Nothing for its heartbeats to do."""
        return self.settled or self.ctx.lease_lost

    def first_beat(self, interval: float) -> Optional[float]:
        """Seconds until the first heartbeat, or None when it is due. Jobs
        shorter than a second cost none (unless they report progress); half
        the interval keeps the first renewal well inside a timeout of four
        intervals."""
        if self.ctx._progress[0] != self.progress_sent:
            return None
        left = self.started + min(1.0, interval / 2) - time.monotonic()
        return left if left > 0 else None

    def plan_beat(self, interval: float) -> "Beat":
        """The next heartbeat: the pending report if one is due; within a
        second of the last report a wait until the next is due (a handler
        that reports once usually reports again); else a wait of
        ``interval``, which a report cuts short."""
        now = time.monotonic()
        seq, value = self.ctx._progress
        due = now >= self.next_report
        if due and seq != self.progress_sent:
            return Beat(True, seq, value, 0.0, False)
        return Beat(False, seq, None, interval if due else self.next_report - now, due)

    def reported(self, seq: int) -> None:
        self.progress_sent = seq
        self.next_report = time.monotonic() + PROGRESS_EVERY

    def cut(self) -> Any:
        """The connection of a full-period wait that a new report should cut
        short, at most once a second (a cancel that reached the server before
        the statement did is ignored, and the next report tries again)."""
        now = time.monotonic()
        if self.waiting_on is None or now - self.cut_at < PROGRESS_EVERY:
            return None
        self.cut_at = now
        return self.waiting_on

    def unsent(self) -> Optional[Tuple[int, Any]]:
        """The last report, if no heartbeat carried it yet."""
        seq, value = self.ctx._progress
        return None if seq == self.progress_sent else (seq, value)


class WorkerBase:
    """The settings and the decisions of a worker; see ``Worker`` and ``AsyncWorker``."""

    def __init__(self, handlers: Union[Registry, Mapping[str, Handler]], conninfo: str = "", *,
                 concurrency: int = 1, job_types: Optional[Sequence[str]] = None,
                 queues: Optional[Sequence[str]] = None, worker_id: Optional[str] = None, poll_wait: float = 5.0,
                 heartbeat_interval: float = 30.0, grace_period: float = 30.0,
                 backoff: Optional[BackoffPolicy] = None, loop_error_policy: LoopErrorPolicy = LoopErrorPolicy(),
                 hold: str = "session", connect_kwargs: Optional[Dict[str, Any]] = None) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        if heartbeat_interval <= 0:
            raise ValueError("heartbeat_interval must be positive")
        if poll_wait < 0 or grace_period < 0:
            raise ValueError("poll_wait and grace_period must not be negative")
        if hold not in ("session", "lease"):
            raise ValueError("hold must be 'session' or 'lease'")
        self.registry = Registry.of(handlers)
        self.job_types = list(job_types) if job_types else sorted(self.registry)
        missing = [t for t in self.job_types if t not in self.registry]
        if missing or not self.job_types:
            raise ValueError(f"no handler for job type(s): {', '.join(missing) or '(none registered)'}")
        self.conninfo = conninfo
        self.connect_kwargs = dict(connect_kwargs or {})
        self.queues = list(queues) if queues else None
        self.concurrency = concurrency
        self.worker_id = worker_id or f"{socket.gethostname()}-{os.getpid()}"
        self.poll_wait = poll_wait
        self.heartbeat_interval = heartbeat_interval
        self.grace_period = grace_period
        self.backoff = backoff
        self.loop_error_policy = loop_error_policy
        self.hold = hold

    # -- connections ----------------------------------------------------------------

    def _connect_options(self, **overrides: Any) -> Dict[str, Any]:
        """Autocommit, and named ``pqrun-worker`` in pg_stat_activity unless
        the conninfo, the connect options or PGAPPNAME name it."""
        options: Dict[str, Any] = {"autocommit": True, **self.connect_kwargs, **overrides}
        if ("application_name" not in psycopg.conninfo.conninfo_to_dict(self.conninfo)
                and "application_name" not in options and not os.environ.get("PGAPPNAME")):
            options["application_name"] = "pqrun-worker"
        return options

    def _session_setup(self, poller: bool) -> List[Tuple[protocol.Call[None], bool]]:
        """The calls that set up a connection of the poller, a slot or a
        slot's heartbeats, so that its claims are held as ``hold`` says:
        (call, optional). The poller's session holds jobs while it waits in a
        pickup, and a waiting backend notices that its client died only when
        it looks: once a second, not at the end of the wait."""
        if self.hold != "session":
            return []
        calls = [(protocol.hold_by_session(), False)]
        if poller:
            calls.append((protocol.check_client_every_second(), True))
        return calls

    # -- decisions and log lines ---------------------------------------------------------

    def _describe(self) -> None:
        log.info("worker %s: %d slot(s), job types %s, queues %s", self.worker_id, self.concurrency,
                 ",".join(self.job_types), ",".join(self.queues) if self.queues else "(all)")

    def _started(self, job: Job) -> None:
        log.info("job %s (%s) attempt %d/%d started", job.id, job.job_type, job.attempts, job.max_attempts)

    def _done(self, f: Flight) -> None:
        log.info("job %s (%s) done in %.0f ms", f.job.id, f.job.job_type, (time.monotonic() - f.started) * 1000)

    def _error_call(self, job: Job, exc: BaseException) -> protocol.Call[str]:
        """The mark_error of a failed attempt: terminal for TerminalError,
        after RetryLater's delay or the backoff policy's, else after the
        server's pqrun.backoff step."""
        terminal = isinstance(exc, TerminalError)
        retry_after = exc.after if isinstance(exc, RetryLater) else None
        if retry_after is None and self.backoff and not terminal:
            retry_after = self.backoff.delay(job.attempts)
        return protocol.mark_error(job, format_error(exc), terminal=terminal, retry_after=retry_after)

    def _failed(self, job: Job, exc: BaseException, status: str) -> None:
        message = str(exc) if len(str(exc)) <= 200 else str(exc)[:200] + "..."
        log.log(logging.ERROR if status == "FAILED" else logging.WARNING,
                "job %s (%s) attempt %d/%d: %s: %s -> %s", job.id, job.job_type, job.attempts,
                job.max_attempts, type(exc).__name__, message, status)

    def _snoozed(self, job: Job, snooze: Snooze) -> None:
        log.info("job %s (%s) snoozed for %gs", job.id, job.job_type, snooze.seconds)

    def _dropped(self, f: Flight) -> bool:
        """The handler returned after its job stopped being ours: nothing to report."""
        if not f.ctx.lease_lost:
            return False
        log.warning("job %s (%s) handler stopped (%s) after %.1fs; outcome dropped", f.job.id,
                    f.job.job_type, f.ctx.stop_reason, time.monotonic() - f.started)
        return True

    def _lease_lost(self, f: Optional[Flight]) -> None:
        if f is None:
            return
        if f.ctx.stop_reason == "released":
            log.info("job %s finished after it was released at shutdown; outcome discarded", f.job.id)
        else:
            log.warning("job %s lost its lease (reaped, cancelled or re-picked); its outcome and "
                        "writes were rolled back", f.job.id)

    def _lost_while_running(self, f: Flight, exc: Any) -> None:
        """A heartbeat learnt that the job is no longer ours: tell the handler."""
        reason = "cancelled" if exc.cancelled else "lease lost"
        f.ctx._lose(reason)
        log.warning("job %s (%s) %s while running (%s); its handler is told to stop",
                    f.job.id, f.job.job_type, reason, exc.diag.message_detail or exc)

    def _released(self, f: Flight) -> None:
        log.warning("job %s (%s) released -> READY, attempt not counted (ran %.1fs, grace period %gs)",
                    f.job.id, f.job.job_type, time.monotonic() - f.started, self.grace_period)

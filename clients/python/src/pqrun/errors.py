"""pqrun's exceptions.

Two families:

- ``PqrunError`` and its subclasses: a pqrun function refused a call with one
  of the SQLSTATEs pqrun documents. They are psycopg errors too
  (``psycopg.DatabaseError``), so ``except psycopg.Error`` still catches
  them, ``exc.sqlstate`` and ``exc.diag`` work as usual, and the error psycopg
  raised is ``exc.__cause__``. SQLSTATEs that are PostgreSQL's own (``40001``,
  ``40P01``, ``57014``, ``25006``, your constraints' ``23xxx``...) stay
  psycopg's own classes.
- ``TerminalError``, ``RetryLater``, ``Snooze`` (and ``InvalidArgs``): raised
  by a handler to tell the worker what the job becomes.
"""

from __future__ import annotations

from typing import Mapping, Optional, Type

import psycopg

# The detail pqrun gives with 55000 when an operator cancelled the job.
CANCELLED_DETAIL = "Its status is CANCELLED."


class PqrunError(psycopg.DatabaseError):
    """A pqrun function refused the call (a SQLSTATE of pqrun's API)."""

    __module__ = "pqrun"


class InvalidArgument(PqrunError, ValueError):
    """22023: an argument pqrun rejects (an empty job type, max_attempts < 1,
    an unknown id in depends_on, a progress report over 8 kB...)."""

    sqlstate = "22023"


class JobNotFound(PqrunError, LookupError):
    """P0002: no job has this id (in this queue, when a queue is given)."""

    sqlstate = "P0002"


class LeaseLost(PqrunError):
    """55000: the job is not RUNNING under this lease: it was reaped,
    cancelled, picked up again or given back meanwhile. The call changed
    nothing, and whatever the same transaction did should roll back."""

    sqlstate = "55000"

    @property
    def cancelled(self) -> bool:
        return False


class JobCancelled(LeaseLost):
    """55000 for a job an operator cancelled (``pqrun.cancel``)."""

    @property
    def cancelled(self) -> bool:
        return True


class PayloadTooLarge(PqrunError):
    """54000: the payload is over ``pqrun.max_payload_bytes``."""

    sqlstate = "54000"


class DuplicateJob(PqrunError):
    """23505 from ``retry``: another unfinished job holds the job's dedupe_key."""

    sqlstate = "23505"


class NotSupported(PqrunError):
    """0A000: a waiting pickup or heartbeat under REPEATABLE READ or
    SERIALIZABLE, whose snapshot could never see what it waits for."""

    sqlstate = "0A000"


# The SQLSTATEs every pqrun call may raise. 23505 is pqrun's only from
# retry(); anywhere else it comes from the caller's own constraints.
ERRORS: Mapping[str, Type[PqrunError]] = {
    str(c.sqlstate): c for c in (InvalidArgument, JobNotFound, LeaseLost, PayloadTooLarge, NotSupported)
}
RETRY_ERRORS: Mapping[str, Type[PqrunError]] = {**ERRORS, "23505": DuplicateJob}


def translate(exc: psycopg.Error, errors: Mapping[str, Type[PqrunError]] = ERRORS) -> Optional[PqrunError]:
    """The pqrun exception for psycopg error ``exc``, or None when its
    SQLSTATE is not one of ``errors``."""
    cls = errors.get(exc.sqlstate or "")
    if cls is None:
        return None
    if cls is LeaseLost and exc.diag.message_detail == CANCELLED_DETAIL:
        cls = JobCancelled
    return cls(*exc.args, info=exc.pgresult)


# -- what a handler raises ------------------------------------------------------


class TerminalError(Exception):
    """Raise from a handler to fail the job now, without retries (a bad
    payload, a business rule that will never pass)."""


class InvalidArgs(TerminalError):
    """The job's payload does not fit the args type its handler was
    registered with: the job fails at once, its handler never runs."""


class RetryLater(Exception):
    """Raise from a handler to retry after ``after`` seconds (a rate limit's
    Retry-After, say) instead of the server's backoff step."""

    def __init__(self, message: str = "", after: Optional[float] = None) -> None:
        super().__init__(message)
        self.after = after


class Snooze(Exception):
    """Raise from a handler to put the job back for ``seconds``
    (``pqrun.snooze``): READY again after them, the attempt not used up,
    ``jobs.snoozes`` one more. For "not yet" (a resource is busy, an upstream
    is not ready) rather than for errors."""

    def __init__(self, seconds: float, message: str = "") -> None:
        super().__init__(message or f"snoozed for {seconds:g}s")
        self.seconds = seconds

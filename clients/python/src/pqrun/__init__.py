"""pqrun: the Python client of pqrun, the job queue inside PostgreSQL.

    import psycopg, pqrun

    registry = pqrun.Registry()

    @registry.handler("summarize")
    def summarize(ctx: pqrun.JobContext) -> dict:
        ctx.enqueue("embed", {"summary_id": 7})        # commits with this job's mark_done
        return {"summary_id": 7}                       # stored in jobs.result

    with psycopg.connect("dbname=app") as conn:        # commits at the end of the block
        pqrun.enqueue(conn, "summarize", {"conversation_id": 123}, dedupe_key="summarize:123")

    pqrun.Worker(registry, "dbname=app", concurrency=4).run()   # until SIGTERM

``pqrun.aio`` has the same producer calls for an AsyncConnection and the
``AsyncWorker``.
"""

__version__ = "0.20.0"

from .async_worker import AsyncWorker
from .context import AsyncJobContext, JobContext
from .core import BackoffPolicy, LoopErrorPolicy, format_error
from .errors import (DuplicateJob, InvalidArgs, InvalidArgument, JobCancelled, JobNotFound, LeaseLost, NotSupported,
                     PayloadTooLarge, PqrunError, RetryLater, Snooze, TerminalError)
from .jobs import Job, JobSpec
from .producer import cancel, enqueue, enqueue_batch, get_job, retry
from .registry import Registry
from .worker import Worker

__all__ = [
    "AsyncJobContext", "AsyncWorker", "BackoffPolicy", "DuplicateJob", "InvalidArgs", "InvalidArgument",
    "Job", "JobCancelled", "JobContext", "JobNotFound", "JobSpec", "LeaseLost", "LoopErrorPolicy", "NotSupported",
    "PayloadTooLarge", "PqrunError", "Registry", "RetryLater", "Snooze", "TerminalError", "Worker", "cancel",
    "enqueue", "enqueue_batch", "format_error", "get_job", "retry",
]

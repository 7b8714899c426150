"""pqrun_worker: a small Python worker for pqrun, on psycopg 3.

    from pqrun_worker import PgJobStore, Registry, TerminalError, Worker

    registry = Registry()

    @registry.handler("summarize")
    def summarize(ctx):
        summary_id = ...
        ctx.enqueue("embed", {"summary_id": summary_id})   # commits with mark_done
        return {"summary_id": summary_id}                  # stored in jobs.result

    store = PgJobStore("dbname=app")
    store.enqueue("summarize", {"conversation_id": 123}, dedupe_key="summarize:conv:123")
    Worker(store, registry, concurrency=4).run()           # until SIGTERM
"""

from .store import Job, PgJobStore, job_cancelled, lease_lost
from .worker import (BackoffPolicy, JobContext, LoopErrorPolicy, Registry, RetryLater, Snooze, TerminalError,
                     Worker, format_error)

__all__ = ["BackoffPolicy", "Job", "JobContext", "LoopErrorPolicy", "PgJobStore", "Registry", "RetryLater",
           "Snooze", "TerminalError", "Worker", "format_error", "job_cancelled", "lease_lost"]

"""Example handlers for the pqrun client (clients/python).

    PYTHONPATH=../../clients/python/src python3 worker.py --dsn "dbname=app" --concurrency 4

greet      success: returns a result, stored in jobs.result
shout      the same as an async handler
welcome    typed args: the payload is checked against a dataclass before the handler
           runs; one that does not fit fails at once (InvalidArgs), no retries
flaky      fails with a retryable error on its first `fail_times` attempts, then succeeds;
           with `retry_after` it asks for that delay instead of the backoff schedule
validate   a terminal failure for a bad payload: FAILED at once, no retries
slow       sleeps `seconds`: long enough to need heartbeats when its timeout_seconds is short;
           wakes up early when told to stop (cancelled, lease lost, released at shutdown)
count      counts to `to`, a step every `step` seconds, reporting each step as progress; an
           attempt resumes from the last one's progress; stops when told to
nap        snoozes for `seconds` the first time it runs, then succeeds
summarize  a handler chain: enqueues an `embed` job in the transaction that marks it done;
           with `fail` it raises after enqueueing, and the follow-up is rolled back with it
embed      the follow-up of summarize
"""

import asyncio
import dataclasses
import hashlib
from typing import Literal

from pqrun import JobContext, Registry, RetryLater, Snooze, TerminalError

registry = Registry()


@registry.handler("greet")
def greet(ctx: JobContext) -> dict:
    return {"greeting": f"hello, {ctx.payload.get('name', 'world')}"}


@registry.handler("shout")
async def shout(ctx: JobContext) -> dict:
    await asyncio.sleep(0.01)
    return {"text": str(ctx.payload.get("text", "")).upper()}


@dataclasses.dataclass
class Welcome:
    user_id: int
    lang: Literal["en", "fr"] = "en"


@registry.handler("welcome", args=Welcome)
def welcome(ctx: JobContext[Welcome]) -> dict:
    return {"user_id": ctx.args.user_id, "text": {"en": "welcome", "fr": "bienvenue"}[ctx.args.lang]}


@registry.handler("flaky")
def flaky(ctx: JobContext) -> dict:
    if ctx.job.attempts <= ctx.payload.get("fail_times", 1):
        message = f"simulated outage on attempt {ctx.job.attempts}"
        if "retry_after" in ctx.payload:
            raise RetryLater(message, after=ctx.payload["retry_after"])
        raise ConnectionError(message)
    return {"succeeded_on_attempt": ctx.job.attempts}


@registry.handler("validate")
def validate(ctx: JobContext) -> dict:
    email = ctx.payload.get("email")
    if not isinstance(email, str) or "@" not in email:
        raise TerminalError(f"invalid email address: {email!r}")
    return {"valid": email}


@registry.handler("slow")
def slow(ctx: JobContext) -> dict:
    seconds = float(ctx.payload.get("seconds", 5))
    ctx.wait(seconds)  # the worker's heartbeats keep the job alive meanwhile
    return {"slept": seconds, "lease_lost": ctx.lease_lost}


@registry.handler("count")
def count(ctx: JobContext) -> dict:
    to, step = int(ctx.payload.get("to", 10)), float(ctx.payload.get("step", 0.1))
    start = (ctx.job.progress or {}).get("count", 0)
    for n in range(start + 1, to + 1):
        if ctx.wait(step):
            return {"stopped_at": n - 1}  # dropped by the worker: the job is no longer ours
        ctx.progress({"count": n, "to": to})
    return {"counted": to, "resumed_from": start}


@registry.handler("nap")
def nap(ctx: JobContext) -> dict:
    if ctx.job.snoozes == 0:
        raise Snooze(float(ctx.payload.get("seconds", 1)))
    return {"snoozes": ctx.job.snoozes}


@registry.handler("summarize")
def summarize(ctx: JobContext) -> dict:
    conversation_id = ctx.payload["conversation_id"]
    summary_id = int(hashlib.sha256(str(conversation_id).encode()).hexdigest()[:8], 16)
    # The follow-up commits together with this job's mark_done, or not at all.
    embed_id = ctx.enqueue("embed", {"summary_id": summary_id, "conversation_id": conversation_id},
                           dedupe_key=f"embed:summary:{summary_id}")
    if ctx.payload.get("fail"):
        raise RuntimeError("summarizer crashed after enqueueing the follow-up")
    return {"summary_id": summary_id, "embed_job": embed_id, "tokens": 1234}


@registry.handler("embed")
def embed(ctx: JobContext) -> dict:
    return {"summary_id": ctx.payload["summary_id"], "dimensions": 768}

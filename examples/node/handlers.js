// Example handlers: one per job_type. A handler gets the job row (id,
// payload, attempts, timeout_seconds, ...) and a context, and returns the
// job's result (any JSON value) or throws. An entry may also be
// { handler, validate }: the worker fails a job whose payload validate
// refuses, without running the handler.

import { setTimeout as sleep } from 'node:timers/promises';
import { TerminalError } from 'pqrun';

export default {
  // Success: the returned value is stored as the job's result.
  async greet(job) {
    return { greeting: `hello ${job.payload.name ?? 'world'}` };
  },

  // Retryable failure: fails until attempt `succeed_on_attempt` (default 3).
  // pqrun retries it after the pqrun.backoff delay for that attempt, and
  // fails it for good when max_attempts is used up.
  async flaky(job) {
    const want = job.payload.succeed_on_attempt ?? 3;
    if (job.attempts < want) throw new Error(`flaky: attempt ${job.attempts} fails, ${want} will succeed`);
    return { succeeded_on_attempt: job.attempts };
  },

  // Terminal failure: retrying cannot help, the job goes to FAILED at once.
  async poison(job) {
    throw new TerminalError(`cannot process payload ${JSON.stringify(job.payload)}`);
  },

  // A long job. The worker heartbeats while it runs (a quarter of
  // timeout_seconds by default), so pqrun does not reap it as stale. It
  // stops early when ctx.signal aborts (cancelled, lease lost, or released
  // at shutdown).
  async slow(job, ctx) {
    const seconds = job.payload.seconds ?? 4;
    await sleep(seconds * 1000, undefined, { signal: ctx.signal });
    return { slept: seconds };
  },

  // Progress: counts to `to`, a step every `step_ms`, reporting each step
  // with ctx.progress. An attempt resumes from the progress the last one
  // left in the job row. Stops when ctx.signal aborts, as slow does.
  async count(job, ctx) {
    const to = job.payload.to ?? 10;
    const from = job.progress?.count ?? 0;
    for (let n = from + 1; n <= to; n++) {
      await sleep(job.payload.step_ms ?? 100, undefined, { signal: ctx.signal });
      ctx.progress({ count: n, to });
    }
    return { counted: to, resumed_from: from };
  },

  // Snooze: puts itself back for `seconds` the first time it runs, then
  // succeeds: DONE with attempts 1 and snoozes 1.
  async nap(job, ctx) {
    if (job.snoozes === 0) ctx.snooze(job.payload.seconds ?? 1); // throws
    return { snoozes: job.snoozes };
  },

  // A chain: the follow-up 'embed' job is enqueued in the transaction that
  // marks this job done, so both happen or neither does (if the lease was
  // lost meanwhile, the follow-up is rolled back with the mark_done).
  async summarize(job, ctx) {
    if (job.payload.delay_ms) await sleep(job.payload.delay_ms, undefined, { signal: ctx.signal });
    const summary = String(job.payload.text ?? '').split(/\s+/).slice(0, 5).join(' ');
    ctx.enqueue('embed', { source_job: job.id, summary });
    return { summary };
  },

  async embed(job) {
    return { source_job: job.payload.source_job, dimensions: job.payload.summary.length };
  },

  // Validation: a payload without a string `to` fails at once (FAILED
  // after one attempt, "invalid payload for notify: ..." in last_error).
  notify: {
    validate(payload) {
      if (typeof payload?.to !== 'string') throw new Error('"to" must be a string');
    },
    async handler(job) {
      return { notified: job.payload.to };
    },
  },
};

// A TypeScript user of the package: compiled with `tsc --noEmit` by
// types.test.js. Each @ts-expect-error is a mistake the declarations catch.

import pg from 'pg';
import {
  enqueue, enqueueBatch, cancel, retry, Worker, TerminalError, RetryLater, Snooze, PqrunError,
  InvalidArgumentError, JobNotRunningError, mapError, stderrLog,
  type EnqueueOptions, type Handler, type Job, type JobContext, type JobId,
} from 'pqrun';

interface Email {
  to: string;
  subject?: string;
}

export async function produce(pool: pg.Pool): Promise<JobId[]> {
  const client: pg.PoolClient = await pool.connect();
  try {
    await client.query('BEGIN');
    const id: JobId = await enqueue<Email>(client, 'send_email', { to: 'ada@example.com' }, {
      dedupeKey: 'welcome:42', delay: '5 min', priority: 1, maxAttempts: 3, timeoutSeconds: 60,
      queue: 'mail', dependsOn: [1, '2', 3n], fifoKey: 'user:42', concurrencyKey: 'tenant-1', rateWeight: 2,
    });
    const later = await enqueue(client, 'report', undefined, { runAfter: new Date(), delay: null });
    // @ts-expect-error the payload must be an Email
    await enqueue<Email>(client, 'send_email', { subject: 'no address' });
    // @ts-expect-error no such option
    await enqueue(client, 'report', {}, { prio: 1 });
    // @ts-expect-error a job type is a string
    await enqueue(client, 42);
    await client.query('COMMIT');
    const ids: string[] = await enqueueBatch(pool, [{ jobType: 'a' }, { jobType: 'b', payload: [1, 2], delay: 10 }]);
    const cancelled: boolean = await cancel(pool, id, { reason: 'no longer needed' });
    const retried: boolean = await retry(new pg.Client(), later, { queue: 'mail' });
    void cancelled;
    void retried;
    return ids;
  } catch (err) {
    if (err instanceof InvalidArgumentError) console.error(err.code, err.detail);
    const mapped = mapError(err);
    if (mapped instanceof JobNotRunningError && mapped.cancelled) return [];
    if (mapped instanceof PqrunError) throw mapped;
    throw err;
  } finally {
    client.release();
  }
}

const sendEmail: Handler<Email, { sent: string }> = async (job, ctx) => {
  const to: string = job.payload.to;
  if (ctx.signal.aborted) throw new TerminalError('stopped', { cause: ctx.signal.reason });
  if (job.attempts > 3) throw new RetryLater('later', { after: 30 });
  if (job.snoozes > 10) throw new Snooze('5 min');
  if (job.progress === null) ctx.snooze(60);
  ctx.progress({ stage: 'sending' });
  await ctx.heartbeat({ stage: 'sent' });
  await ctx.heartbeat();
  ctx.enqueue('audit', { to }, { queue: 'audit' });
  ctx.inTransaction((client) => client.query('SELECT 1'));
  return { sent: to };
};
// @ts-expect-error a handler's result must be what it declares
export const wrongResult: Handler<Email, { sent: string }> = async (job) => ({ sent: job.attempts });

export function work(): Promise<void> {
  const worker = new Worker({
    handlers: {
      send_email: { handler: sendEmail, validate: (p) => typeof (p as Email).to === 'string' },
      ping: async () => 'pong',
    },
    concurrency: 4,
    queues: ['mail'],
    wait: 5,
    graceMs: 10_000,
    hold: 'lease',
    connection: { connectionString: 'postgres://localhost/app', application_name: 'mailer' },
    log: stderrLog,
  });
  worker.register<{ n: number }>('count', async (job: Job<{ n: number }>, ctx: JobContext<{ n: number }>) => {
    ctx.progress(job.payload.n);
    return job.payload.n + 1;
  });
  // @ts-expect-error hold is 'session' or 'lease'
  new Worker({ hold: 'forever' });
  const options: EnqueueOptions = { queue: 'x' };
  void options;
  worker.start().stopOnSignals(['SIGTERM']);
  const id: string = worker.workerId;
  void id;
  return worker.stop({ graceMs: 0 }).then(() => worker.stopped);
}

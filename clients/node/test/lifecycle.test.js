// A running job's life in the worker: heartbeats that keep it from being
// reaped and carry its progress, a cancel reaching the handler through
// ctx.signal, snoozes, and the shutdown that finishes or releases in-flight
// jobs (stop(), and SIGTERM in a process of its own).

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { after, before, test } from 'node:test';
import { setTimeout as abortableSleep } from 'node:timers/promises';
import { cancel, enqueue, Snooze } from 'pqrun';
import { sleep, startWorker, testDatabase, waitFor } from './helpers.js';

let t;
before(async () => {
  t = await testDatabase('lifecycle');
});
after(() => t?.drop());

const job = (id) => t.one('SELECT * FROM pqrun.jobs WHERE id = $1', [id]);
const status = async (id) => (await job(id)).status;

test('heartbeats: a job running past its timeout is not reaped, and its progress is stored as it goes', async () => {
  const worker = startWorker(t, {
    queues: ['beats'],
    handlers: {
      steps: async (j, ctx) => {
        for (let n = 1; n <= 6; n++) {
          await abortableSleep(500, undefined, { signal: ctx.signal });
          ctx.progress({ step: n });
        }
        return { steps: 6 };
      },
      direct: async (j, ctx) => {
        await ctx.heartbeat({ phase: 'one' });
        const seen = (await t.one('SELECT progress FROM pqrun.jobs WHERE id = $1', [j.id])).progress;
        await ctx.heartbeat();
        return { seen };
      },
    },
  });
  // reap every 0.2 s: without heartbeats (every 0.5 s, a quarter of the
  // 2 s timeout) the job would go back to READY 2 s into its run
  let reaping = true;
  const reaper = (async () => {
    while (reaping) {
      await t.db.query('SELECT pqrun.reap_stale()');
      await sleep(200);
    }
  })();
  try {
    const id = await enqueue(t.db, 'steps', {}, { queue: 'beats', timeoutSeconds: 2 });
    const seen = new Set();
    await waitFor('DONE', async () => {
      const row = await job(id);
      if (row.status === 'RUNNING' && row.progress) seen.add(row.progress.step);
      return row.status === 'DONE';
    }, 8000);
    const row = await job(id);
    assert.deepEqual([row.attempts, row.progress, row.result], [1, { step: 6 }, { steps: 6 }]);
    assert.ok(row.duration_ms >= 3000, `ran ${row.duration_ms} ms`);
    assert.ok(seen.size >= 3, `progress seen while running: ${[...seen]}`);
    const outcomes = await t.rows('SELECT outcome FROM pqrun.job_attempts WHERE job_id = $1', [id]);
    assert.deepEqual(outcomes, [{ outcome: 'done' }]);
    assert.ok(worker.lines.filter((l) => l.message === 'heartbeat' && l.job === id).length >= 4);

    const direct = await enqueue(t.db, 'direct', {}, { queue: 'beats' });
    await waitFor('DONE', async () => (await status(direct)) === 'DONE');
    const done = await job(direct);
    assert.deepEqual([done.result, done.progress], [{ seen: { phase: 'one' } }, { phase: 'one' }]);
  } finally {
    reaping = false;
    await reaper;
    await worker.stop();
  }
});

test('cancel: the handler\'s signal aborts at once with reason CANCELLED, and its outcome is dropped', async () => {
  let reason = null;
  let abortedAt = 0;
  const worker = startWorker(t, {
    queues: ['cancel'],
    handlers: {
      endless: async (j, ctx) => {
        ctx.signal.addEventListener('abort', () => {
          reason = ctx.signal.reason;
          abortedAt = Date.now();
        });
        ctx.enqueue('never', {}, { queue: 'cancel' });
        await abortableSleep(60000, undefined, { signal: ctx.signal }).catch(() => {});
        return 'finished anyway';
      },
      after: async () => 'next',
    },
  });
  try {
    // its heartbeats wait 900 s in the server (a quarter of the timeout)
    const id = await enqueue(t.db, 'endless', {}, { queue: 'cancel', timeoutSeconds: 3600 });
    await waitFor('RUNNING', async () => (await status(id)) === 'RUNNING');
    await sleep(1300); // the waiting heartbeat has begun
    const cancelledAt = Date.now();
    assert.equal(await cancel(t.db, id, { reason: 'operator' }), true);
    await waitFor('the abort', () => reason !== null, 3000);
    assert.ok(abortedAt - cancelledAt < 1000, `aborted ${abortedAt - cancelledAt} ms after the cancel`);
    assert.equal(reason.code, 'CANCELLED');
    await waitFor('the outcome dropped', () => worker.lines.some((l) => l.message === 'lease lost, outcome dropped'));
    const row = await job(id);
    assert.deepEqual([row.status, row.result, row.last_error], ['CANCELLED', null, 'operator']);
    assert.equal((await t.one("SELECT count(*)::int AS n FROM pqrun.jobs WHERE job_type = 'never'")).n, 0);
    assert.ok(worker.lines.some((l) => l.message === 'cancelled while running' && l.job === id));
    // the slot goes on
    const next = await enqueue(t.db, 'after', {}, { queue: 'cancel' });
    await waitFor('the next job DONE', async () => (await status(next)) === 'DONE');
  } finally {
    await worker.stop();
  }
});

test('snooze: READY again after the delay, the attempt not used up', async () => {
  const worker = startWorker(t, {
    queues: ['snooze'],
    concurrency: 2,
    handlers: {
      nap: async (j, ctx) => {
        if (j.snoozes === 0) ctx.snooze(0.5);
        return { snoozes: j.snoozes };
      },
      thrown: async (j) => {
        if (j.snoozes < 2) throw new Snooze('0.2 s');
        return { snoozes: j.snoozes };
      },
    },
  });
  try {
    const nap = await enqueue(t.db, 'nap', {}, { queue: 'snooze' });
    const thrown = await enqueue(t.db, 'thrown', {}, { queue: 'snooze' });
    await waitFor('the first snooze', async () => (await job(nap)).snoozes === 1);
    const snoozed = await job(nap);
    assert.deepEqual([snoozed.status, snoozed.attempts], ['READY', 0]);
    await waitFor('both DONE', async () => (await status(nap)) === 'DONE' && (await status(thrown)) === 'DONE');
    const a = await job(nap);
    const b = await job(thrown);
    assert.deepEqual([a.attempts, a.snoozes, a.result], [1, 1, { snoozes: 1 }]);
    assert.deepEqual([b.attempts, b.snoozes, b.result], [1, 2, { snoozes: 2 }]);
    assert.ok(a.finished_at - a.created_at >= 500);
    const history = await t.rows('SELECT outcome FROM pqrun.job_attempts WHERE job_id IN ($1, $2)', [nap, thrown]);
    assert.deepEqual(history, [{ outcome: 'done' }, { outcome: 'done' }]);
    assert.ok(worker.lines.some((l) => l.message === 'snoozed' && l.job === nap));
  } finally {
    await worker.stop();
  }
});

test('stop(): a short job finishes in the grace period, a long one is released with its progress', async () => {
  const reasons = [];
  const worker = startWorker(t, {
    queues: ['stop'],
    concurrency: 3,
    graceMs: 800,
    wait: '30 s',
    applicationName: 'pqrun-stop-test',
    handlers: {
      sleep: async (j, ctx) => {
        ctx.signal.addEventListener('abort', () => reasons.push(ctx.signal.reason.code));
        ctx.progress({ started: true });
        await abortableSleep(j.payload.ms, undefined, { signal: ctx.signal });
        return 'slept';
      },
    },
  });
  const short = await enqueue(t.db, 'sleep', { ms: 300 }, { queue: 'stop' });
  const long = await enqueue(t.db, 'sleep', { ms: 60000 }, { queue: 'stop' });
  await waitFor('both RUNNING', async () => (await status(short)) === 'RUNNING' && (await status(long)) === 'RUNNING');
  await sleep(100);
  const started = Date.now();
  await worker.stop();
  const ms = Date.now() - started;
  assert.ok(ms >= 750 && ms < 2500, `stopped in ${ms} ms (grace 800 ms, the idle pickup of 30 s cancelled)`);
  assert.deepEqual([await status(short), (await job(short)).result], ['DONE', 'slept']);
  const released = await job(long);
  assert.deepEqual([released.status, released.attempts, released.progress], ['READY', 0, { started: true }]);
  assert.ok(released.run_after <= new Date());
  assert.equal((await t.one('SELECT count(*)::int AS n FROM pqrun.job_attempts WHERE job_id = $1', [long])).n, 0);
  assert.deepEqual(reasons, ['RELEASED']);
  assert.ok(worker.lines.some((l) => l.message === 'released' && l.job === long));
  const left = await t.one(`SELECT count(*)::int AS n FROM pg_stat_activity
    WHERE datname = $1 AND application_name = 'pqrun-stop-test'`, [t.database]);
  assert.equal(left.n, 0, 'every connection closed');
  await worker.stopped; // resolved
  await cancel(t.db, long);
});

test('SIGTERM: the process stops gracefully, releases what still runs and exits by itself', async () => {
  const id = await enqueue(t.db, 'sleep', { ms: 60000 }, { queue: 'signal' });
  const child = spawn(process.execPath, [fileURLToPath(new URL('./signal-worker.js', import.meta.url))], {
    env: { ...process.env, PGDATABASE: t.database },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (d) => (output += d));
  child.stderr.on('data', (d) => (output += d));
  const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
  try {
    await waitFor('RUNNING', async () => (await status(id)) === 'RUNNING');
    await sleep(200);
    const started = Date.now();
    child.kill('SIGTERM');
    const { code, signal } = await exited;
    const ms = Date.now() - started;
    assert.deepEqual({ code, signal }, { code: 0, signal: null }, output);
    assert.ok(ms >= 450 && ms < 3000, `exited ${ms} ms after SIGTERM (grace 500 ms)`);
    const row = await job(id);
    assert.deepEqual([row.status, row.attempts], ['READY', 0]);
    assert.match(output, /signal signal=SIGTERM/);
    assert.match(output, /handler aborted: RELEASED/);
  } finally {
    child.kill('SIGKILL');
  }
});

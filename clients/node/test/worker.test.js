// The worker on a real server: handlers by job type, results, follow-ups,
// retryable and terminal errors, validation, concurrency, the long poll's
// wake-up, claims in batches of the free slots and finish-and-claim.
// Each test has a queue of its own.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { enqueue, enqueueBatch, RetryLater, TerminalError } from 'pqrun';
import { makeWorker, sleep, startWorker, testDatabase, waitFor } from './helpers.js';

let t;
before(async () => {
  t = await testDatabase('worker');
});
after(() => t?.drop());

const statuses = async (queue) =>
  (await t.rows('SELECT status::text FROM pqrun.jobs WHERE queue = $1 ORDER BY id', [queue])).map((r) => r.status);
const allDone = (queue, n) => waitFor(`${n} DONE jobs in ${queue}`, async () =>
  (await t.one("SELECT count(*)::int AS n FROM pqrun.jobs WHERE queue = $1 AND status = 'DONE'", [queue])).n === n);
const job = (id) => t.one('SELECT * FROM pqrun.jobs WHERE id = $1', [id]);

test('handlers by job type: the result, follow-ups and own writes in the finishing transaction', async () => {
  await t.db.query('CREATE TABLE audit (job_id bigint, note text)');
  const worker = startWorker(t, {
    queues: ['handlers'],
    concurrency: 2,
    handlers: {
      greet: async (j) => ({ greeting: `hello ${j.payload.name}` }),
      chain: async (j, ctx) => {
        ctx.enqueue('greet', { name: `follow-up of ${j.id}` }, { queue: 'handlers', priority: 3 });
        ctx.inTransaction((client) => client.query('INSERT INTO audit VALUES ($1, $2)', [j.id, 'chained']));
        assert.throws(() => ctx.enqueue('greet', {}, { prio: 1 }), /unknown enqueue option prio/);
        return 'chained';
      },
      nothing: async () => undefined,
    },
  });
  try {
    const greet = await enqueue(t.db, 'greet', { name: 'ada' }, { queue: 'handlers' });
    const chain = await enqueue(t.db, 'chain', {}, { queue: 'handlers' });
    const nothing = await enqueue(t.db, 'nothing', {}, { queue: 'handlers' });
    await allDone('handlers', 4);
    assert.deepEqual((await job(greet)).result, { greeting: 'hello ada' });
    assert.equal((await job(chain)).result, 'chained');
    assert.equal((await job(nothing)).result, null);
    const follow = await t.one("SELECT * FROM pqrun.jobs WHERE job_type = 'greet' AND payload->>'name' LIKE 'follow-up%'");
    assert.deepEqual([follow.priority, follow.result], [3, { greeting: `hello follow-up of ${chain}` }]);
    assert.deepEqual(await t.rows('SELECT job_id, note FROM audit'), [{ job_id: chain, note: 'chained' }]);
    const by = await t.rows("SELECT DISTINCT worker_id FROM pqrun.job_attempts a JOIN pqrun.jobs j ON j.id = a.job_id WHERE j.queue = 'handlers'");
    assert.deepEqual(by, [{ worker_id: worker.workerId }]);
    assert.match(worker.workerId, new RegExp(`^node-.+-${process.pid}$`));
  } finally {
    await worker.stop();
  }
});

test('the finishing transaction: a failing step or a result that is no JSON fails the attempt, all rolled back', async () => {
  const worker = startWorker(t, {
    queues: ['finish'],
    handlers: {
      step: async (j, ctx) => {
        ctx.enqueue('orphan', {}, { queue: 'finish-followups' });
        ctx.inTransaction(async (client) => {
          await client.query('SELECT 1');
          throw new Error('the write failed');
        });
        return 'never stored';
      },
      bigint: async () => ({ n: 1n }),
      after: async () => 'fine',
    },
  });
  try {
    const [step, bigint] = await enqueueBatch(t.db, [
      { jobType: 'step', queue: 'finish', maxAttempts: 1 },
      { jobType: 'bigint', queue: 'finish', maxAttempts: 1 },
    ]);
    await waitFor('both FAILED', async () => (await statuses('finish')).every((s) => s === 'FAILED'));
    const row = await job(step);
    assert.deepEqual([row.attempts, row.result], [1, null]);
    assert.match(row.last_error, /^Error: the write failed/);
    assert.match((await job(bigint)).last_error, /^TypeError: .*BigInt/);
    assert.equal((await t.one("SELECT count(*)::int AS n FROM pqrun.jobs WHERE queue = 'finish-followups'")).n, 0);
    // the slots kept their connections
    assert.ok(!worker.lines.some((l) => l.message === 'slot error, reconnecting'), JSON.stringify(worker.lines));
    const after = await enqueue(t.db, 'after', {}, { queue: 'finish' });
    await waitFor('the next job', async () => (await job(after)).status === 'DONE');
  } finally {
    await worker.stop();
  }
});

test('errors: retried after the backoff or retryAfter, FAILED when terminal or out of attempts', async () => {
  const worker = startWorker(t, {
    queues: ['errors'],
    concurrency: 4,
    handlers: {
      flaky: async (j) => {
        if (j.attempts < 2) throw new Error(`attempt ${j.attempts} fails`);
        return { attempt: j.attempts };
      },
      later: async (j) => {
        if (j.attempts < 2) throw new RetryLater('not yet', { after: 0.2 });
        return { attempt: j.attempts };
      },
      poison: async () => {
        throw new TerminalError('cannot be done');
      },
      flagged: async () => {
        throw Object.assign(new Error('terminal by flag'), { terminal: true });
      },
      always: async () => {
        throw new Error('always fails');
      },
    },
  });
  try {
    const started = Date.now();
    const [flaky, later, poison, flagged, always] = await enqueueBatch(t.db, [
      { jobType: 'flaky', queue: 'errors' },
      { jobType: 'later', queue: 'errors' },
      { jobType: 'poison', queue: 'errors' },
      { jobType: 'flagged', queue: 'errors' },
      { jobType: 'always', queue: 'errors', maxAttempts: 2 },
    ]);
    await waitFor('every job finished', async () =>
      (await statuses('errors')).every((s) => s === 'DONE' || s === 'FAILED'), 8000);
    const later_ = await job(later);
    assert.deepEqual([later_.status, later_.result], ['DONE', { attempt: 2 }]);
    const flaky_ = await job(flaky);
    assert.deepEqual([flaky_.status, flaky_.attempts], ['DONE', 2]);
    const history = await t.rows('SELECT outcome, error FROM pqrun.job_attempts WHERE job_id = $1 ORDER BY attempt', [flaky]);
    assert.deepEqual(history.map((h) => h.outcome), ['retry', 'done']);
    assert.match(history[0].error, /^Error: attempt 1 fails\n {4}at /); // the stack
    assert.ok(Date.now() - started >= 1000, 'the retry waited for pqrun.backoff (1 s)');
    for (const [id, text] of [[poison, /^TerminalError: cannot be done/], [flagged, /^Error: terminal by flag/]]) {
      const row = await job(id);
      assert.deepEqual([row.status, row.attempts], ['FAILED', 1]);
      assert.match(row.last_error, text);
    }
    const always_ = await job(always);
    assert.deepEqual([always_.status, always_.attempts], ['FAILED', 2]);
    const failed = worker.lines.filter((l) => l.message === 'failed' && l.job === poison);
    assert.equal(failed[0].terminal, true);
  } finally {
    await worker.stop();
  }
});

test('validation: a payload its validate function refuses fails at once, without the handler', async () => {
  const ran = [];
  const isOrder = (p) => typeof p?.order === 'number';
  const worker = makeWorker(t, {
    queues: ['validation'],
    handlers: {
      ship: {
        validate: isOrder, // false: invalid
        handler: async (j) => {
          ran.push(j.id);
          return { shipped: j.payload.order };
        },
      },
    },
  }).register('mail', async (j) => {
    ran.push(j.id);
    return { to: j.payload.to };
  }, {
    validate: (p) => {
      if (typeof p.to !== 'string') throw new Error('"to" must be a string');
    },
  }).start();
  try {
    const [good, bad, mailGood, mailBad] = await enqueueBatch(t.db, [
      { jobType: 'ship', payload: { order: 7 }, queue: 'validation' },
      { jobType: 'ship', payload: { order: 'seven' }, queue: 'validation' },
      { jobType: 'mail', payload: { to: 'ada' }, queue: 'validation' },
      { jobType: 'mail', payload: { to: 42 }, queue: 'validation' },
    ]);
    await waitFor('every job finished', async () =>
      (await statuses('validation')).every((s) => s === 'DONE' || s === 'FAILED'));
    assert.deepEqual((await job(good)).result, { shipped: 7 });
    assert.deepEqual((await job(mailGood)).result, { to: 'ada' });
    const badRow = await job(bad);
    assert.deepEqual([badRow.status, badRow.attempts], ['FAILED', 1]);
    assert.match(badRow.last_error, /^TerminalError: invalid payload for ship\n/);
    const mailRow = await job(mailBad);
    assert.deepEqual([mailRow.status, mailRow.attempts], ['FAILED', 1]);
    assert.match(mailRow.last_error, /^TerminalError: invalid payload for mail: "to" must be a string/);
    assert.deepEqual(ran.sort(), [good, mailGood].sort());
  } finally {
    await worker.stop();
  }
});

test('concurrency: N slots run N jobs at once, never more', async () => {
  let running = 0;
  let most = 0;
  let open;
  const gate = new Promise((resolve) => (open = resolve));
  const worker = startWorker(t, {
    queues: ['slots'],
    concurrency: 3,
    handlers: {
      hold: async () => {
        running += 1;
        most = Math.max(most, running);
        await gate;
        running -= 1;
        return null;
      },
    },
  });
  try {
    await enqueueBatch(t.db, Array.from({ length: 5 }, () => ({ jobType: 'hold', queue: 'slots' })));
    await waitFor('3 jobs running', () => running === 3);
    await sleep(300);
    assert.equal(most, 3);
    assert.deepEqual((await statuses('slots')).sort(), ['READY', 'READY', 'RUNNING', 'RUNNING', 'RUNNING']);
    open();
    await allDone('slots', 5);
    assert.equal(most, 3);
  } finally {
    await worker.stop();
  }
});

test('long poll: an idle worker waits in one pickup, and a commit wakes it at once', async () => {
  const worker = startWorker(t, {
    queues: ['poll'],
    concurrency: 3,
    wait: '20 s',
    applicationName: 'pqrun-poll-test',
    handlers: { ping: async () => 'pong' },
  });
  try {
    const waiting = () => t.one(`SELECT count(*)::int AS connections,
        count(*) FILTER (WHERE state = 'active' AND query LIKE '%pqrun.pickup(%')::int AS picking
      FROM pg_stat_activity WHERE datname = $1 AND application_name = 'pqrun-poll-test'`, [t.database]);
    await waitFor('one waiting pickup', async () => (await waiting()).picking === 1);
    await sleep(300);
    assert.deepEqual(await waiting(), { connections: 4, picking: 1 }); // 3 slots and the poller
    const started = Date.now();
    const id = await enqueue(t.db, 'ping', {}, { queue: 'poll' });
    await allDone('poll', 1);
    const ms = Date.now() - started;
    assert.ok(ms < 1500, `DONE ${ms} ms after the enqueue (the pickup waits 20 s)`);
    assert.equal((await job(id)).result, 'pong');
  } finally {
    await worker.stop();
  }
});

test('claims: a burst is claimed by one pickup for the free slots, then by each slot\'s mark_done', async () => {
  let open;
  let gate = Promise.resolve();
  const worker = startWorker(t, {
    queues: ['burst'],
    concurrency: 4,
    wait: '0.5 s',
    applicationName: 'pqrun-burst-test',
    handlers: {
      quick: async () => {
        await sleep(100);
        return null;
      },
      busy: async () => {
        await gate;
        return null;
      },
    },
  });
  const claims = (where) => t.rows(`SELECT count(*)::int AS n FROM pqrun.jobs WHERE queue = 'burst' AND ${where}
    GROUP BY locked_at ORDER BY n DESC, locked_at`);
  try {
    // A slot is free once connected; a pickup asks for the slots free when
    // it starts, and one starts every 0.5 s.
    await waitFor('4 slots and the poller connected', async () => (await t.one(`SELECT count(*)::int AS n
      FROM pg_stat_activity WHERE datname = $1 AND application_name = 'pqrun-burst-test'`, [t.database])).n === 5);
    await sleep(700);
    await enqueueBatch(t.db, Array.from({ length: 12 }, (_, n) => ({ jobType: 'quick', payload: { n }, queue: 'burst' })));
    await allDone('burst', 12);
    assert.deepEqual((await claims("job_type = 'quick'")).map((r) => r.n), [4, 1, 1, 1, 1, 1, 1, 1, 1]);
    const chained = await t.one(`SELECT count(*)::int AS n FROM pqrun.jobs n WHERE queue = 'burst'
      AND EXISTS (SELECT FROM pqrun.jobs p WHERE p.queue = 'burst' AND p.finished_at = n.locked_at)`);
    assert.equal(chained.n, 8, 'claimed by the mark_done_and_pickup of the job before them');
    assert.ok(worker.lines.some((l) => l.message === 'claimed' && l.jobs === 4 && l.free === 4));
    assert.equal((await t.one("SELECT max(attempts) AS a FROM pqrun.jobs WHERE queue = 'burst'")).a, 1);

    // two slots busy: the poller asks for the other two
    gate = new Promise((resolve) => (open = resolve));
    await enqueueBatch(t.db, [{ jobType: 'busy', queue: 'burst' }, { jobType: 'busy', queue: 'burst' }]);
    await waitFor('two busy jobs', async () => (await statuses('burst')).filter((s) => s === 'RUNNING').length === 2);
    await sleep(200);
    await enqueueBatch(t.db, Array.from({ length: 6 }, (_, n) => ({ jobType: 'quick', payload: { two_free: n }, queue: 'burst' })));
    await waitFor('the 6 done', async () => (await t.one(`SELECT count(*)::int AS n FROM pqrun.jobs
      WHERE queue = 'burst' AND payload ? 'two_free' AND status = 'DONE'`)).n === 6);
    assert.deepEqual((await claims("payload ? 'two_free'")).map((r) => r.n), [2, 1, 1, 1, 1]);
    open();
    await allDone('burst', 20);
  } finally {
    open?.();
    await worker.stop();
  }
});

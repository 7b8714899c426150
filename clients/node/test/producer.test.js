// The producer calls on a real server: enqueue in the caller's transaction,
// every option of enqueue, enqueueBatch, cancel, retry, and pqrun's
// SQLSTATEs as error classes.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import {
  enqueue, enqueueBatch, cancel, retry, mapError, PqrunError, InvalidArgumentError, JobNotFoundError,
  JobNotRunningError, PayloadTooLargeError, DuplicateJobError,
} from 'pqrun';
import { testDatabase } from './helpers.js';

let t;
before(async () => {
  t = await testDatabase('producer');
});
after(() => t?.drop());

const job = (id) => t.one('SELECT * FROM pqrun.jobs WHERE id = $1', [id]);

test('enqueue in the caller\'s transaction: rolled back, no job; committed, the job and the write', async () => {
  await t.db.query('CREATE TABLE orders (id int PRIMARY KEY)');
  const client = await t.connect();
  await client.query('BEGIN');
  await client.query('INSERT INTO orders VALUES (1)');
  const lost = await enqueue(client, 'ship', { order: 1 });
  await client.query('ROLLBACK');
  assert.equal(typeof lost, 'string');
  assert.equal((await t.rows('SELECT * FROM pqrun.jobs WHERE id = $1', [lost])).length, 0);

  await client.query('BEGIN');
  await client.query('INSERT INTO orders VALUES (2)');
  const id = await enqueue(client, 'ship', { order: 2 });
  // not visible to others before the commit
  assert.equal((await t.rows('SELECT * FROM pqrun.jobs WHERE id = $1', [id])).length, 0);
  await client.query('COMMIT');
  const row = await job(id);
  assert.equal(row.status, 'READY');
  assert.deepEqual(row.payload, { order: 2 });
  assert.equal((await t.one('SELECT count(*)::int AS n FROM orders')).n, 1);
});

test('enqueue with defaults, and with every option', async () => {
  const plain = await job(await enqueue(t.db, 'plain'));
  assert.deepEqual([plain.payload, plain.priority, plain.max_attempts, plain.queue, plain.timeout_seconds],
    [{}, 0, 5, 'default', null]);

  const dep = await enqueue(t.db, 'dep', 'a string payload');
  const id = await enqueue(t.db, 'full', { n: 1 }, {
    priority: 7, maxAttempts: 2, timeoutSeconds: 30, queue: 'q1', dependsOn: [dep], fifoKey: 'f-options',
    concurrencyKey: 'tenant-1', rateWeight: 3, dedupeKey: 'full-1',
  });
  const row = await job(id);
  assert.deepEqual(
    [row.priority, row.max_attempts, row.timeout_seconds, row.queue, row.depends_on, row.fifo_key,
      row.concurrency_key, row.rate_weight, row.dedupe_key, row.status],
    [7, 2, 30, 'q1', [dep], 'f-options', 'tenant-1', 3, 'full-1', 'BLOCKED'],
  );
  assert.equal((await job(dep)).payload, 'a string payload');
  // null means pqrun's default
  const nulls = await job(await enqueue(t.db, 'nulls', null, { priority: null, queue: null, delay: null }));
  assert.deepEqual([nulls.payload, nulls.priority, nulls.queue], [null, 0, 'default']);
});

test('delays: delay in seconds or as an interval, runAfter as a Date', async () => {
  const { now } = await t.one('SELECT now() AS now');
  const inAMinute = await job(await enqueue(t.db, 'later', {}, { delay: 60 }));
  const inAnHour = await job(await enqueue(t.db, 'later', {}, { delay: '1 hour' }));
  const at = new Date(Date.parse('2099-01-02T03:04:05Z'));
  const fixed = await job(await enqueue(t.db, 'later', {}, { runAfter: at }));
  const near = (row, seconds) => Math.abs(row.run_after - now - seconds * 1000) < 5000;
  assert.ok(near(inAMinute, 60), `run_after ${inAMinute.run_after.toISOString()}`);
  assert.ok(near(inAnHour, 3600), `run_after ${inAnHour.run_after.toISOString()}`);
  assert.equal(fixed.run_after.toISOString(), at.toISOString());
  await assert.rejects(enqueue(t.db, 'later', {}, { delay: 1, runAfter: at }), TypeError);
  await assert.rejects(enqueue(t.db, 'later', {}, { dealy: 1 }), /unknown enqueue option dealy/);
});

test('dedupe: the same key gives the unfinished job\'s id, and a new job once it finished', async () => {
  const first = await enqueue(t.db, 'report', { v: 1 }, { dedupeKey: 'report:7' });
  const again = await enqueue(t.db, 'report', { v: 2 }, { dedupeKey: 'report:7' });
  assert.equal(again, first);
  assert.deepEqual((await job(first)).payload, { v: 1 });
  assert.equal(await cancel(t.db, first), true);
  const fresh = await enqueue(t.db, 'report', { v: 3 }, { dedupeKey: 'report:7' });
  assert.notEqual(fresh, first);
  // retry of the cancelled one would make a second holder of the key
  const err = await retry(t.db, first).catch((e) => e);
  assert.ok(err instanceof DuplicateJobError, String(err));
  assert.ok(err instanceof PqrunError);
  assert.equal(err.code, '23505');
});

test('dependencies: BLOCKED until the dependency is DONE; CANCELLED when it is cancelled', async () => {
  const a = await enqueue(t.db, 'a');
  const b = await enqueue(t.db, 'b', {}, { dependsOn: [a] });
  const c = await enqueue(t.db, 'c', {}, { dependsOn: [Number(b)] });
  assert.deepEqual([(await job(b)).status, (await job(c)).status], ['BLOCKED', 'BLOCKED']);
  assert.equal(await cancel(t.db, a, { reason: 'not needed' }), true);
  assert.deepEqual([(await job(a)).last_error, (await job(b)).status, (await job(c)).status],
    ['not needed', 'CANCELLED', 'CANCELLED']);
  assert.equal(await cancel(t.db, a), false); // finished already
});

test('FIFO groups: the second job of a key waits for the first', async () => {
  const first = await enqueue(t.db, 'fifo', {}, { fifoKey: 'account-1' });
  const second = await enqueue(t.db, 'fifo', {}, { fifoKey: 'account-1' });
  const other = await enqueue(t.db, 'fifo', {}, { fifoKey: 'account-2' });
  assert.deepEqual([(await job(first)).status, (await job(second)).status, (await job(other)).status],
    ['READY', 'BLOCKED', 'READY']);
  await cancel(t.db, first);
  assert.equal((await job(second)).status, 'READY');
});

test('concurrency keys: the key is stored and a limit per key holds', async () => {
  const ids = await enqueueBatch(t.db, [1, 2, 3].map((n) => ({ jobType: 'render', payload: { n }, queue: 'reports',
    concurrencyKey: n < 3 ? 'tenant-a' : 'tenant-b' })));
  await t.db.query("SELECT pqrun.set_key_limit('reports', 1)");
  const picked = await t.rows("SELECT id, concurrency_key FROM pqrun.pickup('w', queues => '{reports}', batch_size => 3)");
  assert.deepEqual(picked.map((r) => r.concurrency_key).sort(), ['tenant-a', 'tenant-b']);
  assert.ok(picked.every((r) => ids.includes(r.id)));
});

test('enqueueBatch: ids in order, options per job, delays on the server\'s clock', async () => {
  assert.deepEqual(await enqueueBatch(t.db, []), []);
  const ids = await enqueueBatch(t.db, [
    { jobType: 'batch', payload: { n: 1 } },
    { jobType: 'batch', payload: { n: 2 }, priority: 5, queue: 'batchq', maxAttempts: 1, timeoutSeconds: 9 },
    { jobType: 'batch', payload: { n: 3 }, delay: 120, dedupeKey: 'batch-3' },
    { jobType: 'batch', payload: { n: 4 }, dedupeKey: 'batch-3' },
  ]);
  assert.equal(ids.length, 4);
  assert.equal(ids[3], ids[2]);
  const rows = await t.rows(`SELECT id, payload, priority, queue, max_attempts, timeout_seconds,
      run_after > now() + interval '100 s' AS delayed FROM pqrun.jobs WHERE id = ANY($1) ORDER BY id`, [ids]);
  assert.deepEqual(rows.map((r) => r.payload.n), [1, 2, 3]);
  assert.deepEqual(rows.map((r) => r.id), ids.slice(0, 3));
  assert.deepEqual([rows[1].priority, rows[1].queue, rows[1].max_attempts, rows[1].timeout_seconds],
    [5, 'batchq', 1, 9]);
  assert.deepEqual(rows.map((r) => r.delayed), [false, false, true]);

  // rolled back with the caller's transaction
  const client = await t.connect();
  await client.query('BEGIN');
  const gone = await enqueueBatch(client, [{ jobType: 'batch' }, { jobType: 'batch' }]);
  await client.query('ROLLBACK');
  assert.equal((await t.one('SELECT count(*)::int AS n FROM pqrun.jobs WHERE id = ANY($1)', [gone])).n, 0);
});

test('cancel and retry: booleans, and a replayed job READY again', async () => {
  const id = await enqueue(t.db, 'replay', {}, { maxAttempts: 1 });
  assert.equal(await retry(t.db, id), false); // READY: nothing to replay
  await t.db.query("SELECT pqrun.pickup('w', '{replay}')");
  const lease = (await job(id)).lease_token;
  await t.db.query("SELECT pqrun.mark_error($1, 'boom', lease_token => $2)", [id, lease]);
  assert.equal((await job(id)).status, 'FAILED');
  assert.equal(await retry(t.db, id, { queue: 'default' }), true);
  assert.equal((await job(id)).status, 'READY');
  assert.equal(await cancel(t.db, BigInt(id), { reason: 'enough', queue: 'default' }), true);
  assert.equal((await job(id)).status, 'CANCELLED');
});

test('pqrun\'s SQLSTATEs as error classes, with the code, the detail and the driver\'s error', async () => {
  const invalid = await enqueue(t.db, '').catch((e) => e);
  assert.ok(invalid instanceof InvalidArgumentError, String(invalid));
  assert.equal(invalid.code, '22023');
  assert.equal(invalid.cause.code, '22023');
  for (const options of [{ maxAttempts: 0 }, { timeoutSeconds: -1 }, { dependsOn: ['999999'] }, { queue: '' }]) {
    await assert.rejects(enqueue(t.db, 'bad', {}, options), InvalidArgumentError, JSON.stringify(options));
  }
  await assert.rejects(enqueueBatch(t.db, [{ jobType: 'ok' }, { jobType: '' }]), InvalidArgumentError);

  await assert.rejects(cancel(t.db, '987654321'), JobNotFoundError);
  await assert.rejects(retry(t.db, 987654321), JobNotFoundError);
  const id = await enqueue(t.db, 'elsewhere', {}, { queue: 'qa' });
  await assert.rejects(cancel(t.db, id, { queue: 'qb' }), JobNotFoundError);

  const big = await t.connect();
  await big.query('SET pqrun.max_payload_bytes = 1024');
  await assert.rejects(enqueue(big, 'big', { text: 'x'.repeat(5000) }), PayloadTooLargeError);

  // 55000 from a call of your own, through mapError
  const running = await enqueue(t.db, 'fenced');
  await t.db.query("SELECT pqrun.pickup('w', '{fenced}')");
  await cancel(t.db, running);
  const raw = await t.db.query("SELECT pqrun.mark_done($1, lease_token => gen_random_uuid())", [running]).catch((e) => e);
  const mapped = mapError(raw);
  assert.ok(mapped instanceof JobNotRunningError, String(mapped));
  assert.equal(mapped.cancelled, true);
  assert.equal(mapped.detail, 'Its status is CANCELLED.');

  // PostgreSQL's own errors pass through as the driver raised them
  const client = await t.connect();
  await client.query('BEGIN READ ONLY');
  const readOnly = await enqueue(client, 'ro').catch((e) => e);
  await client.query('ROLLBACK');
  assert.equal(readOnly.code, '25006');
  assert.ok(!(readOnly instanceof PqrunError));
});

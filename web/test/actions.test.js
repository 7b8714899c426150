'use strict';
// Every action, through the pages' forms: retry, cancel, pause and resume,
// limits set and removed, bulk retry and cancel by a filter.
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { fixture, dashboard, Session, flash } = require('./helpers');

let fx;
let app;
let s;

before(async () => {
  fx = await fixture('actions');
  app = await dashboard(fx);
  s = new Session(app.url);
});

after(async () => {
  if (app) await app.close();
  if (fx) await fx.drop();
});

const one = async (text, params) => (await fx.sql(text, params)).rows[0];

test('retry a failed job', async () => {
  const { id } = await one("SELECT id FROM pqrun.jobs WHERE status = 'FAILED' ORDER BY id LIMIT 1");
  const page = await s.page(`/jobs/${id}`);
  assert.match(page.text, new RegExp(`action="/jobs/${id}/retry"`));
  const r = await s.act(`/jobs/${id}`, `/jobs/${id}/retry`);
  assert.equal(flash(r.text), `Job #${id} is READY again.`);
  assert.equal((await one('SELECT status FROM pqrun.jobs WHERE id = $1', [id])).status, 'READY');
  const again = await s.act(`/jobs/${id}`, `/jobs/${id}/retry`);
  assert.equal(flash(again.text), `Job #${id} is not FAILED or CANCELLED: nothing to retry.`);
});

test('cancel a running job, with a reason', async () => {
  const { id } = await one("SELECT id FROM pqrun.jobs WHERE status = 'RUNNING' LIMIT 1");
  const r = await s.act(`/jobs/${id}`, `/jobs/${id}/cancel`, { reason: 'customer <asked>' });
  assert.equal(flash(r.text), `Job #${id} is CANCELLED.`);
  const row = await one('SELECT status, last_error FROM pqrun.jobs WHERE id = $1', [id]);
  assert.equal(row.status, 'CANCELLED');
  assert.equal(row.last_error, 'customer <asked>');
  assert.ok(r.text.includes('customer &lt;asked&gt;'));
  // Its dependent is cancelled with it (the extension's rule), and the page says so.
  assert.equal((await one("SELECT status FROM pqrun.jobs WHERE job_type = 'receipt'")).status, 'CANCELLED');
});

test('pause and resume a queue', async () => {
  let r = await s.act('/', '/queues/mail/pause');
  assert.equal(flash(r.text), 'Queue mail paused.');
  assert.equal((await one("SELECT paused FROM pqrun.queue_controls WHERE queue = 'mail' AND job_type IS NULL")).paused, true);
  assert.match(r.text, /mail<\/a> <span class="badge paused">paused<\/span>/);
  assert.match(r.text, /action="\/queues\/mail\/resume"/);
  r = await s.act('/', '/queues/mail/pause');
  assert.equal(flash(r.text), 'Queue mail was paused already.');
  r = await s.act('/', '/queues/mail/resume');
  assert.equal(flash(r.text), 'Queue mail resumed.');
  assert.equal((await one("SELECT coalesce(bool_or(paused), false) AS p FROM pqrun.queue_controls WHERE queue = 'mail'")).p, false);
});

test('a queue whose name holds markup and a slash can be paused', async () => {
  const q = '<i>q/1</i>';
  const path = `/queues/${encodeURIComponent(q)}`;
  const r = await s.act(path, `${path}/pause`);
  assert.equal(r.status, 200);
  assert.equal(flash(r.text), `Queue ${q} paused.`);
  assert.equal((await one('SELECT paused FROM pqrun.queue_controls WHERE queue = $1', [q])).paused, true);
  await s.act(path, `${path}/resume`);
});

test('set and remove a concurrency limit and a rate limit', async () => {
  let r = await s.act('/queues/mail', '/queues/mail/concurrency', { job_type: '', max_running: '3' });
  assert.equal(flash(r.text), 'mail: at most 3 running at once.');
  r = await s.act('/queues/mail', '/queues/mail/concurrency', { job_type: 'send', max_running: '1' });
  assert.equal(flash(r.text), 'mail / send: at most 1 running at once.');
  r = await s.act('/queues/mail', '/queues/mail/rate', { job_type: '', per_second: '2.5', burst: '5' });
  assert.equal(flash(r.text), 'mail: at most 2.5 claims per second, 5 at once.');
  const rows = (await fx.sql("SELECT job_type, max_running, rate, burst FROM pqrun.queue_controls WHERE queue = 'mail' ORDER BY job_type NULLS FIRST")).rows;
  assert.deepEqual(rows.map((x) => [x.job_type, x.max_running, x.rate, x.burst]), [[null, 3, 2.5, 5], ['send', 1, null, null]]);
  assert.match(r.text, /Remove limit/);
  r = await s.act('/queues/mail', '/queues/mail/concurrency', { job_type: 'send', clear: '1' });
  assert.equal(flash(r.text), 'Concurrency limit of mail / send removed.');
  r = await s.act('/queues/mail', '/queues/mail/rate', { job_type: '', clear: '1' });
  assert.equal(flash(r.text), 'Rate limit of mail removed.');
  r = await s.act('/queues/mail', '/queues/mail/concurrency', { job_type: '', clear: '1' });
  assert.equal((await fx.sql("SELECT 1 FROM pqrun.queue_controls WHERE queue = 'mail' AND (max_running IS NOT NULL OR rate IS NOT NULL)")).rowCount, 0);
  r = await s.act('/queues/mail', '/queues/mail/concurrency', { max_running: '-1' });
  assert.match(flash(r.text), /^Error: max_running must be an integer/);
  r = await s.act('/queues/mail', '/queues/mail/rate', { per_second: '0', burst: '1' });
  assert.match(flash(r.text), /^Error: per_second/);
});

test('bulk retry by filter, in batches, says how many', async () => {
  await fx.sql(`SELECT count(*) FROM pqrun.enqueue_batch((SELECT jsonb_agg(jsonb_build_object('job_type', 'fetch', 'queue', 'bulk',
                 'max_attempts', 1, 'payload', jsonb_build_object('n', i, 'group', CASE WHEN i <= 30 THEN 'a' ELSE 'b' END)))
                 FROM generate_series(1, 45) i))`);
  await fx.sql(`SELECT count(pqrun.mark_error(id, CASE WHEN (payload->>'n')::int % 3 = 0 THEN 'HTTP 503 from upstream' ELSE 'quota exceeded' END, true))
                  FROM pqrun.pickup('bulk-worker', queues => '{bulk}', batch_size => 45)`);
  const page = await s.page('/jobs?queue=bulk&status=FAILED&error=503');
  assert.match(page.text, /Retry all matching FAILED jobs/);
  const r = await s.post('/jobs/retry', { queue: 'bulk', status: 'FAILED', error: '503' });
  assert.equal(r.status, 303);
  assert.match(r.location, /^\/jobs\?queue=bulk&status=FAILED&error=503/);
  const after = await s.get(r.location);
  assert.equal(flash(after.text), 'Retried 15 jobs (FAILED matching the filter).');
  assert.equal((await one("SELECT count(*)::int AS n FROM pqrun.jobs WHERE queue = 'bulk' AND status = 'READY'")).n, 15);
  // By payload, within a finish time range.
  await s.page('/jobs?queue=bulk');
  const r2 = await s.post('/jobs/retry', { queue: 'bulk', status: 'FAILED', payload: '{"group": "b"}', time: 'finished',
    from: new Date(Date.now() - 3600e3).toISOString() });
  const after2 = await s.get(r2.location);
  assert.equal(flash(after2.text), 'Retried 10 jobs (FAILED matching the filter).');
  // A creation time range does not fit retry_jobs: refused, nothing done.
  await s.page('/jobs');
  const r3 = await s.post('/jobs/retry', { queue: 'bulk', since: '1h' });
  assert.match(flash((await s.get(r3.location)).text), /^Error: retry by a time range of finish/);
});

test('bulk cancel by filter, with a reason, says how many', async () => {
  await s.page('/jobs?queue=bulk&status=READY');
  const r = await s.post('/jobs/cancel', { queue: 'bulk', status: 'READY', payload: '{"group": "a"}', reason: 'bulk test', since: '1h' });
  const after = await s.get(r.location);
  assert.equal(flash(after.text), 'Cancelled 10 jobs (READY matching the filter).');
  assert.equal((await one("SELECT count(*)::int AS n FROM pqrun.jobs WHERE queue = 'bulk' AND status = 'CANCELLED' AND last_error = 'bulk test'")).n, 10);
  assert.equal((await one("SELECT count(*)::int AS n FROM pqrun.jobs WHERE queue = 'bulk' AND status = 'READY'")).n, 15);
  const r2 = await s.post('/jobs/cancel', { queue: 'bulk', status: 'FAILED' });
  assert.match(flash((await s.get(r2.location)).text), /^Error: only BLOCKED, READY and RUNNING/);
});

test('the job list offers the bulk actions that fit its filter', async () => {
  const failed = await s.get('/jobs?status=FAILED');
  assert.match(failed.text, /Retry all matching FAILED jobs/);
  assert.doesNotMatch(failed.text, /Cancel all matching/);
  const ready = await s.get('/jobs?status=READY&since=1h');
  assert.match(ready.text, /Cancel all matching READY jobs/);
  assert.doesNotMatch(ready.text, /Retry all matching/);
  const both = await s.get('/jobs');
  assert.match(both.text, /Retry all matching FAILED\/CANCELLED jobs/);
  assert.match(both.text, /Cancel all matching READY\/BLOCKED jobs/);
  assert.match(both.text, /data-confirm="Cancel every READY\/BLOCKED job/);
});

'use strict';
// Every page answers, shows what it should, escapes what jobs hold, pages
// by keyset and filters; /metrics and the chart answer too.
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { fixture, dashboard, Session } = require('./helpers');

let fx;
let app;
let s;

before(async () => {
  fx = await fixture('pages');
  app = await dashboard(fx, { env: { PQRUN_DASHBOARD_PAGE_SIZE: '10' } });
  s = new Session(app.url);
});

after(async () => {
  if (app) await app.close();
  if (fx) await fx.drop();
});

const ids = (text) => [...text.matchAll(/<td><a href="\/jobs\/(\d+)">/g)].map((m) => Number(m[1]));
const link = (text, rel) => {
  const m = new RegExp(`<a href="([^"]+)" rel="${rel}">`).exec(text);
  return m ? m[1].replace(/&amp;/g, '&') : null;
};

test('every page answers 200 with its content', async () => {
  const failedId = (await fx.sql("SELECT id FROM pqrun.jobs WHERE status = 'FAILED' ORDER BY id LIMIT 1")).rows[0].id;
  const pages = {
    '/': ['Queues', 'mail', 'billing', 'send', 'Pickup latency', 'img class="chart"'],
    '/queues/mail': ['Queue mail', 'Flow control', 'Set concurrency limit', 'Set rate limit'],
    '/jobs': ['Filter', 'FAILED', 'DONE'],
    [`/jobs/${failedId}`]: [`Job #${failedId}`, 'Attempts', 'Retry', 'Payload and result are hidden'],
    '/running': ['billing-worker-1', 'charge', '{&quot;of&quot;:7,&quot;step&quot;:3}'],
    '/schedules': ['nightly-report', '0 3 * * *'],
    '/health': ['Vacuum horizon', 'pqrun.retention', 'operator'],
  };
  for (const [path, wanted] of Object.entries(pages)) {
    const r = await s.get(path);
    assert.equal(r.status, 200, `${path}: ${r.status} ${r.text.slice(0, 300)}`);
    for (const w of wanted) assert.ok(r.text.includes(w), `${path} shows ${w}`);
  }
  assert.equal((await s.get('/jobs/999999999')).status, 404);
  assert.equal((await s.get('/nowhere')).status, 404);
  assert.equal((await s.get('/queues/%E0%A4%A')).status, 400);
});

test('security headers on every answer', async () => {
  for (const path of ['/', '/jobs', '/static/app.js', '/chart.svg', '/nowhere']) {
    const r = await s.get(path);
    const csp = r.headers.get('content-security-policy');
    assert.match(csp, /default-src 'none'/, path);
    assert.match(csp, /script-src 'self'/, path);
    assert.doesNotMatch(csp, /unsafe-inline/, path);
    assert.equal(r.headers.get('x-frame-options'), 'DENY', path);
    assert.equal(r.headers.get('x-content-type-options'), 'nosniff', path);
  }
  const r = await s.get('/');
  assert.doesNotMatch(r.text, /<script>|<script [^>]*>[^<]/, 'no inline script');
  assert.doesNotMatch(r.text, / style="/, 'no inline style');
  const cookie = r.headers.get('set-cookie') || '';
  if (cookie) assert.match(cookie, /HttpOnly; SameSite=Strict/);
});

test('markup in payloads, errors and names is shown as text', async () => {
  const bad = (await fx.sql("SELECT id FROM pqrun.jobs WHERE payload ? 'html'")).rows[0].id;
  const pages = [`/jobs/${bad}?reveal=1`, '/jobs?status=FAILED', '/', '/jobs', `/queues/${encodeURIComponent('<i>q/1</i>')}`];
  for (const path of pages) {
    const r = await s.get(path);
    assert.equal(r.status, 200, path);
    assert.doesNotMatch(r.text, /<script>alert/, `${path}: no live script`);
    assert.doesNotMatch(r.text, /<b>bold<\/b>|<i>q\/1<\/i>/, `${path}: no live markup`);
  }
  const job = await s.get(`/jobs/${bad}?reveal=1`);
  assert.ok(job.text.includes('&lt;script&gt;alert(&quot;error&quot;)&lt;/script&gt;'), 'error escaped');
  assert.ok(job.text.includes('&lt;script&gt;alert(\\&quot;payload\\&quot;)&lt;/script&gt;'), 'payload escaped');
  const overview = await s.get('/');
  assert.ok(overview.text.includes('&lt;i&gt;q/1&lt;/i&gt;'), 'queue name escaped');
  assert.ok(overview.text.includes('href="/queues/%3Ci%3Eq%2F1%3C%2Fi%3E"'), 'queue name encoded in links');
});

test('payloads are hidden until asked for, or configured', async () => {
  const id = (await fx.sql("SELECT id FROM pqrun.jobs WHERE job_type = 'charge'")).rows[0].id;
  const hidden = await s.get(`/jobs/${id}`);
  assert.ok(!hidden.text.includes('amount'), 'payload not shown');
  assert.ok(hidden.text.includes(`/jobs/${id}?reveal=1`));
  const shown = await s.get(`/jobs/${id}?reveal=1`);
  assert.ok(shown.text.includes('&quot;amount&quot;: 42'));
  const other = await dashboard(fx, { args: ['--show-payloads'] });
  try {
    const r = await new Session(other.url).get(`/jobs/${id}`);
    assert.ok(r.text.includes('&quot;amount&quot;: 42'));
  } finally {
    await other.close();
  }
});

test('the job page shows lease, attempts, dependencies, dependents and FIFO group', async () => {
  const charge = (await fx.sql("SELECT id FROM pqrun.jobs WHERE job_type = 'charge'")).rows[0].id;
  const receipt = (await fx.sql("SELECT id FROM pqrun.jobs WHERE job_type = 'receipt'")).rows[0].id;
  const sync = (await fx.sql("SELECT id FROM pqrun.jobs WHERE job_type = 'sync' ORDER BY id")).rows.map((r) => r.id);
  const c = await s.get(`/jobs/${charge}`);
  assert.ok(c.text.includes('billing-worker-1'), 'holder');
  assert.ok(c.text.includes(`href="/jobs/${receipt}"`), 'the dependent waiting for it');
  assert.ok(c.text.includes('<td>running</td>'), 'its running attempt');
  const r = await s.get(`/jobs/${receipt}`);
  assert.ok(r.text.includes(`href="/jobs/${charge}"`), 'what it depends on');
  assert.ok(r.text.includes('BLOCKED'));
  const g = await s.get(`/jobs/${sync[1]}`);
  for (const id of sync) assert.ok(g.text.includes(`href="/jobs/${id}"`), `FIFO member ${id}`);
  assert.ok(g.text.includes('account-7'));
});

test('keyset pages walk every job once, newest first, and back', async () => {
  const all = (await fx.sql("SELECT id FROM pqrun.jobs WHERE queue = 'mail' AND job_type = 'send' ORDER BY id DESC")).rows.map((r) => Number(r.id));
  let path = '/jobs?queue=mail&job_type=send';
  const seen = [];
  const pages = [];
  for (let i = 0; i < 20 && path; i++) {
    const r = await s.get(path);
    assert.equal(r.status, 200);
    pages.push({ path, ids: ids(r.text), text: r.text });
    seen.push(...ids(r.text));
    path = link(r.text, 'next');
  }
  assert.deepEqual(seen, all, 'every job once, in id order, newest first');
  assert.equal(pages[0].ids.length, 10);
  assert.doesNotMatch(pages[2].path, /offset/i);
  const newer = link(pages[2].text, 'prev');
  assert.ok(newer, 'a link to newer jobs');
  const back = await s.get(newer);
  assert.deepEqual(ids(back.text), pages[1].ids, 'newer than page 3 is page 2');
});

test('a window that runs out says so and the next request goes on from there', async () => {
  const narrow = await dashboard(fx, { env: { PQRUN_DASHBOARD_SCAN_WINDOW: '100', PQRUN_DASHBOARD_PAGE_SIZE: '10' } });
  try {
    const ns = new Session(narrow.url);
    const want = (await fx.sql("SELECT id FROM pqrun.jobs WHERE payload @> '{\"n\": 3}' AND job_type = 'send'")).rows[0].id;
    let path = '/jobs?payload=%7B%22n%22%3A+3%7D&job_type=send';
    let found = false;
    let searched = 0;
    for (let i = 0; i < 10 && path; i++) {
      const r = await ns.get(path);
      if (ids(r.text).includes(Number(want))) found = true;
      if (r.text.includes('Search older jobs')) searched++;
      path = link(r.text, 'next');
    }
    assert.ok(found, 'the match beyond the first window is found');
    assert.ok(searched >= 1, 'the first window ran out without it');
  } finally {
    await narrow.close();
  }
});

test('filters: queue, job type, status, time, error text, payload', async () => {
  const statuses = async (path) => [...(await s.get(path)).text.matchAll(/class="status status-(\w+)"/g)].map((m) => m[1]);
  const failed = await statuses('/jobs?status=FAILED');
  assert.equal(failed.length, 5);
  assert.ok(failed.every((x) => x === 'failed'));
  const both = await statuses('/jobs?status=RUNNING&status=BLOCKED');
  assert.deepEqual([...new Set(both)].sort(), ['blocked', 'running']);
  const running = await s.get('/jobs?status=RUNNING&queue=billing&job_type=charge');
  assert.equal(ids(running.text).length, 1);
  const err = await s.get('/jobs?error=MAILBOX+FULL');
  assert.equal(ids(err.text).length, 4, 'error text, case-insensitive');
  const payload = await s.get('/jobs?payload=%7B%22to%22%3A+%22user7%40example.com%22%7D');
  assert.equal(ids(payload.text).length, 1, 'payload @>');
  const recent = await s.get('/jobs?since=1h&queue=reports');
  assert.equal(ids(recent.text).length, 2, 'created in the last hour');
  const future = await s.get(`/jobs?from=${encodeURIComponent(new Date(Date.now() + 3600e3).toISOString().slice(0, 16))}`);
  assert.equal(ids(future.text).length, 0, 'created from an hour ahead: none');
  const finished = await s.get(`/jobs?time=finished&to=${encodeURIComponent(new Date(Date.now() + 60e3).toISOString())}&status=FAILED`);
  assert.equal(ids(finished.text).length, 5, 'finished before a minute from now');
  const bad = await s.get('/jobs?payload=%7Bnot+json');
  assert.equal(bad.status, 200);
  assert.match(bad.text, /payload: not JSON/);
  assert.match((await s.get('/jobs?status=NOPE')).text, /unknown status NOPE/);
});

test('/metrics answers in Prometheus text format', async () => {
  const r = await s.get('/metrics');
  assert.equal(r.status, 200);
  assert.match(r.headers.get('content-type'), /^text\/plain; version=0\.0\.4/);
  assert.match(r.text, /^# HELP pqrun_jobs /m);
  assert.match(r.text, /^pqrun_jobs\{queue="mail",job_type="send",status="DONE"\} 60$/m);
});

test('the chart is an SVG of the samples', async () => {
  await new Promise((resolve) => setTimeout(resolve, 2200)); // two samples, one a second
  const r = await s.get('/chart.svg');
  assert.equal(r.status, 200);
  assert.match(r.headers.get('content-type'), /^image\/svg\+xml/);
  assert.match(r.text, /^<svg xmlns="http:\/\/www.w3.org\/2000\/svg"/);
  assert.match(r.text, /<polyline points="[\d.,\s]+"/);
  const q = await s.get('/chart.svg?queue=%3Cscript%3E');
  assert.ok(q.text.includes('Queue &lt;script&gt;'));
});

test('schedules page by keyset', async () => {
  await fx.sql("SELECT pqrun.schedule('every-' || lpad(i::text, 2, '0'), 'tick', run_every => interval '1 hour') FROM generate_series(1, 14) i");
  const names = [];
  let path = '/schedules';
  for (let i = 0; i < 5 && path; i++) {
    const r = await s.get(path);
    assert.equal(r.status, 200);
    names.push(...[...r.text.matchAll(/<tr>\s*<td>([^<]+)<\/td>/g)].map((m) => m[1]));
    path = link(r.text, 'next');
  }
  const all = (await fx.sql('SELECT name FROM pqrun.periodic ORDER BY name, key')).rows.map((r) => r.name);
  assert.deepEqual(names, all);
});

// pqrun 0.21.0's views: the overview reads the unfinished jobs as the
// maintenance worker counted them (pqrun.queue_overview) and the controls
// without their READY jobs (pqrun.flow_controls); where nothing was counted
// yet (the view empty) it counts them itself. Both show the same rows (the
// worker may count between the two looks: the same jobs, the same counts).
test('the overview reads pqrun.queue_overview and pqrun.flow_controls, or counts where nothing was counted', async () => {
  assert.equal(app.info.features.queueOverview, true);
  assert.equal(app.info.features.flowControls, true);
  await fx.sql("SELECT pqrun.set_concurrency_limit('billing', 5)");
  await fx.sql('SELECT pqrun._count_live_jobs()');
  const counted = await s.get('/');
  assert.equal(counted.status, 200);
  await fx.sql('DELETE FROM pqrun.live_counts; DELETE FROM pqrun.live_count_round');
  const uncounted = await s.get('/');
  assert.equal(uncounted.status, 200);
  const rows = (t) => [...t.matchAll(/<tr class="type">[\s\S]*?<\/tr>/g)].map((m) => m[0].replace(/<td class="n">[\d.]+ (ms|s|min)[^<]*<\/td>/g, ''));
  assert.ok(rows(counted.text).length > 0);
  assert.deepEqual(rows(counted.text), rows(uncounted.text));
  assert.match(counted.text, /\/5 running/);
  assert.equal((await s.get('/queues/billing')).status, 200);
});

test('the overview pages queues by keyset', async () => {
  await fx.sql("SELECT pqrun.enqueue('tick', queue => 'paged-' || lpad(i::text, 2, '0')) FROM generate_series(1, 30) i");
  await fx.sql('SELECT pqrun._count_live_jobs()');
  const small = await dashboard(fx, { env: { PQRUN_DASHBOARD_PAGE_SIZE: '2' } });
  try {
    const ps = new Session(small.url);
    const seen = [];
    let path = '/';
    for (let i = 0; i < 40 && path; i++) {
      const r = await ps.get(path);
      assert.equal(r.status, 200);
      seen.push(...[...r.text.matchAll(/<th class="name"><a href="\/queues\/([^"]+)">/g)].map((m) => decodeURIComponent(m[1])));
      path = link(r.text, 'next');
    }
    const all = (await fx.sql('SELECT DISTINCT queue FROM pqrun.queue_overview ORDER BY queue')).rows.map((r) => r.queue);
    assert.deepEqual(seen, all);
    assert.ok(seen.filter((q) => q.startsWith('paged-')).length === 30, 'every queue once');
  } finally {
    await small.close();
  }
});

// pqrun.job_dependents (0.21.0): the jobs waiting for one, by its edges.
test('dependents come from pqrun.job_dependents', async () => {
  assert.equal(app.info.features.dependents, true);
  const charge = (await fx.sql("SELECT id FROM pqrun.jobs WHERE job_type = 'charge'")).rows[0].id;
  const receipt = (await fx.sql("SELECT id FROM pqrun.jobs WHERE job_type = 'receipt'")).rows[0].id;
  const r = await s.get(`/jobs/${charge}`);
  assert.ok(r.text.includes(`href="/jobs/${receipt}"`), 'the dependent waiting for it');
});

// pqrun.jobs with heartbeat_at (asked of the extension, README.md): shown where it exists.
test('heartbeats are shown where pqrun.jobs has heartbeat_at', async () => {
  await fx.sql(`
    CREATE OR REPLACE VIEW pqrun.jobs AS
      SELECT id, queue, job_type, payload, status, priority, attempts, max_attempts, run_after, timeout_seconds, locked_at,
             locked_by, lease_token, dedupe_key, fifo_key, depends_on, last_error, NULL::timestamptz AS finished_at,
             NULL::int AS duration_ms, NULL::jsonb AS result, created_at, updated_at, progress, snoozes, concurrency_key,
             rate_weight, heartbeat_at
        FROM pqrun.job_live
      UNION ALL
      SELECT id, queue, job_type, payload, status, priority, attempts, max_attempts, run_after, timeout_seconds, locked_at,
             locked_by, lease_token, dedupe_key, fifo_key, depends_on, last_error, finished_at, duration_ms, result,
             created_at, updated_at, progress, snoozes, concurrency_key, rate_weight, NULL::timestamptz
        FROM pqrun.job_done`);
  const other = await dashboard(fx);
  try {
    assert.equal(other.info.features.heartbeat, true);
    const os = new Session(other.url);
    const beat = (await fx.sql("SELECT heartbeat_at FROM pqrun.jobs WHERE job_type = 'charge'")).rows[0].heartbeat_at;
    const id = (await fx.sql("SELECT id FROM pqrun.jobs WHERE job_type = 'charge'")).rows[0].id;
    const running = await os.get('/running');
    assert.match(running.text, /<th>Last heartbeat<\/th>/);
    const job = await os.get(`/jobs/${id}`);
    assert.match(job.text, /Last heartbeat/);
    assert.ok(job.text.includes(`datetime="${beat.toISOString()}"`), 'its heartbeat time');
  } finally {
    await other.close();
  }
});

'use strict';
// Who gets in and what they may do: authentication, CSRF, read-only mode,
// superusers refused, metrics on their own, settings refused at start.
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { fixture, dashboard, Session, TOKEN, USER } = require('./helpers');
const { parse, ConfigError } = require('../lib/config');
const { StartupError } = require('../lib/db');

let fx;
let app;

before(async () => {
  fx = await fixture('auth');
  app = await dashboard(fx, { env: { PQRUN_DASHBOARD_TOKEN: TOKEN } });
});

after(async () => {
  if (app) await app.close();
  if (fx) await fx.drop();
});

test('no credentials, wrong ones: 401 with a challenge', async () => {
  for (const auth of [null, `Basic ${Buffer.from(`${USER}:wrong password`).toString('base64')}`,
    `Basic ${Buffer.from('someone:correct horse battery staple').toString('base64')}`, 'Bearer not-the-token', 'Basic !!!']) {
    for (const path of ['/', '/jobs', '/metrics', '/chart.svg']) {
      const r = await new Session(app.url, { auth }).get(path);
      assert.equal(r.status, 401, `${path} with ${auth}`);
      assert.match(r.headers.get('www-authenticate'), /^Basic realm="pqrun"/);
      assert.doesNotMatch(r.text, /mail|billing/);
    }
  }
  const post = await new Session(app.url, { auth: null }).post('/queues/mail/pause', {}, { csrf: 'x' });
  assert.equal(post.status, 401);
});

test('basic and bearer credentials get in', async () => {
  assert.equal((await new Session(app.url).get('/')).status, 200);
  assert.equal((await new Session(app.url, { auth: 'bearer' }).get('/')).status, 200);
  assert.equal((await new Session(app.url, { auth: 'bearer' }).get('/metrics')).status, 200);
});

test('a POST without the session token is refused with 403, and changes nothing', async () => {
  const s = new Session(app.url);
  await s.page('/');
  const id = (await fx.sql("SELECT id FROM pqrun.jobs WHERE status = 'FAILED' ORDER BY id LIMIT 1")).rows[0].id;
  for (const csrf of [false, '', 'forged-token', 'A'.repeat(43)]) {
    const r = await s.post(`/jobs/${id}/retry`, {}, { csrf });
    assert.equal(r.status, 403, `token ${csrf}`);
  }
  // Another session's token does not fit this one.
  const other = new Session(app.url);
  await other.page('/');
  assert.equal((await s.post(`/jobs/${id}/retry`, {}, { csrf: other.csrf })).status, 403);
  // Without the session cookie, the token means nothing either.
  const token = s.csrf;
  s.cookies.clear();
  assert.equal((await s.post(`/jobs/${id}/retry`, {}, { csrf: token })).status, 403);
  // From another site's page.
  await s.page('/');
  assert.equal((await s.post(`/jobs/${id}/retry`, {}, { headers: { Origin: 'http://evil.example' } })).status, 403);
  assert.equal((await s.post(`/jobs/${id}/retry`, {}, { headers: { 'Sec-Fetch-Site': 'cross-site' } })).status, 403);
  const status = (await fx.sql('SELECT status FROM pqrun.jobs WHERE id = $1', [id])).rows[0].status;
  assert.equal(status, 'FAILED');
  // The same POST with its token goes through.
  const ok = await s.post(`/jobs/${id}/retry`, {});
  assert.equal(ok.status, 303);
  assert.equal((await fx.sql('SELECT status FROM pqrun.jobs WHERE id = $1', [id])).rows[0].status, 'READY');
});

test('session cookies are HttpOnly and SameSite=Strict', async () => {
  const r = await new Session(app.url).get('/');
  assert.match(r.headers.get('set-cookie'), /^pqrun_sid=[\w-]{32}; Path=\/; HttpOnly; SameSite=Strict/);
});

test('a host name other than loopback is refused (DNS rebinding)', async () => {
  // fetch sets Host itself: a plain request names another.
  const get = (host) => new Promise((resolve, reject) => {
    const u = new URL(app.url);
    require('node:http').get({ host: u.hostname, port: u.port, path: '/', headers: { Host: host, Authorization: new Session(app.url).auth } },
      (res) => { res.resume(); resolve(res.statusCode); }).on('error', reject);
  });
  assert.equal(await get('attacker.example'), 421);
  assert.equal(await get(`attacker.example:${new URL(app.url).port}`), 421);
  assert.equal(await get(`localhost:${new URL(app.url).port}`), 200);
});

async function readOnlyChecks(ro) {
  const s = new Session(ro.url);
  assert.equal(ro.info.readOnly, true);
  const id = (await fx.sql("SELECT id FROM pqrun.jobs WHERE status = 'FAILED' ORDER BY id DESC LIMIT 1")).rows[0].id;
  const running = (await fx.sql("SELECT id FROM pqrun.jobs WHERE status = 'RUNNING' LIMIT 1")).rows[0].id;
  for (const path of ['/', '/queues/mail', `/jobs/${id}`, `/jobs/${running}`, '/jobs?status=FAILED', '/jobs?status=READY']) {
    const r = await s.page(path);
    assert.equal(r.status, 200, path);
    assert.doesNotMatch(r.text, /method="post"/, `${path}: no action shown`);
  }
  assert.match((await s.get('/')).text, /read-only/);
  // No form carries a token here; every action is refused before one is looked at.
  for (const [path, fields] of [[`/jobs/${id}/retry`, {}], [`/jobs/${running}/cancel`, {}], ['/queues/mail/pause', {}],
    ['/queues/mail/resume', {}], ['/queues/mail/concurrency', { max_running: '1' }], ['/queues/mail/rate', { per_second: '1', burst: '1' }],
    ['/jobs/retry', { status: 'FAILED' }], ['/jobs/cancel', { status: 'READY' }]]) {
    const r = await s.post(path, fields, { csrf: 'any' });
    assert.equal(r.status, 403, path);
  }
  assert.equal((await fx.sql('SELECT status FROM pqrun.jobs WHERE id = $1', [id])).rows[0].status, 'FAILED');
}

test('a grant_monitor role runs read-only: no actions shown, POSTs refused with 403', async () => {
  const ro = await dashboard(fx, { role: fx.monitor });
  try {
    await readOnlyChecks(ro);
  } finally {
    await ro.close();
  }
});

test('--read-only with an operator role runs read-only too', async () => {
  const ro = await dashboard(fx, { args: ['--read-only'] });
  try {
    await readOnlyChecks(ro);
  } finally {
    await ro.close();
  }
});

test('a superuser is refused at start, unless overridden', async () => {
  await assert.rejects(dashboard(fx, { role: process.env.PGUSER || 'postgres' }),
    (err) => err instanceof StartupError && /superuser/.test(err.message) && /--allow-superuser/.test(err.message));
  const su = await dashboard(fx, { role: process.env.PGUSER || 'postgres', args: ['--allow-superuser'] });
  await su.close();
});

test('a role without grant_monitor is refused at start, with the fix', async () => {
  const role = `pqrun_dash_nobody_${process.pid}`;
  await fx.sql(`CREATE ROLE ${role} LOGIN`);
  try {
    await assert.rejects(dashboard(fx, { role }), (err) => err instanceof StartupError && /grant_monitor/.test(err.message));
  } finally {
    await fx.sql(`DROP ROLE ${role}`);
  }
});

test('metrics public, metrics only', async () => {
  const pub = await dashboard(fx, { env: { PQRUN_DASHBOARD_METRICS_PUBLIC: '1' } });
  try {
    const anon = new Session(pub.url, { auth: null });
    assert.equal((await anon.get('/metrics')).status, 200);
    assert.equal((await anon.get('/')).status, 401, 'pages still need credentials');
  } finally {
    await pub.close();
  }
  const only = await dashboard(fx, { args: ['--metrics-only'] });
  try {
    const s = new Session(only.url);
    assert.equal((await s.get('/metrics')).status, 200);
    assert.equal((await s.get('/')).status, 404);
    assert.equal((await s.get('/jobs')).status, 404);
    assert.equal((await new Session(only.url, { auth: null }).get('/metrics')).status, 401);
  } finally {
    await only.close();
  }
});

test('settings that are unsafe or wrong are refused before start', () => {
  const base = { PQRUN_DASHBOARD_USER: 'a', PQRUN_DASHBOARD_PASSWORD_HASH: 'scrypt$1$1$1$AA$AA' };
  assert.throws(() => parse([], {}), (e) => e instanceof ConfigError && /no authentication configured/.test(e.message));
  assert.throws(() => parse(['--no-auth', '--listen', '0.0.0.0'], {}), /only on a loopback address/);
  assert.throws(() => parse([], { PQRUN_DASHBOARD_USER: 'a' }), /both/);
  assert.throws(() => parse([], { PQRUN_DASHBOARD_USER: 'a', PQRUN_DASHBOARD_PASSWORD_HASH: 'plain' }), /not a hash/);
  assert.throws(() => parse(['--bogus'], base), /unknown option/);
  assert.throws(() => parse([], { ...base, PQRUN_DASHBOARD_PORT: 'x' }), /PORT/);
  const c = parse([], base);
  assert.equal(c.listen, '127.0.0.1');
  assert.equal(c.readOnly, false);
  assert.equal(c.showPayloads, false);
  assert.equal(parse(['--no-auth'], {}).noAuth, true);
  assert.equal(parse(['--metrics-only', '--metrics-public'], {}).metricsOnly, true, 'public metrics alone need no credentials');
});

'use strict';
// What the tests share: a database of their own with pqrun and jobs in
// every state, the roles of grant_operator and grant_monitor, dashboards
// started in this process, and an HTTP client that keeps cookies.
//
// Needs PGHOST, PGPORT and PGUSER (a superuser) of a server with pqrun
// 0.21.0 or later installed. The browser test's dashboard listens on
// PQRUN_DASHBOARD_TEST_PORT (54531); the others on a free port.
const { Client } = require('pg');
const { start } = require('../lib/app');
const { parse } = require('../lib/config');
const { hashPassword } = require('../lib/auth');

const USER = 'admin';
const PASSWORD = 'correct horse battery staple';
const TOKEN = 'test-token-0123456789abcdef';
const MAIN_PORT = Number(process.env.PQRUN_DASHBOARD_TEST_PORT || 54531);

let passwordHash = null;

function admin(database = 'postgres') {
  return new Client({ database, application_name: 'pqrun-dashboard-test' });
}

async function sql(database, text, params) {
  const c = admin(database);
  await c.connect();
  try {
    return await c.query(text, params);
  } finally {
    await c.end();
  }
}

// The jobs every test file starts with (as the extension's owner, through
// pqrun's API): 120 mail/send jobs of which 60 DONE, 5 FAILED bounces (one
// whose payload and error hold markup), a RUNNING charge with progress, a
// BLOCKED job waiting for it, a FIFO group, a delayed job, a cancelled one,
// a queue and job type whose names are markup, a schedule.
const FIXTURE = `
SELECT count(*) FROM pqrun.enqueue_batch((SELECT jsonb_agg(jsonb_build_object('job_type', 'send', 'queue', 'mail',
       'payload', jsonb_build_object('n', i, 'to', 'user' || i || '@example.com')) ORDER BY i) FROM generate_series(1, 120) i));
SELECT count(pqrun.mark_done(id, '{"sent": true}')) FROM pqrun.pickup('fixture-worker', job_types => '{send}', queues => '{mail}', batch_size => 60);
SELECT count(*) FROM pqrun.enqueue_batch((SELECT jsonb_agg(jsonb_build_object('job_type', 'bounce', 'queue', 'mail', 'max_attempts', 1,
       'payload', CASE WHEN i = 1 THEN jsonb_build_object('html', '<script>alert("payload")</script>') ELSE jsonb_build_object('n', i) END))
       FROM generate_series(1, 5) i));
SELECT count(pqrun.mark_error(id, CASE WHEN payload ? 'html' THEN '<script>alert("error")</script>' ELSE 'mailbox full' END, true))
  FROM pqrun.pickup('fixture-worker', job_types => '{bounce}', batch_size => 5);
SELECT pqrun.enqueue('charge', '{"amount": 42}', queue => 'billing', timeout_seconds => 600);
SELECT pqrun.heartbeat(id, lease_token, '{"step": 3, "of": 7}') FROM pqrun.pickup('billing-worker-1', job_types => '{charge}');
SELECT pqrun.enqueue('receipt', '{"for": "charge"}', queue => 'billing',
       depends_on => ARRAY[(SELECT id FROM pqrun.jobs WHERE job_type = 'charge')]);
SELECT pqrun.enqueue('sync', jsonb_build_object('step', i), queue => 'billing', fifo_key => 'account-7') FROM generate_series(1, 3) i;
SELECT pqrun.enqueue('report', '{}', queue => 'reports', run_after => now() + interval '1 hour');
SELECT pqrun.cancel(pqrun.enqueue('report', '{"kind": "weekly"}', queue => 'reports'), 'not needed');
SELECT pqrun.enqueue('<b>bold</b>', '{}', queue => '<i>q/1</i>');
SELECT pqrun.schedule('nightly-report', 'report', cron => '0 3 * * *', queue => 'reports');
`;

// fixture(name): a fresh database with pqrun and the jobs above, and the
// two roles; returns what the tests need to know, and drop().
async function fixture(name) {
  const tag = `${name}_${process.pid}`;
  const database = `pqrun_dash_${tag}`;
  const operator = `pqrun_dash_op_${tag}`;
  const monitor = `pqrun_dash_mon_${tag}`;
  if (!passwordHash) passwordHash = await hashPassword(PASSWORD);
  await sql('postgres', `DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
  await sql('postgres', `CREATE DATABASE ${database}`);
  for (const role of [operator, monitor]) {
    await sql('postgres', `DROP ROLE IF EXISTS ${role}`);
    await sql('postgres', `CREATE ROLE ${role} LOGIN`);
  }
  await sql(database, 'SET client_min_messages = warning; CREATE EXTENSION pqrun');
  await sql(database, `SELECT pqrun.grant_operator('${operator}'); SELECT pqrun.grant_monitor('${monitor}')`);
  await sql(database, FIXTURE);
  const version = (await sql(database, "SELECT extversion FROM pg_extension WHERE extname = 'pqrun'")).rows[0].extversion;
  return {
    database, operator, monitor, version,
    sql: (text, params) => sql(database, text, params),
    async drop() {
      await sql('postgres', `DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
      for (const role of [operator, monitor]) await sql('postgres', `DROP ROLE IF EXISTS ${role}`);
    },
  };
}

function connectionString(role, database) {
  const host = process.env.PGHOST || '/var/run/postgresql';
  const port = process.env.PGPORT || '5432';
  return `postgresql://${encodeURIComponent(role)}@/${encodeURIComponent(database)}?host=${encodeURIComponent(host)}&port=${port}`;
}

// dashboard(fx, { role, env, args, main }): a dashboard started in this process.
async function dashboard(fx, { role = fx.operator, env = {}, args = [], main = false } = {}) {
  const config = parse(args, {
    PQRUN_DASHBOARD_DATABASE_URL: connectionString(role, fx.database),
    PQRUN_DASHBOARD_PORT: String(main ? MAIN_PORT : 0),
    PQRUN_DASHBOARD_USER: USER,
    PQRUN_DASHBOARD_PASSWORD_HASH: passwordHash,
    PQRUN_DASHBOARD_SAMPLE_SECONDS: '1',
    ...env,
  });
  return start(config);
}

// An HTTP client with the dashboard's credentials and cookies.
class Session {
  constructor(base, { auth = 'basic' } = {}) {
    this.base = base;
    this.cookies = new Map();
    this.auth = auth === 'basic' ? `Basic ${Buffer.from(`${USER}:${PASSWORD}`).toString('base64')}`
      : auth === 'bearer' ? `Bearer ${TOKEN}` : auth;
  }

  headers(extra = {}) {
    const h = { ...extra };
    if (this.auth) h.Authorization = this.auth;
    if (this.cookies.size) h.Cookie = [...this.cookies].map(([k, v]) => `${k}=${v}`).join('; ');
    return h;
  }

  keep(res) {
    const set = res.headers.getSetCookie ? res.headers.getSetCookie()
      : (res.headers.get('set-cookie') || '').split(/,(?=\s*\w+=)/).filter(Boolean);
    for (const c of set) {
      const [pair, ...attrs] = c.split(';');
      const [k, v] = pair.split('=');
      if (attrs.some((a) => /max-age=0/i.test(a.trim()))) this.cookies.delete(k.trim());
      else this.cookies.set(k.trim(), v);
    }
  }

  async get(path, headers = {}) {
    const res = await fetch(this.base + path, { headers: this.headers(headers), redirect: 'manual' });
    this.keep(res);
    return { status: res.status, headers: res.headers, text: await res.text() };
  }

  // post(path, fields, { csrf }): a form POST; csrf: the token to send
  // (default: the one of the last page read), false for none.
  async post(path, fields = {}, { csrf, headers = {} } = {}) {
    const body = new URLSearchParams();
    const token = csrf === undefined ? this.csrf : csrf;
    if (token) body.append('_csrf', token);
    for (const [k, v] of Object.entries(fields)) for (const x of Array.isArray(v) ? v : [v]) body.append(k, x);
    const res = await fetch(this.base + path, {
      method: 'POST', body, redirect: 'manual',
      headers: this.headers({ 'Content-Type': 'application/x-www-form-urlencoded', ...headers }),
    });
    this.keep(res);
    return { status: res.status, headers: res.headers, text: await res.text(), location: res.headers.get('location') };
  }

  // page(path): GET, remembering the page's CSRF token.
  async page(path) {
    const r = await this.get(path);
    const m = /name="_csrf" value="([^"]*)"/.exec(r.text);
    if (m && m[1]) this.csrf = m[1];
    return r;
  }

  // act(path, fields): POST from the page at `from`, then follow the redirect.
  async act(from, path, fields = {}) {
    await this.page(from);
    const r = await this.post(path, { back: from, ...fields });
    if (r.status !== 303) return r;
    return this.get(r.location);
  }
}

function flash(text) {
  const m = /<p class="flash[^"]*" role="status">([^<]*)<\/p>/.exec(text);
  const entities = { '&lt;': '<', '&gt;': '>', '&quot;': '"', '&#39;': "'", '&#96;': '`', '&amp;': '&' };
  return m ? m[1].replace(/&(lt|gt|quot|#39|#96|amp);/g, (e) => entities[e]) : null;
}

module.exports = { fixture, dashboard, Session, flash, USER, PASSWORD, TOKEN };

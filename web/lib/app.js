'use strict';
// The HTTP side: authentication, sessions and CSRF, security headers,
// routing to pages and actions.
const http = require('node:http');
const fs = require('node:fs');
const path = require('node:path');
const { Auth, parseCookies } = require('./auth');
const { Db, inspect } = require('./db');
const { Sampler } = require('./sampler');
const { html } = require('./html');
const { isLoopback } = require('./config');
const chart = require('./chart');
const queries = require('./queries');
const actions = require('./actions');
const layout = require('./layout');
const queuesPage = require('./pages/queues');
const jobsPage = require('./pages/jobs');
const jobPage = require('./pages/job');
const { running } = require('./pages/running');
const { schedules } = require('./pages/schedules');
const { health } = require('./pages/health');

const STATIC = {
  '/static/style.css': ['style.css', 'text/css; charset=utf-8'],
  '/static/app.js': ['app.js', 'text/javascript; charset=utf-8'],
  '/favicon.svg': ['favicon.svg', 'image/svg+xml'],
};

const SECURITY_HEADERS = {
  'Content-Security-Policy': "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; " +
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
  'X-Frame-Options': 'DENY',
  'X-Content-Type-Options': 'nosniff',
  'Referrer-Policy': 'same-origin',
  'Cross-Origin-Opener-Policy': 'same-origin',
  'Cross-Origin-Resource-Policy': 'same-origin',
};

const PAGES = [
  [/^\/$/, (ctx) => queuesPage.overview(ctx)],
  [/^\/queues\/([^/]+)$/, (ctx, m) => queuesPage.queuePage(ctx, decodeURIComponent(m[1]))],
  [/^\/jobs$/, (ctx) => jobsPage.list(ctx)],
  [/^\/jobs\/(\d{1,18})$/, (ctx, m) => jobPage.show(ctx, m[1])],
  [/^\/running$/, (ctx) => running(ctx)],
  [/^\/schedules$/, (ctx) => schedules(ctx)],
  [/^\/health$/, (ctx) => health(ctx)],
];

class HttpError extends Error {
  constructor(status, message, headers = {}) { super(message); this.status = status; this.headers = headers; }
}

function readBody(req, limit = 64 * 1024) {
  return new Promise((resolve, reject) => {
    const chunks = [];
    let size = 0;
    req.on('data', (c) => {
      size += c.length;
      if (size > limit) { reject(new HttpError(413, 'Request body too large')); req.destroy(); return; }
      chunks.push(c);
    });
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

function allowedHosts(config) {
  if (process.env.PQRUN_DASHBOARD_ALLOWED_HOSTS) {
    return new Set(process.env.PQRUN_DASHBOARD_ALLOWED_HOSTS.split(',').map((h) => h.trim().toLowerCase()).filter(Boolean));
  }
  // On loopback, only loopback names: a page of another site whose name
  // was made to resolve to 127.0.0.1 (DNS rebinding) is refused.
  if (isLoopback(config.listen)) return new Set(['localhost', '127.0.0.1', '[::1]', config.listen.toLowerCase()]);
  return null;
}

function hostName(host) {
  return (host || '').toLowerCase().replace(/:\d+$/, '');
}

function createHandler({ config, info, db, sampler, auth }) {
  const hosts = allowedHosts(config);
  const files = {};
  for (const [url, [file, type]] of Object.entries(STATIC)) {
    files[url] = { body: fs.readFileSync(path.join(__dirname, '..', 'public', file)), type };
  }
  const cookie = (name, value, extra = '') =>
    `${name}=${value}; Path=/; HttpOnly; SameSite=Strict${config.secureCookies ? '; Secure' : ''}${extra}`;

  function send(res, status, body, type = 'text/html; charset=utf-8', headers = {}) {
    res.writeHead(status, { ...SECURITY_HEADERS, 'Content-Type': type, 'Cache-Control': 'no-store', ...headers });
    res.end(body);
  }

  function errorPage(ctx, status, message) {
    if (!ctx.info) return String(message);
    return String(layout.page(ctx, { title: status === 404 ? 'Not found' : `Error ${status}`, body: html`<p class="flash flash-error">${message}</p>` }));
  }

  async function handle(req, res) {
    const url = new URL(req.url, 'http://dashboard.invalid');
    const ctx = { config, info, db, sampler, url, now: new Date(), refresh: 0 };
    const setCookies = [];
    try {
      if (hosts && !hosts.has(hostName(req.headers.host))) throw new HttpError(421, 'This host name is not served here.');
      if (req.method === 'GET' && files[url.pathname]) {
        const f = files[url.pathname];
        res.writeHead(200, { ...SECURITY_HEADERS, 'Content-Type': f.type, 'Cache-Control': 'public, max-age=300' });
        res.end(f.body);
        return;
      }
      const isMetrics = url.pathname === '/metrics';
      if (!(isMetrics && config.metricsPublic) && !(await auth.check(req))) {
        throw new HttpError(401, 'Authentication required.', { 'WWW-Authenticate': auth.challenge() });
      }
      if (isMetrics && req.method === 'GET') {
        send(res, 200, await queries.metrics(db), 'text/plain; version=0.0.4; charset=utf-8');
        return;
      }
      if (config.metricsOnly) throw new HttpError(404, 'Only /metrics is served here.');

      const cookies = parseCookies(req.headers.cookie);
      let sid = cookies.pqrun_sid && /^[\w-]{32}$/.test(cookies.pqrun_sid) ? cookies.pqrun_sid : null;
      if (req.method === 'POST') {
        await post(req, res, ctx, sid, setCookies);
        return;
      }
      if (req.method !== 'GET' && req.method !== 'HEAD') throw new HttpError(405, 'Method not allowed.', { Allow: 'GET, POST' });
      if (!sid) {
        sid = auth.newSessionId();
        setCookies.push(cookie('pqrun_sid', sid));
      }
      ctx.csrf = auth.csrfToken(sid);
      if (cookies.pqrun_flash) {
        ctx.flash = auth.readFlash(sid, cookies.pqrun_flash);
        setCookies.push(cookie('pqrun_flash', '', '; Max-Age=0'));
      }
      if (url.pathname === '/chart.svg') {
        const queue = url.searchParams.get('queue');
        const body = chart.svg(sampler ? sampler.series(queue) : [], { title: queue ? `Queue ${queue}, per minute` : 'All queues, per minute' });
        send(res, 200, body, 'image/svg+xml; charset=utf-8', { 'Set-Cookie': setCookies });
        return;
      }
      if (url.searchParams.get('refresh') === '10') ctx.refresh = 10;
      for (const [pattern, render] of PAGES) {
        const m = pattern.exec(url.pathname);
        if (!m) continue;
        const body = await render(ctx, m);
        if (body === null) throw new HttpError(404, 'No such job.');
        send(res, 200, String(body), undefined, { 'Set-Cookie': setCookies });
        return;
      }
      throw new HttpError(404, 'No such page.');
    } catch (err) {
      let status = err instanceof HttpError ? err.status : err instanceof URIError ? 400 : 500;
      let message = err instanceof URIError ? 'Malformed address.' : err.message;
      if (!(err instanceof HttpError) && !(err instanceof URIError)) {
        if (err.code === 'ECONNREFUSED' || err.code === '57P01' || err.code === 'ENOENT' || /terminat|connect/i.test(err.message)) {
          status = 503;
          message = `PostgreSQL cannot be reached: ${err.message}`;
        } else {
          process.stderr.write(`${new Date().toISOString()} ${req.method} ${url.pathname}: ${err.stack}\n`);
        }
      }
      if (!ctx.csrf) ctx.csrf = '';
      const plain = status === 401 || status === 421 || isMetricsPath(url) || config.metricsOnly;
      send(res, status, plain ? `${message}\n` : errorPage(ctx, status, message),
        plain ? 'text/plain; charset=utf-8' : undefined, { ...(err.headers || {}), 'Set-Cookie': setCookies });
    }
  }

  function isMetricsPath(url) { return url.pathname === '/metrics'; }

  async function post(req, res, ctx, sid, setCookies) {
    const found = actions.find(ctx.url.pathname);
    if (!found) throw new HttpError(404, 'No such action.');
    if (info.readOnly || !info.actions[found.permission]) {
      throw new HttpError(403, 'This dashboard is read-only: actions are refused.');
    }
    const type = (req.headers['content-type'] || '').split(';')[0].trim();
    if (type !== 'application/x-www-form-urlencoded') throw new HttpError(415, 'Send a form (application/x-www-form-urlencoded).');
    const form = new URLSearchParams(await readBody(req));
    // CSRF: the session's token in the form, and no other site's origin.
    const origin = req.headers.origin;
    const site = req.headers['sec-fetch-site'];
    if ((origin && origin !== 'null' && hostName(new URL(origin).host) !== hostName(req.headers.host)) ||
        (site && site !== 'same-origin' && site !== 'none')) {
      throw new HttpError(403, 'Cross-site request refused.');
    }
    if (!auth.checkCsrf(sid, form.get('_csrf'))) {
      throw new HttpError(403, 'Missing or stale form token (CSRF): reload the page and try again.');
    }
    const result = await actions.run(ctx, found, form);
    // Back to the page the form was on (a path of this site only).
    const back = form.get('back') || '';
    const to = result.to || (/^\/(?![/\\])[^\s\\]*$/.test(back) ? back : '/');
    setCookies.push(cookie('pqrun_flash', auth.flashCookie(sid, result.message), '; Max-Age=60'));
    res.writeHead(303, { ...SECURITY_HEADERS, Location: to, 'Set-Cookie': setCookies, 'Cache-Control': 'no-store' });
    res.end();
  }

  return (req, res) => { handle(req, res); };
}

// start(config): inspect the connection, then listen. Resolves to
// { server, url, info, close() }; rejects with a StartupError to show.
async function start(config) {
  const info = await inspect(config);
  const db = new Db(config);
  const sampler = config.metricsOnly ? null : new Sampler(db, { intervalSeconds: config.sampleSeconds }).start();
  const auth = new Auth(config);
  const server = http.createServer(createHandler({ config, info, db, sampler, auth }));
  server.requestTimeout = config.bulkTimeoutMs + 60000;
  try {
    await new Promise((resolve, reject) => {
      server.once('error', reject);
      server.listen(config.port, config.listen, resolve);
    });
  } catch (err) {
    if (sampler) sampler.stop();
    await db.close();
    throw err;
  }
  const { port } = server.address();
  const host = config.listen.includes(':') ? `[${config.listen}]` : config.listen;
  return {
    server, info, url: `http://${host}:${port}`,
    async close() {
      if (sampler) sampler.stop();
      await new Promise((resolve) => { server.close(resolve); server.closeAllConnections?.(); });
      await db.close();
    },
  };
}

module.exports = { start, createHandler };

'use strict';
// In a real browser (Debian's Chromium, driven by playwright-core): log in,
// open every page, retry a failed job and pause a queue by clicking, and
// take screenshots. No page may log an error (a CSP violation would) or
// run a script it shows as text.
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { chromium } = require('playwright-core');
const { fixture, dashboard, USER, PASSWORD } = require('./helpers');

const CHROMIUM = process.env.PQRUN_DASHBOARD_CHROMIUM || '/usr/bin/chromium';
const SHOTS = process.env.PQRUN_DASHBOARD_SCREENSHOTS || path.join(os.tmpdir(), 'pqrun-dashboard-screenshots');
// As root and on a machine without a network: no sandbox, nothing fetched.
const ARGS = ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
  '--disable-component-update', '--disable-sync', '--disable-dev-shm-usage'];

let fx;
let app;
let browser;

before(async () => {
  fx = await fixture('browser');
  app = await dashboard(fx, { main: true });
  fs.mkdirSync(SHOTS, { recursive: true });
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ARGS });
});

after(async () => {
  if (browser) await browser.close();
  if (app) await app.close();
  if (fx) await fx.drop();
});

function watch(page) {
  const problems = [];
  page.on('console', (m) => { if (m.type() === 'error') problems.push(`console: ${m.text()}`); });
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  page.on('dialog', async (d) => {
    if (d.type() === 'confirm') await d.accept();
    else { problems.push(`unexpected ${d.type()}: ${d.message()}`); await d.dismiss(); }
  });
  return problems;
}

test('without credentials the browser gets 401', async () => {
  const context = await browser.newContext();
  const res = await context.request.get(`${app.url}/`);
  assert.equal(res.status(), 401);
  assert.match(res.headers()['www-authenticate'], /^Basic/);
  await context.close();
});

test('log in, open every page, retry a failed job and pause a queue by clicking', async () => {
  const context = await browser.newContext({ httpCredentials: { username: USER, password: PASSWORD }, viewport: { width: 1400, height: 900 } });
  const page = await context.newPage();
  const problems = watch(page);
  const shot = (name) => page.screenshot({ path: path.join(SHOTS, `${name}.png`), fullPage: true });

  const failed = (await fx.sql("SELECT id FROM pqrun.jobs WHERE status = 'FAILED' AND payload ? 'html'")).rows[0].id;
  const pages = [['overview', '/', 'Queues'], ['queue', '/queues/mail', 'Queue mail'], ['jobs', '/jobs', 'Jobs'],
    ['jobs-failed', '/jobs?status=FAILED', 'Jobs'], ['job', `/jobs/${failed}?reveal=1`, `Job #${failed}`],
    ['running', '/running', 'Running jobs'], ['schedules', '/schedules', 'Schedules'], ['health', '/health', 'Health']];
  for (const [name, p, title] of pages) {
    const res = await page.goto(app.url + p);
    assert.equal(res.status(), 200, p);
    assert.equal(await page.locator('h1').innerText(), title, p);
    await shot(name);
  }
  // The markup held by that job's payload and error is on the page as text.
  await page.goto(`${app.url}/jobs/${failed}?reveal=1`);
  assert.match(await page.locator('pre.json').innerText(), /<script>alert\(\\"payload\\"\)<\/script>/);
  assert.match(await page.locator('pre.error').innerText(), /<script>alert\("error"\)<\/script>/);
  assert.equal(await page.locator('script:not([src])').count(), 0, 'no inline script element');

  // The chart is an image the browser could load.
  await page.goto(`${app.url}/`);
  const width = await page.locator('img.chart').evaluate((img) => img.complete && img.naturalWidth);
  assert.ok(width > 0, 'chart loaded');

  // Retry a failed job: from the list, to the job, click Retry.
  await page.goto(`${app.url}/jobs?status=FAILED&job_type=bounce`);
  await page.locator(`a[href="/jobs/${failed}"]`).first().click();
  await page.getByRole('button', { name: 'Retry' }).click();
  await page.waitForSelector('p.flash');
  assert.equal(await page.locator('p.flash').innerText(), `Job #${failed} is READY again.`);
  assert.match(await page.locator('.job-head').innerText(), /READY/);
  assert.equal((await fx.sql('SELECT status FROM pqrun.jobs WHERE id = $1', [failed])).rows[0].status, 'READY');
  await shot('job-retried');

  // Pause a queue from the overview (it asks first: accepted above).
  await page.goto(`${app.url}/`);
  const mailRow = page.locator('tr.queue', { has: page.locator('a[href="/queues/mail"]') });
  await mailRow.getByRole('button', { name: 'Pause' }).click();
  await page.waitForSelector('p.flash');
  assert.equal(await page.locator('p.flash').innerText(), 'Queue mail paused.');
  assert.equal(await mailRow.locator('.badge.paused').count(), 1);
  assert.equal((await fx.sql("SELECT paused FROM pqrun.queue_controls WHERE queue = 'mail' AND job_type IS NULL")).rows[0].paused, true);
  await shot('queue-paused');

  // Set a concurrency limit on the queue's page by filling its form.
  await page.goto(`${app.url}/queues/mail`);
  await page.locator('form.limit', { hasText: 'Most running' }).locator('input[name=max_running]').fill('4');
  await page.getByRole('button', { name: 'Set concurrency limit' }).click();
  await page.waitForSelector('p.flash');
  assert.equal(await page.locator('p.flash').innerText(), 'mail: at most 4 running at once.');
  await shot('queue-limited');

  assert.deepEqual(problems, []);
  await context.close();
  process.stdout.write(`# screenshots in ${SHOTS}\n`);
});

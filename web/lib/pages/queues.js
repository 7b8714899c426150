'use strict';
// The queues overview and one queue's page: unfinished jobs, throughput,
// pickup latency and flow controls per queue and job type.
const { html } = require('../html');
const fmt = require('../format');
const queries = require('../queries');
const { page, postForm, queueLink, query, when } = require('../layout');

// What the controls of one queue say, in words.
function controlSummary(rows) {
  const parts = [];
  for (const c of rows) {
    const scope = c.concurrency_key !== null ? `key ${c.concurrency_key}` : c.job_type !== null ? c.job_type : '';
    if (c.max_running !== null) parts.push(`${scope ? `${scope}: ` : ''}${fmt.num(c.running)}/${fmt.num(c.max_running)} running`);
    if (c.rate !== null) parts.push(`${scope ? `${scope}: ` : ''}${fmt.num(c.rate)}/s (${fmt.num(c.tokens)} tokens)`);
    if (c.max_running_per_key !== null) parts.push(`≤${fmt.num(c.max_running_per_key)} per key`);
    if (c.rate_per_key !== null) parts.push(`${fmt.num(c.rate_per_key)}/s per key`);
  }
  return parts;
}

function groupByQueue(rows, controls) {
  const queues = new Map();
  const get = (q) => {
    if (!queues.has(q)) queues.set(q, { queue: q, types: [], controls: [], paused: false });
    return queues.get(q);
  };
  for (const r of rows) get(r.queue).types.push(r);
  for (const c of controls) {
    const q = get(c.queue);
    q.controls.push(c);
    if (c.job_type === null && c.concurrency_key === null && c.paused) q.paused = true;
  }
  for (const q of queues.values()) {
    const t = { ready: 0, delayed: 0, running: 0, blocked: 0, done: 0, failed: 0, doneRate: 0, errorRate: 0, picked: 0, waitSum: 0, oldest: null };
    for (const r of q.types) {
      t.ready += Number(r.ready); t.delayed += Number(r.delayed); t.running += Number(r.running); t.blocked += Number(r.blocked);
      t.done += Number(r.done); t.failed += Number(r.failed);
      t.doneRate += Number(r.done_last_5min || 0) / 5; t.errorRate += Number(r.errors_last_5min || 0) / 5;
      if (r.avg_wait_ms_last_5min !== null && r.picked_last_5min) {
        t.picked += Number(r.picked_last_5min); t.waitSum += Number(r.avg_wait_ms_last_5min) * Number(r.picked_last_5min);
      }
      if (r.oldest_ready_s !== null && (t.oldest === null || Number(r.oldest_ready_s) > t.oldest)) t.oldest = Number(r.oldest_ready_s);
    }
    q.totals = t;
  }
  return [...queues.values()].sort((a, b) => a.queue.localeCompare(b.queue));
}

function countLink(n, params) {
  return Number(n) ? html`<a href="/jobs${query(params)}">${fmt.num(n)}</a>` : fmt.num(n);
}

function pauseButton(ctx, q) {
  const a = ctx.info.actions;
  if (q.paused && a.resume) return postForm(ctx, `/queues/${encodeURIComponent(q.queue)}/resume`, { button: 'Resume' });
  if (!q.paused && a.pause) {
    return postForm(ctx, `/queues/${encodeURIComponent(q.queue)}/pause`, { button: 'Pause', confirm: `Pause queue ${q.queue}?` });
  }
  return '';
}

function table(ctx, queues) {
  if (!queues.length) return html`<p class="empty">No queues yet: enqueue a job and it shows here.</p>`;
  const typeRow = (q, r) => html`<tr class="type">
    <td class="name">${r.job_type}</td>
    <td class="n">${countLink(r.ready, { queue: q.queue, job_type: r.job_type, status: 'READY' })}</td>
    <td class="n">${fmt.num(r.delayed)}</td>
    <td class="n">${countLink(r.running, { queue: q.queue, job_type: r.job_type, status: 'RUNNING' })}</td>
    <td class="n">${countLink(r.blocked, { queue: q.queue, job_type: r.job_type, status: 'BLOCKED' })}</td>
    <td class="n">${fmt.seconds(r.oldest_ready_s)}</td>
    <td class="n">${fmt.ms(r.avg_wait_ms_last_5min)}</td>
    <td class="n">${fmt.num(Number(r.done_last_5min || 0) / 5)}</td>
    <td class="n">${fmt.num(Number(r.errors_last_5min || 0) / 5)}</td>
    <td class="n">${fmt.num(r.done)}</td>
    <td class="n">${countLink(r.failed, { queue: q.queue, job_type: r.job_type, status: 'FAILED' })}</td>
    <td></td><td></td></tr>`;
  return html`<table class="grid overview">
<thead><tr><th>Queue / job type</th><th title="READY and due">Ready</th><th title="READY, due later">Delayed</th><th>Running</th><th>Blocked</th>
<th title="How long the oldest due READY job has waited">Oldest ready</th><th title="Mean wait from runnable to picked up, last 5 min">Pickup latency</th>
<th title="Jobs finished DONE per minute, last 5 min">Done/min</th><th title="Attempts that ended in an error per minute (retried or failed), last 5 min">Failed/min</th>
<th title="DONE jobs stored">Done</th><th title="FAILED jobs stored">Failed</th><th>Flow control</th><th></th></tr></thead>
${queues.map((q) => html`<tbody>
<tr class="queue${q.paused ? ' paused' : ''}">
  <th class="name">${queueLink(q.queue)}${q.paused ? html` <span class="badge paused">paused</span>` : ''}</th>
  <td class="n">${countLink(q.totals.ready, { queue: q.queue, status: 'READY' })}</td>
  <td class="n">${fmt.num(q.totals.delayed)}</td>
  <td class="n">${countLink(q.totals.running, { queue: q.queue, status: 'RUNNING' })}</td>
  <td class="n">${countLink(q.totals.blocked, { queue: q.queue, status: 'BLOCKED' })}</td>
  <td class="n">${fmt.seconds(q.totals.oldest)}</td>
  <td class="n">${q.totals.picked ? fmt.ms(q.totals.waitSum / q.totals.picked) : '–'}</td>
  <td class="n">${fmt.num(q.totals.doneRate)}</td>
  <td class="n">${fmt.num(q.totals.errorRate)}</td>
  <td class="n">${fmt.num(q.totals.done)}</td>
  <td class="n">${countLink(q.totals.failed, { queue: q.queue, status: 'FAILED' })}</td>
  <td class="controls">${controlSummary(q.controls).map((s) => html`<span class="chip">${s}</span>`)}</td>
  <td class="actions">${pauseButton(ctx, q)}</td>
</tr>
${q.types.map((r) => typeRow(q, r))}
</tbody>`)}
</table>`;
}

function chart(ctx, queue) {
  const src = `/chart.svg${query({ queue })}`;
  return html`<figure class="chart"><img class="chart" src="${src}" data-refresh="${ctx.config.sampleSeconds}" width="960" height="220"
  alt="Jobs done, failed, enqueued and picked up per minute over the last hour"></figure>`;
}

// When the counts shown were taken: by pqrun's maintenance worker
// (queue_overview), or now.
function countedAt(ctx, rows) {
  const at = rows.length ? rows[0].counted_at : ctx.now;
  return html`counts as of ${when(at, ctx.now)}`;
}

// A page of queues in name order, by keyset (?after=<the last queue of the
// page before>): whole queues in ctx.config.pageSize × 4 rows of queue and
// job type at most, with the controls of the queues in its range of names
// (those of single keys are on each queue's page).
async function overview(ctx) {
  const after = ctx.url.searchParams.get('after') || null;
  const { rows, next } = await queries.overview(ctx.db, { after, size: ctx.config.pageSize * 4, view: ctx.info.features.queueOverview });
  const controls = await queries.controls(ctx.db, { after, through: next, keys: false, view: ctx.info.features.flowControls });
  const queues = groupByQueue(rows, controls);
  return page(ctx, {
    title: 'Queues', active: '/', refresh: ctx.refresh,
    body: html`${chart(ctx, null)}
<p class="hint">Rates per minute over the last five minutes, from pqrun's shared-memory counters; ${countedAt(ctx, rows)}.
${ctx.refresh ? html`<a href="/">Stop refreshing</a>` : html`<a href="/?refresh=10">Refresh every 10 s</a>`}</p>
${table(ctx, queues)}
${after || next ? html`<p class="pager">${after ? html`<a href="/" rel="first">First queues</a>` : ''}${after && next ? ' · ' : ''}
${next ? html`<a href="/${query({ after: next })}" rel="next">Next queues →</a>` : ''}</p>` : ''}`,
  });
}

function limitForms(ctx, q, types) {
  const a = ctx.info.actions;
  const base = `/queues/${encodeURIComponent(q)}`;
  const typeSelect = html`<label>Job type <select name="job_type"><option value="">(the whole queue)</option>
${types.map((t) => html`<option value="${t}">${t}</option>`)}</select></label>`;
  return html`<div class="forms">
${a.concurrency ? postForm(ctx, `${base}/concurrency`, {
    cls: 'limit',
    inputs: html`${typeSelect}<label>Most running <input name="max_running" type="number" min="0" max="10000" required></label>`,
    button: 'Set concurrency limit',
  }) : ''}
${a.rate ? postForm(ctx, `${base}/rate`, {
    cls: 'limit',
    inputs: html`${typeSelect}<label>Per second <input name="per_second" type="number" min="0.001" step="any" required></label>
<label>Burst <input name="burst" type="number" min="1" value="1" required></label>`,
    button: 'Set rate limit',
  }) : ''}
</div>`;
}

function controlsTable(ctx, q, controls) {
  if (!controls.length) return html`<p class="empty">No pause, limit or rate limit on this queue.</p>`;
  const a = ctx.info.actions;
  const base = `/queues/${encodeURIComponent(q)}`;
  return html`<table class="grid">
<thead><tr><th>Applies to</th><th>Paused</th><th>Concurrency (running/limit)</th><th>Rate (tokens, burst)</th>
<th>Per key</th><th>Ready</th><th>Updated</th><th></th></tr></thead>
<tbody>${controls.map((c) => html`<tr>
<td>${c.concurrency_key !== null ? html`key <code>${c.concurrency_key}</code>` : c.job_type !== null ? html`job type <code>${c.job_type}</code>` : 'the queue'}</td>
<td>${c.paused ? html`<span class="badge paused">paused</span>` : 'no'}</td>
<td class="n">${c.max_running !== null ? `${fmt.num(c.running)} / ${fmt.num(c.max_running)}` : '–'}</td>
<td class="n">${c.rate !== null ? `${fmt.num(c.rate)}/s (${fmt.num(c.tokens)} of ${fmt.num(c.burst)})` : '–'}</td>
<td>${[c.max_running_per_key !== null ? `≤${fmt.num(c.max_running_per_key)} running` : '',
    c.rate_per_key !== null ? `${fmt.num(c.rate_per_key)}/s, burst ${fmt.num(c.burst_per_key)}, ${fmt.num(c.rate_limited_keys)} keys waiting` : '',
    c.keyed ? 'keyed' : ''].filter(Boolean).join('; ') || '–'}</td>
<td class="n">${c.ready === null ? '–' : fmt.num(c.ready)}</td>
<td>${when(c.updated_at, ctx.now)}</td>
<td class="actions">${c.concurrency_key === null && c.max_running !== null && a.concurrency
    ? postForm(ctx, `${base}/concurrency`, { hidden: { job_type: c.job_type, clear: '1' }, button: 'Remove limit' }) : ''}
${c.concurrency_key === null && c.rate !== null && a.rate
    ? postForm(ctx, `${base}/rate`, { hidden: { job_type: c.job_type, clear: '1' }, button: 'Remove rate limit' }) : ''}</td>
</tr>`)}</tbody></table>`;
}

async function queuePage(ctx, q) {
  const [{ rows }, controls] = await Promise.all([queries.overview(ctx.db, { queue: q, view: ctx.info.features.queueOverview }),
    queries.controls(ctx.db, { queue: q, view: ctx.info.features.flowControls })]);
  const queues = groupByQueue(rows, controls);
  const types = rows.map((r) => r.job_type);
  return page(ctx, {
    title: `Queue ${q}`, active: '/',
    body: html`${chart(ctx, q)}
<p class="hint">${countedAt(ctx, rows)}.</p>
${table(ctx, queues)}
<p class="links">Jobs of this queue: <a href="/jobs${query({ queue: q })}">all</a> ·
<a href="/jobs${query({ queue: q, status: 'FAILED' })}">failed</a> · <a href="/jobs${query({ queue: q, status: 'READY' })}">ready</a> ·
<a href="/jobs${query({ queue: q, status: 'RUNNING' })}">running</a></p>
<h2>Flow control</h2>
${controlsTable(ctx, q, controls)}
${limitForms(ctx, q, types)}`,
  });
}

module.exports = { overview, queuePage };

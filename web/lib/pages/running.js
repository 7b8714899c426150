'use strict';
// The jobs running now, with the worker that holds each and its heartbeat,
// in id order (keyset pages).
const { html } = require('../html');
const fmt = require('../format');
const queries = require('../queries');
const { page, jobLink, queueLink, when, query } = require('../layout');

async function running(ctx) {
  const afterText = ctx.url.searchParams.get('after');
  const after = /^\d{1,18}$/.test(afterText || '') ? afterText : null;
  const heartbeat = ctx.info.features.heartbeat;
  const { jobs, more } = await queries.running(ctx.db, { after, size: ctx.config.pageSize, heartbeat });
  const holders = new Map();
  for (const j of jobs) holders.set(j.locked_by, (holders.get(j.locked_by) || 0) + 1);
  return page(ctx, {
    title: 'Running jobs', active: '/running',
    body: html`${jobs.length ? html`<p class="hint">Held on this page by ${[...holders].map(([w, n], i) => html`${i ? ', ' : ''}<code>${w}</code> (${n})`)}.</p>
<table class="grid">
<thead><tr><th>Job</th><th>Queue</th><th>Job type</th><th>Attempt</th><th>Held by</th><th>Since</th><th>Running for</th>
${heartbeat ? html`<th>Last heartbeat</th>` : ''}<th>Timeout</th><th>Progress</th></tr></thead>
<tbody>${jobs.map((j) => html`<tr>
<td>${jobLink(j.id)}</td><td>${queueLink(j.queue)}</td><td>${j.job_type}</td><td class="n">${j.attempts}/${j.max_attempts}</td>
<td>${j.locked_by || ''}</td><td>${when(j.locked_at, ctx.now)}</td><td class="n">${fmt.seconds(j.running_s)}</td>
${heartbeat ? html`<td>${j.heartbeat_at ? when(j.heartbeat_at, ctx.now) : '–'}</td>` : ''}
<td class="n">${j.timeout_seconds !== null ? fmt.seconds(j.timeout_seconds) : 'default'}</td>
<td>${j.progress !== null ? html`<code>${JSON.stringify(j.progress)}</code>` : ''}</td></tr>`)}</tbody>
</table>` : html`<p class="empty">No job is running.</p>`}
${!heartbeat ? html`<p class="hint">Heartbeat times are not shown: this server's pqrun.jobs has no heartbeat_at column.</p>` : ''}
<p class="pager">${after ? html`<a href="/running">First</a>` : ''}${after && more ? ' · ' : ''}
${more ? html`<a href="/running${query({ after: jobs[jobs.length - 1].id })}" rel="next">Next →</a>` : ''}</p>`,
  });
}

module.exports = { running };

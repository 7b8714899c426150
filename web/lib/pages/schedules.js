'use strict';
// Periodic schedules (pqrun.periodic) and when each fires next.
const { html } = require('../html');
const fmt = require('../format');
const queries = require('../queries');
const { page, jobLink, queueLink, when, query } = require('../layout');

async function schedules(ctx) {
  const params = ctx.url.searchParams;
  const afterName = params.get('after_name');
  const reveal = ctx.config.showPayloads || params.get('reveal') === '1';
  const { schedules: rows, more } = await queries.schedules(ctx.db, {
    afterName: afterName === null ? null : afterName, afterKey: params.get('after_key') || '', size: ctx.config.pageSize,
  });
  const last = rows[rows.length - 1];
  return page(ctx, {
    title: 'Schedules', active: '/schedules',
    body: html`${rows.length ? html`<table class="grid">
<thead><tr><th>Name</th><th>Key</th><th>Job type</th><th>Queue</th><th>Every</th><th>Active</th><th>Next fire</th><th>Last fired</th><th>Last job</th>
${reveal ? html`<th>Payload</th>` : ''}</tr></thead>
<tbody>${rows.map((s) => html`<tr${s.active ? '' : html` class="inactive"`}>
<td>${s.name}</td><td>${s.key}</td><td>${s.job_type}</td><td>${queueLink(s.queue)}</td>
<td>${s.cron !== null ? html`<code>${s.cron}</code>` : s.run_every}</td><td>${s.active ? 'yes' : 'paused'}</td>
<td>${s.active ? html`${when(s.next_run, ctx.now)} <span class="ago">${fmt.ago(s.next_run, ctx.now.getTime())}</span>` : '–'}</td>
<td>${s.last_run ? when(s.last_run, ctx.now) : '–'}</td><td>${s.last_job_id !== null ? jobLink(s.last_job_id) : '–'}</td>
${reveal ? html`<td><code>${JSON.stringify(s.payload)}</code></td>` : ''}</tr>`)}</tbody>
</table>` : html`<p class="empty">No schedule: <code>SELECT pqrun.schedule(...)</code> makes one.</p>`}
<p class="pager">${afterName !== null ? html`<a href="/schedules">First</a> ` : ''}
${more ? html`<a href="/schedules${query({ after_name: last.name, after_key: last.key, reveal: reveal && !ctx.config.showPayloads ? '1' : '' })}" rel="next">Next →</a>` : ''}
${!reveal ? html` <a href="/schedules${query({ after_name: afterName, after_key: params.get('after_key'), reveal: '1' })}">Show payloads</a>` : ''}</p>`,
  });
}

module.exports = { schedules };

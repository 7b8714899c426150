'use strict';
// What pqrun.health reports (the backend holding back vacuum, dead rows),
// pqrun's settings and shared-memory tables, and this dashboard's mode.
const { html } = require('../html');
const fmt = require('../format');
const queries = require('../queries');
const { page, when } = require('../layout');

const ACTION_NAMES = {
  retry: 'retry', cancel: 'cancel', pause: 'pause', resume: 'resume', concurrency: 'concurrency limits',
  rate: 'rate limits', bulkRetry: 'bulk retry', bulkCancel: 'bulk cancel',
};

async function health(ctx) {
  const { health: h, settings, info, shared } = await queries.health(ctx.db, { sharedCounters: ctx.info.features.sharedCounters });
  const capacity = new Map();
  for (const r of shared) if (r.metric === 'shared_memory_capacity') capacity.set(r.label, r.value);
  const entries = shared.filter((r) => r.metric === 'shared_memory_entries');
  const rescued = shared.filter((r) => r.metric === 'rescued_total');
  const old = h.horizon_xact_age !== null && Number(h.horizon_xact_age) > 10000;
  const a = ctx.info.actions;
  return page(ctx, {
    title: 'Health', active: '/health',
    body: html`<h2>Vacuum horizon</h2>
${h.horizon_pid !== null ? html`<table class="fields${old ? ' warn' : ''}">
<tr><th>Oldest transaction's backend</th><td>pid ${h.horizon_pid} (${h.horizon_user || 'no user'}, ${h.horizon_state || 'no state'})</td></tr>
<tr><th>Its age</th><td>${fmt.num(h.horizon_xact_age)} transactions${old ? html` <span class="badge paused">holds back vacuum</span>` : ''}</td></tr>
<tr><th>Transaction started</th><td>${when(h.horizon_xact_start, ctx.now)}</td></tr>
<tr><th>Query started</th><td>${when(h.horizon_query_start, ctx.now)}</td></tr>
</table>` : html`<p class="empty">No other backend holds a snapshot: vacuum may remove every dead row.</p>`}
<h2>Tables</h2>
<table class="grid"><thead><tr><th>Table</th><th>Live rows</th><th>Dead rows</th></tr></thead><tbody>
<tr><td>job_live (unfinished jobs)</td><td class="n">${fmt.num(h.job_live_live_tuples)}</td><td class="n">${fmt.num(h.job_live_dead_tuples)}</td></tr>
<tr><td>job_done (history, all partitions)</td><td class="n">${fmt.num(h.job_done_live_tuples)}</td><td class="n">${fmt.num(h.job_done_dead_tuples)}</td></tr>
</tbody></table>
${entries.length ? html`<h2>Shared memory</h2><table class="grid"><thead><tr><th>Table</th><th>Entries</th><th>Capacity</th></tr></thead><tbody>
${entries.map((r) => html`<tr><td>${r.label}</td><td class="n">${fmt.num(r.value)}</td><td class="n">${fmt.num(capacity.get(r.label))}</td></tr>`)}
</tbody></table>` : ''}
${rescued.length ? html`<p>Running jobs put back by maintenance since the server started: ${rescued.map((r, i) => html`${i ? ', ' : ''}${fmt.num(r.value)} ${r.label}`)}.</p>` : ''}
<h2>Settings</h2>
<table class="grid"><thead><tr><th>Setting</th><th>Value</th><th>Meaning</th></tr></thead><tbody>
${settings.map((s) => html`<tr><td><code>${s.name}</code></td><td>${s.setting}</td><td>${s.short_desc}</td></tr>`)}
</tbody></table>
<h2>This dashboard</h2>
<table class="fields">
<tr><th>Connected as</th><td>${info.role} to ${info.database} (PostgreSQL ${info.server_version}, pqrun ${info.version})</td></tr>
<tr><th>Mode</th><td>${ctx.info.readOnly ? 'read-only' : `operator: ${Object.keys(a).filter((k) => a[k]).map((k) => ACTION_NAMES[k]).join(', ')}`}</td></tr>
<tr><th>Throughput samples</th><td>${ctx.sampler ? `${ctx.sampler.samples.length}, every ${ctx.config.sampleSeconds} s` : 'off'}
${ctx.sampler && ctx.sampler.lastError ? html` <span class="badge paused">${ctx.sampler.lastError}</span>` : ''}</td></tr>
</table>`,
  });
}

module.exports = { health };

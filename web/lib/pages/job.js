'use strict';
// One job: what it is, who holds it, every attempt, what it waits for and
// what waits for it, its FIFO group. Payload and result only on request.
const { html } = require('../html');
const fmt = require('../format');
const queries = require('../queries');
const { page, postForm, statusBadge, jobLink, queueLink, when, query } = require('../layout');

function field(label, value) {
  return html`<tr><th>${label}</th><td>${value === null || value === undefined || value === '' ? '–' : value}</td></tr>`;
}

function jobRefs(rows, empty) {
  if (!rows.length) return html`<p class="empty">${empty}</p>`;
  return html`<ul class="refs">${rows.map((r) => html`<li>${jobLink(r.id)} ${statusBadge(r.status)} ${r.queue} / ${r.job_type}</li>`)}</ul>`;
}

function actions(ctx, j) {
  const a = ctx.info.actions;
  const out = [];
  if (a.retry && (j.status === 'FAILED' || j.status === 'CANCELLED')) {
    out.push(postForm(ctx, `/jobs/${j.id}/retry`, { button: 'Retry', cls: 'primary' }));
  }
  if (a.cancel && queries.LIVE.includes(j.status)) {
    out.push(postForm(ctx, `/jobs/${j.id}/cancel`, {
      inputs: html`<input name="reason" placeholder="reason (optional)" maxlength="10000">`,
      button: 'Cancel', confirm: `Cancel job #${j.id}${j.status === 'RUNNING' ? ' while it runs' : ''}?`,
    }));
  }
  return out.length ? html`<div class="job-actions">${out}</div>` : '';
}

function hiddenData(ctx, j) {
  const shown = ctx.config.showPayloads || ctx.url.searchParams.get('reveal') === '1';
  if (!shown) {
    return html`<p class="hidden-data">Payload and result are hidden. <a href="/jobs/${j.id}?reveal=1">Show them</a></p>`;
  }
  return html`<h2>Payload</h2><pre class="json">${fmt.json(j.payload)}</pre>
${j.result !== null ? html`<h2>Result</h2><pre class="json">${fmt.json(j.result)}</pre>` : ''}`;
}

async function show(ctx, id) {
  const heartbeat = ctx.info.features.heartbeat;
  const j = await queries.job(ctx.db, id, { heartbeat });
  if (!j) return null;
  const [attempts, deps, waiting, group] = await Promise.all([
    queries.attempts(ctx.db, id),
    queries.jobsById(ctx.db, j.depends_on || []),
    queries.LIVE.includes(j.status) ? queries.waitingDependents(ctx.db, id, { fn: ctx.info.features.dependents }) : Promise.resolve([]),
    j.fifo_key !== null ? queries.fifoGroup(ctx.db, j.fifo_key) : Promise.resolve([]),
  ]);
  const running = j.status === 'RUNNING';
  return page(ctx, {
    title: `Job #${j.id}`, active: '/jobs',
    body: html`<p class="job-head">${statusBadge(j.status)} <strong>${j.job_type}</strong> in ${queueLink(j.queue)}</p>
${actions(ctx, j)}
<div class="columns">
<table class="fields">
${field('Queue', queueLink(j.queue))}
${field('Job type', j.job_type)}
${field('Priority', j.priority)}
${field('Attempts', `${j.attempts} of ${j.max_attempts}`)}
${field('Created', when(j.created_at, ctx.now))}
${field(j.status === 'READY' || j.status === 'BLOCKED' ? 'Runs after' : 'Ran after', when(j.run_after, ctx.now))}
${field('Updated', when(j.updated_at, ctx.now))}
${field('Finished', j.finished_at ? when(j.finished_at, ctx.now) : '')}
${field('Run time', j.duration_ms !== null ? fmt.ms(j.duration_ms) : '')}
${field('Timeout', j.timeout_seconds !== null ? fmt.seconds(j.timeout_seconds) : 'pqrun.stale_timeout')}
${field('Dedupe key', j.dedupe_key)}
${field('Concurrency key', j.concurrency_key)}
${field('Rate weight', j.rate_weight)}
${field('Snoozed', j.snoozes ? `${j.snoozes} times` : '')}
</table>
<table class="fields">
<tr><th colspan="2" class="section">Lease${running ? '' : ' (last)'}</th></tr>
${field('Held by', j.locked_by)}
${field('Since', j.locked_at ? when(j.locked_at, ctx.now) : '')}
${heartbeat ? field('Last heartbeat', j.heartbeat_at ? when(j.heartbeat_at, ctx.now) : '') : ''}
${running ? field('Running for', fmt.ago(j.locked_at, ctx.now.getTime()).replace(' ago', '')) : ''}
${field('Progress', j.progress !== null ? html`<code>${JSON.stringify(j.progress)}</code>` : '')}
<tr><th colspan="2" class="section">FIFO group</th></tr>
${field('Key', j.fifo_key)}
</table>
</div>
${j.fifo_key !== null ? html`<h2>Unfinished jobs of FIFO group <code>${j.fifo_key}</code>, in the order they run</h2>${jobRefs(group, 'none')}` : ''}
${j.last_error ? html`<h2>Last error</h2><pre class="error">${j.last_error}</pre>` : ''}
${hiddenData(ctx, j)}
<h2>Attempts</h2>
${attempts.length ? html`<table class="grid">
<thead><tr><th>#</th><th>Worker</th><th>Started</th><th>Finished</th><th>Outcome</th><th>Error</th></tr></thead>
<tbody>${attempts.map((t) => html`<tr><td class="n">${t.attempt}</td><td>${t.worker_id || ''}</td><td>${when(t.started_at, ctx.now)}</td>
<td>${t.finished_at ? when(t.finished_at, ctx.now) : running ? 'running' : '–'}</td><td>${t.outcome || ''}</td><td class="error">${t.error || ''}</td></tr>`)}</tbody>
</table>` : html`<p class="empty">Not run yet.</p>`}
<h2>Depends on</h2>
${jobRefs(deps, 'Nothing.')}
<h2>Waiting for it</h2>
${queries.LIVE.includes(j.status) ? jobRefs(waiting, 'No BLOCKED job waits for it.') : html`<p class="empty">It has finished: no job waits for it any more.</p>`}
<p class="links"><a href="/jobs${query({ queue: j.queue, job_type: j.job_type })}">More ${j.job_type} jobs of ${j.queue}</a></p>`,
  });
}

module.exports = { show };

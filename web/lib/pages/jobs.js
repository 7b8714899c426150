'use strict';
// The job list: filters, keyset pages by id, and bulk retry / cancel of
// everything the filter matches.
const { html } = require('../html');
const fmt = require('../format');
const queries = require('../queries');
const { page, postForm, statusBadge, jobLink, queueLink, when, query } = require('../layout');

class FilterError extends Error {}

const SINCE = { '15m': 15 * 60, '1h': 3600, '6h': 6 * 3600, '24h': 86400, '7d': 7 * 86400 };

function parseTime(text, name) {
  if (!text) return null;
  // datetime-local sends no zone: the page says times are UTC.
  const s = /[zZ]|[+-]\d\d:?\d\d$/.test(text) ? text : `${text}Z`;
  const d = new Date(s.replace(' ', 'T'));
  if (Number.isNaN(d.getTime())) throw new FilterError(`${name}: not a time (${text}); use 2026-12-06T10:00 (UTC)`);
  return d;
}

function parseId(text, name) {
  if (text === undefined || text === null || text === '') return null;
  if (!/^\d{1,18}$/.test(text)) throw new FilterError(`${name}: not a job id`);
  return text;
}

// filterFrom(params): the filter a query string (or a bulk form) gives.
function filterFrom(params, now = new Date()) {
  const statuses = params.getAll('status').filter((s) => s !== '');
  for (const s of statuses) if (!queries.STATUSES.includes(s)) throw new FilterError(`unknown status ${s}`);
  const f = {
    queue: params.get('queue') || '',
    jobType: params.get('job_type') || '',
    statuses: [...new Set(statuses)],
    timeField: params.get('time') === 'finished' ? 'finished' : 'created',
    since: params.get('since') || '',
    from: parseTime(params.get('from'), 'from'),
    to: parseTime(params.get('to'), 'to'),
    error: params.get('error') || '',
    payloadText: params.get('payload') || '',
    payload: null,
  };
  if (f.since) {
    if (!SINCE[f.since]) throw new FilterError(`since: one of ${Object.keys(SINCE).join(', ')}`);
    f.from = new Date(now.getTime() - SINCE[f.since] * 1000);
    f.to = null;
  }
  if (f.payloadText) {
    try {
      f.payload = JSON.parse(f.payloadText);
    } catch (err) {
      throw new FilterError(`payload: not JSON (${err.message})`);
    }
  }
  return f;
}

// The filter as query parameters: links keep it, the bulk forms send it
// (with `since` made absolute, so that the action matches what was shown).
function filterParams(f, { absolute = false } = {}) {
  return {
    queue: f.queue, job_type: f.jobType, status: f.statuses, time: f.timeField === 'finished' ? 'finished' : '',
    since: absolute ? '' : f.since,
    from: (absolute || !f.since) && f.from ? f.from.toISOString() : '',
    to: f.to ? f.to.toISOString() : '',
    error: f.error, payload: f.payloadText,
  };
}

function filterForm(ctx, f) {
  const local = (d) => (d ? d.toISOString().slice(0, 16) : '');
  return html`<form method="get" action="/jobs" class="filters">
<label>Queue <input name="queue" value="${f.queue}" list="queues" autocomplete="off"></label>
<label>Job type <input name="job_type" value="${f.jobType}" list="job-types" autocomplete="off"></label>
<fieldset class="statuses"><legend>Status</legend>
${queries.STATUSES.map((s) => html`<label class="check"><input type="checkbox" name="status" value="${s}"${f.statuses.includes(s) ? html` checked` : ''}> ${s}</label>`)}
</fieldset>
<label>Time <select name="time"><option value="created">created</option><option value="finished"${f.timeField === 'finished' ? html` selected` : ''}>finished</option></select></label>
<label>Last <select name="since"><option value="">(from – to)</option>
${Object.keys(SINCE).map((k) => html`<option value="${k}"${f.since === k ? html` selected` : ''}>${k}</option>`)}</select></label>
<label>From (UTC) <input name="from" type="datetime-local" value="${f.since ? '' : local(f.from)}"></label>
<label>To (UTC) <input name="to" type="datetime-local" value="${local(f.to)}"></label>
<label>Error contains <input name="error" value="${f.error}"></label>
<label>Payload contains (JSON) <input name="payload" value="${f.payloadText}" placeholder='{"user": 42}' class="wide"></label>
<button type="submit">Filter</button> <a href="/jobs">Clear</a>
<datalist id="queues">${ctx.sampler ? ctx.sampler.queues().map((q) => html`<option value="${q}">`) : ''}</datalist>
<datalist id="job-types">${(ctx.sampler ? ctx.sampler.jobTypes() : []).map((t) => html`<option value="${t}">`)}</datalist>
</form>`;
}

function bulkForms(ctx, f) {
  const a = ctx.info.actions;
  const out = [];
  const hidden = filterParams(f, { absolute: true });
  const retryStatuses = (f.statuses.length ? f.statuses : ['FAILED', 'CANCELLED']).filter((s) => s === 'FAILED' || s === 'CANCELLED');
  const cancelStatuses = (f.statuses.length ? f.statuses : ['READY', 'BLOCKED']).filter((s) => queries.LIVE.includes(s));
  const ranged = f.from || f.to;
  if (a.bulkRetry && retryStatuses.length && (!ranged || f.timeField === 'finished')) {
    out.push(postForm(ctx, '/jobs/retry', {
      hidden, button: `Retry all matching ${retryStatuses.join('/')} jobs`,
      confirm: `Retry every ${retryStatuses.join('/')} job that matches this filter (on every page, not only this one)?`,
    }));
  }
  if (a.bulkCancel && cancelStatuses.length && (!ranged || f.timeField === 'created')) {
    out.push(postForm(ctx, '/jobs/cancel', {
      hidden,
      inputs: html`<input name="reason" placeholder="reason (optional)">`,
      button: `Cancel all matching ${cancelStatuses.join('/')} jobs`,
      confirm: `Cancel every ${cancelStatuses.join('/')} job that matches this filter (on every page, not only this one)?`,
    }));
  }
  if (!out.length) return '';
  return html`<div class="bulk"><span class="hint">By this filter, on every page:</span> ${out}</div>`;
}

function jobsTable(ctx, jobs) {
  if (!jobs.length) return html`<p class="empty">No job matches.</p>`;
  return html`<table class="grid jobs">
<thead><tr><th>Job</th><th>Queue</th><th>Job type</th><th>Status</th><th>Attempts</th><th>Created</th><th>Finished / due</th><th>Worker</th><th>Last error</th></tr></thead>
<tbody>${jobs.map((j) => html`<tr>
<td>${jobLink(j.id)}</td><td>${queueLink(j.queue)}</td><td>${j.job_type}</td><td>${statusBadge(j.status)}</td>
<td class="n">${j.attempts}/${j.max_attempts}</td><td>${when(j.created_at, ctx.now)}</td>
<td>${j.finished_at ? when(j.finished_at, ctx.now) : j.status === 'READY' || j.status === 'BLOCKED' ? when(j.run_after, ctx.now) : '–'}</td>
<td>${j.locked_by || ''}</td><td class="error">${j.last_error || ''}</td>
</tr>`)}</tbody></table>`;
}

async function list(ctx) {
  const params = ctx.url.searchParams;
  let f;
  let result = null;
  let problem = null;
  let before = null;
  let after = null;
  try {
    f = filterFrom(params, ctx.now);
    before = parseId(params.get('before'), 'before');
    after = before === null ? parseId(params.get('after'), 'after') : null;
  } catch (err) {
    if (!(err instanceof FilterError)) throw err;
    problem = err.message;
    f = f || { queue: '', jobType: '', statuses: [], timeField: 'created', since: '', from: null, to: null, error: '', payloadText: '' };
  }
  if (!problem) {
    const q = { ...f, idFrom: null, idTo: null };
    // A time range bounds the ids: creation order is id order.
    if (f.to) q.idTo = await queries.idAtTime(ctx.db, f.to);
    if (f.from && f.timeField === 'created') q.idFrom = await queries.idAtTime(ctx.db, f.from);
    result = await queries.listJobs(ctx.db, q, { before, after, size: ctx.config.pageSize, window: ctx.config.scanWindow });
  }
  const keep = filterParams(f);
  let nav = '';
  if (result) {
    const { jobs, more, windowEnd } = result;
    const links = [];
    if (before !== null || after !== null) links.push(html`<a href="/jobs${query(keep)}">Newest</a>`);
    if (jobs.length && (before !== null || (after !== null && (more || windowEnd)))) {
      links.push(html`<a href="/jobs${query({ ...keep, after: jobs[0].id })}" rel="prev">← Newer</a>`);
    } else if (!jobs.length && before !== null) {
      links.push(html`<a href="/jobs${query({ ...keep, after: String(BigInt(before) - 1n) })}" rel="prev">← Newer</a>`);
    }
    const older = after !== null ? (jobs.length ? jobs[jobs.length - 1].id : null) : more ? jobs[jobs.length - 1].id : windowEnd;
    if (older !== null && older !== undefined) {
      links.push(html`<a href="/jobs${query({ ...keep, before: older })}" rel="next">${!more && after === null ? 'Search older jobs →' : 'Older →'}</a>`);
    }
    const note = !more && windowEnd && after === null
      ? html`<p class="hint">No more matches among the ${fmt.num(ctx.config.scanWindow)} jobs examined (down to #${windowEnd}): search older jobs to go on.</p>`
      : '';
    nav = html`${note}<p class="pager">${links.map((l, i) => html`${i ? ' · ' : ''}${l}`)}</p>`;
  }
  return page(ctx, {
    title: 'Jobs', active: '/jobs',
    body: html`${filterForm(ctx, f)}
${problem ? html`<p class="flash flash-error">${problem}</p>` : ''}
${result ? html`${bulkForms(ctx, f)}${jobsTable(ctx, result.jobs)}${nav}` : ''}`,
  });
}

module.exports = { list, filterFrom, filterParams, FilterError };

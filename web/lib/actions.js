'use strict';
// The POSTs: retry, cancel, pause and resume a queue, set or remove its
// limits, and bulk retry / cancel by a job list's filter. Each answers with
// a message for the next page and where to go.
const { filterFrom, filterParams, FilterError } = require('./pages/jobs');
const { query } = require('./layout');
const queries = require('./queries');

class ActionError extends Error {}

function describe(err) {
  if (err instanceof ActionError || err instanceof FilterError) return `Error: ${err.message}`;
  if (err && err.code) {
    const hint = err.code === '23505' ? ' (another unfinished job holds its dedupe key)' : '';
    return `Error: ${err.message}${hint} [SQLSTATE ${err.code}]`;
  }
  throw err;
}

function jobId(text) {
  if (!/^\d{1,18}$/.test(text)) throw new ActionError('not a job id');
  return text;
}

function intField(form, name, min, max) {
  const v = form.get(name);
  const n = Number(v);
  if (v === null || v === '' || !Number.isInteger(n) || n < min || n > max) {
    throw new ActionError(`${name} must be an integer from ${min} to ${max}`);
  }
  return n;
}

const ACTIONS = [
  {
    pattern: /^\/jobs\/(\d+)\/retry$/, may: 'retry',
    async run(ctx, [id]) {
      const { rows } = await ctx.db.act('SELECT pqrun.retry($1) AS ok', [jobId(id)]);
      return { to: `/jobs/${id}`, message: rows[0].ok ? `Job #${id} is READY again.` : `Job #${id} is not FAILED or CANCELLED: nothing to retry.` };
    },
  },
  {
    pattern: /^\/jobs\/(\d+)\/cancel$/, may: 'cancel',
    async run(ctx, [id], form) {
      const reason = (form.get('reason') || '').trim() || null;
      const { rows } = await ctx.db.act('SELECT pqrun.cancel($1, $2) AS ok', [jobId(id), reason]);
      return { to: `/jobs/${id}`, message: rows[0].ok ? `Job #${id} is CANCELLED.` : `Job #${id} had already finished: nothing to cancel.` };
    },
  },
  {
    pattern: /^\/queues\/([^/]+)\/(pause|resume)$/, may: (m) => m[1],
    async run(ctx, [queue, verb]) {
      const { rows } = await ctx.db.act(`SELECT pqrun.${verb === 'pause' ? 'pause_queue' : 'resume_queue'}($1) AS changed`, [queue]);
      const done = verb === 'pause' ? 'paused' : 'resumed';
      return { message: rows[0].changed ? `Queue ${queue} ${done}.` : `Queue ${queue} was ${verb === 'pause' ? 'paused' : 'not paused'} already.` };
    },
  },
  {
    pattern: /^\/queues\/([^/]+)\/concurrency$/, may: 'concurrency',
    async run(ctx, [queue], form) {
      const type = form.get('job_type') || null;
      const limit = form.get('clear') === '1' ? null : intField(form, 'max_running', 0, 10000);
      await ctx.db.act('SELECT pqrun.set_concurrency_limit($1, $2, $3)', [queue, limit, type]);
      const scope = type ? `${queue} / ${type}` : queue;
      return { message: limit === null ? `Concurrency limit of ${scope} removed.` : `${scope}: at most ${limit} running at once.` };
    },
  },
  {
    pattern: /^\/queues\/([^/]+)\/rate$/, may: 'rate',
    async run(ctx, [queue], form) {
      const type = form.get('job_type') || null;
      const scope = type ? `${queue} / ${type}` : queue;
      if (form.get('clear') === '1') {
        await ctx.db.act('SELECT pqrun.set_rate_limit($1, NULL, 1, $2)', [queue, type]);
        return { message: `Rate limit of ${scope} removed.` };
      }
      const rate = Number(form.get('per_second'));
      if (!(rate > 0 && rate <= 1e6)) throw new ActionError('per_second must be above 0 and at most 1,000,000');
      const burst = intField(form, 'burst', 1, 1000000);
      await ctx.db.act('SELECT pqrun.set_rate_limit($1, $2, $3, $4)', [queue, rate, burst, type]);
      return { message: `${scope}: at most ${rate} claims per second, ${burst} at once.` };
    },
  },
  {
    pattern: /^\/jobs\/retry$/, may: 'bulkRetry',
    async run(ctx, _m, form) {
      const f = filterFrom(form, ctx.now);
      const statuses = (f.statuses.length ? f.statuses : ['FAILED', 'CANCELLED']).filter((s) => s === 'FAILED' || s === 'CANCELLED');
      if (!statuses.length) throw new ActionError('only FAILED and CANCELLED jobs can be retried');
      if ((f.from || f.to) && f.timeField !== 'finished') throw new ActionError('retry by a time range of finish, not of creation');
      const { rows } = await ctx.db.bulk(
        `CALL pqrun.retry_jobs(queue => $1, job_type => $2, statuses => $3::pqrun.job_status[],
                               finished_after => $4, finished_before => $5, error_contains => $6, payload_contains => $7::jsonb)`,
        [f.queue || null, f.jobType || null, statuses, f.from, f.to, f.error || null, f.payloadText ? JSON.stringify(f.payload) : null]);
      return { to: `/jobs${query(filterParams(f))}`, message: `Retried ${Number(rows[0].retried).toLocaleString('en-US')} jobs (${statuses.join('/')} matching the filter).` };
    },
  },
  {
    pattern: /^\/jobs\/cancel$/, may: 'bulkCancel',
    async run(ctx, _m, form) {
      const f = filterFrom(form, ctx.now);
      const statuses = (f.statuses.length ? f.statuses : ['READY', 'BLOCKED']).filter((s) => queries.LIVE.includes(s));
      if (!statuses.length) throw new ActionError('only BLOCKED, READY and RUNNING jobs can be cancelled');
      if ((f.from || f.to) && f.timeField !== 'created') throw new ActionError('cancel by a time range of creation, not of finish');
      const reason = (form.get('reason') || '').trim() || null;
      const { rows } = await ctx.db.bulk(
        `CALL pqrun.cancel_jobs(queue => $1, job_type => $2, statuses => $3::pqrun.job_status[],
                                created_after => $4, created_before => $5, error_contains => $6,
                                payload_contains => $7::jsonb, reason => $8)`,
        [f.queue || null, f.jobType || null, statuses, f.from, f.to, f.error || null,
          f.payloadText ? JSON.stringify(f.payload) : null, reason]);
      return { to: `/jobs${query(filterParams(f))}`, message: `Cancelled ${Number(rows[0].cancelled).toLocaleString('en-US')} jobs (${statuses.join('/')} matching the filter).` };
    },
  },
];

// find(path): the action a POST path names, with its captures, or null.
function find(path) {
  for (const a of ACTIONS) {
    const m = a.pattern.exec(path);
    if (m) {
      const captures = m.slice(1).map((c) => decodeURIComponent(c));
      return { action: a, captures, permission: typeof a.may === 'function' ? a.may(captures) : a.may };
    }
  }
  return null;
}

// run(ctx, found, form): { to, message }; a refused or failed action's
// message says why, and nothing changed.
async function run(ctx, { action, captures }, form) {
  try {
    return await action.run(ctx, captures, form);
  } catch (err) {
    return { message: describe(err) };
  }
}

module.exports = { find, run };

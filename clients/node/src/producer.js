// Producer calls: enqueue, enqueueBatch, cancel, retry. Each runs one
// statement on the caller's client (a pg.Client, a pg.PoolClient inside
// the caller's transaction, or a pg.Pool), so a job enqueued in a
// transaction exists exactly when the transaction's other writes do.

import { interval, mapError, DuplicateJobError } from './errors.js';

// enqueue's options: JavaScript name -> [argument name, SQL type].
const OPTIONS = {
  priority: ['priority', 'int'],
  runAfter: ['run_after', 'timestamptz'],
  maxAttempts: ['max_attempts', 'int'],
  timeoutSeconds: ['timeout_seconds', 'int'],
  dedupeKey: ['dedupe_key', 'text'],
  queue: ['queue', 'text'],
  dependsOn: ['depends_on', 'bigint[]'],
  fifoKey: ['fifo_key', 'text'],
  concurrencyKey: ['concurrency_key', 'text'],
  rateWeight: ['rate_weight', 'int'],
};

function checkJobType(jobType) {
  if (typeof jobType !== 'string') throw new TypeError('jobType must be a string');
}

// The given options as [argument name, SQL type, value]; undefined or null
// leaves pqrun's default. `delay` (seconds or an interval) is run_after
// counted from the enqueue's own clock, not from the transaction's start.
export function namedArgs(options = {}) {
  if (options === null || typeof options !== 'object') throw new TypeError('options must be an object');
  const args = [];
  for (const [key, value] of Object.entries(options)) {
    if (value === undefined || value === null) {
      if (key !== 'delay' && !OPTIONS[key]) throw new TypeError(`unknown enqueue option ${key}`);
      continue;
    }
    if (key === 'delay') {
      if (options.runAfter != null) throw new TypeError('give delay or runAfter, not both');
      args.push(['delay', 'interval', interval(value)]);
      continue;
    }
    const spec = OPTIONS[key];
    if (!spec) throw new TypeError(`unknown enqueue option ${key}`);
    if (key === 'dependsOn' && !Array.isArray(value)) throw new TypeError('dependsOn must be an array of job ids');
    args.push([spec[0], spec[1], key === 'dependsOn' ? value.map(String) : value]);
  }
  return args;
}

function json(value) {
  const text = JSON.stringify(value);
  if (text === undefined) throw new TypeError('the payload is not a JSON value');
  return text;
}

async function call(db, sql, values, extra) {
  try {
    return (await db.query(sql, values)).rows;
  } catch (err) {
    throw mapError(err, extra);
  }
}

// enqueue(db, jobType, payload, options): the new job's id (a string, as
// pg returns bigint), or with a dedupeKey an unfinished job already holds,
// that job's id.
export async function enqueue(db, jobType, payload, options) {
  checkJobType(jobType);
  const values = [jobType];
  const parts = ['$1'];
  if (payload !== undefined) {
    values.push(json(payload));
    parts.push(`payload => $${values.length}::jsonb`);
  }
  for (const [name, type, value] of namedArgs(options)) {
    values.push(value);
    parts.push(name === 'delay'
      ? `run_after => clock_timestamp() + $${values.length}::interval`
      : `${name} => $${values.length}::${type}`);
  }
  const rows = await call(db, `SELECT pqrun.enqueue(${parts.join(', ')}) AS id`, values);
  return rows[0].id;
}

// enqueueBatch(db, jobs): one statement for all; `jobs` are
// { jobType, payload, ...options }. The ids, in the order of `jobs`.
export async function enqueueBatch(db, jobs) {
  if (!Array.isArray(jobs)) throw new TypeError('jobs must be an array');
  if (jobs.length === 0) return [];
  const elements = jobs.map((job, i) => {
    if (job === null || typeof job !== 'object') throw new TypeError(`jobs[${i}] is not an object`);
    const { jobType, payload, ...options } = job;
    checkJobType(jobType);
    const element = { job_type: jobType };
    if (payload !== undefined) element.payload = payload;
    for (const [name, , value] of namedArgs(options)) element[name] = value;
    return element;
  });
  const rows = await call(db, BATCH, [json(elements)]);
  return rows.map((r) => r.id);
}

// A `delay` becomes run_after on the server's clock.
const BATCH = `SELECT id FROM pqrun.enqueue_batch((
  SELECT jsonb_agg(CASE WHEN e ? 'delay'
                        THEN (e - 'delay') || jsonb_build_object('run_after', clock_timestamp() + (e->>'delay')::interval)
                        ELSE e END ORDER BY n)
    FROM jsonb_array_elements($1::jsonb) WITH ORDINALITY AS t(e, n))) AS id`;

// cancel(db, id, { reason, queue }): true if the job was BLOCKED, READY or
// RUNNING and is CANCELLED now (with its dependents), false if it had
// finished already.
export async function cancel(db, id, { reason = null, queue = null } = {}) {
  const rows = await call(db, 'SELECT pqrun.cancel($1::bigint, $2, $3) AS ok', [String(id), reason, queue]);
  return rows[0].ok;
}

// retry(db, id, { queue }): true if the FAILED or CANCELLED job is READY
// again, false otherwise. DuplicateJobError while another unfinished job
// holds its dedupe key.
export async function retry(db, id, { queue = null } = {}) {
  const rows = await call(db, 'SELECT pqrun.retry($1::bigint, $2) AS ok', [String(id), queue],
    { 23505: DuplicateJobError });
  return rows[0].ok;
}

'use strict';
// Every statement the pages run, each through pqrun's views and functions
// (the roles of grant_monitor and grant_operator read no table). Each reads
// what its page shows plus a bounded window, by an index, except the two
// that the views allow no other way yet (README.md, "Cost at scale"):
// unfinished counts per queue and job type, and the flow controls.

const LIVE = ['BLOCKED', 'READY', 'RUNNING'];
const FINISHED = ['DONE', 'FAILED', 'CANCELLED'];
const STATUSES = [...LIVE, ...FINISHED];

// The columns of a job in a list; a long error is cut here, not in Node.
const LIST_COLUMNS = `id, queue, job_type, status, priority, attempts, max_attempts, run_after, created_at,
  finished_at, locked_by, left(last_error, 300) AS last_error`;

const OVERVIEW_COLUMNS = `queue, job_type, blocked, ready, delayed, running, extract(epoch FROM oldest_ready_age) AS oldest_ready_s,
  done, failed, cancelled, done_last_5min, errors_last_5min, enqueued_last_5min, picked_last_5min,
  avg_duration_ms_last_5min, avg_wait_ms_last_5min`;

// Unfinished jobs per queue and job type, at most `size` rows of whole
// queues from the one after `after` (null: the first) or of the one queue
// given, and when they were counted. From pqrun.queue_overview where the
// extension has it (0.21.0: counted by the database's maintenance worker,
// read by its primary key); counted here where it has not, or where the
// view is empty (a server without pqrun preloaded, whose count never runs;
// or no job at all): queue_stats' grouping of the unfinished rows with the
// delayed ones (READY, due later) apart, joined to the shared-memory
// counters queue_stats reads, one pass over job_live.
async function overview(db, { queue = null, after = null, size = 1000, view = false } = {}) {
  if (view) {
    // One row more than the page holds: the page ends before the queue it
    // falls in, which the next page shows whole.
    const { rows } = await db.query(
      `SELECT ${OVERVIEW_COLUMNS}, counted_at FROM pqrun.queue_overview
        WHERE ($1::text IS NULL OR queue = $1) AND ($2::text IS NULL OR queue > $2)
        ORDER BY queue, job_type LIMIT $3`, [queue, after, size + 1]);
    if (rows.length || (await db.query('SELECT EXISTS (SELECT FROM pqrun.queue_overview) AS counted')).rows[0].counted) {
      return page(rows, size);
    }
  }
  const { rows } = await db.query(
    `WITH live AS (
       SELECT queue, job_type,
              count(*) FILTER (WHERE status = 'BLOCKED') AS blocked,
              count(*) FILTER (WHERE status = 'READY' AND run_after <= now()) AS ready,
              count(*) FILTER (WHERE status = 'READY' AND run_after > now()) AS delayed,
              count(*) FILTER (WHERE status = 'RUNNING') AS running,
              extract(epoch FROM now() - min(run_after) FILTER (WHERE status = 'READY' AND run_after <= now()))
                AS oldest_ready_s
         FROM pqrun.jobs
        WHERE status IN ('BLOCKED', 'READY', 'RUNNING') AND ($1::text IS NULL OR queue = $1)
          AND ($2::text IS NULL OR queue > $2)
        GROUP BY queue, job_type)
     SELECT queue, job_type, COALESCE(l.blocked, 0) AS blocked, COALESCE(l.ready, 0) AS ready,
            COALESCE(l.delayed, 0) AS delayed, COALESCE(l.running, 0) AS running, l.oldest_ready_s,
            COALESCE(c.done, 0) AS done, COALESCE(c.failed, 0) AS failed, COALESCE(c.cancelled, 0) AS cancelled,
            c.done_last_5min, c.errors_last_5min, c.enqueued_last_5min, c.picked_last_5min,
            c.avg_duration_ms_last_5min, c.avg_wait_ms_last_5min, now() AS counted_at
       FROM live l
       FULL JOIN (SELECT * FROM pqrun._queue_counters()
                   WHERE ($1::text IS NULL OR queue = $1) AND ($2::text IS NULL OR queue > $2)) c USING (queue, job_type)
      ORDER BY queue, job_type LIMIT $3`, [queue, after, size + 1]);
  return page(rows, size);
}

// page(rows, most): the rows of whole queues among the first `most`, and
// the queue the next page starts after (null: none). A queue with more job
// types than a page holds is shown alone, cut.
function page(rows, most) {
  if (rows.length <= most) return { rows, next: null };
  const cut = rows[most].queue;
  let whole = rows.slice(0, most).filter((r) => r.queue !== cut);
  if (!whole.length) whole = rows.slice(0, most);
  return { rows: whole, next: whole[whole.length - 1].queue };
}

// The flow controls of one queue, or of the queues after `after` up to
// `through` (null: no bound), those of keys only with `keys`: from
// pqrun.flow_controls where the extension has it (the controls, their
// RUNNING jobs and shared-memory counters; no READY job counted), else from
// queue_controls, which counts the controlled queues' jobs. By the
// controls' unique key (queue, job_type, concurrency_key).
async function controls(db, { queue = null, after = null, through = null, keys = true, view = false } = {}) {
  const { rows } = await db.query(
    `SELECT queue, job_type, concurrency_key, paused, max_running, running, ${view ? 'NULL::bigint AS ready' : 'ready'}, rate, burst,
            tokens, max_running_per_key, busiest_key_running, rate_per_key,
            burst_per_key, rate_limited_keys, keyed, updated_at
       FROM ${view ? 'pqrun.flow_controls' : 'pqrun.queue_controls'}
      WHERE ($1::text IS NULL OR queue = $1) AND ($2::text IS NULL OR queue > $2) AND ($3::text IS NULL OR queue <= $3)
        AND ($4 OR concurrency_key IS NULL)
      ORDER BY queue, job_type NULLS FIRST, concurrency_key NULLS FIRST`, [queue, after, through, keys]);
  return rows;
}

// The shared-memory counters alone (no table read): the throughput chart's samples.
async function counters(db) {
  const { rows } = await db.query(
    `SELECT queue, job_type, done, failed, cancelled, enqueued_last_5min, picked_last_5min, done_last_5min,
            errors_last_5min, avg_wait_ms_last_5min FROM pqrun._queue_counters()`);
  return rows;
}

// idAtTime(t): the first job id created at or after t, by a binary search
// over ids (one index probe per step), ids being handed out in creation
// order. A job enqueued by a transaction that stayed open across t may lie
// on the other side.
async function idAtTime(db, t) {
  const { rows } = await db.query(
    `WITH RECURSIVE b(lo, hi) AS (
       SELECT COALESCE((SELECT id FROM pqrun.jobs ORDER BY id LIMIT 1), 0),
              COALESCE((SELECT id FROM pqrun.jobs ORDER BY id DESC LIMIT 1), 0) + 1
       UNION ALL
       SELECT CASE WHEN p.id IS NULL OR p.created_at >= $1 THEN b.lo ELSE p.id + 1 END,
              CASE WHEN p.id IS NULL THEN (b.lo + b.hi) / 2 WHEN p.created_at >= $1 THEN p.id ELSE b.hi END
         FROM b
         LEFT JOIN LATERAL (SELECT id, created_at FROM pqrun.jobs
                             WHERE id >= (b.lo + b.hi) / 2 AND id < b.hi ORDER BY id LIMIT 1) p ON true
        WHERE b.lo < b.hi)
     SELECT lo FROM b WHERE lo >= hi LIMIT 1`, [t]);
  return rows.length ? Number(rows[0].lo) : null;
}

// listJobs(db, f, page): a page of jobs matching filter f, newest first,
// paged by id. The filters that an index serves (the id range, unfinished
// statuses) bound a window of at most `window` jobs in id order; the others
// are checked on the window's jobs only. A page that is not full says where
// its window ended, and the next request goes on from there.
async function listJobs(db, f, { before = null, after = null, size = 50, window = 20000 } = {}) {
  const inner = [];
  const outer = [];
  const params = [];
  const p = (v) => { params.push(v); return `$${params.length}`; };

  if (before !== null) inner.push(`id < ${p(before)}`);
  if (after !== null) inner.push(`id > ${p(after)}`);
  if (f.idFrom !== null && f.idFrom !== undefined) inner.push(`id >= ${p(f.idFrom)}`);
  if (f.idTo !== null && f.idTo !== undefined) inner.push(`id < ${p(f.idTo)}`);
  const statuses = f.statuses || [];
  const liveOnly = statuses.length > 0 && statuses.every((s) => LIVE.includes(s));
  if (liveOnly) {
    // Excludes pqrun.job_done's side of the view by its CHECK constraint;
    // RUNNING and BLOCKED have indexes of their own.
    inner.push(`status IN (${statuses.map(p).join(', ')})`);
  } else if (statuses.length && statuses.every((s) => FINISHED.includes(s))) {
    inner.push(`status IN ('DONE', 'FAILED', 'CANCELLED')`); // excludes job_live's side alike
  }
  const dir = after !== null ? 'ASC' : 'DESC';
  const windowSql = `SELECT * FROM pqrun.jobs ${inner.length ? `WHERE ${inner.join(' AND ')}` : ''}
                      ORDER BY id ${dir} LIMIT ${p(window)}`;
  const windowParams = params.slice();

  if (statuses.length && !liveOnly) outer.push(`status IN (${statuses.map(p).join(', ')})`);
  if (f.queue) outer.push(`queue = ${p(f.queue)}`);
  if (f.jobType) outer.push(`job_type = ${p(f.jobType)}`);
  if (f.from) outer.push(`${f.timeField === 'finished' ? 'finished_at' : 'created_at'} >= ${p(f.from)}`);
  if (f.to) outer.push(`${f.timeField === 'finished' ? 'finished_at' : 'created_at'} < ${p(f.to)}`);
  if (f.error) outer.push(`strpos(lower(last_error), lower(${p(f.error)})) > 0`);
  if (f.payload !== undefined && f.payload !== null) outer.push(`payload @> ${p(JSON.stringify(f.payload))}::jsonb`);

  const { rows } = await db.query(
    `SELECT ${LIST_COLUMNS} FROM (${windowSql}) w
      ${outer.length ? `WHERE ${outer.join(' AND ')}` : ''}
      ORDER BY id ${dir} LIMIT ${size + 1}`, params);
  const more = rows.length > size;
  const jobs = rows.slice(0, size);
  let windowEnd = null;
  if (!more) {
    // The page did not fill: did the window reach the last job, or where did it end?
    const span = await db.query(
      `SELECT count(*) AS n, ${dir === 'DESC' ? 'min' : 'max'}(id) AS edge
         FROM (${windowSql.replace('SELECT *', 'SELECT id')}) w`, windowParams);
    if (Number(span.rows[0].n) >= window) windowEnd = span.rows[0].edge;
  }
  if (dir === 'ASC') jobs.reverse();
  return { jobs, more, windowEnd };
}

async function job(db, id, { heartbeat = false } = {}) {
  const { rows } = await db.query(
    `SELECT id, queue, job_type, payload, status, priority, attempts, max_attempts, run_after, timeout_seconds,
            locked_at, locked_by, dedupe_key, fifo_key, depends_on, last_error, finished_at, duration_ms, result,
            created_at, updated_at, progress, snoozes, concurrency_key, rate_weight${heartbeat ? ', heartbeat_at' : ''}
       FROM pqrun.jobs WHERE id = $1`, [id]);
  return rows[0] || null;
}

async function attempts(db, id) {
  const { rows } = await db.query(
    `SELECT attempt, worker_id, started_at, finished_at, outcome, error
       FROM pqrun.job_attempts WHERE job_id = $1 ORDER BY attempt`, [id]);
  return rows;
}

async function jobsById(db, ids) {
  if (!ids || !ids.length) return [];
  const { rows } = await db.query(
    `SELECT id, queue, job_type, status, finished_at FROM pqrun.jobs WHERE id = ANY ($1::bigint[]) ORDER BY id`,
    [ids.slice(0, 200)]);
  return rows;
}

// The jobs still waiting for this one: by pqrun.job_dependents where the
// extension has it (its pending dependency edges, by their index); else
// among the BLOCKED jobs, by their index, those listing it in depends_on.
// A job that depends on a finished one no longer waits for it.
async function waitingDependents(db, id, { limit = 50, fn = false } = {}) {
  if (fn) {
    const { rows } = await db.query('SELECT id, queue, job_type, status FROM pqrun.job_dependents($1, $2)', [id, limit]);
    return rows;
  }
  const { rows } = await db.query(
    `SELECT id, queue, job_type, status FROM pqrun.jobs
      WHERE status = 'BLOCKED' AND depends_on @> ARRAY[$1::bigint] ORDER BY id LIMIT $2`, [id, limit]);
  return rows;
}

// The unfinished jobs of a FIFO group, in the order they run.
async function fifoGroup(db, key, limit = 20) {
  const { rows } = await db.query(
    `SELECT id, queue, job_type, status FROM pqrun.jobs
      WHERE fifo_key = $1 AND status IN ('BLOCKED', 'READY', 'RUNNING') ORDER BY id LIMIT $2`, [key, limit]);
  return rows;
}

async function running(db, { after = null, size = 50, heartbeat = false } = {}) {
  const { rows } = await db.query(
    `SELECT id, queue, job_type, attempts, max_attempts, locked_by, locked_at, timeout_seconds, progress,
            extract(epoch FROM now() - locked_at) AS running_s${heartbeat ? ', heartbeat_at' : ''}
       FROM pqrun.jobs WHERE status = 'RUNNING' AND ($1::bigint IS NULL OR id > $1)
      ORDER BY id LIMIT $2`, [after, size + 1]);
  return { jobs: rows.slice(0, size), more: rows.length > size };
}

async function schedules(db, { afterName = null, afterKey = '', size = 50 } = {}) {
  // Two statements, so that each can walk the primary key (name, key).
  const { rows } = await db.query(
    `SELECT name, key, job_type, queue, priority, cron, run_every::text AS run_every, active, next_run, last_run,
            last_job_id, payload, updated_at
       FROM pqrun.periodic ${afterName === null ? '' : 'WHERE (name, key) > ($2, $3)'}
      ORDER BY name, key LIMIT $1`, afterName === null ? [size + 1] : [size + 1, afterName, afterKey]);
  return { schedules: rows.slice(0, size), more: rows.length > size };
}

async function health(db, { sharedCounters = false } = {}) {
  const [h, settings, info, shared] = await Promise.all([
    db.query(`SELECT horizon_pid, horizon_user, horizon_state, horizon_xact_age, horizon_xact_start, horizon_query_start,
                     job_live_dead_tuples, job_live_live_tuples, job_done_dead_tuples, job_done_live_tuples
                FROM pqrun.health`),
    db.query(`SELECT name, current_setting(name) AS setting, short_desc FROM pg_settings WHERE name LIKE 'pqrun.%' ORDER BY name`),
    db.query(`SELECT (SELECT extversion FROM pg_extension WHERE extname = 'pqrun') AS version,
                     current_setting('server_version') AS server_version, current_user AS role,
                     current_database() AS database, now() AS now`),
    sharedCounters
      ? db.query(`SELECT metric, label, value FROM pqrun._shared_counters() ORDER BY metric, label`)
      : Promise.resolve({ rows: [] }),
  ]);
  return { health: h.rows[0], settings: settings.rows, info: info.rows[0], shared: shared.rows };
}

async function metrics(db) {
  const { rows } = await db.query('SELECT pqrun.metrics() AS text');
  return rows[0].text;
}

module.exports = {
  LIVE, FINISHED, STATUSES, overview, controls, counters, idAtTime, listJobs, job, attempts, jobsById,
  waitingDependents, fifoGroup, running, schedules, health, metrics,
};

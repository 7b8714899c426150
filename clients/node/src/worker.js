// The pqrun worker on the pg package.
//
//   import { Worker, TerminalError } from 'pqrun';
//   const worker = new Worker({ handlers: { send_email: async (job, ctx) => ({ sent: true }) }, concurrency: 3 });
//   worker.start().stopOnSignals();
//
// A worker has `concurrency` slots, each running one job at a time on a
// pg.Client of its own, and one poller, with a pg.Client of its own too,
// that claims jobs for the slots that are free: while at least one slot is
// free it long-polls pqrun.pickup(worker_id, job types, queues,
// batch_size => <free slots>, wait) and hands each job it gets to a free
// slot. A burst of jobs is claimed in batches of up to the free slots, and
// however many slots a worker has, at most one of its connections waits in
// a pickup. A slot runs the handler (with waiting heartbeats on a second
// pg.Client of the slot while it runs), then mark_done, mark_error or
// snooze. mark_done is pqrun.mark_done_and_pickup (one job, no wait): the
// same statement claims the slot's next job, so a busy slot commits once per
// job and is free again, for the poller to fill, only when it gets none (the
// claim is the slot's once that transaction committed). All calls pass the
// job's lease_token, so a job finishes from the slot's connection whichever
// connection claimed it, and a job that was reaped, rescued or cancelled
// meanwhile cannot be finished twice: pqrun answers SQLSTATE 55000 instead,
// and a waiting heartbeat answers it the moment an operator cancels the
// job, so that the handler hears of it through ctx.signal at once.

import os from 'node:os';
import pg from 'pg';
import { cancelRequest } from './cancel-request.js';
import { CANCELLED_DETAIL, Snooze, TerminalError, interval, mapError } from './errors.js';
import { stderrLog } from './log.js';
import { enqueue, namedArgs } from './producer.js';

const MAX_ERROR_CHARS = 10000; // what pqrun keeps of last_error
const LEASE_LOST = new Set(['55000', 'P0002']); // not RUNNING / lease mismatch, unknown job
const QUERY_CANCELED = '57014';
const PROGRESS_EVERY_MS = 1000; // at most one progress write per job this often
const GRACE_OVER = Symbol('grace over');

const PICKUP = 'SELECT * FROM pqrun.pickup($1, $2, $3, $4, $5::interval)';
const HEARTBEAT = 'SELECT pqrun.heartbeat($1, $2, $3::jsonb, $4::interval)';
const RELEASE = 'SELECT pqrun.release($1, $2)';
const SNOOZE = 'SELECT pqrun.snooze($1, $2::interval, $3)';
const MARK_DONE = 'SELECT pqrun.mark_done($1, $2::jsonb, $3)';
const MARK_DONE_AND_PICKUP =
  'SELECT * FROM pqrun.mark_done_and_pickup($1, ARRAY[$2::bigint], ARRAY[$3::uuid], ARRAY[$4::jsonb], $5, $6, 1)';
const MARK_ERROR = 'SELECT pqrun.mark_error($1, $2, $3, $4, $5::interval) AS status';

// An error's retryAfter as an interval (a number is seconds), or null for
// pqrun's backoff.
function retryAfter(err) {
  const after = err?.retryAfter;
  if (typeof after === 'number' && Number.isFinite(after)) return `${after} s`;
  return typeof after === 'string' ? after : null;
}

function errorText(err) {
  const text = err instanceof Error ? err.stack || String(err) : String(err);
  return text.length > MAX_ERROR_CHARS ? text.slice(0, MAX_ERROR_CHARS) : text;
}

// A payload its job type's validate function refuses: validate returned
// false or threw. The job fails at once (a terminal error).
async function validated(validate, job) {
  if (!validate) return null;
  let ok;
  try {
    ok = await validate(job.payload, job);
  } catch (err) {
    return new TerminalError(`invalid payload for ${job.job_type}: ${err?.message ?? err}`, { cause: err });
  }
  return ok === false ? new TerminalError(`invalid payload for ${job.job_type}`) : null;
}

export class Worker {
  #handlers;
  #slots;
  #poller;
  #free;
  #pollerWake;
  #loops;
  #stopped;
  #graceEnded;
  #wakeOnStop;
  #wakeOnGraceEnd;
  #endGrace;
  #stopping;
  #connection;
  #settle; // resolves `stopped`
  #stoppedOnce;

  // options:
  //   handlers     { job_type: async (job, ctx) => result }, or
  //                { job_type: { handler, validate } }; or use register()
  //   concurrency  slots: jobs run at once, each slot with its own connection (1)
  //   queues       array of queue names, null for any (null)
  //   wait         long-poll wait of one pickup of the poller ('5 s')
  //   heartbeatMs  how long one heartbeat waits in the server before it
  //                renews the lease; default a quarter of the job's
  //                timeout_seconds, or 60 s for jobs without one
  //   graceMs      on stop(), how long in-flight jobs may finish before
  //                they are released (10 s)
  //   workerId     the worker_id every claim of this worker is made under, the
  //                poller's and the slots' alike (node-<host>-<pid>)
  //   connection   pg.Client config; {} reads PGHOST, PGPORT, PGUSER, PGDATABASE...
  //   hold         'session' (default): every connection of the worker runs
  //                SET pqrun.claim_hold = session, so the jobs of a worker that
  //                dies are given back within a maintenance round; 'lease':
  //                they wait for their stale window (behind a pooler in
  //                transaction mode, whose server connections are not ours)
  //   log          (level, message, fields) => void (stderrLog); verbose: log
  //                heartbeats and the poller's batches too
  constructor(options = {}) {
    this.#handlers = new Map(); // job_type -> { handler, validate }
    for (const [type, entry] of Object.entries(options.handlers || {})) {
      if (typeof entry === 'function') this.register(type, entry);
      else this.register(type, entry?.handler, { validate: entry?.validate });
    }
    this.concurrency = options.concurrency ?? 1;
    if (!Number.isInteger(this.concurrency) || this.concurrency < 1) {
      throw new TypeError('concurrency must be an integer of at least 1');
    }
    this.queues = options.queues?.length ? [...options.queues] : null;
    this.wait = interval(options.wait ?? '5 s');
    this.heartbeatMs = options.heartbeatMs ?? null;
    this.graceMs = options.graceMs ?? 10000;
    this.workerId = options.workerId ?? `node-${os.hostname()}-${process.pid}`;
    this.#connection = options.connection ?? {};
    this.hold = options.hold ?? 'session';
    if (!['session', 'lease'].includes(this.hold)) throw new TypeError("hold must be 'session' or 'lease'");
    this.log = options.log ?? stderrLog;
    this.verbose = options.verbose ?? false;
    this.#stopping = false;
    this.#slots = [];
    this.#poller = null;
    this.#free = []; // resolvers of the free slots' waits for a job, one each
    this.#pollerWake = null; // resolver of the poller's wait for a free slot
    this.#loops = null;
    this.#stopped = null;
    this.#stoppedOnce = new Promise((resolve) => (this.#settle = resolve));
    this.#graceEnded = false;
    this.#wakeOnStop = new Set(); // resolvers of sleeps cut short by stop()
    this.#wakeOnGraceEnd = new Set(); // resolvers of in-flight jobs' grace races
    this.#endGrace = () => {
      this.#graceEnded = true;
      for (const wake of this.#wakeOnGraceEnd) wake(GRACE_OVER);
    };
  }

  // register(jobType, handler, { validate }): validate(payload, job), if
  // given, runs before the handler; when it returns false or throws, the
  // job fails at once (a terminal error) and the handler is not called.
  register(jobType, handler, { validate } = {}) {
    if (this.#loops) throw new Error('register handlers before start()');
    if (typeof handler !== 'function') throw new TypeError(`handler for ${jobType} is not a function`);
    if (validate !== undefined && typeof validate !== 'function') {
      throw new TypeError(`validate for ${jobType} is not a function`);
    }
    this.#handlers.set(jobType, { handler, validate });
    return this;
  }

  start() {
    if (this.#loops) throw new Error('worker already started');
    if (this.#handlers.size === 0) throw new Error('no handlers registered');
    this.#slots = Array.from({ length: this.concurrency }, (_, i) => ({
      n: i + 1,
      client: null,
      job: null,
      beatClient: null, // the heartbeats' own connection
      beats: Promise.resolve(), // the heartbeat loops of the slot's jobs, one after the other
      beating: false, // a heartbeat statement is running
    }));
    this.#poller = { client: null, picking: false };
    const slots = Promise.all(this.#slots.map((slot) => this.#slot(slot)));
    this.#loops = Promise.all([slots, this.#poll()]).then(async () => {
      // The poller's session holds the jobs it claimed: it closes only now
      // that they are finished or given back.
      await this.#poller.client?.end().catch(() => {});
      this.#poller.client = null;
    });
    this.log('info', 'worker started', {
      worker: this.workerId, concurrency: this.concurrency, types: [...this.#handlers.keys()].join(','),
    });
    return this;
  }

  // stop: claim nothing more (the poller's waiting pickup is cancelled, and
  // the jobs it claimed for no slot yet are given back with pqrun.release),
  // give in-flight jobs graceMs to finish, then abort the ctx.signal of the
  // rest and give them back with pqrun.release too: READY at once for
  // another worker, the attempt not used up. Resolves when every connection
  // is closed. A second call with { graceMs: 0 } ends the grace period at
  // once.
  stop({ graceMs = this.graceMs } = {}) {
    if (graceMs === 0) this.#endGrace();
    if (this.#stopped) return this.#stopped;
    this.#stopping = true;
    for (const wake of this.#wakeOnStop) wake();
    for (const give of this.#free.splice(0)) give(null); // free slots: no job is coming
    this.#wakePoller();
    const running = this.#slots.filter((s) => s.job).length;
    this.log('info', 'worker stopping', { in_flight: running, grace_ms: graceMs });
    const grace = setTimeout(this.#endGrace, graceMs);
    const cancels = [];
    const cancel = () => {
      if (this.#poller?.picking) cancels.push(cancelRequest(this.#poller.client));
    };
    cancel();
    const recancel = setInterval(cancel, 1000); // a cancel that raced the pickup's start
    this.#stopped = (this.#loops ?? Promise.resolve()).then(async () => {
      clearTimeout(grace);
      clearInterval(recancel);
      await Promise.all(cancels); // let the server or pooler close them first
      this.log('info', 'worker stopped', { worker: this.workerId });
      this.#settle();
    });
    return this.#stopped;
  }

  // Resolves once the worker has stopped (stop() has finished).
  get stopped() {
    return this.#stoppedOnce;
  }

  // stopOnSignals(signals): the first of these signals stops the worker
  // gracefully, a second one ends the grace period at once. The listeners
  // are removed once the worker has stopped; what the process does then
  // (exit, or whatever else keeps it alive) is the caller's.
  stopOnSignals(signals = ['SIGTERM', 'SIGINT']) {
    let received = 0;
    const onSignal = (signal) => {
      received += 1;
      this.log('info', 'signal', { signal });
      this.stop(received > 1 ? { graceMs: 0 } : undefined);
    };
    for (const signal of signals) process.on(signal, onSignal);
    this.#stoppedOnce.then(() => {
      for (const signal of signals) process.off(signal, onSignal);
    });
    return this;
  }

  // Sleep ms, or less when stop() is called meanwhile.
  #sleepUnlessStopping(ms) {
    if (this.#stopping) return Promise.resolve();
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.#wakeOnStop.delete(done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.#wakeOnStop.add(done);
    });
  }

  // The handler's outcome, or GRACE_OVER if the shutdown grace period ends
  // first (the handler then keeps running detached; its outcome is ignored).
  async #outcomeWithinGrace(handled) {
    if (this.#graceEnded) return GRACE_OVER;
    let wake;
    const graceOver = new Promise((resolve) => this.#wakeOnGraceEnd.add((wake = resolve)));
    try {
      return await Promise.race([handled, graceOver]);
    } finally {
      this.#wakeOnGraceEnd.delete(wake);
    }
  }

  // Sleep ms, or less when the job settles or reports progress meanwhile.
  #pause(run, ms) {
    if (run.settled) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(() => run.wake(), Math.max(ms, 0));
      run.wake = () => {
        clearTimeout(timer);
        run.wake = null;
        resolve();
      };
    });
  }

  async #connect({ poller = false } = {}) {
    // Named pqrun-worker in pg_stat_activity, unless PGAPPNAME or the connection config name it.
    const client = new pg.Client({ application_name: process.env.PGAPPNAME || 'pqrun-worker', ...this.#connection });
    client.on('error', (err) => this.log('warn', 'connection error', { error: err.message }));
    await client.connect();
    if (this.hold === 'session') {
      await client.query('SET pqrun.claim_hold = session');
      // The poller's session holds jobs while it waits in a pickup, and a
      // waiting backend notices that its client died only when it looks:
      // once a second, not at the end of the wait.
      if (poller) await client.query("SET client_connection_check_interval = '1s'").catch(() => {});
    }
    return client;
  }

  #wakePoller() {
    const wake = this.#pollerWake;
    this.#pollerWake = null;
    wake?.();
  }

  // The poller: one long-poll pickup at a time, for as many jobs as slots
  // are free, and only while one is. It asks for the slots free when its
  // pickup starts; a slot freed during the wait counts from the next pickup.
  async #poll() {
    const poller = this.#poller;
    while (!this.#stopping) {
      if (this.#free.length === 0) {
        await new Promise((resolve) => (this.#pollerWake = resolve));
        continue;
      }
      const want = this.#free.length;
      let jobs;
      try {
        poller.client ??= await this.#connect({ poller: true });
        jobs = await this.#pickup(poller, want);
      } catch (err) {
        this.log('error', 'pickup failed, reconnecting', { worker: this.workerId, error: err.message });
        const broken = poller.client;
        poller.client = null;
        if (broken) await broken.end().catch(() => {});
        await this.#sleepUnlessStopping(1000);
        continue;
      }
      if (jobs.length && this.verbose) this.log('debug', 'claimed', { jobs: jobs.length, free: want });
      const unassigned = [];
      for (const job of jobs) {
        const give = this.#free.shift(); // none once the worker is stopping
        if (give) give(job);
        else unassigned.push(job);
      }
      if (unassigned.length) await this.#releaseUnassigned(unassigned);
    }
  }

  async #pickup(poller, batchSize) {
    poller.picking = true;
    try {
      const { rows } = await poller.client.query(PICKUP,
        [this.workerId, [...this.#handlers.keys()], this.queues, batchSize, this.wait]);
      return rows;
    } catch (err) {
      if (err.code === QUERY_CANCELED && this.#stopping) return []; // our own cancel at shutdown
      throw err;
    } finally {
      poller.picking = false;
    }
  }

  // The jobs a stopping worker claimed for no slot: back to READY at once.
  // On a connection of their own, as a cancel meant for the poller's
  // pickup may still be on its way to the poller's connection.
  async #releaseUnassigned(jobs) {
    let client = null;
    try {
      client = await this.#connect();
      for (const job of jobs) {
        const status = await this.#giveBack(client, job, RELEASE, [job.id, job.lease_token]);
        this.log('info', 'released unstarted', { job: job.id, type: job.job_type, status });
      }
    } catch (err) {
      this.log('warn', 'unstarted jobs not released, the server gives them back later',
        { jobs: jobs.map((j) => j.id).join(','), error: err.message });
    } finally {
      await client?.end().catch(() => {});
    }
  }

  // A free slot's wait for a job from the poller; null when the worker stops.
  #nextJob() {
    if (this.#stopping) return Promise.resolve(null);
    return new Promise((resolve) => {
      this.#free.push(resolve);
      this.#wakePoller();
    });
  }

  async #slot(slot) {
    let next = null; // claimed with the last job's mark_done: ours already
    while (next || !this.#stopping) {
      let job = next;
      next = null;
      try {
        if (!job) {
          // A slot counts as free only with a connection to run its job on.
          slot.client ??= await this.#connect();
          job = await this.#nextJob();
          if (!job) break;
        }
        next = await this.#run(slot, job);
      } catch (err) {
        this.log('error', 'slot error, reconnecting', { slot: slot.n, job: job?.id ?? null, error: err.message });
        const broken = slot.client;
        slot.client = null;
        if (broken) await broken.end().catch(() => {});
        if (job) await this.#reportLost(job, err);
        await this.#sleepUnlessStopping(1000);
      }
    }
    if (slot.client) await slot.client.end().catch(() => {});
    slot.client = null;
    if (slot.beatClient) {
      if (slot.beating) await cancelRequest(slot.beatClient); // still waiting for a job that ended
      await slot.beats;
      await slot.beatClient.end().catch(() => {});
      slot.beatClient = null;
    }
  }

  // A job whose outcome its slot could not report (the connection broke, or
  // the commit failed): a failed attempt, recorded from a new connection.
  // The job may be held by the poller's session, which lives on, and would
  // otherwise wait for its stale window. If the report did commit, the lease
  // token makes pqrun refuse this one (55000).
  async #reportLost(job, err) {
    let client = null;
    try {
      client = await this.#connect();
      const status = await this.#markError(client, job, `the worker could not report the outcome: ${err.message}`,
        false, null);
      this.log('warn', 'outcome lost', { job: job.id, type: job.job_type, status });
    } catch (markErr) {
      this.log('error', 'outcome lost and not recorded, the server rescues the job later',
        { job: job.id, error: markErr.message });
    } finally {
      await client?.end().catch(() => {});
    }
  }

  async #run(slot, job) {
    const started = Date.now();
    const abort = new AbortController();
    const steps = []; // run in the transaction that marks the job done
    const fields = { job: job.id, type: job.job_type, attempt: job.attempts, slot: slot.n };
    // progress: the last report (JSON); reports and sent count the reports
    // made and stored; waiting: a heartbeat of a full period is running.
    const run = {
      job, fields, started, settled: false, lost: false, beat: null, wake: null,
      progress: null, reports: 0, sent: 0, nextReport: 0, waiting: false, cutAt: 0,
    };
    const stop = (code, message) => abort.abort(Object.assign(new Error(message), { code }));
    run.lose = (err) => {
      const cancelled = err.detail === CANCELLED_DETAIL;
      run.lost = true;
      this.log('warn', cancelled ? 'cancelled while running' : 'lease lost', { ...fields, error: err.message });
      if (cancelled) stop('CANCELLED', `job ${job.id} was cancelled`);
      else stop('LEASE_LOST', `lease lost: ${err.message}`);
    };
    slot.job = run;
    this.log('info', 'picked', fields);

    // ctx.heartbeat: one at a time, on the slot's connection (idle while
    // the handler runs), in the order they were asked for.
    const heartbeat = (progress) => {
      if (progress !== undefined) this.#recordProgress(run, progress);
      const beat = (run.beat ?? Promise.resolve()).then(() => this.#beatNow(slot, run));
      run.beat = beat.catch(() => {});
      return beat;
    };
    const ctx = {
      job,
      workerId: this.workerId,
      // aborted when the job is cancelled, its lease is lost or it is
      // released at shutdown; signal.reason.code says which
      signal: abort.signal,
      heartbeat,
      progress: (value) => this.#reportProgress(slot, run, value),
      snooze: (after) => {
        throw new Snooze(after);
      },
      // enqueue a follow-up job in the same transaction as this job's
      // mark_done (its options are checked now)
      enqueue: (jobType, payload, options) => {
        if (typeof jobType !== 'string') throw new TypeError('jobType must be a string');
        namedArgs(options);
        steps.push((c) => enqueue(c, jobType, payload, options));
      },
      // run fn(client) in that transaction too (your own writes)
      inTransaction: (fn) => {
        if (typeof fn !== 'function') throw new TypeError('inTransaction takes a function');
        steps.push(fn);
      },
    };

    const every = this.heartbeatMs ?? (job.timeout_seconds ? job.timeout_seconds * 250 : 60000);
    if (every > 0) slot.beats = slot.beats.then(() => this.#heartbeats(slot, run, every));

    let outcome;
    try {
      const { handler, validate } = this.#handlers.get(job.job_type);
      const handled = validated(validate, job)
        .then((invalid) => {
          if (invalid) throw invalid;
          return handler(job, ctx);
        })
        .then((result) => ({ ok: true, result }), (err) => ({ ok: false, err }));
      outcome = await this.#outcomeWithinGrace(handled);
    } finally {
      run.settled = true;
      run.wake?.();
      await run.beat?.catch(() => {});
    }
    try {
      const ms = Date.now() - started;
      if (outcome === GRACE_OVER) {
        stop('RELEASED', 'released: the worker shut down before the job finished');
        await this.#flushProgress(slot.client, run);
        const status = await this.#giveBack(slot.client, job, RELEASE, [job.id, job.lease_token]);
        this.log('warn', 'released', { ...fields, status, ms });
      } else if (abort.signal.aborted) {
        this.log('warn', 'lease lost, outcome dropped', { ...fields, reason: abort.signal.reason.code, ms });
      } else if (outcome.ok) {
        const done = await this.#markDone(slot, run, outcome.result, steps);
        if (done) this.log('info', 'done', { ...fields, ms });
        return done?.next ?? null;
      } else if (outcome.err instanceof Snooze) {
        await this.#flushProgress(slot.client, run);
        await this.#snooze(slot, run, outcome.err.delay, ms);
      } else {
        const { err } = outcome;
        const terminal = err instanceof TerminalError || err?.terminal === true;
        await this.#flushProgress(slot.client, run);
        const after = retryAfter(err);
        const status = await this.#markError(slot.client, job, errorText(err), terminal, after).catch((markErr) => {
          // an interval pqrun refuses: pqrun's backoff instead
          if (after === null || !markErr.code?.startsWith('22')) throw markErr;
          return this.#markError(slot.client, job, errorText(err), terminal, null);
        });
        this.log('warn', 'failed', { ...fields, status, terminal, error: err?.message ?? String(err), ms });
      }
    } finally {
      slot.job = null;
    }
    return null;
  }

  // The heartbeats of one job, on the slot's heartbeat connection: a waiting
  // heartbeat sleeps inside its statement, so on the slot's connection it
  // would hold up mark_done. Each one waits up to `every` in the server and
  // then renews the lease; a cancel of the job ends it at once (55000). The
  // first starts a second into the job (half of `every`, if less), so
  // shorter jobs cost none. A progress report goes out on a heartbeat of
  // its own without a wait, at most one a second: within a second of the
  // last report a heartbeat waits only until the next one is due (a handler
  // that reports once usually reports again); a full wait is cut short by
  // the next report (#reportProgress).
  async #heartbeats(slot, run, every) {
    const { job } = run;
    const first = run.started + Math.min(1000, every / 2);
    while (!run.settled && !run.lost) {
      if (run.reports === run.sent && Date.now() < first) {
        await this.#pause(run, first - Date.now());
        continue;
      }
      let report = false;
      let seq = 0;
      try {
        slot.beatClient ??= await this.#connect();
        const now = Date.now();
        const due = now >= run.nextReport;
        report = due && run.reports !== run.sent;
        seq = run.reports;
        const beat = slot.beatClient.query(HEARTBEAT, [job.id, job.lease_token, report ? run.progress : null,
          `${report ? 0 : due ? every : run.nextReport - now} ms`]);
        run.waiting = due && !report;
        slot.beating = true;
        await beat;
        if (report) {
          run.sent = Math.max(run.sent, seq);
          run.nextReport = Date.now() + PROGRESS_EVERY_MS;
        }
        if (this.verbose) this.log('debug', 'heartbeat', run.fields);
      } catch (err) {
        if (run.settled) break; // the job ended during the wait, so the heartbeat failed
        if (LEASE_LOST.has(err.code)) {
          run.lose(err);
        } else if (report && err.code === '22023') { // over pqrun's 8 kB
          run.sent = seq;
          this.log('error', 'progress report dropped', { ...run.fields, error: err.message });
        } else if (err.code !== QUERY_CANCELED) { // not a progress report cutting the wait short
          this.log('error', 'heartbeat failed', { ...run.fields, error: err.message });
          if (!err.code || err.code.startsWith('08')) {
            const broken = slot.beatClient;
            slot.beatClient = null;
            await broken?.end().catch(() => {});
          }
          await this.#pause(run, 1000);
        }
      } finally {
        run.waiting = false;
        slot.beating = false;
      }
    }
  }

  // A heartbeat now on the slot's connection, with the progress not sent
  // yet. None once the job has ended: the connection is the job's
  // finishing transaction's, or the next job's, by then.
  async #beatNow(slot, run) {
    const { job } = run;
    if (run.settled) throw new Error(`job ${job.id} has ended`);
    const seq = run.reports;
    const report = seq !== run.sent ? run.progress : null;
    try {
      await slot.client.query(HEARTBEAT, [job.id, job.lease_token, report, '0']);
    } catch (err) {
      if (LEASE_LOST.has(err.code)) run.lose(err);
      else if (report !== null && err.code === '22023') run.sent = seq; // over pqrun's 8 kB: dropped
      throw mapError(err);
    }
    if (report !== null) {
      run.sent = Math.max(run.sent, seq);
      run.nextReport = Date.now() + PROGRESS_EVERY_MS;
    }
    if (this.verbose) this.log('debug', 'heartbeat', run.fields);
  }

  #recordProgress(run, value) {
    run.progress = JSON.stringify(value) ?? null;
    run.reports += 1;
  }

  // ctx.progress: the report goes out with the next heartbeat. A heartbeat
  // waiting its full period is cancelled to send it now; at most once a
  // second, as a cancel that reached the server before the statement is
  // ignored and the next report tries again.
  #reportProgress(slot, run, value) {
    this.#recordProgress(run, value);
    if (run.waiting && Date.now() - run.cutAt >= PROGRESS_EVERY_MS) {
      run.cutAt = Date.now();
      cancelRequest(slot.beatClient);
    }
    run.wake?.();
  }

  // The handler's last progress report, if no heartbeat carried it yet.
  async #flushProgress(client, run) {
    if (run.sent === run.reports) return;
    run.sent = run.reports;
    try {
      await client.query(HEARTBEAT, [run.job.id, run.job.lease_token, run.progress, '0']);
    } catch (err) {
      this.log('warn', 'last progress report not stored', { job: run.job.id, error: err.message });
    }
  }

  // BEGIN, the handler's follow-up enqueues and writes, mark_done, COMMIT:
  // all of them or none. Unless the worker is stopping, mark_done also
  // claims the next job, which is answered as `next` once COMMIT returned.
  // Returns false when the lease was lost meanwhile.
  async #markDone(slot, run, result, steps) {
    const { job } = run;
    const c = slot.client;
    let json;
    try {
      json = result === undefined ? null : JSON.stringify(result);
    } catch (err) { // a BigInt, a cycle: the handler's result is no JSON
      const status = await this.#markError(c, job, errorText(err), false, null);
      this.log('warn', 'failed: the result is not JSON', { job: job.id, status, error: err.message });
      return false;
    }
    await this.#flushProgress(c, run);
    await c.query('BEGIN');
    try {
      for (const step of steps) await step(c);
      let next = null;
      if (this.#stopping) {
        await c.query(MARK_DONE, [job.id, json, job.lease_token]);
      } else {
        const { rows } = await c.query(MARK_DONE_AND_PICKUP,
          [this.workerId, job.id, job.lease_token, json, [...this.#handlers.keys()], this.queues]);
        next = rows[0] ?? null;
      }
      await c.query('COMMIT');
      return { next };
    } catch (err) {
      const usable = await c.query('ROLLBACK').then(() => true, () => false);
      if (LEASE_LOST.has(err.code)) {
        this.log('warn', 'lease lost, result and follow-ups rolled back', { job: job.id, error: err.message });
        return false;
      }
      if (!usable || err.code?.startsWith('08')) throw err; // the connection: let the slot reconnect
      // a follow-up or the handler's own write failed: the job failed
      const status = await this.#markError(slot.client, job, errorText(err), false, null);
      this.log('warn', 'failed in the finishing transaction', { job: job.id, status, error: err.message });
      return false;
    }
  }

  // pqrun.release or pqrun.snooze: the job goes back, its attempt not used up.
  async #giveBack(client, job, sql, params) {
    try {
      await client.query(sql, params);
      return 'READY';
    } catch (err) {
      if (!LEASE_LOST.has(err.code)) throw err;
      this.log('warn', 'lease lost, job not given back', { job: job.id, error: err.message });
      return 'lease lost';
    }
  }

  // A delay pqrun refuses (not an interval, negative, over 100 years) fails
  // the attempt instead.
  async #snooze(slot, run, delay, ms) {
    const { job, fields } = run;
    try {
      const status = await this.#giveBack(slot.client, job, SNOOZE, [job.id, delay, job.lease_token]);
      this.log('info', 'snoozed', { ...fields, delay, status, ms });
    } catch (err) {
      if (!err.code?.startsWith('22')) throw err;
      const status = await this.#markError(slot.client, job, errorText(err), false, null);
      this.log('warn', 'failed', { ...fields, status, error: err.message, ms });
    }
  }

  async #markError(client, job, text, terminal, retryAfter) {
    try {
      const { rows } = await client.query(MARK_ERROR, [job.id, text, terminal, job.lease_token, retryAfter]);
      return rows[0].status;
    } catch (err) {
      if (!LEASE_LOST.has(err.code)) throw err;
      this.log('warn', 'lease lost, error not recorded', { job: job.id, error: err.message });
      return 'lease lost';
    }
  }
}


'use strict';
// Samples of pqrun's shared-memory counters (pqrun._queue_counters(), what
// queue_stats' recent columns come from), every few seconds, for the
// throughput chart: one read of shared memory, no table, per sample. The
// last hour is kept in memory, per queue.
const queries = require('./queries');

const SERIES = ['done', 'errors', 'enqueued', 'picked'];

class Sampler {
  constructor(db, { intervalSeconds = 10, keepSeconds = 3600 } = {}) {
    this.db = db;
    this.intervalMs = intervalSeconds * 1000;
    this.keep = Math.ceil(keepSeconds / intervalSeconds) + 1;
    this.samples = []; // { t, queues: Map(queue -> {done, errors, enqueued, picked} per minute) }
    this.lastError = null;
    this.timer = null;
    this.jobTypeNames = [];
  }

  start() {
    const tick = () => this.sample().finally(() => {
      if (this.timer !== null) this.timer = setTimeout(tick, this.intervalMs);
    });
    this.timer = setTimeout(tick, 0);
    return this;
  }

  stop() {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
  }

  async sample() {
    try {
      const rows = await queries.counters(this.db);
      const queues = new Map();
      for (const r of rows) {
        const q = queues.get(r.queue) || { done: 0, errors: 0, enqueued: 0, picked: 0 };
        // Per minute, over the last five minutes.
        q.done += Number(r.done_last_5min || 0) / 5;
        q.errors += Number(r.errors_last_5min || 0) / 5;
        q.enqueued += Number(r.enqueued_last_5min || 0) / 5;
        q.picked += Number(r.picked_last_5min || 0) / 5;
        queues.set(r.queue, q);
      }
      this.jobTypeNames = [...new Set(rows.map((r) => r.job_type))].sort();
      this.samples.push({ t: Date.now(), queues });
      if (this.samples.length > this.keep) this.samples.shift();
      this.lastError = null;
    } catch (err) {
      this.lastError = err.message;
    }
  }

  // series(queue): [{ t, done, errors, enqueued, picked }] for one queue or all.
  series(queue = null) {
    return this.samples.map(({ t, queues }) => {
      const point = { t, done: 0, errors: 0, enqueued: 0, picked: 0 };
      for (const [name, v] of queues) {
        if (queue !== null && name !== queue) continue;
        for (const k of SERIES) point[k] += v[k];
      }
      return point;
    });
  }

  jobTypes() { return this.jobTypeNames; }

  queues() {
    const last = this.samples[this.samples.length - 1];
    return last ? [...last.queues.keys()].sort() : [];
  }
}

module.exports = { Sampler, SERIES };

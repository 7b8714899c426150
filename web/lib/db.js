'use strict';
// Connections: a pool for the pages (read-only transactions), a pool for
// single actions, a connection of its own for each bulk action (a CALL that
// commits batch by batch, outside any transaction block, for minutes).
// At start, what the role is and may do decides the mode.
const { Pool, Client } = require('pg');

const APP = 'pqrun-dashboard';

const ACTIONS = {
  retry: 'pqrun.retry(bigint,text)',
  cancel: 'pqrun.cancel(bigint,text,text)',
  pause: 'pqrun.pause_queue(text)',
  resume: 'pqrun.resume_queue(text)',
  concurrency: 'pqrun.set_concurrency_limit(text,integer,text)',
  rate: 'pqrun.set_rate_limit(text,double precision,integer,text)',
  bulkRetry: 'pqrun.retry_jobs(text,text,pqrun.job_status[],timestamptz,timestamptz,text,jsonb,integer,bigint)',
  bulkCancel: 'pqrun.cancel_jobs(text,text,pqrun.job_status[],timestamptz,timestamptz,text,jsonb,text,integer,bigint)',
};
const VIEWS = ['pqrun.jobs', 'pqrun.job_attempts', 'pqrun.queue_stats', 'pqrun.queue_controls', 'pqrun.health', 'pqrun.periodic'];

class StartupError extends Error {}

function connectionOptions(config, settings) {
  const options = Object.entries(settings).map(([k, v]) => `-c ${k}=${v}`).join(' ');
  return { connectionString: config.connectionString, application_name: APP, options };
}

// can(client, signature): whether the role may execute a function or
// procedure that exists (false for one this server's pqrun lacks).
async function may(client, signature) {
  const { rows } = await client.query(
    `SELECT CASE WHEN to_regprocedure($1) IS NULL THEN false
                 ELSE has_function_privilege(to_regprocedure($1), 'EXECUTE') END AS ok`, [signature]);
  return rows[0].ok;
}

async function readable(client, view) {
  const { rows } = await client.query(
    `SELECT to_regclass($1) IS NOT NULL AND has_table_privilege(to_regclass($1), 'SELECT') AS ok`, [view]);
  return rows[0].ok;
}

// inspect(config): who we are connected as and what we may do, or a
// StartupError saying why the dashboard must not run so.
async function inspect(config) {
  const client = new Client(connectionOptions(config, {}));
  try {
    await client.connect();
  } catch (err) {
    throw new StartupError(`cannot connect to PostgreSQL: ${err.message}`);
  }
  try {
    const who = (await client.query(
      `SELECT current_user AS role, current_database() AS database,
              (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) AS superuser,
              (SELECT rolsuper FROM pg_roles WHERE rolname = session_user) AS session_superuser,
              (SELECT extversion FROM pg_extension WHERE extname = 'pqrun') AS version,
              current_setting('server_version') AS server_version`)).rows[0];
    if ((who.superuser || who.session_superuser) && !config.allowSuperuser) {
      throw new StartupError(`connected as ${who.role}, a superuser: connect as a role made by ` +
        `pqrun.grant_monitor (read-only) or pqrun.grant_operator (actions), or pass --allow-superuser`);
    }
    if (!who.version) throw new StartupError(`database ${who.database} has no pqrun extension`);
    const usage = (await client.query(`SELECT has_schema_privilege('pqrun', 'USAGE') AS ok`)).rows[0].ok;
    if (!usage) {
      throw new StartupError(`role ${who.role} may not use schema pqrun: run SELECT pqrun.grant_monitor('${who.role}') ` +
        `(or grant_operator) as the extension's owner`);
    }
    const unreadable = [];
    const needed = config.metricsOnly ? [] : VIEWS;
    for (const view of needed) if (!(await readable(client, view))) unreadable.push(view);
    if (!(await may(client, 'pqrun.metrics()'))) unreadable.push('pqrun.metrics()');
    if (unreadable.length) {
      throw new StartupError(`role ${who.role} cannot read ${unreadable.join(', ')}: ` +
        `run SELECT pqrun.grant_monitor('${who.role}') (or grant_operator) as the extension's owner`);
    }
    const actions = {};
    for (const [name, signature] of Object.entries(ACTIONS)) {
      actions[name] = !config.readOnly && !config.metricsOnly && await may(client, signature);
    }
    // Parts of pqrun used where this server's has them (pqrun 0.21.0's
    // views and function; README.md, "Cost at scale").
    const features = {
      heartbeat: (await client.query(
        `SELECT EXISTS (SELECT FROM pg_attribute WHERE attrelid = 'pqrun.jobs'::regclass
                         AND attname = 'heartbeat_at' AND NOT attisdropped) AS ok`)).rows[0].ok,
      queueOverview: await readable(client, 'pqrun.queue_overview'),
      flowControls: await readable(client, 'pqrun.flow_controls'),
      dependents: await may(client, 'pqrun.job_dependents(bigint,integer)'),
      sharedCounters: await may(client, 'pqrun._shared_counters()'),
    };
    return { ...who, actions, readOnly: !Object.values(actions).some(Boolean), features };
  } finally {
    await client.end().catch(() => {});
  }
}

class Db {
  constructor(config) {
    this.config = config;
    const timeout = config.statementTimeoutMs;
    this.read = new Pool({ ...connectionOptions(config, { default_transaction_read_only: 'on', statement_timeout: timeout }), max: 4 });
    this.write = new Pool({ ...connectionOptions(config, { statement_timeout: timeout, lock_timeout: 5000 }), max: 2 });
    for (const pool of [this.read, this.write]) pool.on('error', () => {}); // an idle connection lost: the next query reconnects
  }

  query(sql, params) { return this.read.query(sql, params); }

  act(sql, params) { return this.write.query(sql, params); }

  // bulk(sql, params): a CALL on a connection of its own, outside any
  // transaction block (the procedure commits each batch).
  async bulk(sql, params) {
    const client = new Client(connectionOptions(this.config, { statement_timeout: this.config.bulkTimeoutMs }));
    await client.connect();
    try {
      return await client.query(sql, params);
    } finally {
      await client.end().catch(() => {});
    }
  }

  async close() {
    await Promise.all([this.read.end(), this.write.end()]);
  }
}

module.exports = { Db, inspect, StartupError, ACTIONS };

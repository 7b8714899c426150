// What the tests share: a database of their own on the server that PGHOST,
// PGPORT and PGUSER name, with pqrun in it; polling; a worker whose log the
// test can read.

import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { Worker } from 'pqrun';

// A database for one test file: created with the extension, retries after
// 1 s (pqrun.backoff), dropped by drop(). Named for the file and the run
// (PQRUN_TEST_RUN, else this process), so a runner can drop what a killed
// run left.
export async function testDatabase(name) {
  const database = `pqrun_node_${name}_${process.env.PQRUN_TEST_RUN ?? process.pid}`;
  await admin(`CREATE DATABASE ${database}`);
  await admin(`ALTER DATABASE ${database} SET pqrun.backoff = '1s'`);
  const clients = [];
  const connect = async () => {
    const client = new pg.Client({ database, application_name: 'pqrun-node-test' });
    await client.connect();
    clients.push(client);
    return client;
  };
  const db = await connect();
  await db.query('CREATE EXTENSION pqrun');
  return {
    database,
    db,
    connect,
    // the rows of one query on the test's own connection
    rows: async (text, values) => (await db.query(text, values)).rows,
    one: async (text, values) => (await db.query(text, values)).rows[0],
    async drop() {
      await Promise.all(clients.map((c) => c.end().catch(() => {})));
      await admin(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
    },
  };
}

async function admin(text) {
  const client = new pg.Client({ database: 'postgres' });
  await client.connect();
  try {
    await client.query(text);
  } finally {
    await client.end();
  }
}

// Polls fn until it returns a truthy value (answered), or throws after ms.
export async function waitFor(what, fn, ms = 5000) {
  const deadline = Date.now() + ms;
  let last;
  while (Date.now() < deadline) {
    last = await fn();
    if (last) return last;
    await sleep(25);
  }
  throw new Error(`waited ${ms} ms for ${what}; last answer ${JSON.stringify(last)}`);
}

// A worker on the test's database whose log lines are kept in
// worker.lines ({ level, message, ...fields }), and printed with
// PQRUN_TEST_LOG=1; startWorker starts it too.
export function startWorker(t, options) {
  return makeWorker(t, options).start();
}

export function makeWorker(t, options) {
  const lines = [];
  const worker = new Worker({
    connection: { database: t.database, application_name: options.applicationName ?? 'pqrun-node-test-worker' },
    verbose: true,
    log: (level, message, fields) => {
      lines.push({ level, message, ...fields });
      if (process.env.PQRUN_TEST_LOG) console.error(level, message, JSON.stringify(fields));
    },
    ...options,
  });
  worker.lines = lines;
  return worker;
}

export { sleep };

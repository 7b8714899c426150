#!/usr/bin/env node
// node cli.js --handlers ./handlers.js [--concurrency 3] [--queues a,b] [--wait '5 s']
//             [--heartbeat-ms N] [--grace-ms N] [--worker-id ID] [--hold session|lease] [--verbose]
//
// Runs a pqrun Worker (the pqrun client) with the handlers a module exports.
// Connects with the usual PG* environment variables (PGHOST, PGPORT, PGUSER,
// PGDATABASE, PGPASSWORD). SIGTERM or SIGINT: graceful shutdown, exit 0; a
// second signal ends the grace period at once.

import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { Worker } from 'pqrun';

const usage = `usage: node cli.js --handlers FILE [--concurrency N] [--queues q1,q2] [--wait INTERVAL]
                   [--heartbeat-ms N] [--grace-ms N] [--worker-id ID] [--hold session|lease] [--verbose]`;

let values;
try {
  ({ values } = parseArgs({
    options: {
      handlers: { type: 'string' },
      concurrency: { type: 'string', default: '1' },
      queues: { type: 'string' },
      wait: { type: 'string', default: '5 s' },
      'heartbeat-ms': { type: 'string' },
      'grace-ms': { type: 'string', default: '10000' },
      'worker-id': { type: 'string' },
      hold: { type: 'string', default: 'session' },
      verbose: { type: 'boolean', default: false },
      help: { type: 'boolean', default: false },
    },
  }));
} catch (err) {
  console.error(`${err.message}\n${usage}`);
  process.exit(2);
}
if (values.help || !values.handlers) {
  console.error(usage);
  process.exit(values.help ? 0 : 2);
}

const int = (name) => {
  const n = Number(values[name]);
  if (!Number.isInteger(n) || n < 0) {
    console.error(`--${name} must be a non-negative integer\n${usage}`);
    process.exit(2);
  }
  return n;
};

// The handlers module: an ES module's exports (or its default export), or
// a CommonJS module's module.exports; { job_type: handler } either way,
// a handler being a function or { handler, validate }.
const loaded = await import(pathToFileURL(path.resolve(values.handlers)).href);
const handlers = loaded.default && typeof loaded.default === 'object' ? loaded.default : loaded;

const worker = new Worker({
  handlers,
  concurrency: Math.max(1, int('concurrency')),
  queues: values.queues ? values.queues.split(',') : null,
  wait: values.wait,
  heartbeatMs: values['heartbeat-ms'] === undefined ? null : int('heartbeat-ms'),
  graceMs: int('grace-ms'),
  workerId: values['worker-id'],
  hold: values.hold,
  verbose: values.verbose,
});

worker.start().stopOnSignals(['SIGTERM', 'SIGINT']);
await worker.stopped;
process.exit(0);

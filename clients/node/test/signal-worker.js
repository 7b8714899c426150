// A worker process for the SIGTERM test (lifecycle.test.js): queue
// 'signal', a grace period of 500 ms, stopped by SIGTERM. It does not call
// process.exit: once the worker has stopped, nothing may keep it alive.

import { setTimeout as sleep } from 'node:timers/promises';
import { Worker } from 'pqrun';

const worker = new Worker({
  queues: ['signal'],
  graceMs: 500,
  wait: '30 s',
  handlers: {
    sleep: async (job, ctx) => {
      ctx.signal.addEventListener('abort', () => console.log(`handler aborted: ${ctx.signal.reason.code}`));
      await sleep(job.payload.ms, undefined, { signal: ctx.signal });
    },
  },
});
worker.start().stopOnSignals();

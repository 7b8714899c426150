// pqrun: the producer calls and the worker of pqrun, the job queue inside
// PostgreSQL.
export { enqueue, enqueueBatch, cancel, retry } from './producer.js';
export { Worker } from './worker.js';
export {
  PqrunError, InvalidArgumentError, JobNotFoundError, JobNotRunningError, PayloadTooLargeError,
  DuplicateJobError, NotSupportedError, mapError, TerminalError, RetryLater, Snooze,
} from './errors.js';
export { stderrLog } from './log.js';

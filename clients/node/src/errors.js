// Errors: pqrun's documented SQLSTATEs as classes, and the outcomes a
// handler throws (TerminalError, RetryLater, Snooze).

// The base of the errors pqrun raises: `code` is the SQLSTATE, `detail`
// the server's detail, `cause` the driver's error.
export class PqrunError extends Error {
  constructor(message, { code, detail, cause } = {}) {
    super(message, { cause });
    this.name = new.target.name;
    this.code = code;
    this.detail = detail;
  }
}

// 22023: an argument pqrun refuses (empty job_type, max_attempts < 1, an
// unknown id in depends_on, a bad interval, an enqueue_batch element...).
export class InvalidArgumentError extends PqrunError {}

// P0002: no job has this id (in this queue, when one is given).
export class JobNotFoundError extends PqrunError {}

// 55000: the job is not RUNNING, or not under this lease any more (it was
// cancelled, reaped, rescued, given back or picked up again). `cancelled`
// is true when pqrun said the job is CANCELLED. Also 55000 without the
// preloaded library for the flow-control functions.
export class JobNotRunningError extends PqrunError {
  get cancelled() {
    return this.detail === CANCELLED_DETAIL;
  }
}

// 54000: the payload is over pqrun.max_payload_bytes.
export class PayloadTooLargeError extends PqrunError {}

// 23505 from retry: another unfinished job holds the job's dedupe_key.
export class DuplicateJobError extends PqrunError {}

// 0A000: not possible here, e.g. a waiting pickup or heartbeat under
// REPEATABLE READ or SERIALIZABLE.
export class NotSupportedError extends PqrunError {}

export const CANCELLED_DETAIL = 'Its status is CANCELLED.'; // pqrun's detail of 55000 for a cancelled job

const CLASSES = new Map([
  ['22023', InvalidArgumentError],
  ['P0002', JobNotFoundError],
  ['55000', JobNotRunningError],
  ['54000', PayloadTooLargeError],
  ['0A000', NotSupportedError],
]);

// mapError(err): the pqrun error class for a driver error with one of
// pqrun's SQLSTATEs, else err itself (PostgreSQL's own errors, 40001,
// 40P01, 57014..., and connection errors pass through unchanged).
// `extra` maps more SQLSTATEs for one call (retry's 23505).
export function mapError(err, extra) {
  if (!err || typeof err.code !== 'string' || err instanceof PqrunError) return err;
  const Class = extra?.[err.code] ?? CLASSES.get(err.code);
  return Class ? new Class(err.message, { code: err.code, detail: err.detail, cause: err }) : err;
}

// A handler throws TerminalError for an error that retrying cannot fix: the
// job goes to FAILED at once. Any other error is retried after pqrun's
// backoff for the attempt, or after `retryAfter` (seconds or an interval
// such as '30 s') when the error has one, as RetryLater does.
export class TerminalError extends Error {
  constructor(message, options) {
    super(message, options);
    this.name = 'TerminalError';
    this.terminal = true;
  }
}

export class RetryLater extends Error {
  constructor(message, { after, ...options } = {}) {
    super(message, options);
    this.name = 'RetryLater';
    this.retryAfter = after === undefined ? null : interval(after);
  }
}

// A handler throws Snooze (or calls ctx.snooze) to put its job back for a
// while (pqrun.snooze): READY again after `after` (seconds or an interval
// such as '5 min'), the attempt not used up, jobs.snoozes one more. For
// "not yet" (a resource is busy, an upstream is not ready), not for errors.
export class Snooze extends Error {
  constructor(after, options) {
    const delay = interval(after);
    super(`snoozed for ${delay}`, options);
    this.name = 'Snooze';
    this.delay = delay;
  }
}

// A duration for PostgreSQL: a number of seconds, or an interval's text.
export function interval(value) {
  if (typeof value === 'number') {
    if (!Number.isFinite(value)) throw new TypeError(`not a duration: ${value}`);
    return `${value} s`;
  }
  if (typeof value === 'string') return value;
  throw new TypeError(`a duration is a number of seconds or an interval such as '5 min', not ${typeof value}`);
}

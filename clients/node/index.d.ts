// Type declarations of the pqrun client (src/index.js).

/** A job's id: pqrun's bigint, as a string (as pg returns bigint). */
export type JobId = string;
/** What the calls accept as a job id. */
export type JobIdLike = string | number | bigint;
/** A duration: a number of seconds, or a PostgreSQL interval such as '5 min'. */
export type Duration = number | string;
export type JobStatus = 'BLOCKED' | 'READY' | 'RUNNING' | 'DONE' | 'FAILED' | 'CANCELLED';

/**
 * What the producer calls run their statement on: a pg.Client, a
 * pg.PoolClient (inside your transaction) or a pg.Pool.
 */
export interface Queryable {
  query(text: string, values?: any[]): Promise<{ rows: any[] }>;
}

/** enqueue's named arguments; undefined or null leaves pqrun's default. */
export interface EnqueueOptions {
  /** Higher runs first (0). */
  priority?: number | null;
  /** Not runnable before this time. */
  runAfter?: Date | string | null;
  /** Not runnable before this long after the enqueue (instead of runAfter). */
  delay?: Duration | null;
  /** Attempts before the job is FAILED (5). */
  maxAttempts?: number | null;
  /** The job's stale window: reaped when silent this long (pqrun.stale_timeout). */
  timeoutSeconds?: number | null;
  /** While an unfinished job holds this key, its id is returned and nothing is created. */
  dedupeKey?: string | null;
  /** 'default' unless given. */
  queue?: string | null;
  /** BLOCKED until every one of these jobs is DONE; CANCELLED if one fails or is cancelled. */
  dependsOn?: readonly JobIdLike[] | null;
  /** Jobs sharing a key run one at a time, in id order. */
  fifoKey?: string | null;
  /** The tenant or other key that per-key limits and fair rotation apply to. */
  concurrencyKey?: string | null;
  /** Tokens a claim takes from the rate limits that apply (1). */
  rateWeight?: number | null;
}

export interface BatchJob<P = unknown> extends EnqueueOptions {
  jobType: string;
  payload?: P;
}

/** The new job's id, or the id of the unfinished job that holds options.dedupeKey. */
export function enqueue<P = unknown>(db: Queryable, jobType: string, payload?: P, options?: EnqueueOptions): Promise<JobId>;
/** One statement for all jobs; their ids, in order. */
export function enqueueBatch(db: Queryable, jobs: readonly BatchJob[]): Promise<JobId[]>;
/** True if the job is CANCELLED now (with its dependents), false if it had finished. */
export function cancel(db: Queryable, id: JobIdLike, options?: { reason?: string | null; queue?: string | null }): Promise<boolean>;
/** True if the FAILED or CANCELLED job is READY again, false otherwise. */
export function retry(db: Queryable, id: JobIdLike, options?: { queue?: string | null }): Promise<boolean>;

/** A row of pqrun.jobs, as pickup returns it. */
export interface Job<P = any> {
  id: JobId;
  queue: string;
  job_type: string;
  payload: P;
  status: JobStatus;
  priority: number;
  attempts: number;
  max_attempts: number;
  run_after: Date;
  timeout_seconds: number | null;
  locked_at: Date | null;
  locked_by: string | null;
  lease_token: string | null;
  dedupe_key: string | null;
  fifo_key: string | null;
  depends_on: JobId[] | null;
  last_error: string | null;
  finished_at: Date | null;
  duration_ms: number | null;
  result: unknown;
  created_at: Date;
  updated_at: Date;
  /** What the last attempt reported with ctx.progress or ctx.heartbeat(progress). */
  progress: any;
  snoozes: number;
  concurrency_key: string | null;
  rate_weight: number | null;
}

/** Why ctx.signal aborted: signal.reason.code. */
export type AbortCode = 'CANCELLED' | 'LEASE_LOST' | 'RELEASED';
export interface AbortReason extends Error {
  code: AbortCode;
}

export interface JobContext<P = any> {
  readonly job: Job<P>;
  readonly workerId: string;
  /** Aborted when the job is cancelled, its lease is lost, or a shutdown's grace period ends. */
  readonly signal: AbortSignal;
  /** A heartbeat now, on the slot's connection, storing progress if given. */
  heartbeat(progress?: unknown): Promise<void>;
  /** Reports progress (JSON, at most 8 kB); stored within about a second. */
  progress(value: unknown): void;
  /** Throws Snooze: the job is READY again after `after`, its attempt not used up. */
  snooze(after: Duration): never;
  /** Enqueues a follow-up job in the transaction that marks this job done. */
  enqueue<Q = unknown>(jobType: string, payload?: Q, options?: EnqueueOptions): void;
  /** Runs fn in the transaction that marks this job done. */
  inTransaction(fn: (client: Queryable) => unknown): void;
}

/** Returns the job's result (any JSON value), or throws. */
export type Handler<P = any, R = unknown> = (job: Job<P>, ctx: JobContext<P>) => R | Promise<R>;
/** Runs before the handler: returning false or throwing fails the job at once. */
export type Validate = (payload: unknown, job: Job<unknown>) => unknown;

export interface HandlerEntry<P = any, R = unknown> {
  handler: Handler<P, R>;
  validate?: Validate;
}

export type LogLevel = 'debug' | 'info' | 'warn' | 'error';
export type Logger = (level: LogLevel, message: string, fields: Record<string, unknown>) => void;
/** The default log: one line per event on stderr. */
export const stderrLog: Logger;

/** pg.Client's connection settings; {} reads PGHOST, PGPORT, PGUSER, PGDATABASE... */
export interface ConnectionConfig {
  connectionString?: string;
  host?: string;
  port?: number;
  user?: string;
  password?: string | (() => string | Promise<string>);
  database?: string;
  application_name?: string;
  ssl?: unknown;
  [setting: string]: unknown;
}

export interface WorkerOptions {
  handlers?: Record<string, Handler<any, unknown> | HandlerEntry<any, unknown>>;
  /** Jobs run at once, each on a connection of its own (1). */
  concurrency?: number;
  /** The queues to take jobs from; any when null or empty. */
  queues?: readonly string[] | null;
  /** How long one pickup of the poller waits for a job ('5 s'). */
  wait?: Duration;
  /** How long one heartbeat waits in the server (a quarter of the job's timeout, else 60 s). */
  heartbeatMs?: number | null;
  /** How long in-flight jobs may finish after stop() before they are released (10000). */
  graceMs?: number;
  /** The worker_id of every claim (node-<host>-<pid>). */
  workerId?: string;
  connection?: ConnectionConfig;
  /** 'session': a dead worker's jobs come back within a round; 'lease': after their stale window. */
  hold?: 'session' | 'lease';
  log?: Logger;
  /** Also log heartbeats and the poller's batches. */
  verbose?: boolean;
}

export class Worker {
  constructor(options?: WorkerOptions);
  readonly workerId: string;
  readonly concurrency: number;
  readonly queues: string[] | null;
  readonly wait: string;
  readonly heartbeatMs: number | null;
  readonly graceMs: number;
  readonly hold: 'session' | 'lease';
  readonly verbose: boolean;
  readonly log: Logger;
  register<P = any, R = unknown>(jobType: string, handler: Handler<P, R>, options?: { validate?: Validate }): this;
  start(): this;
  /** Claims nothing more, lets in-flight jobs finish for graceMs, releases the rest. */
  stop(options?: { graceMs?: number }): Promise<void>;
  /** Resolves once the worker has stopped. */
  readonly stopped: Promise<void>;
  /** The first signal stops the worker, a second ends the grace period at once. */
  stopOnSignals(signals?: readonly string[]): this;
}

export class PqrunError extends Error {
  constructor(message: string, options?: { code?: string; detail?: string; cause?: unknown });
  /** The SQLSTATE. */
  readonly code: string;
  readonly detail: string | undefined;
}
/** 22023 */
export class InvalidArgumentError extends PqrunError {}
/** P0002 */
export class JobNotFoundError extends PqrunError {}
/** 55000 */
export class JobNotRunningError extends PqrunError {
  /** pqrun said the job is CANCELLED. */
  readonly cancelled: boolean;
}
/** 54000 */
export class PayloadTooLargeError extends PqrunError {}
/** 23505 from retry */
export class DuplicateJobError extends PqrunError {}
/** 0A000 */
export class NotSupportedError extends PqrunError {}
/** The pqrun error class for a driver error with one of pqrun's SQLSTATEs, else err itself. */
export function mapError(err: unknown, extra?: Record<string, new (message: string, options?: { code?: string; detail?: string; cause?: unknown }) => PqrunError>): unknown;

/** Thrown by a handler: the job is FAILED at once. */
export class TerminalError extends Error {
  constructor(message?: string, options?: { cause?: unknown });
  readonly terminal: true;
}
/** Thrown by a handler: retried after `after` instead of pqrun's backoff. */
export class RetryLater extends Error {
  constructor(message?: string, options?: { after?: Duration; cause?: unknown });
  readonly retryAfter: string | null;
}
/** Thrown by a handler: READY again after `after`, its attempt not used up. */
export class Snooze extends Error {
  constructor(after: Duration, options?: { cause?: unknown });
  readonly delay: string;
}

/* What pqrun's roles may use, in one list (0.21.0): each relation
 * (SELECT), function and procedure (EXECUTE) of the API with the roles that
 * grant_producer, grant_worker, grant_monitor and grant_operator give it
 * to, and whether distribute() has Citus run a call of it on the node of
 * its queue. A function added to the API is granted and delegated by its
 * row here. */
CREATE FUNCTION pqrun._api(OUT object text, OUT kind "char", OUT roles text[], OUT delegated boolean)
RETURNS SETOF record LANGUAGE sql IMMUTABLE SET search_path = pg_catalog, pg_temp
AS $$ VALUES
	('pqrun.jobs', 'r'::"char", '{producer,worker,monitor,operator}'::text[], false),
	/* await_jobs cannot be SECURITY DEFINER (it commits): it reads job_live
	 * and the flow controls as its caller. */
	('pqrun.job_live', 'r', '{worker}', false),
	('pqrun.queue_control', 'r', '{worker}', false),
	('pqrun.job_attempts', 'r', '{monitor,operator}', false),
	('pqrun.queue_stats', 'r', '{monitor,operator}', false),
	('pqrun.queue_controls', 'r', '{monitor,operator}', false),
	('pqrun.queue_overview', 'r', '{monitor,operator}', false),
	('pqrun.flow_controls', 'r', '{monitor,operator}', false),
	('pqrun.workers', 'r', '{monitor,operator}', false),
	('pqrun.health', 'r', '{monitor,operator}', false),
	('pqrun.periodic', 'r', '{monitor,operator}', false),
	('pqrun.enqueue(text, jsonb, int, timestamptz, int, int, text, text, bigint[], text, text, int)', 'f',
	 '{producer,worker}', true),
	('pqrun.enqueue_batch(jsonb)', 'f', '{producer,worker}', false),
	('pqrun.cancel(bigint, text, text)', 'f', '{producer,operator}', true),
	('pqrun.pickup(text, text[], text[], int, interval)', 'f', '{worker}', false),
	('pqrun.pickup_from(text, text, int, interval, text[])', 'f', '{worker}', true),
	('pqrun.mark_done(bigint, jsonb, uuid, text)', 'f', '{worker}', true),
	('pqrun.mark_done_batch(bigint[], uuid[], text)', 'f', '{worker}', true),
	('pqrun.mark_done_and_pickup(text, bigint[], uuid[], jsonb[], text[], text[], int)', 'f', '{worker}', false),
	('pqrun.mark_error(bigint, text, boolean, uuid, interval, text)', 'f', '{worker}', true),
	('pqrun.heartbeat(bigint, uuid, jsonb, interval, text)', 'f', '{worker}', true),
	('pqrun.release(bigint, uuid, text)', 'f', '{worker}', true),
	('pqrun.snooze(bigint, interval, uuid, text)', 'f', '{worker}', true),
	('pqrun.queue_node(text)', 'f', '{worker}', false),
	('pqrun.await_jobs(text[], text[], interval, boolean)', 'p', '{worker}', false),
	('pqrun.metrics()', 'f', '{monitor,operator}', false),
	('pqrun.job_dependents(bigint, int)', 'f', '{monitor,operator}', false),
	/* Functions in a view run with the privileges of whoever reads it. */
	('pqrun._queue_counters()', 'f', '{monitor,operator}', false),
	('pqrun._flow_counters()', 'f', '{monitor,operator}', false),
	('pqrun._key_buckets()', 'f', '{monitor,operator}', false),
	('pqrun._shared_counters()', 'f', '{monitor,operator}', false),
	('pqrun._label(text)', 'f', '{monitor,operator}', false),
	('pqrun.retry(bigint, text)', 'f', '{operator}', true),
	('pqrun.pause_queue(text)', 'f', '{operator}', true),
	('pqrun.resume_queue(text)', 'f', '{operator}', true),
	('pqrun.set_concurrency_limit(text, int, text)', 'f', '{operator}', true),
	('pqrun.set_rate_limit(text, double precision, int, text)', 'f', '{operator}', true),
	('pqrun.set_key_limit(text, int, text)', 'f', '{operator}', true),
	('pqrun.set_key_rate_limit(text, double precision, int, text)', 'f', '{operator}', true),
	/* The bulk actions run as their caller (they commit): the helpers they call. */
	('pqrun.retry_jobs(text, text, pqrun.job_status[], timestamptz, timestamptz, text, jsonb, int, bigint)', 'p',
	 '{operator}', false),
	('pqrun.cancel_jobs(text, text, pqrun.job_status[], timestamptz, timestamptz, text, jsonb, text, int, bigint)', 'p',
	 '{operator}', false),
	('pqrun._jobs_matching(boolean, text, text, pqrun.job_status[], timestamptz, timestamptz, text, jsonb, bigint, int)',
	 'f', '{operator}', false),
	('pqrun._check_bulk(pqrun.job_status[], pqrun.job_status[], int)', 'f', '{operator}', false),
	('pqrun.schedule(text, text, text, interval, jsonb, int, text, text, boolean)', 'f', '{}', true)
$$;
REVOKE ALL ON FUNCTION pqrun._api() FROM PUBLIC;

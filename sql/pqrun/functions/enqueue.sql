CREATE FUNCTION pqrun.enqueue(
	job_type        text,
	payload         jsonb       DEFAULT '{}',
	priority        int         DEFAULT 0,
	run_after       timestamptz DEFAULT pg_catalog.now(),
	max_attempts    int         DEFAULT 5,
	timeout_seconds int         DEFAULT NULL,
	dedupe_key      text        DEFAULT NULL,
	queue           text        DEFAULT 'default',
	depends_on      bigint[]    DEFAULT NULL,
	fifo_key        text        DEFAULT NULL,
	concurrency_key text        DEFAULT NULL,
	rate_weight     int         DEFAULT NULL)
RETURNS bigint
AS 'MODULE_PATHNAME', 'pqrun_enqueue' LANGUAGE c VOLATILE;

/* Bulk retry and cancel by filter, batch_size jobs per transaction: a
 * million-row action never holds one long transaction or its locks. They
 * commit, so they are procedures (not SECURITY DEFINER, which would forbid
 * COMMIT): they act as their caller, through pqrun.retry and pqrun.cancel,
 * and name every operator and function by its schema. */
CREATE PROCEDURE pqrun.retry_jobs(
	queue            text               DEFAULT NULL,
	job_type         text               DEFAULT NULL,
	statuses         pqrun.job_status[] DEFAULT '{FAILED,CANCELLED}',
	finished_after   timestamptz        DEFAULT NULL,
	finished_before  timestamptz        DEFAULT NULL,
	error_contains   text               DEFAULT NULL,
	payload_contains jsonb              DEFAULT NULL,
	batch_size       int                DEFAULT 1000,
	INOUT retried    bigint             DEFAULT NULL)
LANGUAGE plpgsql AS $$
DECLARE
	after_id bigint := -9223372036854775808;
	job record;
	last_id bigint;
BEGIN
	PERFORM pqrun._check_bulk(statuses, '{FAILED,CANCELLED}', batch_size);
	retried := 0;
	LOOP
		last_id := NULL;
		FOR job IN SELECT m.job_id AS id, m.job_queue AS queue FROM pqrun._jobs_matching(true, queue, job_type, statuses,
		               finished_after, finished_before, error_contains, payload_contains, after_id, batch_size) m LOOP
			BEGIN
				IF pqrun.retry(job.id, job.queue) THEN
					retried := retried OPERATOR(pg_catalog.+) 1;
				END IF;
			EXCEPTION WHEN unique_violation THEN
				/* Another unfinished job holds its dedupe_key: it stays. */
				NULL;
			END;
			last_id := job.id;
		END LOOP;
		EXIT WHEN last_id IS NULL;
		after_id := last_id;
		COMMIT;
	END LOOP;
END $$;

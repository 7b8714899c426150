CREATE PROCEDURE pqrun.cancel_jobs(
	queue            text               DEFAULT NULL,
	job_type         text               DEFAULT NULL,
	statuses         pqrun.job_status[] DEFAULT '{READY,BLOCKED}',
	created_after    timestamptz        DEFAULT NULL,
	created_before   timestamptz        DEFAULT NULL,
	error_contains   text               DEFAULT NULL,
	payload_contains jsonb              DEFAULT NULL,
	reason           text               DEFAULT NULL,
	batch_size       int                DEFAULT 1000,
	INOUT cancelled  bigint             DEFAULT NULL)
LANGUAGE plpgsql AS $$
DECLARE
	after_id bigint := -9223372036854775808;
	job record;
	last_id bigint;
BEGIN
	PERFORM pqrun._check_bulk(statuses, '{READY,BLOCKED,RUNNING}', batch_size);
	cancelled := 0;
	LOOP
		last_id := NULL;
		FOR job IN SELECT m.job_id AS id, m.job_queue AS queue FROM pqrun._jobs_matching(false, queue, job_type, statuses,
		               created_after, created_before, error_contains, payload_contains, after_id, batch_size) m LOOP
			IF pqrun.cancel(job.id, reason, job.queue) THEN
				cancelled := cancelled OPERATOR(pg_catalog.+) 1;
			END IF;
			last_id := job.id;
		END LOOP;
		EXIT WHEN last_id IS NULL;
		after_id := last_id;
		COMMIT;
	END LOOP;
END $$;

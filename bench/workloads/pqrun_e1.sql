-- E1 (pqrun): enqueue_batch of 1,000 jobs per call (one transaction).
SELECT count(*) FROM pqrun.enqueue_batch(
	(SELECT jsonb_agg(jsonb_build_object('job_type', 'e1', 'payload', jsonb_build_object('n', i)))
	   FROM generate_series(1, 1000) AS i));

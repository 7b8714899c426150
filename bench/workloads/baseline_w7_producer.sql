-- W7/W7h producer (baseline): one INSERT of the 128 jobs of the JSON array
-- :batch (the text pqrun's producers send), on W7's fixed schedule
-- (pqrun_w7_producer.sql).
\set due :t0 + (:k * :nprod + :client_id) * :period
SELECT pg_sleep(:due - extract(epoch FROM clock_timestamp())::float8);
WITH ins AS (
	INSERT INTO base.jobs (job_type, payload)
	SELECT e->>'job_type', e->'payload' FROM jsonb_array_elements(:batch::jsonb) AS e
	RETURNING id)
INSERT INTO bench.w7_batches (ids) SELECT array_agg(id) FROM ins;
\set k :k + 1

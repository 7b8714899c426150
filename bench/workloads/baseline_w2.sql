-- W2/W4/W5 (baseline): even clients enqueue one job per transaction, odd
-- clients consume (pickup, done, each its own transaction). With a single
-- client (-D nclients=1) that client does both. An idle consumer polls
-- again after 1 ms.
\if :nclients = 1 or :client_id % 2 = 0
INSERT INTO base.jobs (job_type, payload) VALUES ('w2', '{"n": 1}');
\endif
\if :nclients = 1 or :client_id % 2 = 1
WITH picked AS (
	SELECT id FROM base.jobs
	 WHERE status = 'READY' AND run_after <= now()
	 ORDER BY priority DESC, id
	 FOR UPDATE SKIP LOCKED LIMIT 1),
claimed AS (
	UPDATE base.jobs j
	   SET status = 'RUNNING', attempts = j.attempts + 1, locked_at = now(),
	       locked_by = 'w' || :client_id::text, lease_token = gen_random_uuid(), updated_at = now()
	  FROM picked WHERE j.id = picked.id
	RETURNING j.*)
SELECT coalesce((SELECT id FROM claimed), 0) AS id \gset
\if :id > 0
UPDATE base.jobs
   SET status = 'DONE', finished_at = now(), updated_at = now(),
       duration_ms = (extract(epoch FROM now() - locked_at) * 1000)::int
 WHERE id = :id;
\else
\sleep 1 ms
\endif
\endif

-- W1b (baseline): pick up 100 jobs and mark them all done in one transaction.
BEGIN;
WITH picked AS (
	SELECT id FROM base.jobs
	 WHERE status = 'READY' AND run_after <= now()
	 ORDER BY priority DESC, id
	 FOR UPDATE SKIP LOCKED LIMIT 100),
claimed AS (
	UPDATE base.jobs j
	   SET status = 'RUNNING', attempts = j.attempts + 1, locked_at = now(),
	       locked_by = 'w' || :client_id::text, lease_token = gen_random_uuid(), updated_at = now()
	  FROM picked WHERE j.id = picked.id
	RETURNING j.*)
SELECT coalesce(array_agg(id), '{}') AS ids FROM claimed \gset
UPDATE base.jobs
   SET status = 'DONE', finished_at = now(), updated_at = now(),
       duration_ms = (extract(epoch FROM now() - locked_at) * 1000)::int
 WHERE id = ANY (:ids::bigint[]);
COMMIT;

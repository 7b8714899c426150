-- W1/W3 (baseline): the seed design's pickup of one job (its own
-- transaction) then its done UPDATE (its own transaction).
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
\endif

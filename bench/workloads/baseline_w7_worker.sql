-- W7/W7h worker (baseline), one client of a fleet: the seed design's
-- SKIP LOCKED claim of up to :batch jobs (of job types :jt, a
-- comma-separated list, or any for "*"), each job then marked done in its own
-- transaction, then the next claim at once. A claim that finds nothing
-- sleeps :poll_ms ms on the client before it tries again, as a polling
-- worker without LISTEN does (its connection idle meanwhile). pgbench starts
-- each client at -D n=0 -D ids={}.
\if :n = 0
WITH picked AS (
	SELECT id FROM base.jobs
	 WHERE status = 'READY' AND run_after <= now() AND (:jt::text = '*' OR job_type = ANY (string_to_array(:jt, ',')))
	 ORDER BY priority DESC, id
	 FOR UPDATE SKIP LOCKED LIMIT :batch),
claimed AS (
	UPDATE base.jobs j
	   SET status = 'RUNNING', attempts = j.attempts + 1, locked_at = now(),
	       locked_by = 'w' || :client_id::text, lease_token = gen_random_uuid(), updated_at = now()
	  FROM picked WHERE j.id = picked.id
	RETURNING j.id)
SELECT coalesce(array_agg(id ORDER BY id)::text, '{}') AS ids, count(*) AS n FROM claimed \gset
\if :n = 0
\sleep :poll_ms ms
\endif
\else
WITH done AS (
	UPDATE base.jobs
	   SET status = 'DONE', finished_at = now(), updated_at = now(),
	       duration_ms = (extract(epoch FROM now() - locked_at) * 1000)::int
	 WHERE id = (:ids::bigint[])[1])
SELECT ((:ids::bigint[])[2:])::text AS ids \gset
\set n :n - 1
\endif

-- W1c (pqrun): one worker step = mark_done_and_pickup of the job the step
-- before claimed (none at a client's first step: pgbench starts it at
-- -D id=0), one statement in autocommit: one transaction per job.
SELECT coalesce((SELECT id FROM pqrun.mark_done_and_pickup('w' || :client_id::text,
       CASE WHEN :id > 0 THEN ARRAY[:id]::bigint[] END)), 0) AS id \gset

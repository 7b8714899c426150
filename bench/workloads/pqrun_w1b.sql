-- W1b (pqrun): pick up 100 jobs and mark them all done in one transaction
-- (one statement: the function scan claims the batch before mark_done_batch runs).
SELECT pqrun.mark_done_batch(coalesce(array_agg(id), '{}')) AS n
  FROM pqrun.pickup('w' || :client_id::text, batch_size => 100);

-- W1/W3 (pqrun): one worker step = pickup of one job (its own transaction)
-- then mark_done (its own transaction); pgbench runs each statement in
-- autocommit. coalesce keeps \gset happy when the queue is empty.
SELECT coalesce((SELECT id FROM pqrun.pickup('w' || :client_id::text)), 0) AS id \gset
\if :id > 0
SELECT pqrun.mark_done(:id);
\endif

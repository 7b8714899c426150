-- W3Q (pqrun): W1 by queue — pickup of one job of queue 'default' (its own
-- transaction), then mark_done (its own transaction), beside the deep
-- backlog of queue 'deep'.
SELECT coalesce((SELECT id FROM pqrun.pickup('w' || :client_id::text, queues => '{default}')), 0) AS id \gset
\if :id > 0
SELECT pqrun.mark_done(:id);
\endif

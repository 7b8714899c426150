-- W3Qt (pqrun): W1 by job type — pickup of one job of type 'job' (its own
-- transaction), then mark_done (its own transaction), beside the deep
-- backlog of job type 'deep'.
SELECT coalesce((SELECT id FROM pqrun.pickup('w' || :client_id::text, job_types => '{job}')), 0) AS id \gset
\if :id > 0
SELECT pqrun.mark_done(:id);
\endif

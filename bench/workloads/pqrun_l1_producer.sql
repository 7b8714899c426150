-- L1 producer (pqrun, run rate-limited with pgbench -R, in a session with
-- synchronous_commit off): enqueue one job whose payload carries the clock
-- at enqueue, and a row in bench.l1_commits whose xmin tells the commit
-- time of the same transaction (track_commit_timestamp is on in the bench
-- cluster). The latency is measured from that commit; the payload clock
-- gives the older upper bound that also counts the enqueue's own work.
BEGIN;
SELECT pqrun.enqueue('l1', jsonb_build_object('t', clock_timestamp())) AS id \gset
INSERT INTO bench.l1_commits (id) VALUES (:id);
COMMIT;

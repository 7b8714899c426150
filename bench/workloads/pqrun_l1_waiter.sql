-- L1 waiter (pqrun, one client): a long-polling pickup; the latency is the
-- clock when pickup hands back the job minus the commit time of the
-- enqueue (bench/run.sh), or minus the clock written into the payload at
-- enqueue (lat_us, the upper bound). The worker's own finish commits asynchronously so it
-- is back in the long poll at once.
SELECT coalesce(max(id), 0) AS id,
       coalesce(max((extract(epoch FROM clock_timestamp() - (payload->>'t')::timestamptz) * 1000000)::bigint), 0) AS lat_us,
       max(clock_timestamp()) AS returned_at
  FROM pqrun.pickup('l1-waiter', job_types => '{l1}', wait => '2s') \gset
\if :id > 0
BEGIN;
SET LOCAL synchronous_commit = off;
SELECT pqrun.mark_done(:id);
INSERT INTO bench.l1 (id, lat_us, returned_at) VALUES (:id, :lat_us, :returned_at);
COMMIT;
\endif

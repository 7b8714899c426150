-- examples/pg_cron.sql — scheduling pqrun jobs with pg_cron (Debian: postgresql-15-cron).
--
-- pqrun has schedules of its own (pqrun.schedule(name, job_type, cron => ...)),
-- fired by its background workers. pg_cron is the other way, for servers that
-- already run it, or to enqueue from arbitrary SQL (one job per row of a
-- query, jobs computed from your tables). The statements below are what
-- test/shell/pg_cron.sh runs.
--
-- postgresql.conf:
--
--   shared_preload_libraries = 'pqrun,pg_cron'   -- or 'pg_cron' alone: see part 3
--   cron.database_name = 'app'                   -- where cron.job lives (default 'postgres')
--   cron.use_background_workers = on             -- run jobs in background workers, no
--                                                -- connection or password needed
--                                                -- (or leave it off and set cron.host)
--
-- Then, in database `app`:

CREATE EXTENSION IF NOT EXISTS pqrun;
CREATE EXTENSION IF NOT EXISTS pg_cron;

-- pg_cron 1.4 (Debian 12) schedules by the minute; pg_cron 1.5 and later
-- also take '[1-59] seconds'.

-- 1. Enqueue a job on a schedule: one statement, one job per firing.
SELECT cron.schedule('pqrun-hourly-report', '0 * * * *',
                     $$SELECT pqrun.enqueue('report', jsonb_build_object('hour', date_trunc('hour', now())))$$);

-- 2. The plain SQL form, with a dedupe key. The original design's
--
--      INSERT INTO jobs (job_type, payload, dedupe_key) SELECT ... ON CONFLICT DO NOTHING;
--
--    becomes a query over your own tables calling pqrun.enqueue per row. While
--    a job with the same dedupe_key is BLOCKED, READY or RUNNING, enqueue
--    returns that job's id and creates nothing, so a schedule that fires
--    again (or twice at once, or a manual re-run) never doubles the work;
--    once that job is DONE, the next firing enqueues a new one.
SELECT cron.schedule('pqrun-nightly-cleanup', '30 3 * * *', $$
    SELECT count(pqrun.enqueue('cleanup',
                               jsonb_build_object('tenant', t.id, 'target_date', current_date - 30),
                               dedupe_key => format('cleanup:%s:%s', t.id, current_date - 30)))
      FROM tenants t          -- your table
     WHERE t.active
$$);

--    The single-job form of the same thing:
SELECT cron.schedule('pqrun-cleanup', '*/10 * * * *', $$
    SELECT pqrun.enqueue('cleanup', jsonb_build_object('target_date', current_date - 30),
                         dedupe_key => 'cleanup:' || (current_date - 30))
$$);

-- 3. Without shared_preload_libraries = 'pqrun' there are no pqrun background
--    workers: every SQL function works, but nothing reaps stale jobs, fires
--    pqrun.schedule() schedules, makes delayed jobs runnable for waiting
--    pickups or applies retention. One call of run_maintenance() does one
--    round of all that; run it every minute.
--    A RUNNING job whose worker's connection is gone (orphan) goes back to
--    READY at the next run; one whose worker is connected but silent, once its
--    stale window has passed: timeout_seconds, else pqrun.stale_timeout (set
--    in postgresql.conf or with ALTER SYSTEM; default 20 minutes).
SELECT cron.schedule('pqrun-maintenance', '* * * * *', 'SELECT pqrun.run_maintenance()');

-- When the jobs live in another database than cron.database_name:
--   SELECT cron.schedule_in_database('pqrun-maintenance-app2', '* * * * *',
--                                    'SELECT pqrun.run_maintenance()', 'app2');

-- What ran, and how it went:
SELECT j.jobname, d.status, d.return_message, d.start_time
  FROM cron.job_run_details d JOIN cron.job j USING (jobid)
 ORDER BY d.start_time DESC LIMIT 20;

-- And the jobs it made:
SELECT job_type, status, count(*) FROM pqrun.jobs GROUP BY 1, 2 ORDER BY 1, 2;

-- Removing the schedules again:
--   SELECT cron.unschedule('pqrun-hourly-report');
--   SELECT cron.unschedule('pqrun-nightly-cleanup');
--   SELECT cron.unschedule('pqrun-cleanup');
--   SELECT cron.unschedule('pqrun-maintenance');

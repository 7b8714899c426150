-- test/lib/queue_contents.sql — fingerprints of everything a queue must keep
-- across an update or a dump and restore: jobs (the 'tick' schedule's own
-- excluded, since the worker keeps adding them), attempts, schedules and
-- dependency edges, one line each.
-- Columns an update added (0.8.0: progress, snoozes; 0.10.0:
-- concurrency_key; 0.11.0: rate_weight) are left out while they hold their
-- defaults, so a job reads the same before the update and after.
SELECT md5(string_agg(CASE WHEN r->'progress' = 'null' AND r->'snoozes' = '0'
                                AND coalesce(r->'concurrency_key', 'null') = 'null'
                                AND coalesce(r->'rate_weight', 'null') = 'null'
                           THEN r - '{progress,snoozes,concurrency_key,rate_weight}'::text[]
                           ELSE r END::text, '|' ORDER BY (r->>'id')::bigint))
  FROM (SELECT to_jsonb(j) AS r FROM pqrun.jobs j WHERE job_type <> 'tick') AS jobs;
SELECT md5(string_agg(a::text, '|' ORDER BY job_id, attempt)) FROM pqrun.job_attempts a;
SELECT string_agg(format('%s/%s %s %s %s %s', name, key, job_type, run_every, cron, active), '|' ORDER BY name)
  FROM pqrun.periodic;
SELECT string_agg(format('%s>%s', job_id, dep_id), ',' ORDER BY job_id, dep_id) FROM pqrun.job_dep;

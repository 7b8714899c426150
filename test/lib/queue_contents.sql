-- test/lib/queue_contents.sql — fingerprints of everything a queue must keep
-- across an update or a dump and restore: jobs (the 'tick' schedule's own
-- excluded, since the worker keeps adding them), attempts, schedules and
-- dependency edges, one line each.
SELECT md5(string_agg(j::text, '|' ORDER BY id)) FROM pqrun.jobs j WHERE job_type <> 'tick';
SELECT md5(string_agg(a::text, '|' ORDER BY job_id, attempt)) FROM pqrun.job_attempts a;
SELECT string_agg(format('%s/%s %s %s %s %s', name, key, job_type, run_every, cron, active), '|' ORDER BY name)
  FROM pqrun.periodic;
SELECT string_agg(format('%s>%s', job_id, dep_id), ',' ORDER BY job_id, dep_id) FROM pqrun.job_dep;

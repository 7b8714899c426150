-- finish: a running job in no FIFO group ends below the executor
-- (src/jobs/finish_direct.hpp) under READ COMMITTED, through SQL under
-- REPEATABLE READ and SERIALIZABLE or when the tables need the executor.
-- Either way the history row, the statistics and the follow-ups must be
-- the same.
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS pqrun CASCADE;
CREATE EXTENSION pqrun;
RESET client_min_messages;
\pset null '(null)'

CREATE TEMP TABLE got (id bigint, lease_token uuid, way text);
-- Claims an attempt of `n` jobs of type `t` as worker `w`, made to look
-- 00:05:04.5675 older (within the reaper's default window of 20 minutes;
-- the fraction of a millisecond makes the rounding of duration_ms matter).
CREATE FUNCTION claim(t text, w text, n int, way text) RETURNS void LANGUAGE sql AS $$
  INSERT INTO got SELECT id, lease_token, way FROM pqrun.pickup(w, job_types => ARRAY[t], batch_size => n);
  UPDATE pqrun.job_live SET locked_at = locked_at - interval '00:05:04.5675' WHERE locked_by = w;
$$;
SELECT count(*) AS enqueued FROM pqrun.enqueue_batch((SELECT jsonb_agg(jsonb_build_object('job_type', t,
  'payload', jsonb_build_object('n', i), 'priority', 3, 'max_attempts', 1,
  'dedupe_key', t || i)) FROM generate_series(1, 4) AS i, unnest('{ok,bad}'::text[]) AS t));

-- 1. mark_done with a result and mark_error without attempts left, each
-- once below the executor and once through SQL (REPEATABLE READ), with and
-- without the lease: the four history rows of each kind are the same but
-- for the id, the lease, the payload and the times, and duration_ms is the
-- SQL expression's value.
SELECT claim('ok', 'w1', 4, 'ok');
SELECT claim('bad', 'w2', 4, 'bad');
CREATE VIEW nth AS SELECT way, id, lease_token, row_number() OVER (PARTITION BY way ORDER BY id) AS n FROM got;
SELECT pqrun.mark_done(id, '{"r": 1}', lease_token) FROM nth WHERE way = 'ok' AND n = 1;
SELECT pqrun.mark_done(id, '{"r": 1}') FROM nth WHERE way = 'ok' AND n = 2;
SELECT pqrun.mark_error(id, 'boom', lease_token => lease_token) FROM nth WHERE way = 'bad' AND n = 1;
SELECT pqrun.mark_error(id, 'boom') FROM nth WHERE way = 'bad' AND n = 2;
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT pqrun.mark_done(id, '{"r": 1}', lease_token) FROM nth WHERE way = 'ok' AND n = 3;
SELECT pqrun.mark_done(id, '{"r": 1}') FROM nth WHERE way = 'ok' AND n = 4;
SELECT pqrun.mark_error(id, 'boom', lease_token => lease_token) FROM nth WHERE way = 'bad' AND n = 3;
SELECT pqrun.mark_error(id, 'boom') FROM nth WHERE way = 'bad' AND n = 4;
COMMIT;
SELECT job_type, count(*) AS jobs,
       count(DISTINCT to_jsonb(d) - '{id,lease_token,payload,dedupe_key,duration_ms,finished_at,updated_at}'::text[])
         AS distinct_rows,
       bool_and(duration_ms = LEAST(GREATEST(date_part('epoch', finished_at - locked_at), 0) * 1000, 2147483647)::int)
         AS sql_duration,
       bool_and(d.lease_token = g.lease_token) AS same_lease, bool_and(updated_at = finished_at) AS updated_when_finished,
       bool_and(dedupe_key = job_type || (payload->>'n')) AS same_dedupe_key
  FROM pqrun.job_done d JOIN got g USING (id) GROUP BY job_type ORDER BY job_type;
SELECT to_jsonb(d) - '{id,lease_token,payload,dedupe_key,duration_ms,run_after,locked_at,finished_at,created_at,updated_at}'::text[]
       AS row
  FROM pqrun.job_done d WHERE id IN (SELECT id FROM nth WHERE way IN ('ok', 'bad') AND n = 1) ORDER BY id;
SELECT job_type, running, done, failed FROM pqrun.queue_stats WHERE job_type IN ('ok', 'bad') ORDER BY job_type;
SELECT count(*) AS live_rows FROM pqrun.job_live;

-- 2. A payload stored out of line: the live row is deleted before the
-- history row is written, which copies the payload out of job_live's TOAST
-- table; it arrives whole.
SELECT pqrun.enqueue('big', payload => jsonb_build_object('blob',
  (SELECT string_agg(md5(i::text), '') FROM generate_series(1, 2000) AS i))) AS big \gset
SELECT reltoastrelid::regclass AS live_toast FROM pg_class WHERE oid = 'pqrun.job_live'::regclass \gset
SELECT count(DISTINCT chunk_id) AS toasted FROM :live_toast;
SELECT claim('big', 'w3', 1, 'big');
SELECT pqrun.mark_done(:big);
SELECT status, payload->>'blob' = (SELECT string_agg(md5(i::text), '') FROM generate_series(1, 2000) AS i)
       AS same_payload
  FROM pqrun.jobs WHERE id = :big;
SELECT count(DISTINCT chunk_id) AS toasted FROM :live_toast;

-- 3. Finished below the executor, a job releases its dependents.
SELECT pqrun.enqueue('parent') AS parent \gset
SELECT pqrun.enqueue('child', depends_on => ARRAY[:parent]) AS child \gset
SELECT claim('parent', 'w4', 1, 'parent');
SELECT pqrun.mark_done(:parent);
SELECT (SELECT status FROM pqrun.jobs WHERE id = :parent) AS parent, (SELECT status FROM pqrun.jobs WHERE id = :child) AS child;

-- 4. The lease fences the finish: a stale lease or a finished job raises
-- 55000 and changes nothing.
SELECT pqrun.enqueue('fenced') AS fenced \gset
SELECT claim('fenced', 'w5', 1, 'fenced');
SELECT pqrun.mark_done(:fenced, lease_token => gen_random_uuid());
SELECT pqrun.mark_done(:fenced);
SELECT pqrun.mark_done(:fenced);
SELECT status, attempts FROM pqrun.jobs WHERE id = :fenced;

-- 5. A read-only transaction gets 25006 and changes nothing. (The code
-- itself, not PostgreSQL's text, which names the statement "SELECT".)
SELECT pqrun.enqueue('ro') AS ro \gset
SELECT claim('ro', 'w6', 1, 'ro');
BEGIN READ ONLY;
\set VERBOSITY sqlstate
SELECT pqrun.mark_done(:ro);
\set VERBOSITY default
ROLLBACK;
SELECT status, attempts FROM pqrun.jobs WHERE id = :ro;

-- 6. An operator's trigger on job_done sees every finished job: with a
-- trigger on either table, the finish is the SQL statement.
CREATE TABLE finish_log (id bigint, status text);
CREATE FUNCTION log_finish() RETURNS trigger LANGUAGE plpgsql AS
  $$ BEGIN INSERT INTO public.finish_log VALUES (NEW.id, NEW.status); RETURN NEW; END $$;
CREATE TRIGGER log_finish AFTER INSERT ON pqrun.job_done FOR EACH ROW EXECUTE FUNCTION log_finish();
SELECT pqrun.enqueue('logged', max_attempts => 1) AS logged1 \gset
SELECT pqrun.enqueue('logged', max_attempts => 1) AS logged2 \gset
SELECT claim('logged', 'w7', 2, 'logged');
SELECT pqrun.mark_done(:logged1);
SELECT pqrun.mark_error(:logged2, 'boom');
SELECT id = :logged1 AS first, status FROM finish_log ORDER BY id;
DROP TRIGGER log_finish ON pqrun.job_done;
DROP FUNCTION log_finish();
DROP TABLE finish_log;

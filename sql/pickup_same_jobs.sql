-- pickup_same_jobs: a pickup whose claims are deferred locks its jobs below the
-- executor (src/jobs/pick_direct.hpp) unless job_live, job_live_pick or the
-- transaction needs the SQL statement. Either way it must hand out the same
-- jobs, in the same order, as the same rows.
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS pqrun CASCADE;
CREATE EXTENSION pqrun;
RESET client_min_messages;
\pset null '(null)'

-- path_of answers which path the pickups of `statement` took: the SQL
-- statement calls pqrun._lease_token() for every job it locks, the direct
-- path makes the tokens itself.
SET track_functions = 'all';
CREATE FUNCTION token_calls() RETURNS bigint LANGUAGE sql AS $$
  SELECT coalesce((SELECT calls FROM pg_stat_xact_user_functions WHERE funcid = 'pqrun._lease_token'::regproc), 0)
$$;
CREATE FUNCTION path_of(statement text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
  before bigint := token_calls();
  picked bigint;
BEGIN
  EXECUTE statement INTO picked;
  RETURN CASE WHEN picked = 0 THEN 'nothing picked' WHEN token_calls() = before THEN 'direct' ELSE 'sql' END;
END $$;
-- index_of answers which of the pick indexes the pickups of `statement`
-- read: a filtered pickup its lanes (job_live_pick_type by job type,
-- job_live_pick_queue by queue), an unfiltered one job_live_pick.
CREATE FUNCTION index_of(statement text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
  names text[] := '{job_live_pick,job_live_pick_type,job_live_pick_queue}';
  before bigint[] := ARRAY(SELECT pg_stat_get_xact_numscans(('pqrun.' || n)::regclass) FROM unnest(names) n);
  read text[];
BEGIN
  EXECUTE statement;
  read := ARRAY(SELECT n FROM unnest(names) WITH ORDINALITY AS i(n, k)
                 WHERE pg_stat_get_xact_numscans(('pqrun.' || n)::regclass) > before[k]);
  RETURN array_to_string(read, ',');
END $$;
-- picked answers what a batch pickup with these filters hands out, in
-- order, but for what differs between any two pickups (lease, claim time),
-- and rolls the pickup back.
CREATE FUNCTION picked(types text[], queues text[]) RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
  rows jsonb;
BEGIN
  SELECT coalesce(jsonb_agg(to_jsonb(p) - '{lease_token,locked_at,updated_at,ordinality}'::text[] ORDER BY ordinality),
                  '[]')
    INTO rows
    FROM pqrun.pickup('cmp', job_types => types, queues => queues, batch_size => 1000) WITH ORDINALITY AS p;
  RAISE EXCEPTION 'undo';
EXCEPTION WHEN raise_exception THEN
  RETURN rows;
END $$;

-- 60 jobs in four priorities, two types and two queues, some with every
-- optional column set.
SELECT count(*) AS enqueued FROM pqrun.enqueue_batch((
  SELECT jsonb_agg(jsonb_build_object('job_type', CASE WHEN i % 2 = 0 THEN 'even' ELSE 'odd' END,
                                      'queue', CASE WHEN i % 3 = 0 THEN 'q3' ELSE 'default' END,
                                      'priority', i % 4, 'max_attempts', 2 + i % 5,
                                      'timeout_seconds', CASE WHEN i % 7 = 0 THEN 30 END,
                                      'payload', jsonb_build_object('n', i)) ORDER BY i)
    FROM generate_series(1, 60) AS i));

-- 1. Which pickups go which way.
BEGIN;
SELECT path_of($$SELECT count(*) FROM pqrun.pickup('p')$$) AS plain,
       path_of($$SELECT count(*) FROM pqrun.pickup('p', batch_size => 5)$$) AS batch,
       path_of($$SELECT count(*) FROM pqrun.pickup('p', job_types => '{odd}')$$) AS by_type,
       path_of($$SELECT count(*) FROM pqrun.pickup('p', queues => '{q3}')$$) AS by_queue,
       path_of($$SELECT count(*) FROM pqrun.pickup('p', batch_size => 2, wait => '10 ms')$$) AS waiting,
       path_of($$SELECT count(*) FROM pqrun.pickup('p', job_types => '{none}')$$) AS no_match;
ROLLBACK;
BEGIN;
SELECT index_of($$SELECT count(*) FROM pqrun.pickup('p')$$) AS plain,
       index_of($$SELECT count(*) FROM pqrun.pickup('p', job_types => '{odd}')$$) AS by_type,
       index_of($$SELECT count(*) FROM pqrun.pickup('p', queues => '{q3}')$$) AS by_queue,
       index_of($$SELECT count(*) FROM pqrun.pickup('p', job_types => '{odd}', queues => '{q3}')$$) AS by_both;
ROLLBACK;
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT path_of($$SELECT count(*) FROM pqrun.pickup('p')$$) AS repeatable_read;
ROLLBACK;
BEGIN ISOLATION LEVEL SERIALIZABLE;
SELECT path_of($$SELECT count(*) FROM pqrun.pickup('p')$$) AS serializable;
ROLLBACK;
BEGIN;
SET LOCAL pqrun.deferred_claims = off;
SELECT path_of($$SELECT count(*) FROM pqrun.pickup('p')$$) AS claims_not_deferred;
ROLLBACK;
-- A read-only transaction gets the SQL path's error (which statement raises
-- it depends on what the pickup finds to do first).
\set VERBOSITY sqlstate
BEGIN READ ONLY;
SELECT count(*) FROM pqrun.pickup('p');
ROLLBACK;
\set VERBOSITY default

-- 2. The same jobs in the same order as the SQL statement (REPEATABLE READ
-- takes it), as the same rows, with and without filters.
CREATE TEMP TABLE filters (n int, types text[], queues text[]);
INSERT INTO filters VALUES (1, NULL, NULL), (2, '{odd}', NULL), (3, NULL, '{q3,nope}'), (4, '{even}', '{default}'),
                           (5, '{none}', NULL), (6, '{odd,even,odd}', '{default,q3,default}'), (7, '{odd,odd}', NULL),
                           (8, NULL, '{q3,q3,default}'), (9, '{even,odd}', '{q3}');
SELECT jsonb_object_agg(n, picked(types, queues)) AS direct FROM filters \gset
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT jsonb_object_agg(n, picked(types, queues)) AS sql FROM filters \gset
ROLLBACK;
SELECT n, jsonb_array_length(d) AS jobs, d = (:'sql'::jsonb -> n::text) AS same_as_sql,
       ARRAY(SELECT (j->>'id')::bigint FROM jsonb_array_elements(d) WITH ORDINALITY AS e(j, k) ORDER BY k) =
       ARRAY(SELECT id FROM pqrun.jobs WHERE (types IS NULL OR job_type = ANY (types))
                                         AND (queues IS NULL OR queue = ANY (queues)) ORDER BY priority DESC, id)
         AS in_pickup_order
  FROM filters, LATERAL (SELECT :'direct'::jsonb -> n::text) AS v(d)
 ORDER BY n;
SELECT (j->>'status', j->>'attempts' = (SELECT attempts + 1 FROM pqrun.jobs WHERE id = (j->>'id')::bigint)::text,
        j->>'locked_by', j->>'finished_at', j->>'duration_ms', j->>'result') AS claimed_as, count(*)
  FROM jsonb_array_elements(:'direct'::jsonb -> '1') AS j GROUP BY 1;

-- 3. Pickups of 7 in transactions of their own hand out every job once, in
-- pickup order across the priorities: each starts at the pickup hint
-- (src/xact/wake.cpp) its predecessors raised, a row comparison on
-- (-priority, id).
CREATE TEMP TABLE seq (n serial, id bigint);
DO $$
BEGIN
  FOR i IN 1..10 LOOP
    INSERT INTO seq (id) SELECT id FROM pqrun.pickup('seq', batch_size => 7);
    COMMIT;
  END LOOP;
END $$;
SELECT count(*) AS picked, count(DISTINCT id) AS distinct_jobs,
       array_agg(id ORDER BY n) = (SELECT array_agg(id ORDER BY priority DESC, id) FROM pqrun.jobs) AS in_pickup_order
  FROM seq;
SELECT status, attempts, locked_by, count(*) FROM pqrun.jobs GROUP BY 1, 2, 3;

-- 4. What only the SQL statement honours, or a pick index that is not
-- pqrun's, sends the pickup there; it still hands out the same jobs.
SELECT count(*) AS enqueued FROM pqrun.enqueue_batch((
  SELECT jsonb_agg(jsonb_build_object('job_type', 'again', 'priority', i % 3) ORDER BY i) FROM generate_series(1, 9) AS i));
SELECT picked(NULL, NULL) AS before \gset
BEGIN;
ALTER TABLE pqrun.job_live ENABLE ROW LEVEL SECURITY;
SELECT path_of($$SELECT count(*) FROM pqrun.pickup('p')$$) AS row_security;
ROLLBACK;
-- with_pick_index answers, with job_live_pick made by `definition`
-- instead (none when null), which way a pickup goes and whether it hands
-- out `expected`, and changes nothing. Only an index ordered by
-- -(priority::bigint), id that holds every READY job not delayed is
-- pqrun's.
CREATE FUNCTION with_pick_index(definition text, expected jsonb, OUT path text, OUT same_jobs boolean)
LANGUAGE plpgsql AS $$
BEGIN
  DROP INDEX pqrun.job_live_pick;
  IF definition IS NOT NULL THEN
    EXECUTE 'CREATE INDEX job_live_pick ON pqrun.job_live ' || definition;
  END IF;
  same_jobs := picked(NULL, NULL) = expected;
  path := path_of($q$SELECT count(*) FROM pqrun.pickup('p')$q$);
  RAISE EXCEPTION 'undo';
EXCEPTION WHEN raise_exception THEN
  RETURN;
END $$;
SELECT coalesce(definition, '(none)') AS pick_index, w.path, w.same_jobs
  FROM unnest(ARRAY[NULL,
                    '((-(priority::bigint)) DESC, id) WHERE status = ''READY'' AND NOT delayed',
                    '((priority::bigint), id) WHERE status = ''READY'' AND NOT delayed',
                    '((-(priority::bigint)), id) WHERE status = ''READY'' AND NOT delayed AND priority > 0',
                    '((-(priority::bigint)), id) WHERE NOT delayed',
                    '((-(priority::bigint)), id) WHERE NOT delayed AND status = ''READY''',
                    '((-(priority::bigint)), id) WHERE status = ''READY''',
                    '((-(priority::bigint)), id)']) WITH ORDINALITY AS d(definition, n),
       LATERAL with_pick_index(definition, :'before') AS w
 ORDER BY n;
SELECT path_of($$SELECT count(*) FROM pqrun.pickup('p')$$) AS restored;
-- A lanes index that is not pqrun's (here one that misses the jobs of
-- priority 0) is passed over: the filtered pickup walks job_live_pick, and
-- hands out the same jobs.
SELECT picked('{again}', NULL) AS before_type \gset
BEGIN;
DROP INDEX pqrun.job_live_pick_type;
CREATE INDEX job_live_pick_type ON pqrun.job_live (job_type, (-(priority::bigint)), id) WHERE status = 'READY' AND priority > 0;
SELECT picked('{again}', NULL) = :'before_type' AS same_jobs,
       index_of($$SELECT count(*) FROM pqrun.pickup('p', job_types => '{again}')$$) AS index_read;
ROLLBACK;

-- 5. A second pickup of the same transaction writes the first one's claims
-- before it looks, and so passes over those jobs.
BEGIN;
SELECT count(*) AS first FROM pqrun.pickup('twice', batch_size => 4);
SELECT count(*) AS second FROM pqrun.pickup('twice', batch_size => 4);
SELECT count(*) AS running, count(DISTINCT id) AS distinct_jobs FROM pqrun.jobs WHERE locked_by = 'twice';
COMMIT;

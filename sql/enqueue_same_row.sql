-- enqueue_same_row: a job without dedupe key, dependencies or FIFO group is
-- inserted below the executor (src/jobs/enqueue_direct.hpp), unless job_live or
-- the transaction needs the SQL path. Either way the row, its index entries
-- and what an operator's changes to job_live demand must be the same.
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS pqrun CASCADE;
CREATE EXTENSION pqrun;
RESET client_min_messages;

-- path_of runs `statement` after a pickup whose claim is deferred and
-- answers which path inserted: any SQL statement on job_live writes the
-- deferred claim first (src/xact/deferred_claims.hpp), a direct insert runs none.
CREATE FUNCTION live_updates() RETURNS bigint LANGUAGE sql AS
  $$ SELECT n_tup_upd FROM pg_stat_xact_user_tables WHERE relid = 'pqrun.job_live'::regclass $$;
CREATE FUNCTION path_of(statement text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
  before bigint;
BEGIN
  PERFORM pqrun.enqueue_batch('[{"job_type": "marker", "priority": 100}]');
  PERFORM pqrun.pickup('probe', job_types => '{marker}');
  before := live_updates();
  EXECUTE statement;
  RETURN CASE WHEN live_updates() = before THEN 'direct' ELSE 'sql' END;
END $$;

-- 1. Which jobs go which way: only READ COMMITTED inserts directly
-- (direct_rows::OpenTables).
SELECT path_of($$SELECT pqrun.enqueue('plain')$$) AS plain,
       path_of($$SELECT pqrun.enqueue('later', run_after => now() + interval '1 hour')$$) AS delayed,
       path_of($$SELECT pqrun.enqueue('keyed', dedupe_key => 'k1')$$) AS keyed,
       path_of($$SELECT pqrun.enqueue('grouped', fifo_key => 'g1')$$) AS grouped,
       path_of($$SELECT pqrun.enqueue('after', depends_on => ARRAY[1::bigint])$$) AS dependent,
       path_of($$SELECT pqrun.enqueue_batch('[{"job_type": "b"}, {"job_type": "b"}]')$$) AS batch,
       path_of($$SELECT pqrun.enqueue_batch('[{"job_type": "b"}, {"job_type": "b", "dedupe_key": "k2"}]')$$)
         AS keyed_batch;
BEGIN ISOLATION LEVEL SERIALIZABLE;
SELECT path_of($$SELECT pqrun.enqueue('plain')$$) AS serializable;
COMMIT;
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT path_of($$SELECT pqrun.enqueue('plain')$$) AS repeatable_read;
COMMIT;

-- 2. A direct insert writes the row the SQL path writes: the same jobs,
-- single and batched, ready and delayed, once each way (SERIALIZABLE takes
-- the SQL path), compared column by column but for the id and the times
-- of the transaction.
CREATE TEMP TABLE ways (id bigint, way text);
CREATE FUNCTION enqueue_all(way text) RETURNS void LANGUAGE sql AS $$
  INSERT INTO ways SELECT pqrun.enqueue('cmp', '{"n": 1}', priority => 7, max_attempts => 3, timeout_seconds => 9,
                                        queue => 'qq'), way;
  INSERT INTO ways SELECT pqrun.enqueue('cmp', '{"n": 1}', run_after => '2100-01-01 00:00+00', queue => 'qq'), way;
  INSERT INTO ways SELECT b, way FROM pqrun.enqueue_batch('[{"job_type": "cmp", "payload": {"n": 1}, "priority": 7,
    "max_attempts": 3, "timeout_seconds": 9, "queue": "qq"}, {"job_type": "cmp", "payload": {"n": 1},
    "run_after": "2100-01-01 00:00+00", "queue": "qq"}]') AS b;
$$;
SELECT enqueue_all('direct');
BEGIN ISOLATION LEVEL SERIALIZABLE;
SELECT enqueue_all('sql');
COMMIT;
SELECT count(*) AS jobs,
       count(DISTINCT to_jsonb(l) - '{id,created_at,updated_at,run_after}'::text[] || jsonb_build_object('delayed_to',
         CASE WHEN l.delayed THEN l.run_after END)) AS distinct_rows,
       count(*) FILTER (WHERE l.created_at = l.updated_at AND (l.delayed OR l.run_after = l.created_at)) AS stamped
  FROM pqrun.job_live l JOIN ways w USING (id);
SELECT w.way, l.status, l.delayed, l.priority, l.max_attempts, l.timeout_seconds, l.queue, l.payload
  FROM pqrun.job_live l JOIN ways w USING (id) ORDER BY l.id;
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS amcheck;
RESET client_min_messages;
SELECT c.relname, bt_index_check(c.oid, true) AS checked
  FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
 WHERE i.indrelid = 'pqrun.job_live'::regclass ORDER BY c.relname;
SELECT count(*) AS heap_problems FROM verify_heapam('pqrun.job_live');
DROP EXTENSION amcheck;
-- The directly inserted jobs are picked up in priority order.
SELECT job_type, priority FROM pqrun.pickup('w', job_types => '{cmp}', batch_size => 10);

-- 3. A column an operator adds gets its default, whatever it is: any
-- column pqrun did not create sends the insert through SQL.
ALTER TABLE pqrun.job_live ADD COLUMN tenant text NOT NULL DEFAULT 'acme';
SELECT path_of($$SELECT pqrun.enqueue('tenant1')$$) AS constant_default;
ALTER TABLE pqrun.job_live ALTER COLUMN tenant SET DEFAULT 'globex';
SELECT path_of($$SELECT pqrun.enqueue('tenant2')$$) AS changed_default;
CREATE FUNCTION public.current_tenant() RETURNS text LANGUAGE sql AS $$ SELECT 'initech' $$;
ALTER TABLE pqrun.job_live ALTER COLUMN tenant SET DEFAULT public.current_tenant();
SELECT path_of($$SELECT pqrun.enqueue('tenant3')$$) AS function_default;
SELECT job_type, tenant FROM pqrun.job_live WHERE job_type LIKE 'tenant_' ORDER BY id;

-- 4. Without a default that NOT NULL column fails the enqueue, each way with
-- the same error, and nothing is written; so does an operator's CHECK
-- constraint.
ALTER TABLE pqrun.job_live ALTER COLUMN tenant DROP DEFAULT;
SELECT count(*) AS jobs_before FROM pqrun.job_live \gset
\set VERBOSITY terse
SELECT pqrun.enqueue('tenantless');
BEGIN ISOLATION LEVEL SERIALIZABLE;
SELECT pqrun.enqueue('tenantless');
ROLLBACK;
ALTER TABLE pqrun.job_live DROP COLUMN tenant;
ALTER TABLE pqrun.job_live ADD CONSTRAINT no_evil CHECK (job_type <> 'evil');
SELECT pqrun.enqueue('evil');
SELECT * FROM pqrun.enqueue_batch('[{"job_type": "fine"}, {"job_type": "evil"}]');
BEGIN ISOLATION LEVEL SERIALIZABLE;
SELECT pqrun.enqueue('evil');
ROLLBACK;
\set VERBOSITY default
SELECT count(*) - :jobs_before AS written FROM pqrun.job_live;
ALTER TABLE pqrun.job_live DROP CONSTRAINT no_evil;
SELECT path_of($$SELECT pqrun.enqueue('plain')$$) AS after_drop;
-- A default coerced to a domain is never kept (the domain's constraints can
-- change without job_live's invalidation): such a column sends the insert
-- through SQL too.
CREATE DOMAIN public.job_weight AS int CHECK (VALUE > 0);
ALTER TABLE pqrun.job_live ADD COLUMN weight public.job_weight DEFAULT 3;
SELECT path_of($$SELECT pqrun.enqueue('weighed')$$) AS domain_default;
SELECT job_type, weight FROM pqrun.job_live WHERE job_type = 'weighed';
ALTER TABLE pqrun.job_live DROP COLUMN weight;
DROP DOMAIN public.job_weight;

-- 5. An operator's trigger on job_live sees every new job (inserted in SQL).
CREATE FUNCTION stamp_payload() RETURNS trigger LANGUAGE plpgsql AS
  $$ BEGIN NEW.payload := NEW.payload || '{"stamped": true}'; RETURN NEW; END $$;
CREATE TRIGGER stamp_payload BEFORE INSERT ON pqrun.job_live FOR EACH ROW EXECUTE FUNCTION stamp_payload();
SELECT path_of($$SELECT pqrun.enqueue('stamped')$$) AS with_trigger;
SELECT payload FROM pqrun.job_live WHERE job_type = 'stamped';
DROP TRIGGER stamp_payload ON pqrun.job_live;
SELECT path_of($$SELECT pqrun.enqueue('unstamped')$$) AS trigger_dropped;
DROP FUNCTION stamp_payload(), path_of(text), live_updates(), enqueue_all(text), public.current_tenant();

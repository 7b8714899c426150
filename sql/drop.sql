-- drop: DROP EXTENSION leaves no residue, and the extension can be created
-- again and used at once.
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS pqrun CASCADE;
CREATE EXTENSION pqrun;
RESET client_min_messages;
\pset null '(null)'

-- Some data in every table first (live, finished, history, dependency edges).
SELECT pqrun.enqueue('a') AS id;
SELECT pqrun.enqueue('b', depends_on => ARRAY[1]::bigint[], fifo_key => 'g') AS id;
SELECT id FROM pqrun.pickup('w');
SELECT pqrun.mark_error(1, 'retry', retry_after => '0') AS new_status;
SELECT id FROM pqrun.pickup('w');
SELECT pqrun.mark_done(1);
SELECT status, count(*) FROM pqrun.jobs GROUP BY status ORDER BY status;

-- Objects owned by the extension before the drop.
SELECT count(*) > 0 AS has_objects FROM pg_depend d
 WHERE d.refclassid = 'pg_extension'::regclass
   AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'pqrun');

DROP EXTENSION pqrun;

-- No extension, no schema, nothing left in the catalogs.
SELECT count(*) AS extensions FROM pg_extension WHERE extname = 'pqrun';
SELECT count(*) AS schemas FROM pg_namespace WHERE nspname = 'pqrun';
SELECT count(*) AS relations FROM pg_class c
 WHERE c.relnamespace IN (SELECT oid FROM pg_namespace WHERE nspname = 'pqrun')
    OR c.relname LIKE 'job\_%' OR c.relname LIKE 'pqrun%';
SELECT count(*) AS functions FROM pg_proc p
 WHERE p.pronamespace IN (SELECT oid FROM pg_namespace WHERE nspname = 'pqrun')
    OR p.proname LIKE 'pqrun%' OR p.prosrc LIKE 'pqrun\_%';
SELECT count(*) AS types FROM pg_type t
 WHERE t.typnamespace IN (SELECT oid FROM pg_namespace WHERE nspname = 'pqrun')
    OR t.typname LIKE '%job\_status%';
SELECT count(*) AS dependencies FROM pg_depend d
 WHERE d.refclassid = 'pg_extension'::regclass
   AND d.refobjid NOT IN (SELECT oid FROM pg_extension);
SELECT count(*) AS init_privs FROM pg_init_privs i
 WHERE NOT EXISTS (SELECT 1 FROM pg_class c WHERE c.oid = i.objoid)
   AND i.classoid = 'pg_class'::regclass;
\dn pqrun

-- The API is gone.
\set VERBOSITY sqlstate
SELECT pqrun.enqueue('x');
SELECT * FROM pqrun.jobs;
\set VERBOSITY default

-- Created again: a fresh, empty queue whose ids start at 1, fully usable.
CREATE EXTENSION pqrun;
SELECT count(*) AS jobs FROM pqrun.jobs;
SELECT count(*) AS attempts FROM pqrun.job_attempts;
SELECT pqrun.enqueue('again', payload => '{"n": 1}') AS id;
SELECT pqrun.enqueue('again', depends_on => ARRAY[1]::bigint[]) AS id;
SELECT id, job_type, payload, status, attempts FROM pqrun.pickup('w2', batch_size => 5);
SELECT pqrun.mark_done(1, '"ok"');
SELECT id, status FROM pqrun.jobs ORDER BY id;
SELECT id, status, attempts FROM pqrun.pickup('w2');
SELECT pqrun.mark_error(2, 'no', terminal => true) AS new_status;
SELECT job_id, attempt, worker_id, outcome FROM pqrun.job_attempts ORDER BY job_id, attempt;

-- And dropped again, in the same session (cached plans must not break).
DROP EXTENSION pqrun;
CREATE EXTENSION pqrun;
SELECT pqrun.enqueue('third') AS id;
SELECT id, status FROM pqrun.pickup('w3');
SELECT pqrun.mark_done(1);
SELECT id, status FROM pqrun.jobs ORDER BY id;

-- What the old extension's pickups taught the shared pickup hint does not
-- outlive it. Once, a new extension's pickups started past the ids the old
-- one had handed out, and a READY job written without pqrun's API (as a
-- restore writes them) was not picked up until a maintenance round:
--   pickup of 20 jobs; DROP EXTENSION; CREATE EXTENSION;
--   INSERT INTO pqrun.job_live ... (id 1, READY); pickup -> no row.
SELECT count(*) FROM pqrun.enqueue_batch((SELECT jsonb_agg(jsonb_build_object('job_type', 'many')) FROM generate_series(1, 20)));
SELECT count(pqrun.mark_done(id)) FROM pqrun.pickup('w4', batch_size => 20);
DROP EXTENSION pqrun;
CREATE EXTENSION pqrun;
INSERT INTO pqrun.job_live (status, priority, max_attempts, run_after, created_at, updated_at, queue, job_type, payload)
VALUES ('READY', 0, 5, now(), now(), now(), 'default', 'restored', '{}');
SELECT id, job_type, status FROM pqrun.pickup('w5');
DROP EXTENSION pqrun;
SELECT count(*) AS schemas FROM pg_namespace WHERE nspname = 'pqrun';

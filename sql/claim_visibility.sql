-- claim_visibility: batch pickups lock their jobs and write the claims only when
-- something could look at them (src/xact/deferred_claims.hpp). Whatever the
-- route, every job must look exactly as if the claim had been written at
-- once; mark_done_batch with nothing in between that read the queue skips
-- the write.
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS pqrun CASCADE;
CREATE EXTENSION pqrun;
RESET client_min_messages;
\pset null '(null)'

-- Finishes go below the executor into job_done's partition for now, which
-- a maintenance round makes once job_done holds a job (0.12.0).
INSERT INTO pqrun.job_done_default (id, status, priority, attempts, max_attempts, run_after, finished_at,
                                    created_at, updated_at, queue, job_type, payload)
VALUES (0, 'DONE', 0, 0, 1, now(), now(), now(), now(), 'warm', 'warm', '{}');
DO $$
BEGIN
	FOR i IN 1..100 LOOP -- a round that found job_done locked makes them later
		PERFORM pqrun.run_maintenance();
		EXIT WHEN EXISTS (SELECT FROM pqrun._history_partitions());
		PERFORM pg_sleep(0.1);
	END LOOP;
END $$;
DELETE FROM pqrun.job_done WHERE id = 0;
CREATE TEMP TABLE got (id bigint, lease_token uuid, step text);
CREATE FUNCTION live_updates() RETURNS bigint LANGUAGE sql AS
  $$ SELECT n_tup_upd FROM pg_stat_xact_user_tables WHERE relid = 'pqrun.job_live'::regclass $$;
SELECT count(*) AS enqueued FROM pqrun.enqueue_batch(
  (SELECT jsonb_agg(jsonb_build_object('job_type', 'd', 'payload', jsonb_build_object('n', i))) FROM generate_series(1, 40) AS i));

-- 1. Read your own claims: the next statement of the transaction sees the
-- jobs RUNNING with the lease the pickup handed out.
BEGIN;
INSERT INTO got SELECT id, lease_token, 'read' FROM pqrun.pickup('w1', batch_size => 3);
SELECT j.id, j.status, j.attempts, j.locked_by, j.lease_token = g.lease_token AS same_lease, j.locked_at = now() AS locked_now
  FROM pqrun.jobs j JOIN got g USING (id) WHERE g.step = 'read' ORDER BY j.id;
COMMIT;
SELECT id, status, attempts FROM pqrun.jobs WHERE status <> 'READY' ORDER BY id;
SELECT count(*) AS running_attempts FROM pqrun.job_attempts WHERE outcome IS NULL;

-- 2. Written at commit when nothing else ran after the pickup: a pickup in
-- its own transaction leaves RUNNING jobs with the leases it returned.
SELECT count(*) AS picked FROM (SELECT pqrun.pickup('w2', batch_size => 2)) AS p;
SELECT id, status, attempts, locked_by FROM pqrun.jobs WHERE locked_by = 'w2' ORDER BY id;
CREATE TEMP TABLE got2 AS SELECT id, lease_token FROM pqrun.pickup('w3', batch_size => 2);
SELECT count(*) AS same_lease FROM pqrun.jobs j JOIN got2 g USING (id)
 WHERE j.status = 'RUNNING' AND j.lease_token = g.lease_token AND j.locked_by = 'w3';

-- 3. Finished in the pickup's own statement: written once, straight to
-- DONE, with the lease it was handed and one attempt. The claim is never
-- written: job_live sees no update in this transaction.
BEGIN;
SELECT live_updates() AS before \gset
WITH p AS (SELECT * FROM pqrun.pickup('w4', batch_size => 4)),
     kept AS (INSERT INTO got SELECT id, lease_token, 'done' FROM p)
SELECT pqrun.mark_done_batch(array_agg(id), array_agg(lease_token)) AS done FROM p;
SELECT live_updates() - :before AS claim_writes;
COMMIT;
SELECT j.id, j.status, j.attempts, j.locked_by, j.lease_token = g.lease_token AS same_lease,
       j.finished_at IS NOT NULL AS finished, j.duration_ms >= 0 AS has_duration
  FROM pqrun.jobs j JOIN got g USING (id) WHERE g.step = 'done' ORDER BY j.id;
SELECT job_id, attempt, worker_id, outcome, started_at IS NOT NULL AS started FROM pqrun.job_attempts
 WHERE worker_id = 'w4' ORDER BY job_id;
SELECT done FROM pqrun.queue_stats WHERE job_type = 'd';

-- 3b. Statements that do not read the queue leave the claims deferred: a
-- mark_done_batch later in the transaction still skips the claim write.
BEGIN;
SELECT live_updates() AS before \gset
INSERT INTO got SELECT id, lease_token, 'later' FROM pqrun.pickup('w4b', batch_size => 3);
SELECT count(*) AS kept FROM got WHERE step = 'later';
SELECT pqrun.mark_done_batch(array_agg(id), array_agg(lease_token)) AS done FROM got WHERE step = 'later';
SELECT live_updates() - :before AS claim_writes;
COMMIT;
SELECT count(*) AS done_once FROM pqrun.jobs j JOIN got g USING (id)
 WHERE g.step = 'later' AND j.status = 'DONE' AND j.attempts = 1 AND j.lease_token = g.lease_token AND j.locked_by = 'w4b';

-- 4. A stale lease for a deferred claim raises 55000 like any other and
-- changes nothing: the jobs stay READY and unclaimed.
SELECT count(*) AS ready_before FROM pqrun.jobs WHERE status = 'READY';
SELECT pqrun.mark_done_batch(array_agg(id), array_agg(gen_random_uuid())) FROM pqrun.pickup('w5', batch_size => 2);
SELECT count(*) AS ready_after FROM pqrun.jobs WHERE status = 'READY';
SELECT count(*) AS by_w5 FROM pqrun.jobs WHERE locked_by = 'w5';

-- 5. A rolled-back savepoint forgets its deferred claims with their locks;
-- a released one keeps them.
BEGIN;
SAVEPOINT a;
SELECT count(*) AS picked FROM pqrun.pickup('w6', batch_size => 2);
ROLLBACK TO a;
SAVEPOINT b;
SELECT count(*) AS picked FROM pqrun.pickup('w7', batch_size => 2);
RELEASE b;
COMMIT;
SELECT locked_by, status, count(*) FROM pqrun.jobs WHERE locked_by IN ('w6', 'w7') GROUP BY 1, 2 ORDER BY 1;
SELECT count(*) AS never_attempted FROM pqrun.jobs WHERE status = 'READY' AND attempts = 0 AND locked_by IS NULL;

-- 5b. Claims written inside a savepoint below the pickup's are written again
-- when that savepoint rolls back (the pickup's locks are still held), so
-- they are never lost.
BEGIN;
SELECT count(*) AS picked FROM pqrun.pickup('w6a', batch_size => 2);
SAVEPOINT s;
SELECT count(*) AS running_w6a FROM pqrun.jobs WHERE locked_by = 'w6a' AND status = 'RUNNING';
ROLLBACK TO s;
SELECT count(*) AS running_w6a FROM pqrun.jobs WHERE locked_by = 'w6a' AND status = 'RUNNING';
COMMIT;
BEGIN;
SELECT count(*) AS picked FROM pqrun.pickup('w6b', batch_size => 2);
SAVEPOINT a;
SAVEPOINT b;
SELECT count(*) AS running_w6b FROM pqrun.jobs WHERE locked_by = 'w6b' AND status = 'RUNNING';
RELEASE b;
ROLLBACK TO a;
COMMIT;
BEGIN;
SAVEPOINT a;
SELECT count(*) AS picked FROM pqrun.pickup('w6c', batch_size => 2);
SAVEPOINT b;
SELECT count(*) AS running_w6c FROM pqrun.jobs WHERE locked_by = 'w6c' AND status = 'RUNNING';
ROLLBACK TO b;
RELEASE a;
COMMIT;
SELECT locked_by, status, attempts, count(*) FROM pqrun.jobs WHERE locked_by IN ('w6a', 'w6b', 'w6c')
 GROUP BY 1, 2, 3 ORDER BY 1;

-- 6. Two pickups in one statement never hand out the same job: the second
-- writes the first one's claims before it looks.
SELECT count(*) AS picked, count(DISTINCT id) AS distinct_ids
  FROM (SELECT id FROM pqrun.pickup('w8', batch_size => 2)
        UNION ALL SELECT id FROM pqrun.pickup('w9', batch_size => 2)) AS both_pickups;

-- 7. COPY of the table itself (no executor) sees the claims too.
BEGIN;
SELECT count(*) AS picked FROM pqrun.pickup('w10', batch_size => 2);
COPY pqrun.job_live (id, status, locked_by) TO '/dev/null';
SELECT count(*) AS running_w10 FROM pqrun.job_live WHERE locked_by = 'w10' AND status = 'RUNNING';
COMMIT;

-- 8. A prepared transaction carries its claims.
BEGIN;
SELECT count(*) AS picked FROM pqrun.pickup('w11', batch_size => 2);
PREPARE TRANSACTION 'pqrun_deferred';
COMMIT PREPARED 'pqrun_deferred';
SELECT status, count(*) FROM pqrun.jobs WHERE locked_by = 'w11' GROUP BY 1;

-- 9. Dependents and FIFO groups are followed up as with written claims.
SELECT pqrun.enqueue('parent', priority => 9) AS parent \gset
SELECT pqrun.enqueue('child', depends_on => ARRAY[:parent]::bigint[]) AS child \gset
SELECT pqrun.enqueue('f', priority => 9, fifo_key => 'g') AS f1 \gset
SELECT pqrun.enqueue('f', priority => 9, fifo_key => 'g') AS f2 \gset
SELECT (SELECT status FROM pqrun.jobs WHERE id = :child) AS child, (SELECT status FROM pqrun.jobs WHERE id = :f2) AS f2;
SELECT pqrun.mark_done_batch(array_agg(id)) AS done
  FROM pqrun.pickup('w12', job_types => '{parent,f}', batch_size => 5);
SELECT id = :parent AS is_parent, id = :f1 AS is_f1, status, attempts FROM pqrun.jobs
 WHERE id IN (:parent, :f1) ORDER BY id;
SELECT (SELECT status FROM pqrun.jobs WHERE id = :child) AS child, (SELECT status FROM pqrun.jobs WHERE id = :f2) AS f2;

-- 10. A single-job pickup defers its claim as a batch does (the next
-- statement that reads the queue writes it). A waiting pickup writes them
-- before it returns, in the subtransaction that locked their rows (written
-- by its parent, each claim would carry a MultiXact: multixact.sh), after
-- the claims an earlier pickup left unwritten; with
-- pqrun.deferred_claims off every pickup writes its claims at once.
BEGIN;
SELECT live_updates() AS before \gset
SELECT count(*) AS picked FROM pqrun.pickup('w13');
SELECT live_updates() - :before AS claim_writes;
SELECT count(*) AS picked FROM pqrun.pickup('w13', batch_size => 2, wait => '1 ms');
SELECT live_updates() - :before AS claim_writes;
SET LOCAL pqrun.deferred_claims = off;
SELECT count(*) AS picked FROM pqrun.pickup('w14', batch_size => 2);
SELECT live_updates() - :before AS claim_writes;
COMMIT;
-- A waiting pickup's jobs finished in its own statement were claimed in
-- job_live first, for the same reason (0.15.0 finished them unwritten, and
-- made two MultiXacts per job).
SELECT count(*) AS enqueued FROM pqrun.enqueue_batch('[{"job_type": "wq"}, {"job_type": "wq"}]');
BEGIN;
SELECT live_updates() AS before \gset
SELECT pqrun.mark_done_batch(array_agg(id)) AS done
  FROM pqrun.pickup('w14w', job_types => '{wq}', batch_size => 2, wait => '1 ms');
SELECT live_updates() - :before AS claim_writes;
COMMIT;
SELECT status, attempts, count(*) FROM pqrun.jobs WHERE locked_by = 'w14w' GROUP BY 1, 2;

-- 11. A worker role without table privileges: its claims are written as
-- the extension's owner, at the next statement and at commit.
SET client_min_messages = warning;
DROP ROLE IF EXISTS pqrun_deferred_worker;
RESET client_min_messages;
CREATE ROLE pqrun_deferred_worker;
SELECT pqrun.grant_worker('pqrun_deferred_worker');
SET ROLE pqrun_deferred_worker;
BEGIN;
SELECT count(*) AS picked FROM pqrun.pickup('w15', batch_size => 2);
SELECT count(*) AS running_w15 FROM pqrun.jobs WHERE locked_by = 'w15' AND status = 'RUNNING';
COMMIT;
SELECT count(*) AS picked FROM pqrun.pickup('w16', batch_size => 2);
RESET ROLE;
SELECT locked_by, status, count(*) FROM pqrun.jobs WHERE locked_by IN ('w15', 'w16') GROUP BY 1, 2 ORDER BY 1;
DROP OWNED BY pqrun_deferred_worker;
DROP ROLE pqrun_deferred_worker;

-- 12. Finished below the executor, a payload stored out of line moves to
-- job_done whole, and nothing of it stays in job_live's TOAST table.
SELECT pqrun.enqueue('big', payload => jsonb_build_object('blob',
  (SELECT string_agg(md5(i::text), '') FROM generate_series(1, 2000) AS i))) AS big \gset
SELECT reltoastrelid::regclass AS live_toast FROM pg_class WHERE oid = 'pqrun.job_live'::regclass \gset
SELECT count(DISTINCT chunk_id) AS toasted FROM :live_toast;
BEGIN;
SELECT live_updates() AS before \gset
SELECT pqrun.mark_done_batch(array_agg(id)) AS done FROM pqrun.pickup('w17', job_types => '{big}', batch_size => 2);
SELECT live_updates() - :before AS claim_writes;
COMMIT;
SELECT status, attempts, locked_by, payload->>'blob' = (SELECT string_agg(md5(i::text), '') FROM generate_series(1, 2000) AS i)
       AS same_payload
  FROM pqrun.jobs WHERE id = :big;
SELECT count(DISTINCT chunk_id) AS toasted FROM :live_toast;

-- 13. The finish below the executor writes the history row the SQL path
-- writes: one batch each way in one transaction, then every column but
-- the id, the lease and the payload compared.
SELECT count(*) AS enqueued FROM pqrun.enqueue_batch((SELECT jsonb_agg(jsonb_build_object('job_type', 'cmp',
  'payload', jsonb_build_object('n', i), 'priority', 3, 'max_attempts', 7)) FROM generate_series(1, 4) AS i));
BEGIN;
SELECT live_updates() AS before \gset
SELECT pqrun.mark_done_batch(array_agg(id)) AS direct FROM pqrun.pickup('w19', job_types => '{cmp}', batch_size => 2);
SELECT live_updates() - :before AS claim_writes;
SET LOCAL pqrun.deferred_claims = off;
SELECT pqrun.mark_done_batch(array_agg(id)) AS through_sql FROM pqrun.pickup('w19', job_types => '{cmp}', batch_size => 2);
SELECT live_updates() - :before AS claim_writes;
COMMIT;
SELECT count(*) AS jobs, count(DISTINCT to_jsonb(d) - '{id,lease_token,payload}'::text[]) AS distinct_rows
  FROM pqrun.job_done d WHERE job_type = 'cmp';
SELECT to_jsonb(d) - '{id,lease_token,payload,run_after,locked_at,finished_at,created_at,updated_at}'::text[] AS row
  FROM pqrun.job_done d WHERE job_type = 'cmp' LIMIT 1;

-- 14. An operator's trigger on job_done sees every finished job: with a
-- trigger on either table, the claims are written and finished in SQL.
CREATE TABLE finished_log (id bigint);
CREATE FUNCTION log_finished() RETURNS trigger LANGUAGE plpgsql AS
  $$ BEGIN INSERT INTO public.finished_log VALUES (NEW.id); RETURN NEW; END $$;
CREATE TRIGGER log_finished AFTER INSERT ON pqrun.job_done FOR EACH ROW EXECUTE FUNCTION log_finished();
BEGIN;
SELECT live_updates() AS before \gset
SELECT pqrun.mark_done_batch(array_agg(id)) AS done FROM pqrun.pickup('w18', job_types => '{d}', batch_size => 3);
SELECT live_updates() - :before AS claim_writes;
COMMIT;
SELECT count(*) AS logged FROM finished_log JOIN pqrun.jobs j USING (id) WHERE j.locked_by = 'w18' AND j.status = 'DONE';
DROP TRIGGER log_finished ON pqrun.job_done;

-- 15. Under SERIALIZABLE the batch is finished by the SQL path, whose reads
-- take predicate locks: the claims are written first.
SELECT count(*) AS enqueued FROM pqrun.enqueue_batch('[{"job_type": "ser"}, {"job_type": "ser"}]');
BEGIN ISOLATION LEVEL SERIALIZABLE;
SELECT live_updates() AS before \gset
SELECT pqrun.mark_done_batch(array_agg(id)) AS done FROM pqrun.pickup('w20', job_types => '{ser}', batch_size => 2);
SELECT live_updates() - :before AS claim_writes;
COMMIT;
SELECT status, count(*) FROM pqrun.jobs WHERE locked_by = 'w20' GROUP BY status;

-- 16. A claim written below the executor (src/jobs/claim_direct.hpp) is the row
-- the SQL path writes: one job claimed each way in one transaction, then
-- every column but the id, the lease and the payload compared; amcheck
-- finds every row version in the indexes it belongs to.
SELECT count(*) AS enqueued FROM pqrun.enqueue_batch((SELECT jsonb_agg(jsonb_build_object('job_type', 'claim',
  'payload', jsonb_build_object('n', i), 'priority', 4, 'max_attempts', 6, 'timeout_seconds', 30,
  'dedupe_key', 'claim-' || i)) FROM generate_series(1, 2) AS i));
BEGIN;
SELECT live_updates() AS before \gset
CREATE TEMP TABLE claimed AS SELECT id, lease_token FROM pqrun.pickup('w21', job_types => '{claim}');
SELECT live_updates() - :before AS claim_writes;
SET LOCAL pqrun.deferred_claims = off;
INSERT INTO claimed SELECT id, lease_token FROM pqrun.pickup('w21', job_types => '{claim}');
SELECT live_updates() - :before AS claim_writes;
COMMIT;
SELECT count(*) AS jobs, count(DISTINCT to_jsonb(l) - '{id,lease_token,payload,dedupe_key}'::text[]) AS distinct_rows,
       count(*) FILTER (WHERE (l.id, l.lease_token) IN (SELECT * FROM claimed)) AS leases_handed_out
  FROM pqrun.job_live l WHERE job_type = 'claim';
SELECT to_jsonb(l) - '{id,lease_token,payload,dedupe_key,run_after,locked_at,created_at,updated_at,holder_pid,holder_started}'::text[]
       AS row, holder_pid IS NULL AND holder_started IS NULL AS held_by_lease,
       locked_at = updated_at AS stamped_once
  FROM pqrun.job_live l WHERE job_type = 'claim' LIMIT 1;
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS amcheck;
RESET client_min_messages;
SELECT c.relname, bt_index_check(c.oid, true) AS checked
  FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
 WHERE i.indrelid IN ('pqrun.job_live'::regclass, 'pqrun.job_done_default'::regclass) AND c.relam = (SELECT oid FROM pg_am WHERE amname = 'btree')
 ORDER BY c.relname;
-- job_done's partitions by time, each with its two indexes (by id, and by
-- finish time of FAILED jobs), every one checked: those of now and of the
-- two intervals after it, which the round at the top made, and the one for
-- the time before them that a worker's round may have made since the row
-- that held that time is gone (or not yet).
SELECT count(*) FILTER (WHERE hi > now()) AS indexes_checked, count(DISTINCT part) FILTER (WHERE hi > now()) AS partitions,
       count(*) FILTER (WHERE hi <= now()) IN (0, 2) AS earlier_checked_if_any
  FROM (SELECT p.part, p.hi, bt_index_check(c.oid, true)
          FROM pqrun._history_partitions() p JOIN pg_index i ON i.indrelid = p.part JOIN pg_class c ON c.oid = i.indexrelid
         WHERE c.relam = (SELECT oid FROM pg_am WHERE amname = 'btree')) AS checked;
SELECT count(*) AS heap_problems FROM verify_heapam('pqrun.job_live');
DROP EXTENSION amcheck;
-- The enqueue of a job with the same dedupe key finds the claimed one.
SELECT pqrun.enqueue('claim', dedupe_key => 'claim-1') = (SELECT id FROM pqrun.job_live WHERE dedupe_key = 'claim-1')
       AS deduplicated;

-- A claim made under pqrun.claim_hold = session is held by its session too
-- (orphan rescue ends it with the session), on each way a claim is
-- written: below the executor at commit, by the pick's own UPDATE
-- (deferred_claims off), and by the deferred claims' UPDATE (REPEATABLE
-- READ, where the direct write declines). The hold is the one in force at
-- the pickup, not at the write. A heartbeat keeps the kind of hold.
SELECT count(pqrun.enqueue('hold')) AS enqueued FROM generate_series(1, 5);
SET pqrun.claim_hold = session;
BEGIN;
SELECT count(*) AS picked FROM pqrun.pickup('w22', job_types => '{hold}');
SET LOCAL pqrun.deferred_claims = off;
SELECT count(*) AS picked FROM pqrun.pickup('w22', job_types => '{hold}');
COMMIT;
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT count(*) AS picked FROM pqrun.pickup('w22', job_types => '{hold}');
COMMIT;
BEGIN;
SELECT count(*) AS picked FROM pqrun.pickup('w23', job_types => '{hold}');
RESET pqrun.claim_hold;
COMMIT;
SELECT locked_by, holder_pid = pg_backend_pid() AND holder_started = pqrun._backend_started() AS held_by_me
  FROM pqrun.job_live WHERE job_type = 'hold' AND status = 'RUNNING' ORDER BY id;
SELECT count(*) AS picked FROM pqrun.pickup('w24', job_types => '{hold}');
SELECT locked_by, holder_pid IS NULL AND holder_started IS NULL AS held_by_lease
  FROM pqrun.job_live WHERE job_type = 'hold' AND locked_by = 'w24';
SELECT pqrun.heartbeat(id) FROM pqrun.job_live WHERE job_type = 'hold' AND locked_by IN ('w22', 'w24');
SELECT locked_by, holder_pid IS NOT NULL AS held_by_session
  FROM pqrun.job_live WHERE job_type = 'hold' AND status = 'RUNNING' ORDER BY id;
SELECT pqrun.mark_done(id) FROM pqrun.job_live WHERE job_type = 'hold';

-- 17. An operator's CHECK constraint holds for claims written below the
-- executor: the commit that would break it fails and the job stays READY.
-- An operator's trigger on job_live sees every claim (written in SQL).
SELECT pqrun.enqueue('guarded') AS guarded \gset
ALTER TABLE pqrun.job_live ADD CONSTRAINT no_banned_worker CHECK (locked_by IS DISTINCT FROM 'banned');
\set VERBOSITY terse
SELECT count(*) AS picked FROM pqrun.pickup('banned', job_types => '{guarded}');
\set VERBOSITY default
SELECT status, attempts, locked_by FROM pqrun.jobs WHERE id = :guarded;
ALTER TABLE pqrun.job_live DROP CONSTRAINT no_banned_worker;
CREATE TABLE claim_log (id bigint, status text);
CREATE FUNCTION log_claim() RETURNS trigger LANGUAGE plpgsql AS
  $$ BEGIN INSERT INTO public.claim_log VALUES (NEW.id, NEW.status); RETURN NEW; END $$;
CREATE TRIGGER log_claim AFTER UPDATE ON pqrun.job_live FOR EACH ROW EXECUTE FUNCTION log_claim();
SELECT count(*) AS picked FROM pqrun.pickup('allowed', job_types => '{guarded}');
SELECT id = :guarded AS is_guarded, status FROM claim_log;
DROP TRIGGER log_claim ON pqrun.job_live;
SELECT status, attempts, locked_by FROM pqrun.jobs WHERE id = :guarded;

-- 18. An operator's trigger that suppresses pqrun's writes (BEFORE ... RETURN
-- NULL) gets 27000 and the job stays as it was. On 0.15.0 every pickup
-- raised XX000 "pqrun: wrote 0 of 1 deferred claims", and mark_done a
-- misleading 55000 "lease token does not match" without any lease.
SELECT pqrun.enqueue('suppressed') AS suppressed \gset
CREATE FUNCTION suppress() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NULL; END $$;
CREATE TRIGGER suppress_claims BEFORE UPDATE ON pqrun.job_live FOR EACH ROW EXECUTE FUNCTION suppress();
\set VERBOSITY sqlstate
SELECT count(*) AS picked FROM pqrun.pickup('w25', job_types => '{suppressed}');
\set VERBOSITY default
SELECT status, attempts, locked_by FROM pqrun.jobs WHERE id = :suppressed;
DROP TRIGGER suppress_claims ON pqrun.job_live;
SELECT count(*) AS picked FROM pqrun.pickup('w25', job_types => '{suppressed}');
CREATE TRIGGER suppress_finishes BEFORE DELETE ON pqrun.job_live FOR EACH ROW EXECUTE FUNCTION suppress();
\set VERBOSITY sqlstate
SELECT pqrun.mark_done(:suppressed);
SELECT pqrun.mark_done(:suppressed, lease_token => (SELECT lease_token FROM pqrun.jobs WHERE id = :suppressed));
SELECT pqrun.mark_done(:suppressed, lease_token => gen_random_uuid());
\set VERBOSITY default
DROP TRIGGER suppress_finishes ON pqrun.job_live;
SELECT status, attempts, locked_by FROM pqrun.jobs WHERE id = :suppressed;
SELECT pqrun.mark_done(:suppressed);

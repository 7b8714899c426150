-- finish_and_claim: mark_done_and_pickup finishes the jobs a worker completed
-- and claims its next ones in one call and one transaction. The finish is
-- as fenced as mark_done (a stale lease finishes nothing and claims
-- nothing), never waits, and releases dependents and FIFO successors at
-- its commit.
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS pqrun CASCADE;
CREATE EXTENSION pqrun;
RESET client_min_messages;
\pset null '(null)'

SELECT pqrun.enqueue('a', jsonb_build_object('n', g), priority => 10 - g) FROM generate_series(1, 4) g;

-- 1. Nothing to finish: a pickup that never waits.
SELECT id, status, attempts FROM pqrun.mark_done_and_pickup('w1', NULL);
SELECT id, lease_token AS l1 FROM pqrun.jobs WHERE id = 1 \gset

-- 2. Finish job 1 with its lease and result, claim the next: one row back,
-- both written by one transaction (one xmin).
SELECT id, status, attempts, locked_by FROM pqrun.mark_done_and_pickup('w1', ARRAY[1], ARRAY[:'l1'::uuid],
	ARRAY['{"sum": 1}'::jsonb]);
SELECT id, status, result, outcome FROM pqrun.job_done ORDER BY id;
SELECT count(DISTINCT xmin::text) AS transactions FROM (
	SELECT xmin FROM pqrun.job_done WHERE id = 1 UNION ALL SELECT xmin FROM pqrun.job_live WHERE id = 2) t;

-- 3. A stale lease: 55000, nothing finished and nothing claimed.
\set ON_ERROR_STOP 0
SELECT * FROM pqrun.mark_done_and_pickup('w1', ARRAY[2], ARRAY[gen_random_uuid()]);
\set ON_ERROR_STOP 1
SELECT id, status FROM pqrun.jobs ORDER BY id;

-- 4. A batch: finish one (no lease: unfenced), claim up to three; then
-- finish those with nothing left to claim: no row, at once.
SELECT id, status FROM pqrun.mark_done_and_pickup('w1', ARRAY[2], batch_size => 3) ORDER BY id;
SELECT count(*) AS claimed FROM pqrun.mark_done_and_pickup('w1', ARRAY[3, 4], batch_size => 3);
SELECT status, count(*) FROM pqrun.jobs GROUP BY 1 ORDER BY 1;
SELECT job_id, attempt, outcome FROM pqrun.job_attempts ORDER BY job_id;

-- 5. A dependent and a FIFO successor are released by the finish, and the
-- same call may claim them: they are READY to this transaction.
SELECT pqrun.enqueue('parent') AS parent \gset
SELECT pqrun.enqueue('child', depends_on => ARRAY[:parent]) AS child \gset
SELECT pqrun.enqueue('f', fifo_key => 'g') AS f1 \gset
SELECT pqrun.enqueue('f', fifo_key => 'g') AS f2 \gset
SELECT array_agg(id ORDER BY id) AS running FROM pqrun.pickup('w2', batch_size => 5) \gset
SELECT :'running' AS running;
SELECT id, job_type FROM pqrun.mark_done_and_pickup('w2', :'running'::bigint[], batch_size => 5) ORDER BY id;
SELECT id, job_type, status FROM pqrun.jobs WHERE id > 4 ORDER BY id;

-- 6. Filters as pickup's: only the job types asked for.
SELECT pqrun.enqueue('x') AS x \gset
SELECT pqrun.enqueue('y') AS y \gset
SELECT array_agg(id) AS run2 FROM pqrun.jobs WHERE status = 'RUNNING' \gset
SELECT job_type FROM pqrun.mark_done_and_pickup('w3', :'run2'::bigint[], job_types => ARRAY['y']);
SELECT job_type, status FROM pqrun.jobs WHERE job_type IN ('x', 'y') ORDER BY job_type;

-- 7. Bad input: 22023, nothing finished.
\set ON_ERROR_STOP 0
SELECT * FROM pqrun.mark_done_and_pickup(NULL, NULL);
SELECT * FROM pqrun.mark_done_and_pickup('w3', ARRAY[(SELECT id FROM pqrun.jobs WHERE job_type = 'y'), NULL]);
SELECT * FROM pqrun.mark_done_and_pickup('w3', ARRAY[1, 1]);
SELECT * FROM pqrun.mark_done_and_pickup('w3', ARRAY[1], ARRAY[]::uuid[]);
SELECT * FROM pqrun.mark_done_and_pickup('w3', ARRAY[1], results => ARRAY['{}'::jsonb, '{}']);
SELECT * FROM pqrun.mark_done_and_pickup('w3', NULL, results => ARRAY['{}'::jsonb]);
SELECT * FROM pqrun.mark_done_and_pickup('w3', ARRAY[[1]]);
SELECT * FROM pqrun.mark_done_and_pickup('w3', NULL, batch_size => 0);
\set ON_ERROR_STOP 1
SELECT job_type, status FROM pqrun.jobs WHERE job_type = 'y';

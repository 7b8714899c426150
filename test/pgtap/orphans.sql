-- test/pgtap/orphans.sql — orphan rescue knows a holder by process id and start.
--
-- A RUNNING job claimed under pqrun.claim_hold = session remembers the
-- session that picked it up or last sent its heartbeat: its process id and
-- when it started (holder_pid, holder_started); a job held by its lease
-- (the default) remembers none and is never rescued. Process ids are reused (after a crash, a reboot, in a
-- restarted container, in a restored dump), so a live backend with that id
-- holds the job only if it is that session. A previous session with this
-- session's process id is staged by giving a claim another start. Jobs
-- claimed before 0.5.0 (holder_started NULL) are judged by process id alone.
-- Everything runs in one rolled-back transaction on a queue of its own; the
-- workers of the database cannot see its jobs.
BEGIN;
SELECT plan(12);
SET LOCAL pqrun.claim_hold = session;

SELECT pqrun.enqueue('held', queue => 'tap_orphan') AS held,
       pqrun.enqueue('reused', queue => 'tap_orphan') AS reused,
       pqrun.enqueue('heartbeat', queue => 'tap_orphan') AS beat,
       pqrun.enqueue('before-0.5', queue => 'tap_orphan') AS old,
       pqrun.enqueue('gone', queue => 'tap_orphan') AS gone \gset
SELECT is((SELECT count(*) FROM pqrun.pickup('w1', queues => '{tap_orphan}', batch_size => 5)), 5::bigint,
	'this session holds five jobs');
SET LOCAL pqrun.claim_hold = lease;
SELECT pqrun.enqueue('leased', queue => 'tap_lease') AS leased \gset
SELECT is((SELECT count(*) FROM pqrun.pickup('w1', queues => '{tap_lease}')), 1::bigint, 'and one by its lease');
SELECT results_eq(format('SELECT holder_pid, holder_started FROM pqrun.job_live WHERE id = %s', :leased),
	$$VALUES (NULL::int, NULL::timestamptz)$$, 'which names no holder (internal columns)');
SELECT results_eq($$SELECT DISTINCT holder_pid = pg_backend_pid(), holder_started = backend_start
	FROM pqrun.job_live JOIN pg_stat_activity ON pid = pg_backend_pid() WHERE queue = 'tap_orphan'$$,
	$$VALUES (true, true)$$, 'each remembers this session''s process id and start (internal columns)');

-- Internal columns: two jobs as a previous session with this process id
-- would have left them, one of them then getting a heartbeat from this
-- session; one claimed before 0.5.0; one whose holder's id is free.
UPDATE pqrun.job_live SET holder_started = holder_started - interval '1 hour' WHERE id IN (:reused, :beat);
SELECT lives_ok(format('SELECT pqrun.heartbeat(%s)', :beat), 'a heartbeat from this session');
UPDATE pqrun.job_live SET holder_started = NULL WHERE id = :old;
UPDATE pqrun.job_live SET holder_pid = 0 WHERE id = :gone;

SELECT is((SELECT (pqrun.run_maintenance()->>'orphaned')::int), 2, 'one round rescues two orphans');
SELECT results_eq(format('SELECT id, status::text FROM pqrun.jobs WHERE id IN (%s, %s, %s, %s, %s, %s) ORDER BY id',
	:held, :reused, :beat, :old, :gone, :leased),
	format($$VALUES (%s::bigint, 'RUNNING'), (%s, 'READY'), (%s, 'RUNNING'), (%s, 'RUNNING'), (%s, 'READY'), (%s, 'RUNNING')$$,
	:held, :reused, :beat, :old, :gone, :leased),
	'an earlier session''s and a gone one''s: rescued; this session''s, by heartbeat, by process id before 0.5.0, by lease: kept');
SELECT results_eq(format($$SELECT outcome FROM pqrun.job_attempts WHERE job_id = %s$$, :reused),
	$$VALUES ('orphaned'::text)$$, 'the rescued attempt is ended as orphaned');
SELECT is((SELECT last_error FROM pqrun.jobs WHERE id = :reused),
	'orphaned: the backend holding the job exited', 'with the orphan''s error');
SELECT is((SELECT holder_started FROM pqrun.job_live WHERE id = :reused), NULL,
	'a job put back has no holder (internal column)');
SELECT is((SELECT (pqrun.run_maintenance()->>'orphaned')::int), 0, 'the next round finds no orphan');
SELECT lives_ok(format('SELECT pqrun.mark_done(%s)', :beat), 'the job held through its heartbeat is still its worker''s');

SELECT * FROM finish();
ROLLBACK;

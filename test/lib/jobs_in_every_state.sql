-- test/lib/jobs_in_every_state.sql — jobs 1 to 10 in every state, for tests
-- that must carry them across something (an update, a dump and restore).
-- Runs against a fresh `CREATE EXTENSION pqrun` (any released version).
-- Job 6 stays READY: the test picks it up from a session that stays alive.
-- The 'tick' schedule fires every second from the maintenance worker.
SELECT pqrun.enqueue('done', '{"k": 1}');                               -- 1
SELECT pqrun.enqueue('failed', max_attempts => 1);                      -- 2
SELECT pqrun.enqueue('cancelled');                                      -- 3
SELECT pqrun.enqueue('ready', '{"k": 4}', priority => 3, dedupe_key => 'ready-4');  -- 4
SELECT pqrun.enqueue('delayed', run_after => now() + interval '1 day'); -- 5
SELECT pqrun.enqueue('held');                                           -- 6
SELECT pqrun.enqueue('dependent', depends_on => ARRAY[6::bigint]);      -- 7
SELECT pqrun.enqueue('fifo', fifo_key => 'g');                          -- 8
SELECT pqrun.enqueue('fifo', fifo_key => 'g');                          -- 9
SELECT pqrun.enqueue('retried', max_attempts => 3);                     -- 10
SELECT id FROM pqrun.pickup('old', job_types => ARRAY['done', 'failed']);
SELECT id FROM pqrun.pickup('old', job_types => ARRAY['failed', 'done']);
SELECT id FROM pqrun.pickup('old', job_types => ARRAY['retried']);
SELECT pqrun.mark_done(1, '{"r": 1}');
SELECT pqrun.mark_error(2, 'boom');
SELECT pqrun.mark_error(10, 'try again');  -- READY after a backoff, its attempt in attempt_log
SELECT pqrun.cancel(3, 'not needed');
SELECT pqrun.schedule('tick', 'tick', run_every => '1 second');

-- validation: every bad input of API.md's "Bad input" table raises its
-- SQLSTATE and changes nothing.
--   22023  NULL or empty job_type, max_attempts < 1, timeout_seconds <= 0,
--          batch_size < 1, negative wait, unknown id in depends_on,
--          enqueue_batch input that is not an array of objects,
--          empty job_types/queues arrays
--   P0002  unknown job_id
--   55000  job not RUNNING, lease mismatch
--   54000  payload larger than pqrun.max_payload_bytes
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS pqrun CASCADE;
CREATE EXTENSION pqrun;
RESET client_min_messages;
\pset null '(null)'

-- Some state to protect: a READY job, a RUNNING one, a DONE one.
SELECT pqrun.enqueue('done', dedupe_key => 'k1') AS id;  -- 1
SELECT pqrun.enqueue('running') AS id;  -- 2
SELECT pqrun.enqueue('ready') AS id;  -- 3
SELECT id FROM pqrun.pickup('w', batch_size => 2);
SELECT pqrun.mark_done(1);
-- :state shows every job with the fields an error could have touched.
\set state 'SELECT count(*) AS jobs, string_agg(job_type || \':\' || status || \':\' || attempts || \':\' || coalesce(last_error, \'-\'), \' \' ORDER BY id) AS state FROM pqrun.jobs;'
:state

\set VERBOSITY sqlstate

-- 1. enqueue: 22023
SELECT pqrun.enqueue(NULL);
SELECT pqrun.enqueue('');
SELECT pqrun.enqueue(job_type => NULL, dedupe_key => 'k1');
SELECT pqrun.enqueue('x', max_attempts => 0);
SELECT pqrun.enqueue('x', max_attempts => -1);
SELECT pqrun.enqueue('x', timeout_seconds => 0);
SELECT pqrun.enqueue('x', timeout_seconds => -30);
SELECT pqrun.enqueue('x', depends_on => ARRAY[999]::bigint[]);
SELECT pqrun.enqueue('x', depends_on => ARRAY[NULL]::bigint[]);
-- job_type and queue over 1,000 bytes (0.16.0 indexes both: a longer one
-- made the index row too large, 54000; filters.sh enqueues 1,000 bytes of
-- each).
SELECT pqrun.enqueue(repeat('t', 1001));
SELECT pqrun.enqueue('x', queue => repeat('q', 1001));
SELECT pqrun.enqueue_batch(jsonb_build_array(jsonb_build_object('job_type', 'x', 'queue', repeat('q', 100000))));
SELECT pqrun.schedule('long', repeat('t', 1001), run_every => '1 hour');
SELECT pqrun.schedule('long', 'x', run_every => '1 hour', queue => repeat('q', 1001));
-- NULL for an argument that has a default is rejected too, not silently
-- replaced (run_after, timeout_seconds, dedupe_key, depends_on and fifo_key
-- accept NULL).
SELECT pqrun.enqueue('x', payload => NULL);
SELECT pqrun.enqueue('x', priority => NULL);
SELECT pqrun.enqueue('x', max_attempts => NULL);
SELECT pqrun.enqueue('x', queue => NULL);
SELECT pqrun.enqueue('x', queue => '');
:state

-- 2. pickup: 22023
SELECT * FROM pqrun.pickup('w', batch_size => 0);
SELECT * FROM pqrun.pickup('w', batch_size => -1);
SELECT * FROM pqrun.pickup('w', wait => '-1 ms');
SELECT * FROM pqrun.pickup('w', wait => '-1 day');
SELECT * FROM pqrun.pickup('w', job_types => '{}');
SELECT * FROM pqrun.pickup('w', queues => '{}');
SELECT * FROM pqrun.pickup('w', job_types => '{}', queues => '{default}');
SELECT * FROM pqrun.pickup('w', batch_size => NULL);
SELECT * FROM pqrun.pickup('w', wait => NULL);
SELECT * FROM pqrun.pickup(NULL);
:state

-- 3. enqueue_batch input that is not an array of objects: 22023
SELECT * FROM pqrun.enqueue_batch(NULL);
SELECT * FROM pqrun.enqueue_batch('null');
SELECT * FROM pqrun.enqueue_batch('1');
SELECT * FROM pqrun.enqueue_batch('"job"');
SELECT * FROM pqrun.enqueue_batch('true');
SELECT * FROM pqrun.enqueue_batch('{"job_type": "x"}');
SELECT * FROM pqrun.enqueue_batch('[1]');
SELECT * FROM pqrun.enqueue_batch('[null]');
SELECT * FROM pqrun.enqueue_batch('[[{"job_type": "x"}]]');
SELECT * FROM pqrun.enqueue_batch('[{"job_type": "x"}, "y"]');
-- unknown key
SELECT * FROM pqrun.enqueue_batch('[{"job_type": "x", "jobtype": "y"}]');
SELECT * FROM pqrun.enqueue_batch('[{"job_type": "x"}, {"job_type": "x", "attempts": 3}]');
-- wrong JSON type for a key
SELECT * FROM pqrun.enqueue_batch('[{"job_type": 1}]');
SELECT * FROM pqrun.enqueue_batch('[{"job_type": ["x"]}]');
SELECT * FROM pqrun.enqueue_batch('[{"job_type": "x", "priority": "high"}]');
SELECT * FROM pqrun.enqueue_batch('[{"job_type": "x", "max_attempts": "5"}]');
SELECT * FROM pqrun.enqueue_batch('[{"job_type": "x", "timeout_seconds": true}]');
SELECT * FROM pqrun.enqueue_batch('[{"job_type": "x", "run_after": 12345}]');
SELECT * FROM pqrun.enqueue_batch('[{"job_type": "x", "dedupe_key": 5}]');
SELECT * FROM pqrun.enqueue_batch('[{"job_type": "x", "queue": {"name": "q"}}]');
SELECT * FROM pqrun.enqueue_batch('[{"job_type": "x", "fifo_key": false}]');
SELECT * FROM pqrun.enqueue_batch('[{"job_type": "x", "depends_on": 1}]');
SELECT * FROM pqrun.enqueue_batch('[{"job_type": "x", "depends_on": ["1"]}]');
SELECT * FROM pqrun.enqueue_batch('[{"job_type": "x", "depends_on": [1, null]}]');
-- missing, null or empty job_type, and the enqueue rules per element
SELECT * FROM pqrun.enqueue_batch('[{}]');
SELECT * FROM pqrun.enqueue_batch('[{"payload": {}}]');
SELECT * FROM pqrun.enqueue_batch('[{"job_type": null}]');
SELECT * FROM pqrun.enqueue_batch('[{"job_type": ""}]');
SELECT * FROM pqrun.enqueue_batch('[{"job_type": "x", "max_attempts": 0}]');
SELECT * FROM pqrun.enqueue_batch('[{"job_type": "x", "timeout_seconds": 0}]');
SELECT * FROM pqrun.enqueue_batch('[{"job_type": "x", "depends_on": [999]}]');
SELECT * FROM pqrun.enqueue_batch('[{"job_type": "x"}, {"job_type": "x", "max_attempts": -1}]');
:state

-- 4. Unknown job_id: P0002
SELECT pqrun.mark_done(999);
SELECT pqrun.mark_done(999, '{}', gen_random_uuid());
SELECT pqrun.mark_error(999, 'x');
SELECT pqrun.mark_error(999, 'x', true);
SELECT pqrun.heartbeat(999);
SELECT pqrun.cancel(999);
SELECT pqrun.retry(999);
:state

-- 5. Job not RUNNING, or lease mismatch: 55000
SELECT pqrun.mark_done(3);           -- READY
SELECT pqrun.mark_error(3, 'x');     -- READY
SELECT pqrun.heartbeat(3);           -- READY
SELECT pqrun.mark_done(1);           -- DONE
SELECT pqrun.mark_error(1, 'x', true);  -- DONE
SELECT pqrun.heartbeat(1);           -- DONE
SELECT pqrun.mark_done(2, NULL, '00000000-0000-0000-0000-000000000000');  -- RUNNING, other lease
SELECT pqrun.mark_error(2, 'x', false, '00000000-0000-0000-0000-000000000000');
SELECT pqrun.heartbeat(2, '00000000-0000-0000-0000-000000000000');
:state

-- 6. Payload larger than pqrun.max_payload_bytes: 54000
SET pqrun.max_payload_bytes = 100;
SHOW pqrun.max_payload_bytes;
SELECT pqrun.enqueue('big', payload => jsonb_build_object('data', repeat('x', 200)));
SELECT * FROM pqrun.enqueue_batch(jsonb_build_array(jsonb_build_object('job_type', 'big', 'payload', jsonb_build_object('data', repeat('x', 200)))));
SELECT * FROM pqrun.enqueue_batch(jsonb_build_array(jsonb_build_object('job_type', 'small'),
                                                    jsonb_build_object('job_type', 'big', 'payload', jsonb_build_object('data', repeat('x', 200)))));
-- a dedupe hit does not make a too-big payload acceptable
SELECT pqrun.enqueue('big', payload => jsonb_build_object('data', repeat('x', 200)), dedupe_key => 'k1');
:state
\set VERBOSITY default
-- Payloads within the limit are accepted, directly and in a batch.
SELECT pqrun.enqueue('small', payload => '{"data": "xxxxxxxxxx"}') IS NOT NULL AS accepted;
SELECT count(*) AS ids FROM pqrun.enqueue_batch('[{"job_type": "small", "payload": {"data": "xxxxxxxxxx"}}]');
-- The default limit (1 MB) accepts a payload of 200 kB and rejects one of 2 MB.
RESET pqrun.max_payload_bytes;
SHOW pqrun.max_payload_bytes;
SELECT pqrun.enqueue('medium', payload => jsonb_build_object('data', repeat('x', 200000))) IS NOT NULL AS accepted;
\set VERBOSITY sqlstate
SELECT pqrun.enqueue('huge', payload => jsonb_build_object('data', repeat('x', 2000000)));
\set VERBOSITY default
SELECT job_type, count(*) FROM pqrun.jobs WHERE job_type IN ('small', 'medium', 'big', 'huge') GROUP BY job_type ORDER BY job_type;

-- 7. Other arguments of the operating functions.
\set VERBOSITY sqlstate
SELECT pqrun.reap_stale('-1 minute');
SELECT pqrun.reap_stale(NULL);
SELECT pqrun.purge('-1 day');
SELECT pqrun.purge(NULL);
SELECT pqrun.purge('1 day', NULL);
SELECT pqrun.mark_error(2, 'x', retry_after => '-1 second');
SELECT pqrun.mark_error(2, 'x', terminal => NULL);
SELECT pqrun.mark_done(NULL);
SELECT pqrun.cancel(NULL);
SELECT pqrun.retry(NULL);
\set VERBOSITY default
:state

-- The messages, for the record.
SELECT pqrun.enqueue(NULL);
SELECT pqrun.enqueue('x', max_attempts => 0);
SELECT pqrun.enqueue('x', timeout_seconds => 0);
SELECT * FROM pqrun.pickup('w', batch_size => 0);
SELECT * FROM pqrun.pickup('w', wait => '-1 ms');
SELECT * FROM pqrun.pickup('w', queues => '{}');
SELECT * FROM pqrun.enqueue_batch('{"job_type": "x"}');
SELECT * FROM pqrun.enqueue_batch('[{"job_type": "x"}, 7]');
SELECT * FROM pqrun.enqueue_batch('[{"job_type": "x", "prio": 1}]');
SELECT * FROM pqrun.enqueue_batch('[{"job_type": "x", "priority": "high"}]');
SELECT pqrun.retry(999);
SELECT pqrun.heartbeat(3);
SET pqrun.max_payload_bytes = 100;
SELECT pqrun.enqueue('big', payload => jsonb_build_object('data', repeat('x', 200)));
SELECT * FROM pqrun.enqueue_batch('[{"job_type": "a"}, {"job_type": "b", "payload": {"data": "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}}]');
RESET pqrun.max_payload_bytes;
:state

-- 8. In enqueue_batch, a number that is not an integer is the wrong JSON
-- type for an integer key: 22023, not rounded (a depends_on of 1.5 must not
-- silently mean job 2).
\set VERBOSITY sqlstate
SELECT * FROM pqrun.enqueue_batch('[{"job_type": "x", "priority": 1.5}]');
SELECT * FROM pqrun.enqueue_batch('[{"job_type": "x", "max_attempts": 2.5}]');
SELECT * FROM pqrun.enqueue_batch('[{"job_type": "x", "timeout_seconds": 0.5}]');
SELECT * FROM pqrun.enqueue_batch('[{"job_type": "x", "depends_on": [1.5]}]');
\set VERBOSITY default
:state

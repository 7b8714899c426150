-- key_rates: rate limits per concurrency key and rate weights of jobs
-- (0.11.0, docs/flow-control.md). set_key_rate_limit gives each key of a
-- queue a token bucket of its own (or one key its own rate); a job's
-- rate_weight is the tokens its claim takes from every rate limit that
-- applies to it: a claim needs one token, so a heavy job may leave a bucket
-- below zero. Rates here are so slow (0.001 per second) that no bucket
-- refills while the test runs: what a pickup may claim is the burst.
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS pqrun CASCADE;
CREATE EXTENSION pqrun;
RESET client_min_messages;
\pset null '(null)'
\set controls 'SELECT queue, concurrency_key, keyed, rate, burst, rate_per_key, burst_per_key FROM pqrun.queue_controls ORDER BY queue, concurrency_key NULLS FIRST;'
\set claimed 'SELECT concurrency_key, count(*) FROM pqrun.job_live WHERE queue = ''r'' AND status = ''RUNNING'' GROUP BY 1 ORDER BY 1 NULLS FIRST;'

-- 1. Bad input: 22023, nothing changes.
\set VERBOSITY sqlstate
SELECT pqrun.set_key_rate_limit(NULL, 1);
SELECT pqrun.set_key_rate_limit('', 1);
SELECT pqrun.set_key_rate_limit('q', 0);
SELECT pqrun.set_key_rate_limit('q', -1);
SELECT pqrun.set_key_rate_limit('q', 'NaN');
SELECT pqrun.set_key_rate_limit('q', 'Infinity');
SELECT pqrun.set_key_rate_limit('q', 1e7);
SELECT pqrun.set_key_rate_limit('q', 1, 0);
SELECT pqrun.set_key_rate_limit('q', 1, NULL);
SELECT pqrun.set_key_rate_limit('q', 1, 1000001);
SELECT pqrun.set_key_rate_limit('q', 1, 1, '');
SELECT pqrun.set_key_rate_limit('q', 1, 1, repeat('k', 1001));
SELECT pqrun.enqueue('a', rate_weight => 0);
SELECT pqrun.enqueue('a', rate_weight => -1);
SELECT pqrun.enqueue('a', rate_weight => 1000001);
SELECT pqrun.enqueue_batch('[{"job_type": "a", "rate_weight": 0}]');
SELECT pqrun.enqueue_batch('[{"job_type": "a", "rate_weight": 1.5}]');
SELECT pqrun.enqueue_batch('[{"job_type": "a", "rate_weight": "2"}]');
SELECT pqrun.enqueue_batch('[{"job_type": "a"}, {"job_type": "a", "rate_weight": 2000000}]');
\set VERBOSITY default
SELECT count(*) AS controls FROM pqrun.queue_control;
SELECT count(*) AS jobs FROM pqrun.jobs;

-- 2. A job's weight is its own, in pqrun.jobs and in what pickup returns
-- (NULL: one token).
SELECT pqrun.enqueue('a', queue => 'show', rate_weight => 3) > 0 AS enqueued;
SELECT count(*) FROM pqrun.enqueue_batch('[{"job_type": "a", "queue": "show", "rate_weight": 2},
                                           {"job_type": "a", "queue": "show", "rate_weight": null}]');
SELECT rate_weight FROM pqrun.jobs WHERE queue = 'show' ORDER BY id;
SELECT rate_weight FROM pqrun.pickup('w', queues => ARRAY['show'], batch_size => 3) ORDER BY id;

-- 3. A rate limit per key: each key has a bucket of its own (burst 2
-- here), so each key gets at most 2 claims; jobs without a key are not
-- limited by it.
SELECT pqrun.set_key_rate_limit('r', 0.001, 2);
SELECT count(pqrun.enqueue('a', queue => 'r', concurrency_key => k))
  FROM unnest(ARRAY['a', 'b', 'c']) k, generate_series(1, 5);
SELECT count(pqrun.enqueue('a', queue => 'r')) FROM generate_series(1, 3);
:controls
SELECT count(*) AS claimed FROM pqrun.pickup('w', queues => ARRAY['r'], batch_size => 20);
:claimed
SELECT count(*) AS claimed FROM pqrun.pickup('w', queues => ARRAY['r'], batch_size => 20);
-- queue_controls counts the keys held back (without a token).
SELECT queue, rate_limited_keys FROM pqrun.queue_controls WHERE queue = 'r';
-- A key's own rate limit replaces the queue's for that key (a new bucket,
-- full: 3 more of c).
SELECT pqrun.set_key_rate_limit('r', 0.001, 3, 'c');
SELECT count(*) AS claimed FROM pqrun.pickup('w', queues => ARRAY['r'], batch_size => 20);
:claimed
-- A new key starts with a full bucket.
SELECT count(pqrun.enqueue('a', queue => 'r', concurrency_key => 'd')) FROM generate_series(1, 5);
-- A claim rolled back gives its tokens back, also to a savepoint.
BEGIN;
SELECT count(*) AS claimed FROM pqrun.pickup('w', queues => ARRAY['r'], batch_size => 20);
ROLLBACK;
BEGIN;
SAVEPOINT s;
SELECT count(*) AS claimed FROM pqrun.pickup('w', queues => ARRAY['r'], batch_size => 20);
ROLLBACK TO s;
SELECT count(*) AS claimed FROM pqrun.pickup('w', queues => ARRAY['r'], batch_size => 20);
COMMIT;
:claimed
-- A finished job does not give its token back: a rate counts claims.
SELECT count(pqrun.mark_done(id)) FROM pqrun.job_live WHERE queue = 'r' AND status = 'RUNNING';
SELECT count(*) AS claimed FROM pqrun.pickup('w', queues => ARRAY['r'], batch_size => 20);

-- 4. Weights: a claim needs one token and takes its weight. A queue with
-- 5 tokens: a job of weight 3 leaves 2, the next of weight 3 still finds a
-- token and leaves -1, and then nothing is claimed until the bucket refills.
SELECT pqrun.set_rate_limit('wq', 0.001, 5);
SELECT pqrun.enqueue('a', queue => 'wq', rate_weight => 3, priority => 3) > 0,
       pqrun.enqueue('a', queue => 'wq', rate_weight => 3, priority => 2) > 0,
       pqrun.enqueue('a', queue => 'wq', priority => 1) > 0;
SELECT priority, rate_weight FROM pqrun.pickup('w', queues => ARRAY['wq'], batch_size => 3);
SELECT round(tokens) AS tokens FROM pqrun.queue_controls WHERE queue = 'wq';
SELECT count(*) AS claimed FROM pqrun.pickup('w', queues => ARRAY['wq'], batch_size => 3);
-- A rollback gives the weight back.
SELECT pqrun.set_rate_limit('wb', 0.001, 4);
SELECT count(pqrun.enqueue('a', queue => 'wb', rate_weight => 2)) FROM generate_series(1, 3);
BEGIN;
SELECT count(*) AS claimed FROM pqrun.pickup('w', queues => ARRAY['wb'], batch_size => 3);
SELECT round(tokens) AS tokens FROM pqrun.queue_controls WHERE queue = 'wb';
ROLLBACK;
SELECT round(tokens) AS tokens FROM pqrun.queue_controls WHERE queue = 'wb';
-- The weight counts in a key's bucket and in the queue's at once.
SELECT pqrun.set_key_rate_limit('wk', 0.001, 4);
SELECT pqrun.set_rate_limit('wk', 0.002, 100);
SELECT count(pqrun.enqueue('a', queue => 'wk', concurrency_key => 'x', rate_weight => 2)) FROM generate_series(1, 3);
SELECT count(*) AS claimed FROM pqrun.pickup('w', queues => ARRAY['wk'], batch_size => 3);
SELECT round(tokens) AS queue_tokens FROM pqrun.queue_controls WHERE queue = 'wk';

-- 5. metrics(): the rate of each key and of the keys with their own, the
-- keys held back, and the tokens of a key's own bucket. A queue's own rate
-- and limit are not its keys' (wk: 0.002 for the queue, 0.001 per key; a
-- cap of 7, 3 per key).
SELECT pqrun.set_concurrency_limit('wk', 7);
SELECT pqrun.set_key_limit('wk', 3);
SELECT line FROM regexp_split_to_table(pqrun.metrics(), E'\n') line
 WHERE line ~ '^pqrun_(key|concurrency)_limit\{queue="wk"' ORDER BY 1;
SELECT line FROM regexp_split_to_table(pqrun.metrics(), E'\n') line
 WHERE line ~ '^pqrun_key_rate_limit' OR line ~ '^pqrun_rate_limit' ORDER BY 1;
SELECT regexp_replace(line, ' [-0-9.e]+$', ' (tokens)') AS line
  FROM regexp_split_to_table(pqrun.metrics(), E'\n') line WHERE line ~ '^pqrun_key_rate_tokens';

-- 6. NULL removes a rate limit per key or a key's own; the queue stays
-- keyed, and its keys claim freely.
SELECT pqrun.set_key_rate_limit('r', NULL);
SELECT pqrun.set_key_rate_limit('r', NULL, 1, 'c');
:controls
SELECT count(*) AS claimed FROM pqrun.pickup('w', queues => ARRAY['r'], batch_size => 20);

-- 7. Only the owner and roles it grants may set them (42501).
SET client_min_messages = warning;
DROP ROLE IF EXISTS key_rates_worker;
CREATE ROLE key_rates_worker;
RESET client_min_messages;
SELECT pqrun.grant_worker('key_rates_worker');
SET ROLE key_rates_worker;
\set VERBOSITY sqlstate
SELECT pqrun.set_key_rate_limit('r', 1);
\set VERBOSITY default
SELECT pqrun.enqueue('a', queue => 'r', concurrency_key => 'e', rate_weight => 2) > 0 AS worker_enqueued;
RESET ROLE;
SET client_min_messages = warning;
DROP OWNED BY key_rates_worker;
DROP ROLE key_rates_worker;

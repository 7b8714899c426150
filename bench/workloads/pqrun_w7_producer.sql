-- W7/W7h producer (pqrun): enqueue_batch of a JSON array of 128 jobs (:batch,
-- the text a client sends) on a fixed schedule: client c of :nprod sends
-- its k-th batch at :t0 + (k * :nprod + c) * :period (epoch seconds), late
-- ones at once, so the offered rate is 128 / :period jobs/s without the
-- bursts of a Poisson schedule. The batch's ids go to bench.w7_batches in
-- the same statement, whose row's commit timestamp is the batch's commit.
-- pgbench starts each client at -D k=0.
\set due :t0 + (:k * :nprod + :client_id) * :period
SELECT pg_sleep(:due - extract(epoch FROM clock_timestamp())::float8);
INSERT INTO bench.w7_batches (ids) SELECT array_agg(id) FROM pqrun.enqueue_batch(:batch::jsonb) AS id;
\set k :k + 1

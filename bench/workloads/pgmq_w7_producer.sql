-- W7/W7h producer (pgmq-like): send_batch of 128 messages (:msgs, the jsonb[]
-- text pgmq's clients send), on W7's fixed schedule (pqrun_w7_producer.sql).
\set due :t0 + (:k * :nprod + :client_id) * :period
SELECT pg_sleep(:due - extract(epoch FROM clock_timestamp())::float8);
INSERT INTO bench.w7_batches (ids) SELECT array_agg(id) FROM pgmq.send_batch('jobs', :msgs::jsonb[]) AS id;
\set k :k + 1

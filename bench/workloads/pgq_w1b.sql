-- W1b (PgQ): one consumer step = next_batch, get_batch_events, finish_batch
-- in one transaction. PgQ consumers do not share a queue's batches, so each
-- pgbench client consumes its own queue bq<client_id> (the refill spreads the
-- jobs over them and ticks every 100 events, so a batch holds 100 events).
-- Each batch is logged (count, first and last event id) to check exactly-once.
BEGIN;
SELECT coalesce(pgq.next_batch('bq' || :client_id::text, 'bench'), 0) AS batch \gset
\if :batch > 0
INSERT INTO bench.pgq_batches (batch_id, queue, n, min_id, max_id, done_at)
SELECT :batch, 'bq' || :client_id::text, count(*), min(ev_id), max(ev_id), clock_timestamp()
  FROM pgq.get_batch_events(:batch);
SELECT pgq.finish_batch(:batch);
\endif
COMMIT;

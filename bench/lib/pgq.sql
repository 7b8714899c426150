-- bench/lib/pgq.sql — PgQ peer of the batched workloads, in database
-- bench_pgq: the pgq extension (Debian package postgresql-15-pgq3), a log of
-- consumed batches (to check exactly-once) and the refill procedures.
\set ON_ERROR_STOP on
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS pgq;
DROP SCHEMA IF EXISTS bench CASCADE;
CREATE SCHEMA bench;

-- One row per consumed batch: how many events, first and last event id.
CREATE TABLE bench.pgq_batches (
	batch_id bigint      PRIMARY KEY,
	queue    text        NOT NULL,
	n        bigint      NOT NULL,
	min_id   bigint,
	max_id   bigint,
	done_at  timestamptz NOT NULL
);

-- W1b refill: drop every queue, then create queues bq0..bq<nqueues-1> with
-- consumer 'bench' and insert `total` events spread over them, `per_batch`
-- events per transaction followed by a tick, so that each PgQ batch holds
-- `per_batch` events (what a ticker running during production would make of
-- a queue filled by producers). Ticks are forced (ticker_max_count = 1).
CREATE PROCEDURE bench.pgq_refill(nqueues int, total int, per_batch int)
LANGUAGE plpgsql AS $$
DECLARE
	q text;
	left_ int;
	n int;
BEGIN
	PERFORM pgq.drop_queue(queue_name, true) FROM pgq.queue;
	TRUNCATE bench.pgq_batches;
	FOR i IN 0 .. nqueues - 1 LOOP
		q := 'bq' || i;
		PERFORM pgq.create_queue(q);
		PERFORM pgq.set_queue_config(q, 'ticker_max_count', '1');
		PERFORM pgq.register_consumer(q, 'bench');
	END LOOP;
	COMMIT;
	FOR i IN 0 .. nqueues - 1 LOOP
		q := 'bq' || i;
		left_ := total / nqueues + CASE WHEN i < total % nqueues THEN 1 ELSE 0 END;
		WHILE left_ > 0 LOOP
			n := least(per_batch, left_);
			PERFORM pgq.insert_event(q, 'job', g::text) FROM generate_series(1, n) AS g;
			COMMIT;
			PERFORM pgq.ticker(q);
			COMMIT;
			left_ := left_ - n;
		END LOOP;
	END LOOP;
END $$;

-- E1 reset: one queue 'eq' without consumers.
CREATE PROCEDURE bench.pgq_reset_enqueue()
LANGUAGE plpgsql AS $$
BEGIN
	PERFORM pgq.drop_queue(queue_name, true) FROM pgq.queue;
	PERFORM pgq.create_queue('eq');
END $$;

-- Events ever inserted into queue q and still stored.
CREATE FUNCTION bench.pgq_event_count(q text) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
	n bigint;
BEGIN
	EXECUTE format('SELECT count(*) FROM %s', (SELECT queue_data_pfx FROM pgq.queue WHERE queue_name = q)) INTO n;
	RETURN n;
END $$;

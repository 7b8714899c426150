-- E1 (PgQ): 1,000 pgq.insert_event calls in one statement and transaction.
SELECT count(pgq.insert_event('eq', 'e1', i::text)) FROM generate_series(1, 1000) AS i;

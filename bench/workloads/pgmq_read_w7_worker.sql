-- W7 worker (pgmq-like, polling from the client): pgmq's read of up to
-- :batch messages with a visibility timeout of :vt seconds, each message
-- then archived in its own transaction, then read again at once; a read
-- that finds nothing sleeps :poll_ms ms on the client (its connection idle
-- meanwhile), as a pgmq client does that polls without read_with_poll.
-- pgbench starts each client at -D n=0 -D ids={}.
\if :n = 0
SELECT coalesce(array_agg(msg_id)::text, '{}') AS ids, count(*) AS n FROM pgmq.read('jobs', :vt, :batch) \gset
\if :n = 0
\sleep :poll_ms ms
\endif
\else
SELECT pgmq.archive('jobs', (:ids::bigint[])[1]) AS archived, ((:ids::bigint[])[2:])::text AS ids \gset
\set n :n - 1
\endif

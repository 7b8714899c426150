-- W7/W7h worker (pgmq-like), one client of a fleet: pgmq's long poll,
-- read_with_poll of up to :batch messages with a visibility timeout of :vt
-- seconds, polling every 100 ms for up to :poll_s seconds (its defaults: 5 s,
-- 100 ms); then each message is archived in its own transaction (pgmq's
-- archive keeps it, as pqrun keeps a finished job), then back to
-- read_with_poll. pgmq has no job types: a queue per type is its filter, and
-- every job here is in queue 'jobs'. pgbench starts each client at -D n=0
-- -D ids={}.
\if :n = 0
SELECT coalesce(array_agg(msg_id)::text, '{}') AS ids, count(*) AS n
  FROM pgmq.read_with_poll('jobs', :vt, :batch, :poll_s, 100) \gset
\else
SELECT pgmq.archive('jobs', (:ids::bigint[])[1]) AS archived, ((:ids::bigint[])[2:])::text AS ids \gset
\set n :n - 1
\endif

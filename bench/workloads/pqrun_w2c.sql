-- W2c (pqrun): W2 with finish-and-claim consumers. Even clients enqueue one
-- job per transaction; odd clients finish the job they hold and claim the
-- next in one call (mark_done_and_pickup), and only when it claims nothing
-- wait in pqrun's long poll. With a single client (-D nclients=1) that
-- client does both. pgbench starts each client at -D id=0.
\if :nclients = 1 or :client_id % 2 = 0
SELECT pqrun.enqueue('w2', '{"n": 1}');
\endif
\if :nclients = 1 or :client_id % 2 = 1
SELECT coalesce((SELECT id FROM pqrun.mark_done_and_pickup('w' || :client_id::text,
       CASE WHEN :id > 0 THEN ARRAY[:id]::bigint[] END)), 0) AS id \gset
\if :id = 0
SELECT coalesce((SELECT id FROM pqrun.pickup('w' || :client_id::text, wait => '100ms')), 0) AS id \gset
\endif
\endif

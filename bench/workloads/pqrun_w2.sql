-- W2/W4/W5 (pqrun): even clients enqueue one job per transaction, odd
-- clients consume (pickup, mark_done, each its own transaction). With a
-- single client (-D nclients=1) that client does both. An idle consumer
-- waits in pqrun's long poll instead of spinning.
\if :nclients = 1 or :client_id % 2 = 0
SELECT pqrun.enqueue('w2', '{"n": 1}');
\endif
\if :nclients = 1 or :client_id % 2 = 1
SELECT coalesce((SELECT id FROM pqrun.pickup('w' || :client_id::text, wait => '100ms')), 0) AS id \gset
\if :id > 0
SELECT pqrun.mark_done(:id);
\endif
\endif

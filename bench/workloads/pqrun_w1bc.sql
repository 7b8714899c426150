-- W1bc (pqrun): one worker step = mark_done_and_pickup of the up to 100
-- jobs the step before claimed, claiming up to 100 more: one transaction
-- per batch (pgbench starts each client at -D ids={}).
SELECT coalesce(array_agg(id)::text, '{}') AS ids
  FROM pqrun.mark_done_and_pickup('w' || :client_id::text, :ids::bigint[], batch_size => 100) \gset

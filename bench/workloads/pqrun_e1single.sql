-- E1 reference (pqrun): one enqueue call per job and transaction.
SELECT pqrun.enqueue('e1', jsonb_build_object('n', :client_id::int));

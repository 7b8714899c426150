-- E1 reference (baseline): one INSERT per job and transaction.
INSERT INTO base.jobs (job_type, payload) VALUES ('e1', jsonb_build_object('n', :client_id::int));

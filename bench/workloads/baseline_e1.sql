-- E1 (baseline): 1,000 jobs per INSERT ... SELECT (one transaction).
INSERT INTO base.jobs (job_type, payload)
SELECT 'e1', jsonb_build_object('n', i) FROM generate_series(1, 1000) AS i;

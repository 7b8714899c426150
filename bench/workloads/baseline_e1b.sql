-- E1b (baseline): one INSERT of the 128 jobs of the JSON array :batch (the
-- text pqrun's producers send, one parameter), returning their ids.
INSERT INTO base.jobs (job_type, payload)
SELECT e->>'job_type', e->'payload' FROM jsonb_array_elements(:batch::jsonb) AS e
RETURNING id;

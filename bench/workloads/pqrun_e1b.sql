-- E1b (pqrun): enqueue_batch of a JSON array of 128 jobs, the text a client
-- sends (:batch, one parameter), reading back the ids as a client does.
SELECT id FROM pqrun.enqueue_batch(:batch::jsonb) AS id;

-- E1b (pgmq-like): send_batch of 128 messages, the jsonb[] text pgmq's
-- clients send (:msgs, one parameter), reading back the message ids.
SELECT * FROM pgmq.send_batch('jobs', :msgs::jsonb[]);

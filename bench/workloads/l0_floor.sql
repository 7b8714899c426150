-- W1 floor: the least one unbatched job can cost when its done is durable,
-- whatever the queue's design. A worker step needs a pickup round trip (here
-- one that reads and writes nothing) and a done whose commit waits for its
-- WAL flush (here the L0 update, the cheapest such commit). Each statement
-- is its own transaction, as in W1. Table l0.counters (100,000 rows).
\set id random(1, 100000)
SELECT 1;
UPDATE l0.counters SET n = n + 1 WHERE id = :id;

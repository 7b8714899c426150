-- L0 commit ceiling: one UPDATE of one random row per transaction, no queue.
-- An unbatched job needs at least two commits (pickup, done), so L0/2 is the
-- limit of W1 on this machine when both commits wait for their WAL flush.
-- Table l0.counters (100,000 rows).
\set id random(1, 100000)
UPDATE l0.counters SET n = n + 1 WHERE id = :id;

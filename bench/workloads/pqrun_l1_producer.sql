-- L1 producer (pqrun, run rate-limited with pgbench -R, in a session with
-- synchronous_commit off): enqueue one job whose payload carries the clock
-- at enqueue. One autocommit statement with an asynchronous commit, so that
-- this timestamp is within microseconds of the commit and the measured
-- figure is an upper bound of "commit -> a waiting pickup returns".
SELECT pqrun.enqueue('l1', jsonb_build_object('t', clock_timestamp()));

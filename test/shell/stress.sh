#!/usr/bin/env bash
# test/shell/stress.sh — exactly-once under concurrency, proven rather than
# assumed: every claim path, many concurrent clients, cancels, timeouts,
# rollbacks and kills, and every handout checked.
#
# Runs against the cluster in PGHOST/PGPORT/PGUSER (it must preload pqrun),
# in a database of its own that it drops at the end. The clients are
# test/shell/stress.py (python3 with psycopg 3). Takes about 50 s on a
# 2-core machine: 40 s of chaos (PQRUN_STRESS_SECONDS), 2-3 s of wind-down
# and drain (up to 45 s if orphans are not rescued), 4 s for the known
# 25P02 case, 1 s of checks; every phase is bounded and the whole run is
# killed after 150 s. PQRUN_STRESS_SEED seeds the clients' choices (the
# seed is printed; timing makes no two runs alike).
#
# Chaos phase, 17 connections at once:
#  - 3 producers enqueue 1-12 jobs per transaction (several enqueue calls,
#    or enqueue_batch, or one autocommit enqueue_batch), 20% of the
#    transactions rolled back; one of them only trickles, so that waiters
#    often outnumber jobs. Job types a, b, c, queues default and q2,
#    priorities 0-2, max_attempts 1000, 10% with timeout_seconds 1, 10%
#    delayed by 50-500 ms, 20% (PQRUN_STRESS_FIFO_SHARE) in one of 3 FIFO
#    groups, one group per transaction of separate enqueue calls;
#  - concurrency limits hold throughout: at most 3 jobs of queue q2 and 4 of
#    job type c in the default queue RUNNING at once (sampled every 0.25 s
#    with the others; q2 must reach its limit at least once);
#  - 10 consumers over every claim path, each pickup with a random filter
#    and pqrun.deferred_claims on or off (the SQL path): pickup of 1 and of
#    2-8 (or 100) without waiting; pickup(wait => 50 ms-1.5 s) of 1-4 (several
#    waiters on the same types at once); waiting pickups whose
#    statement_timeout (30-700 ms) lands during the wait; a waiting pickup
#    in a transaction block with SET LOCAL statement_timeout and/or
#    mark_done_batch; CALL await_jobs then a pickup; pickup and mark_done /
#    mark_done_batch in one transaction, with a read of pqrun.jobs in
#    between; pickup and mark_done_batch in one statement; pickups in
#    REPEATABLE READ (the SQL locking pick; 40001 allowed there only); a
#    pickup in a savepoint released or rolled back. 20% of the transactions
#    roll back. 10% of the operations run under a 1-8 ms statement_timeout,
#    so that timeouts land inside pqrun's own code (direct pick and finish,
#    claims written at COMMIT). Jobs claimed and committed are finished
#    later with mark_done, mark_done_batch or mark_error(retry_after 0-300 ms),
#    given back with release or snooze (0 or 20 ms), or get a heartbeat with
#    progress, by their lease; 4% are held 2.5 s (the reaper's turn for
#    jobs with timeout_seconds 1); 30% of successful marks are repeated with
#    the same lease, which must answer 55000;
#  - a chaos thread sends pg_cancel_backend to a random producer or
#    consumer and pg_terminate_backend to a random consumer every 20-200 ms
#    (the consumer reconnects as a new worker id; its jobs are rescued by
#    orphan rescue as new attempts);
#  - a "waker" commits delayed jobs due ever earlier, each of which wakes
#    every waiting pickup to re-time its sleep, so waiters look again and
#    again;
#  - a victim session repeats the known case: SET statement_timeout = '1s';
#    SELECT * FROM pqrun.pickup('x', ARRAY['never'], wait => '10 s');
#    SELECT 'ALIVE'.
# Then consumers finish what they hold, 4 well-behaved workers drain the
# queue, and 4 sessions run the known 25P02 case 4 times each with the waker
# at full speed.
#
# Checks (each violation class is printed with examples; exit 1 on any):
#  - each job handed out once per attempt: no (job, attempt) pair and no
#    lease token in two committed claims (a claim counts once the statement
#    or COMMIT that made it returned), but for an attempt given back by
#    release or snooze, which was never made and is not in job_attempts; every
#    other committed claim is the
#    job_attempts row of that attempt, by that worker; every job_attempts
#    row is a committed claim, unless its worker's connection was killed
#    while such a commit was in flight;
#  - nothing lost: every committed job ends DONE with its payload, attempts
#    1..n in its history, the last one done, the others retry, orphaned or
#    stale; rolled-back enqueues never appear; the counts match;
#  - leases: a successful mark_done is the job's last attempt with its
#    lease; a successful mark_error made that attempt a retry; no job is
#    marked done twice; 55000 comes only for an attempt orphaned after its
#    holder was killed, reaped as stale, given back, or already finished by
#    a mark whose answer the kill swallowed; a repeated mark is never
#    accepted;
#  - no session left in an aborted transaction: after every error (cancel,
#    timeout, 40001, 55000) the session is idle (after ROLLBACK if it had
#    opened a block) and SELECT 1 works; 25P02 is a violation;
#  - no error other than 55000 (marks), 57014, 57P01 (kills) and 40001
#    (REPEATABLE READ only); every 40P01 is reported; no connection is lost
#    that chaos did not terminate; the server log shows no crash, no FATAL
#    of a client other than the kills, no error of pqrun's workers;
#  - the long poll is really crowded: at least 3 consumers asleep in it at
#    once, and more sleepers than runnable jobs in some samples;
#  - every path (mode x direct/SQL) made committed claims.
set -uo pipefail

repo=$(cd "$(dirname "$0")/../.." && pwd)
: "${PGHOST:?PGHOST must point at a running cluster that preloads pqrun}"
: "${PGPORT:?}" "${PGUSER:=postgres}"
export PGHOST PGPORT PGUSER

db=pqrun_stress
log=${PQRUN_WORK:+$PQRUN_WORK/server.log}
[ -z "$log" ] && [ -f "$PGHOST/server.log" ] && log=$PGHOST/server.log
log_from=0
[ -n "$log" ] && [ -f "$log" ] && log_from=$(stat -c %s "$log")

cleanup() {
	psql -X -q -d postgres -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null 2>&1 || true
}
trap cleanup EXIT

cleanup
psql -X -q -v ON_ERROR_STOP=1 -d postgres -c "CREATE DATABASE $db" >/dev/null || exit 1
psql -X -q -v ON_ERROR_STOP=1 -d "$db" -c "CREATE EXTENSION pqrun" >/dev/null || exit 1

rc=0
timeout --kill-after=5 150 /usr/bin/python3 "$repo/test/shell/stress.py" "$db" || rc=$?
[ $rc = 124 ] && echo "FAIL stress.py did not end within 150 s"

# log_since: what the server logged since this test started.
log_since() { tail -c +$((log_from + 1)) "$log"; }

if [ -n "$log" ] && [ -f "$log" ]; then
	crashes=$(log_since |
		grep -E "PANIC|TRAP:|terminated by signal|server process .* was terminated|was terminated by exception" || true)
	if [ -n "$crashes" ]; then
		echo "FAIL the server log shows a crash:"
		printf '%s\n' "$crashes" | head -n 20
		rc=1
	else
		echo "ok   the server log shows no crash"
	fi
	fatal=$(log_since | grep -E " stress_[a-z0-9]+ FATAL: " |
		grep -vE "FATAL:  terminating connection due to administrator command" || true)
	if [ -n "$fatal" ]; then
		echo "FAIL the server log shows $(printf '%s\n' "$fatal" | wc -l) FATAL errors of clients that no kill explains:"
		printf '%s\n' "$fatal" | sed -E 's/^[^]]*\] //' | sort | uniq -c | sort -rn | head -n 10
		rc=1
	fi
	# (The prefix names a background worker's lines, test/lib/cluster.sh;
	# direct_decision.sh shows the pattern matches a failing round's line.)
	bgw=$(log_since | grep -E "\] pqrun (maintenance|launcher) +(ERROR|FATAL):" || true)
	if [ -n "$bgw" ]; then
		echo "FAIL a pqrun background worker reported errors:"
		printf '%s\n' "$bgw" | head -n 10
		rc=1
	fi
else
	echo "note: no server log found (set PQRUN_WORK); crash check skipped"
fi
# After the kills, PostgreSQL's own check of the tables and indexes.
source "$repo/test/lib/amcheck.sh"
amcheck_ok "after the chaos" -d "$db" || rc=1
[ $rc = 0 ] && echo "stress: all checks passed" || echo "stress: FAILED"
exit $rc

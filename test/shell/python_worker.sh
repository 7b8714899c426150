#!/usr/bin/env bash
# test/shell/python_worker.sh — the example worker of examples/python (its
# handlers on the Python client of clients/python, imported from the source
# tree) against the test cluster (PGHOST/PGPORT/PGUSER exported, pqrun
# preloaded): jobs of each kind are enqueued, the worker runs them with 3
# slots, and the outcomes are checked in pqrun.jobs and pqrun.job_attempts:
# results of successful jobs, retries with tracebacks, terminal failures,
# typed args (a payload that does not fit its dataclass FAILED at once), a handler
# chain that commits (or rolls back) with its job, heartbeats that keep a job
# longer than its timeout alive; with heartbeats that wait 30 s, a cancel that
# reaches its running handler at once, progress reports stored while the job
# runs and kept after it, a handler that snoozes; a graceful shutdown on
# SIGTERM that finishes one in-flight job and gives two back with
# pqrun.release (attempt not counted, progress kept); a worker killed with
# SIGKILL has its jobs back within a round (the heartbeats moved their hold
# to the heartbeat connections), or, with --hold lease, at their stale
# window. A worker with 4 slots has one poller: idle, exactly one of its
# connections waits in a pickup; a burst of 12 jobs is claimed by one pickup
# of 4 and then one by one with the mark_done of the job before, each job
# DONE after one attempt; with two slots busy the pickup asks for 2; the
# poller's session holds the jobs it claimed until a heartbeat moves them,
# and a SIGKILL while it holds them (and waits in a pickup) gives them back
# within a round. Then three worker processes drain 400 jobs in waves,
# long-polling between them (idle, 3 waiting pickups for their 6 slots),
# each job DONE after exactly one attempt, most claimed by the
# mark_done_and_pickup of the job before them.
#
# Needs psycopg 3 (Debian: python3-psycopg). Takes about 45 s, at most ~80 s.
# Mostly waits for its worker's jobs and the server's rounds:
# test/run.sh: beside the others
set -uo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
: "${PGHOST:?PGHOST must point at the test cluster}" "${PGPORT:?}" "${PGUSER:?}"

source "$repo/test/lib/python.sh"
find_psycopg_python || exit 1
# The client from the source tree (test/packages/python_client.sh tests its wheel).
export PYTHONPATH=$repo/clients/python/src${PYTHONPATH:+:$PYTHONPATH}
echo "-- python: $py, psycopg $("$py" -c 'import psycopg; print(psycopg.__version__)')"

db=pqrun_python_worker
work=$(mktemp -d /tmp/pqrun-python.XXXXXX)
log=$work/worker.log
worker=
probe=
features=
burst=
failures=0

cleanup() {
	[ -n "$worker" ] && kill -KILL "$worker" 2>/dev/null
	[ -n "$probe" ] && kill -KILL "$probe" 2>/dev/null
	[ -n "$features" ] && kill -KILL "$features" 2>/dev/null
	[ -n "$burst" ] && kill -KILL "$burst" 2>/dev/null
	dropdb --if-exists --force "$db" 2>/dev/null
	rm -rf "$work"
}
trap cleanup EXIT

q() { psql -X -qtA -v ON_ERROR_STOP=1 -d "$db" -c "$1"; }
fail() {
	echo "FAIL: $*"
	failures=$((failures + 1))
}
# check WHAT SQL EXPECTED: one assertion, printed as it runs.
check() {
	local got
	got=$(q "$2" 2>&1)
	if [ "$got" = "$3" ]; then echo "ok: $1"; else fail "$1: [$2] gave [$got], expected [$3]"; fi
}
# wait_for SQL EXPECTED SECONDS: poll until SQL answers EXPECTED; 1 on timeout.
wait_for() {
	local got= deadline=$((SECONDS + $3))
	while [ $SECONDS -le $deadline ]; do
		got=$(q "$1" 2>/dev/null)
		[ "$got" = "$2" ] && return 0
		sleep 0.2
	done
	echo "   waited $3 s for [$1] = [$2], last answer [$got]"
	return 1
}
# await_exit PID SECONDS: wait up to SECONDS for the process to exit; sets rc
# to its exit status, or kills it and sets rc=124.
await_exit() {
	local i
	for i in $(seq 1 $(($2 * 10))); do
		kill -0 "$1" 2>/dev/null || break
		sleep 0.1
	done
	if kill -0 "$1" 2>/dev/null; then
		kill -KILL "$1"
		wait "$1" 2>/dev/null
		rc=124
	else
		wait "$1"
		rc=$?
	fi
}
# job LABEL: the id of the job whose payload has that label.
job() { echo "(SELECT id FROM pqrun.jobs WHERE payload->>'label' = '$1')"; }
now_ms() { date +%s%3N; }

dropdb --if-exists --force "$db" 2>/dev/null
createdb "$db" || exit 1
q "CREATE EXTENSION pqrun" >/dev/null || exit 1
# Retries come back after 1 s instead of the default minute (new sessions only).
q "ALTER DATABASE $db SET pqrun.backoff = '1s'" >/dev/null

echo "-- enqueue jobs of every kind"
q "SELECT pqrun.enqueue('greet', '{\"label\": \"greet-ada\", \"name\": \"ada\"}'),
          pqrun.enqueue('greet', '{\"label\": \"greet-bob\", \"name\": \"bob\"}'),
          pqrun.enqueue('shout', '{\"label\": \"shout\", \"text\": \"async\"}'),
          pqrun.enqueue('flaky', '{\"label\": \"flaky-twice\", \"fail_times\": 2}'),
          pqrun.enqueue('flaky', '{\"label\": \"flaky-exhausted\", \"fail_times\": 99}', max_attempts => 2),
          pqrun.enqueue('flaky', '{\"label\": \"flaky-later\", \"fail_times\": 99, \"retry_after\": 3600}'),
          pqrun.enqueue('validate', '{\"label\": \"terminal\", \"email\": \"not-an-address\"}'),
          pqrun.enqueue('validate', jsonb_build_object('label', 'terminal-huge', 'email', repeat('x', 20000))),
          pqrun.enqueue('summarize', '{\"label\": \"chain\", \"conversation_id\": 1}'),
          pqrun.enqueue('summarize', '{\"label\": \"chain-fails\", \"conversation_id\": 2, \"fail\": true}', max_attempts => 1),
          pqrun.enqueue('slow', '{\"label\": \"slow-heartbeats\", \"seconds\": 4}', timeout_seconds => 2),
          pqrun.enqueue('welcome', '{\"user_id\": 7, \"lang\": \"fr\"}'),
          pqrun.enqueue('welcome', '{\"user_id\": \"seven\"}')" >/dev/null || exit 1

echo "-- start the worker: 3 slots, heartbeats every 0.5 s, grace period 3 s"
cd "$repo/examples/python" || exit 1
start=$SECONDS
export PYTHONDONTWRITEBYTECODE=1
"$py" worker.py --dsn "dbname=$db" --concurrency 3 --queues default \
	--heartbeat-interval 0.5 --grace-period 3 --log-level DEBUG >"$log" 2>&1 &
worker=$!
cd - >/dev/null

# Every job but flaky-later (waiting an hour for its retry) reaches its end state.
expected="chain=DONE/1 chain-fails=FAILED/1 flaky-exhausted=FAILED/2 flaky-later=READY/1 flaky-twice=DONE/3 greet-ada=DONE/1 greet-bob=DONE/1 shout=DONE/1 slow-heartbeats=DONE/1 terminal=FAILED/1 terminal-huge=FAILED/1"
summary="SELECT string_agg(payload->>'label' || '=' || status || '/' || attempts, ' ' ORDER BY payload->>'label') FROM pqrun.jobs WHERE payload ? 'label'"
wait_for "$summary" "$expected" 30 || fail "the jobs did not reach their expected states"
echo "   outcomes after $((SECONDS - start)) s: $(q "$summary")"
kill -0 "$worker" 2>/dev/null || fail "the worker exited early"

echo "-- successes are DONE with the handler's result"
check "greet result" "SELECT result->>'greeting' FROM pqrun.jobs WHERE id = $(job greet-ada)" "hello, ada"
check "async handler result" "SELECT result::text FROM pqrun.jobs WHERE id = $(job shout)" '{"text": "ASYNC"}'
check "duration recorded" "SELECT duration_ms IS NOT NULL AND finished_at IS NOT NULL FROM pqrun.jobs WHERE id = $(job greet-bob)" t

echo "-- retryable failures are retried (pqrun.backoff = 1s) with the traceback kept"
check "fails twice, then DONE on attempt 3" \
	"SELECT status || ' ' || attempts || ' ' || (result->>'succeeded_on_attempt') FROM pqrun.jobs WHERE id = $(job flaky-twice)" "DONE 3 3"
check "its attempts: retry, retry, done" \
	"SELECT string_agg(outcome, ',' ORDER BY attempt) FROM pqrun.job_attempts WHERE job_id = $(job flaky-twice)" "retry,retry,done"
check "the retries' errors are tracebacks" \
	"SELECT count(*) FROM pqrun.job_attempts WHERE job_id = $(job flaky-twice) AND outcome = 'retry'
	   AND error LIKE 'Traceback (most recent call last):%' AND error LIKE '%ConnectionError: simulated outage on attempt _%'" 2
check "out of attempts: FAILED with the last traceback" \
	"SELECT status || ' ' || attempts || ' ' || (last_error LIKE 'Traceback%ConnectionError: simulated outage on attempt 2%')
	   FROM pqrun.jobs WHERE id = $(job flaky-exhausted)" "FAILED 2 true"
check "RetryLater(after=3600): READY, attempts 1, an hour away, traceback kept" \
	"SELECT status || ' ' || attempts || ' ' || (run_after > now() + interval '50 minutes') || ' '
	        || (last_error LIKE 'Traceback%RetryLater: simulated outage on attempt 1%')
	   FROM pqrun.jobs WHERE id = $(job flaky-later)" "READY 1 true true"

echo "-- terminal failures are FAILED at once"
check "TerminalError: FAILED after 1 of 5 attempts" \
	"SELECT status || ' ' || attempts || '/' || max_attempts || ' ' || (last_error LIKE '%TerminalError: invalid email address: ''not-an-address''%')
	   FROM pqrun.jobs WHERE id = $(job terminal)" "FAILED 1/5 true"
check "a 20,000-character traceback is cut to its last 10,000 characters" \
	"SELECT length(last_error) || ' ' || (last_error LIKE '...%xxx''' || chr(10)) FROM pqrun.jobs WHERE id = $(job terminal-huge)" "10000 true"

echo "-- typed args: the payload is checked against the handler's dataclass"
wait_for "SELECT count(*) FROM pqrun.jobs WHERE job_type = 'welcome' AND status IN ('DONE', 'FAILED')" 2 15 ||
	fail "the welcome jobs did not end"
check "a payload that fits: DONE, with the args the handler got" \
	"SELECT status || ' ' || (result->>'text') FROM pqrun.jobs WHERE job_type = 'welcome' AND payload->>'user_id' = '7'" "DONE bienvenue"
check "one that does not: FAILED on its first attempt, saying where and why" \
	"SELECT status || ' ' || attempts || ' ' || (last_error LIKE '%InvalidArgs: invalid args for job type ''welcome'' (Welcome): user_id: expected integer, got string ''seven''%')
	   FROM pqrun.jobs WHERE job_type = 'welcome' AND payload->>'user_id' = 'seven'" "FAILED 1 true"

echo "-- the handler chain: the follow-up commits with its job, or not at all"
check "summarize is DONE and names its follow-up" \
	"SELECT status || ' ' || ((result->>'embed_job')::bigint = e.id) FROM pqrun.jobs s,
	        (SELECT id FROM pqrun.jobs WHERE job_type = 'embed' AND payload->>'conversation_id' = '1') e
	  WHERE s.id = $(job chain)" "DONE true"
check "the follow-up embed job ran: DONE with its result" \
	"SELECT string_agg(status || ' ' || (result->>'summary_id' = payload->>'summary_id') || ' ' || (result->>'dimensions'), ',')
	   FROM pqrun.jobs WHERE job_type = 'embed' AND payload->>'conversation_id' = '1'" "DONE true 768"
check "a handler that fails after enqueueing leaves no follow-up" \
	"SELECT count(*) FROM pqrun.jobs WHERE job_type = 'embed' AND payload->>'conversation_id' = '2'" 0

echo "-- heartbeats keep a 4 s job with timeout_seconds 2 alive"
check "the slow job ran once, was never reaped" \
	"SELECT string_agg(outcome, ',' ORDER BY attempt) FROM pqrun.job_attempts WHERE job_id = $(job slow-heartbeats)" "done"
check "it ran longer than its timeout" \
	"SELECT duration_ms >= 3900 AND timeout_seconds = 2 AND result->>'lease_lost' = 'false' FROM pqrun.jobs WHERE id = $(job slow-heartbeats)" t
beats=$(grep -c "job $(q "SELECT $(job slow-heartbeats)") heartbeat" "$log")
if [ "$beats" -ge 4 ]; then echo "ok: $beats heartbeats sent"; else fail "expected at least 4 heartbeats for the slow job, the log shows $beats"; fi

echo "-- a job claimed by a long-poll pickup that had already waited 4 s"
# A second worker serves queue 'probe' alone, so its poller has been
# idle inside pickup(wait => '10 s') since it started; the job comes 4 s
# into that wait, with a timeout (2 s) shorter than the wait so far.
cd "$repo/examples/python" || exit 1
"$py" worker.py --dsn "dbname=$db" --queues probe --poll-wait 10 \
	--heartbeat-interval 0.5 --grace-period 1 --log-level DEBUG >"$work/probe.log" 2>&1 &
probe=$!
cd - >/dev/null
sleep 4
q "SELECT pqrun.enqueue('slow', '{\"label\": \"after-long-poll\", \"seconds\": 2}', timeout_seconds => 2, queue => 'probe')" >/dev/null
wait_for "SELECT status FROM pqrun.jobs WHERE id = $(job after-long-poll)" DONE 10 || true
kill -TERM $probe
await_exit $probe 5
probe=
[ $rc = 0 ] || fail "the probe worker exited with $rc"
check "it ran once, was not reaped, and its duration is its run time (locked_at is the claim time, not when the wait began)" \
	"SELECT status || ' ' || attempts || ' ' || (SELECT string_agg(outcome, ',' ORDER BY attempt) FROM pqrun.job_attempts WHERE job_id = j.id)
	        || ' ' || (duration_ms BETWEEN 1900 AND 3000) FROM pqrun.jobs j WHERE id = $(job after-long-poll)" "DONE 1 done true"

echo "-- cancel, progress and snooze, with heartbeats that wait 30 s in the server"
# A third worker serves queue 'features' with --heartbeat-interval 30: a
# cancel or a progress report reaches the server in time only because a
# cancel ends a waiting heartbeat at once and a report cuts its wait short.
cd "$repo/examples/python" || exit 1
"$py" worker.py --dsn "dbname=$db" --concurrency 2 --queues features \
	--heartbeat-interval 30 --grace-period 1 --log-level DEBUG >"$work/features.log" 2>&1 &
features=$!
cd - >/dev/null
q "SELECT pqrun.enqueue('slow', '{\"label\": \"cancelled\", \"seconds\": 600}', timeout_seconds => 3600, queue => 'features'),
          pqrun.enqueue('count', '{\"label\": \"progress\", \"to\": 3, \"step\": 3}', timeout_seconds => 3600, queue => 'features')" >/dev/null
wait_for "SELECT count(*) FROM pqrun.jobs WHERE queue = 'features' AND status = 'RUNNING'" 2 30 || fail "the two jobs did not start"
sleep 1.5 # the first heartbeat starts a second into the job, then waits 30 s
cancelled=$(q "SELECT $(job cancelled)")
cancel_at=$(now_ms)
q "SELECT pqrun.cancel($cancelled)" >/dev/null
stopped=
while [ $(($(now_ms) - cancel_at)) -lt 5000 ]; do
	grep -q "job $cancelled (slow) handler stopped (cancelled)" "$work/features.log" && stopped=$(($(now_ms) - cancel_at)) && break
	sleep 0.05
done
if [ -n "$stopped" ] && [ "$stopped" -le 2000 ]; then
	echo "ok: the cancel reached the running handler, which stopped ${stopped} ms later"
else
	fail "the handler of cancelled job $cancelled did not stop within 2 s (${stopped:-not within 5 s} ms)"
fi
check "the cancelled job is CANCELLED, no outcome recorded" \
	"SELECT status || ' ' || attempts || ' ' || (result IS NULL) FROM pqrun.jobs WHERE id = $cancelled" "CANCELLED 1 true"
grep -q "job $cancelled (slow) cancelled while running" "$work/features.log" && echo "ok: the worker logged the cancel" ||
	fail "the worker did not log the cancel of job $cancelled"
# A report every 3 s: each one cuts a waiting heartbeat short. Seen while
# the job runs, 3 to 9 s after it starts: long enough for the cancel above
# to end first on a loaded machine.
wait_for "SELECT status || ' ' || (progress->>'count' IN ('1', '2')) || ' ' || (progress->>'to') FROM pqrun.jobs WHERE id = $(job progress)" \
	"RUNNING true 3" 10 && echo "ok: progress is stored while the job runs" || fail "no progress stored while the job ran"
q "SELECT pqrun.enqueue('greet', '{\"label\": \"after-cancel\"}', queue => 'features'),
          pqrun.enqueue('nap', '{\"label\": \"snoozed\", \"seconds\": 1}', queue => 'features')" >/dev/null
wait_for "SELECT string_agg(status::text, ' ' ORDER BY id) FROM pqrun.jobs WHERE id IN ($(job progress), $(job after-cancel), $(job snoozed))" \
	"DONE DONE DONE" 15 || fail "the features worker did not finish its jobs"
check "the worker went on after the cancel: a later job is DONE" \
	"SELECT status || ' ' || (result->>'greeting') FROM pqrun.jobs WHERE id = $(job after-cancel)" "DONE hello, world"
check "the last progress report is kept after DONE" \
	"SELECT status || ' ' || progress::text || ' ' || (result->>'counted') FROM pqrun.jobs WHERE id = $(job progress)" \
	'DONE {"to": 3, "count": 3} 3'
check "the snoozed job: DONE on its one attempt, snoozed once, a second later" \
	"SELECT status || ' ' || attempts || ' ' || snoozes || ' ' || (result->>'snoozes') || ' ' || (finished_at - created_at >= interval '1 s')
	   FROM pqrun.jobs WHERE id = $(job snoozed)" "DONE 1 1 1 true"
check "its history holds the one attempt, no snooze" \
	"SELECT string_agg(outcome, ',') FROM pqrun.job_attempts WHERE job_id = $(job snoozed)" "done"
grep -q "job $(q "SELECT $(job snoozed)") (nap) snoozed for 1s" "$work/features.log" && echo "ok: the worker logged the snooze" ||
	fail "the worker did not log the snooze"
kill -TERM $features
await_exit $features 5
features=
[ $rc = 0 ] || fail "the features worker exited with $rc"

echo "-- graceful shutdown: SIGTERM finishes a short job, releases two long ones, picks up nothing new"
q "SELECT pqrun.enqueue('slow', '{\"label\": \"finishes-in-grace\", \"seconds\": 1.5}'),
          pqrun.enqueue('slow', '{\"label\": \"outlives-grace\", \"seconds\": 60}'),
          pqrun.enqueue('count', '{\"label\": \"counts-past-grace\", \"to\": 1000000, \"step\": 0.1}')" >/dev/null
wait_for "SELECT count(*) FROM pqrun.jobs WHERE status = 'RUNNING'" 3 15 || fail "the three jobs did not start"
kill -TERM "$worker"
term_at=$SECONDS
sleep 0.5
q "SELECT pqrun.enqueue('greet', '{\"label\": \"after-sigterm\"}')" >/dev/null
await_exit "$worker" 10
worker=
elapsed=$((SECONDS - term_at))
if [ $rc = 0 ] && [ $elapsed -le 6 ]; then
	echo "ok: the worker exited 0, ${elapsed} s after SIGTERM (grace period 3 s)"
elif [ $rc = 124 ]; then
	fail "the worker still ran 10 s after SIGTERM"
else
	fail "the worker exited with $rc, ${elapsed} s after SIGTERM"
fi
check "the job that fits the grace period finished DONE" \
	"SELECT status || ' ' || attempts FROM pqrun.jobs WHERE id = $(job finishes-in-grace)" "DONE 1"
check "the job that outlives it is READY again at once, its attempt not counted, not left RUNNING" \
	"SELECT status || ' ' || attempts || ' ' || (run_after <= now()) || ' ' || (last_error IS NULL)
	   FROM pqrun.jobs WHERE id = $(job outlives-grace)" "READY 0 true true"
check "no attempt of it is in the history" \
	"SELECT count(*) FROM pqrun.job_attempts WHERE job_id = $(job outlives-grace)" 0
grep -q "job $(q "SELECT $(job outlives-grace)") (slow) handler stopped (released)" "$log" &&
	echo "ok: its handler was told to stop" || fail "the released job's handler was not told to stop"
check "a released job keeps its progress for its next attempt" \
	"SELECT status || ' ' || attempts || ' ' || ((progress->>'count')::int > 0) FROM pqrun.jobs WHERE id = $(job counts-past-grace)" \
	"READY 0 true"
check "nothing was picked up after SIGTERM" \
	"SELECT status || ' ' || attempts FROM pqrun.jobs WHERE id = $(job after-sigterm)" "READY 0"
check "no job is left RUNNING" "SELECT count(*) FROM pqrun.jobs WHERE status = 'RUNNING'" 0

echo "-- SIGKILL mid-job: the dead worker's jobs come back within a round (its claims are held by its sessions)"
# Maintenance rounds run every second (the test server's pqrun.reap_interval);
# the jobs' stale window is an hour. With --hold lease, they wait for it.
for hold in session lease; do
	cd "$repo/examples/python" || exit 1
	"$py" worker.py --dsn "dbname=$db" --concurrency 2 --queues "killed-$hold" \
		--hold "$hold" --heartbeat-interval 0.5 --log-level INFO >"$work/killed-$hold.log" 2>&1 &
	victim=$!
	cd - >/dev/null
	q "SELECT pqrun.enqueue('slow', '{\"seconds\": 600}', timeout_seconds => 3600, queue => 'killed-$hold')
	     FROM generate_series(1, 2)" >/dev/null
	wait_for "SELECT count(*) FROM pqrun.jobs WHERE queue = 'killed-$hold' AND status = 'RUNNING'" 2 30 ||
		fail "the two jobs of queue killed-$hold did not start"
	sleep 1.2 # a heartbeat or two on the heartbeat connections too
	if [ "$hold" = session ]; then
		check "the heartbeats moved both jobs' hold from the poller's session to the heartbeat connections" \
			"SELECT count(*) FROM pqrun.job_live j JOIN pg_stat_activity a ON a.pid = j.holder_pid
			  WHERE j.queue = 'killed-$hold' AND a.query LIKE '%pqrun.heartbeat(%'" 2
	fi
	kill -KILL "$victim"
	wait "$victim" 2>/dev/null
	killed_at=$(now_ms)
	if [ "$hold" = session ]; then
		wait_for "SELECT string_agg(status || ' ' || attempts || ' ' || last_error, ',') FROM pqrun.jobs WHERE queue = 'killed-$hold'" \
			"READY 1 orphaned: the backend holding the job exited,READY 1 orphaned: the backend holding the job exited" 5 &&
			echo "ok: both jobs READY again $(($(now_ms) - killed_at)) ms after the SIGKILL" ||
			fail "the jobs of the killed worker did not come back within 5 s"
	else
		sleep 2.5
		check "with --hold lease, the killed worker's jobs stay RUNNING under their leases (until their stale window)" \
			"SELECT string_agg(status::text, ',') FROM pqrun.jobs WHERE queue = 'killed-$hold'" "RUNNING,RUNNING"
		q "SELECT pqrun.cancel(id) FROM pqrun.jobs WHERE queue = 'killed-$hold'" >/dev/null
	fi
done
q "SELECT pqrun.cancel(id) FROM pqrun.jobs WHERE queue = 'killed-session'" >/dev/null

echo "-- one waiting pickup per worker: its poller claims for the free slots, in batches"
# A worker with 4 slots, alone on queue 'burst' and named by PGAPPNAME in
# pg_stat_activity. Its poller long-polls for as many jobs as slots are free
# (--poll-wait 2: a pickup begun before every slot was free is soon asked
# again for all of them); a slot takes its next job with the mark_done of
# the last. Heartbeats start a second into a job (--heartbeat-interval 30).
cd "$repo/examples/python" || exit 1
PGAPPNAME=pqrun-burst "$py" worker.py --dsn "dbname=$db" --concurrency 4 \
	--queues burst --worker-id burst --poll-wait 2 --heartbeat-interval 30 --grace-period 1 --log-level DEBUG \
	>"$work/burst.log" 2>&1 &
burst=$!
cd - >/dev/null
# "connections waiting-pickups" of the burst worker.
waiting="SELECT count(*) || ' ' || count(*) FILTER (WHERE state = 'active' AND wait_event IN ('PqrunLongPoll', 'Extension')
                                                  AND query LIKE '%pqrun.pickup(%')
           FROM pg_stat_activity WHERE datname = '$db' AND application_name = 'pqrun-burst'"
# held_by WHAT: how many of queue burst's running jobs are held by a session
# of the burst worker whose last statement is WHAT (pickup: the poller's).
held_by() {
	echo "SELECT count(*) FROM pqrun.job_live j JOIN pg_stat_activity a ON a.pid = j.holder_pid
	       WHERE j.queue = 'burst' AND j.status = 'RUNNING' AND a.application_name = 'pqrun-burst'
	         AND a.query LIKE '%pqrun.$1(%'"
}
# Up to 30 s for its start (see node_worker.sh).
wait_for "$waiting" "5 1" 30 && echo "ok: idle with 4 slots: 5 connections, one of them waits in a pickup" ||
	fail "the idle burst worker does not have exactly one waiting pickup among its 5 connections"
sleep 2.2
# Between two pickups (every 2 s) a sample may see none, never two.
most=$(for _ in $(seq 1 10); do q "$waiting" | cut -d' ' -f2; sleep 0.1; done | sort -n | tail -n 1)
[ "$most" = 1 ] && echo "ok: sampled 10 times over a second, never more than one waiting pickup" ||
	fail "the idle burst worker had up to ${most:-?} waiting pickups"

# 12 jobs of 0.5 s at once: the poller's waiting pickup claims 4 (one per
# free slot); each slot then claims its next with the mark_done of the last.
q "SELECT count(pqrun.enqueue('slow', jsonb_build_object('burst', n, 'seconds', 0.5), queue => 'burst'))
     FROM generate_series(1, 12) n" >/dev/null
wait_for "SELECT count(*) FROM pqrun.jobs WHERE queue = 'burst' AND status = 'DONE'" 12 15 || fail "the burst did not finish"
check "every burst job is DONE after exactly one attempt, with one attempt in its history" \
	"SELECT count(*) || ' ' || max(attempts) || ' ' || (SELECT count(*) || ' ' || count(DISTINCT job_id)
	   FROM pqrun.job_attempts a JOIN pqrun.jobs j ON j.id = a.job_id WHERE j.queue = 'burst')
	   FROM pqrun.jobs WHERE queue = 'burst' AND status = 'DONE'" "12 1 12 12"
# chained WHERE: of queue burst's jobs matching WHERE, how many were claimed
# by a pickup and how many by the mark_done of a job before them (claimed
# when that job finished, in its transaction). Not grouped by claim time:
# two slots in step can start their transactions in the same microsecond.
chained() {
	echo "SELECT count(*) FILTER (WHERE NOT chained) || ' ' || count(*) FILTER (WHERE chained)
	        FROM (SELECT EXISTS (SELECT FROM pqrun.jobs p WHERE p.queue = 'burst' AND p.finished_at = n.locked_at) AS chained
	                FROM pqrun.jobs n WHERE n.queue = 'burst' AND $1) c"
}
check "the claims: 4 by a pickup (the poller's, for the 4 free slots), 8 by the mark_done of a job before them" \
	"$(chained true)" "4 8"
check "all under the worker's id" "SELECT string_agg(DISTINCT locked_by, ',') FROM pqrun.jobs WHERE queue = 'burst'" burst
[ "$(grep -o "poller: claimed [0-9]* job(s) for [0-9]* free slot(s)" "$work/burst.log")" = "poller: claimed 4 job(s) for 4 free slot(s)" ] &&
	echo "ok: the worker logged one pickup, the batch of 4" || fail "the worker did not log one pickup, a batch of 4"
wait_for "$waiting" "5 1" 5 && echo "ok: idle again, one waiting pickup" || fail "no single waiting pickup after the burst"

# With two slots busy, the poller asks for the other two: of 6 jobs enqueued
# at once it claims 2, and the two free slots chain the rest. The jobs it
# claims are held by its session until a heartbeat renews their lease (here
# after the 30 s of its wait; the SIGKILL test above saw renewals move them).
# 10 s: still running when the 6 are enqueued on a loaded machine (see
# node_worker.sh).
q "SELECT pqrun.enqueue('slow', '{\"busy\": 1, \"seconds\": 10}', queue => 'burst'),
          pqrun.enqueue('slow', '{\"busy\": 2, \"seconds\": 10}', queue => 'burst')" >/dev/null
wait_for "SELECT count(*) FROM pqrun.jobs WHERE queue = 'burst' AND status = 'RUNNING'" 2 15 || fail "the two busy jobs did not start"
check "the two running jobs are held by the poller's session" "$(held_by pickup)" 2
# Their heartbeats begin, on connections of their own, and the poller waits
# again (a single sample may fall between two of its pickups).
wait_for "$waiting" "7 1" 5 && echo "ok: two slots busy: 7 connections (2 of them for heartbeats), one waiting pickup" ||
	fail "two slots busy: not 7 connections (2 of them for heartbeats) with one waiting pickup"
check "the two busy jobs still run" "SELECT count(*) FROM pqrun.jobs WHERE queue = 'burst' AND payload ? 'busy' AND status = 'RUNNING'" 2
q "SELECT count(pqrun.enqueue('greet', jsonb_build_object('two_free', n), queue => 'burst')) FROM generate_series(1, 6) n" >/dev/null
wait_for "SELECT count(*) FROM pqrun.jobs WHERE queue = 'burst' AND payload ? 'two_free' AND status = 'DONE'" 6 15 ||
	fail "the 6 jobs did not finish"
# The poller's claims are printed when its pickup of 2 is missing (see
# node_worker.sh).
grep -q "poller: claimed 2 job(s) for 2 free slot(s)" "$work/burst.log" &&
	echo "ok: the poller asked for the two free slots and got 2" || fail "the poller did not claim 2 for 2 free slots"
if ! grep -q "poller: claimed 2 job(s) for 2 free slot(s)" "$work/burst.log"; then
	echo "note: no pickup of 2 for the 2 free slots; the burst worker's claims:"
	grep -E "claimed|picked|done" "$work/burst.log" | tail -n 30
fi
wait_for "SELECT count(*) FROM pqrun.jobs WHERE queue = 'burst' AND payload ? 'busy' AND status = 'DONE' AND attempts = 1" 2 15 ||
	fail "the two busy jobs did not finish DONE after one attempt"

# A worker killed while the poller's session holds its jobs (their first
# heartbeat still waiting): they come back within a round of the poller's
# backend exit, which notices the death within a second although it waits
# in a pickup. The worker is frozen first, to look at it.
q "SELECT pqrun.enqueue('slow', jsonb_build_object('killed', n, 'seconds', 600), timeout_seconds => 3600, queue => 'burst')
     FROM generate_series(1, 2) n" >/dev/null
wait_for "SELECT count(*) FROM pqrun.jobs WHERE queue = 'burst' AND payload ? 'killed' AND status = 'RUNNING'" 2 15 ||
	fail "the two jobs to kill did not start"
# Frozen while its poller's session waits in a pickup, and killed at once
# (see node_worker.sh).
frozen=
for _ in 1 2 3 4 5; do
	wait_for "$(held_by pickup) AND a.state = 'active'" 2 5
	kill -STOP "$burst"
	frozen=$(q "$(held_by pickup) AND a.state = 'active'")
	[ "$frozen" = 2 ] && break
	kill -CONT "$burst"
done
kill -KILL "$burst"
wait "$burst" 2>/dev/null
burst=
killed_at=$(now_ms)
[ "$frozen" = 2 ] && echo "ok: killed frozen, its poller's session holding both and waiting in a pickup for the 2 free slots" ||
	fail "killed frozen, but not while its poller's session held both in a pickup ($frozen)"
wait_for "SELECT string_agg(status || ' ' || attempts || ' ' || last_error, ',') FROM pqrun.jobs WHERE queue = 'burst' AND payload ? 'killed'" \
	"READY 1 orphaned: the backend holding the job exited,READY 1 orphaned: the backend holding the job exited" 5 &&
	echo "ok: both jobs READY again $(($(now_ms) - killed_at)) ms after the SIGKILL" ||
	fail "the jobs held by the killed worker's poller did not come back within 5 s"
q "SELECT pqrun.cancel(id) FROM pqrun.jobs WHERE queue = 'burst' AND payload ? 'killed'" >/dev/null

echo "-- exactly once: 3 worker processes x 2 slots drain 4 waves of 100 jobs, long-polling between waves"
# Each slot marks a job done with mark_done_and_pickup, which claims its
# next job in the same transaction; between waves each worker's poller waits
# in a long-poll pickup for its free slots. Every job must end DONE after
# exactly one attempt.
drainers=()
cd "$repo/examples/python" || exit 1
for i in 1 2 3; do
	"$py" worker.py --dsn "dbname=$db" --concurrency 2 --queues drain \
		--poll-wait 2 --grace-period 3 --log-level INFO >"$work/drain$i.log" 2>&1 &
	drainers+=($!)
done
cd - >/dev/null
sleep 1
for wave in 1 2 3 4; do
	q "SELECT count(pqrun.enqueue('greet', jsonb_build_object('wave', $wave, 'n', n), queue => 'drain'))
	     FROM generate_series(1, 100) n" >/dev/null
	sleep 1.5
done
wait_for "SELECT count(*) FROM pqrun.jobs WHERE queue = 'drain' AND status = 'DONE'" 400 30 ||
	fail "the drain did not finish"
wait_for "SELECT count(*) FROM pg_stat_activity WHERE datname = '$db' AND application_name = 'pqrun-worker'
            AND state = 'active' AND query LIKE '%pqrun.pickup(%'" 3 5 &&
	echo "ok: idle, the 3 workers of 2 slots wait in 3 pickups" || fail "the idle drain workers do not wait in 3 pickups"
for pid in "${drainers[@]}"; do kill -TERM "$pid" 2>/dev/null; done
for pid in "${drainers[@]}"; do await_exit "$pid" 10; [ $rc = 0 ] || fail "a drain worker exited with $rc"; done
check "every drain job is DONE after exactly one attempt" \
	"SELECT count(*) || ' ' || max(attempts) FROM pqrun.jobs WHERE queue = 'drain' AND status = 'DONE'" "400 1"
check "every drain job has exactly one attempt in its history" \
	"SELECT count(*) || ' ' || count(DISTINCT job_id) FROM pqrun.job_attempts a JOIN pqrun.jobs j ON j.id = a.job_id
	  WHERE j.queue = 'drain'" "400 400"
check "all three workers took part" \
	"SELECT count(DISTINCT locked_by) FROM pqrun.jobs WHERE queue = 'drain'" 3
slots=$(for i in 1 2 3; do grep " started$" "$work/drain$i.log" | grep -o "\[pqrun-slot-[0-9]*\]" | sort -u | sed "s/^/$i /"; done | wc -l)
[ "$slots" = 6 ] && echo "ok: all six slots ran jobs" || fail "$slots of the six slots ran jobs"
# A job claimed by mark_done_and_pickup was locked when its predecessor
# finished: the same transaction, the same worker.
chained=$(q "SELECT count(*) FROM pqrun.jobs n JOIN pqrun.jobs p ON p.queue = 'drain' AND p.locked_by = n.locked_by
             AND p.finished_at = n.locked_at AND p.id <> n.id WHERE n.queue = 'drain'")
if [ "${chained:-0}" -gt 100 ]; then
	echo "ok: $chained of 400 jobs were claimed by the mark_done of the job before them"
else
	fail "only ${chained:-0} of 400 jobs were claimed by mark_done_and_pickup"
fi

if [ $failures != 0 ]; then
	echo "-- worker log (last 60 lines)"
	grep -v " heartbeat after " "$log" | tail -n 60
	echo "python_worker: $failures check(s) failed"
	exit 1
fi
echo "python_worker: all checks passed"

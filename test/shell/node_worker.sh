#!/usr/bin/env bash
# test/shell/node_worker.sh — the Node.js example worker (examples/node: its
# CLI and handlers on the Worker of the client in clients/node) on the real
# test cluster.
#
# Runs against an already running server with pqrun preloaded (test/run.sh
# exports PGHOST, PGPORT and PGUSER), in a database of its own that it creates
# and drops, with pqrun.backoff = '1s' so that retries come back quickly.
# Needs node (18 or later) and npm; installs the example's locked
# dependencies with `npm ci` when examples/node/node_modules is missing or
# its copy of the client (`.npmrc`: install-links) is not clients/node's.
#
# Enqueues one job of each kind, runs `node cli.js --concurrency 3` in the
# background and checks: results of successful jobs, a job failing twice then
# succeeding (DONE, attempts 3, two 'retry' attempts), a retryable failure out
# of attempts (FAILED), a terminal error (FAILED at once, stack in
# last_error), a payload its validate function refuses (FAILED at once, the
# handler not run) beside one it accepts, a chain (the follow-up enqueued in
# the transaction that marks the job done runs; a chain cancelled while it
# runs leaves no follow-up), a slow job (timeout_seconds => 2, runs 4 s,
# heartbeats every 0.5 s) that is not reaped. With heartbeats that wait 900 s
# (timeout_seconds => 3600): a cancel reaches the running handler within 2 s
# and the worker goes on, progress reports are stored while the job runs and
# kept after it, a handler snoozes once (DONE, attempts 1, snoozes 1). Then
# SIGTERM: a short in-flight job finishes within the grace period, two long
# ones are given back with pqrun.release (READY, attempts 0, no attempt in the
# history, progress kept), the waiting pickup is cancelled and the process
# exits 0 within the grace period plus 2 s. A worker killed with SIGKILL has
# its jobs back within a round (the heartbeats moved their hold to the
# heartbeat connection), or, with --hold lease, at their stale window. A
# worker with 4 slots has one poller: idle, exactly one of its connections
# waits in a pickup; a burst of 12 jobs is claimed by one pickup of 4 and then
# one by one with the mark_done of the job before, each job DONE after one
# attempt; with two slots busy the pickup asks for 2; the poller's session
# holds the jobs it claimed until a heartbeat renews them, and a SIGKILL while
# it holds them (and waits in a pickup) gives them back within a round. Then
# three worker processes drain 400 jobs in waves, long-polling between them
# (idle, 3 waiting pickups for their 6 slots): each job DONE after exactly one
# attempt, most claimed by the mark_done_and_pickup of the job before them.
# Bounded: about 45 s, every wait has a limit.
# test/run.sh: beside the others
set -uo pipefail

repo=$(cd "$(dirname "$0")/../.." && pwd)
example=$repo/examples/node
export PGHOST=${PGHOST:?PGHOST must point at the running test server} PGPORT=${PGPORT:-5432} PGUSER=${PGUSER:-postgres}
db=pqrun_node_$$
tmp=$(mktemp -d /tmp/pqrun-node.XXXXXX)
worker_pid=
reaper_pid=
burst_pid=

cleanup() {
	[ -n "$worker_pid" ] && kill -KILL "$worker_pid" 2>/dev/null
	[ -n "$reaper_pid" ] && kill "$reaper_pid" 2>/dev/null
	[ -n "$burst_pid" ] && kill -KILL "$burst_pid" 2>/dev/null
	if ! dropdb --if-exists "$db" 2>/dev/null; then
		psql -X -q -d postgres -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null
	fi
	rm -rf "$tmp"
}
trap cleanup EXIT

source "$repo/test/lib/checks.sh"

die() {
	echo "FAIL $*"
	[ -f "$tmp/worker.log" ] && tail -n 30 "$tmp/worker.log"
	exit 1
}

echo "== setup"
command -v node >/dev/null || die "node is not installed (Debian: apt-get install nodejs npm)"
node_major=$(node -p 'process.versions.node.split(".")[0]')
[ "$node_major" -ge 18 ] || die "node $(node --version) is too old, the example needs 18 or later"
client=$repo/clients/node
installed=$example/node_modules/pqrun
if [ ! -d "$example/node_modules/pg" ] || ! cmp -s "$client/package.json" "$installed/package.json" ||
	! diff -rq "$client/src" "$installed/src" >/dev/null 2>&1; then
	command -v npm >/dev/null || die "npm is not installed (Debian: apt-get install npm)"
	echo "     npm ci in examples/node (the client from clients/node)"
	(cd "$example" && npm ci --no-audit --no-fund) >"$tmp/npm.log" 2>&1 || { cat "$tmp/npm.log"; die "npm ci failed"; }
fi
echo "     node $(node --version), pqrun $(node -p "require('$installed/package.json').version"), pg $(node -p "require('$example/node_modules/pg/package.json').version")"
createdb "$db" || die "createdb $db"
q -c "CREATE EXTENSION pqrun" -c "ALTER DATABASE $db SET pqrun.backoff = '1s'" >/dev/null || die "setup of $db"

echo "== enqueue one job of each kind"
enqueue() { q -c "SELECT pqrun.enqueue($1)"; }
greet=$(enqueue "'greet', '{\"name\": \"ada\"}'")
flaky=$(enqueue "'flaky', '{\"succeed_on_attempt\": 3}', max_attempts => 5")
exhausted=$(enqueue "'flaky', '{\"succeed_on_attempt\": 99}', max_attempts => 2")
poison=$(enqueue "'poison', '{\"bad\": true}'")
slow=$(enqueue "'slow', '{\"seconds\": 4}', timeout_seconds => 2")
chain=$(enqueue "'summarize', '{\"text\": \"pqrun keeps the job queue inside PostgreSQL itself\"}'")
fenced=$(enqueue "'summarize', '{\"text\": \"never embedded\", \"delay_ms\": 3000}'")
valid=$(enqueue "'notify', '{\"to\": \"ada\"}'")
invalid=$(enqueue "'notify', '{\"to\": 42}'")
echo "     greet=$greet flaky=$flaky exhausted=$exhausted poison=$poison slow=$slow chain=$chain fenced=$fenced valid=$valid invalid=$invalid"

echo "== run the worker: node cli.js --handlers ./handlers.js --concurrency 3"
# --wait '10 s': a pickup that the shutdown failed to cancel would hold the
# exit back past the bound checked below (or pick up the released job).
(cd "$example" && PGDATABASE=$db exec node cli.js --handlers ./handlers.js --concurrency 3 \
	--wait '10 s' --grace-ms 3000 --verbose) >"$tmp/worker.log" 2>&1 &
worker_pid=$!
t0=$(now_ms)
# Reap stale jobs every 0.3 s meanwhile, so that the slow job's check does
# not depend on the background workers' 1 s rounds: without heartbeats it
# would be reaped 2 s after its pickup.
for _ in $(seq 1 150); do echo "SELECT pqrun.reap_stale(); SELECT pg_sleep(0.3);"; done |
	psql -X -q -d "$db" >/dev/null 2>&1 &
reaper_pid=$!

# The fenced chain: cancel it while its handler runs; its heartbeat tells
# the handler, and the worker drops its outcome, follow-up included.
# Up to 30 s for the start (see the burst worker below).
wait_for 30 RUNNING "SELECT status FROM pqrun.jobs WHERE id = $fenced" || die "job $fenced never ran"
q -c "SELECT pqrun.cancel($fenced, 'cancelled while running')" >/dev/null

wait_for 45 0 "SELECT count(*) FROM pqrun.jobs WHERE id IN ($greet, $flaky, $exhausted, $poison, $slow, $chain, $valid, $invalid)
	AND status NOT IN ('DONE', 'FAILED')" || die "the jobs did not finish"
wait_for 10 DONE "SELECT status FROM pqrun.jobs WHERE job_type = 'embed' AND payload->>'source_job' = '$chain'" ||
	die "the follow-up of job $chain did not finish"
wait_for 10 1 "SELECT count(*) FROM pqrun.jobs WHERE id = $fenced AND status = 'CANCELLED'" || die "job $fenced"
kill -0 "$worker_pid" 2>/dev/null || die "the worker exited"
kill "$reaper_pid" 2>/dev/null
reaper_pid=
echo "     all finished after $(($(now_ms) - t0)) ms"

echo "== outcomes"
check "success: DONE with the handler's result" 'DONE|1|hello ada' \
	"SELECT status || '|' || attempts || '|' || (result->>'greeting') FROM pqrun.jobs WHERE id = $greet"
check "retried: failed twice, then DONE with attempts 3" 'DONE|3|3' \
	"SELECT status || '|' || attempts || '|' || (result->>'succeeded_on_attempt') FROM pqrun.jobs WHERE id = $flaky"
check "retried: attempts 1 and 2 ended 'retry' with the stack, 3 'done'" 'retry:stack,retry:stack,done:' \
	"SELECT string_agg(outcome || ':' || CASE WHEN error LIKE E'Error: flaky: attempt%\n    at flaky (%handlers.js:%'
	   THEN 'stack' ELSE '' END, ',' ORDER BY attempt)
	   FROM pqrun.job_attempts WHERE job_id = $flaky"
check "retryable error out of attempts: FAILED after 2" 'FAILED|2' \
	"SELECT status || '|' || attempts FROM pqrun.jobs WHERE id = $exhausted"
check "terminal error: FAILED after 1 attempt" 'FAILED|1' \
	"SELECT status || '|' || attempts FROM pqrun.jobs WHERE id = $poison"
check "terminal error: last_error is the stack" t \
	"SELECT last_error LIKE E'TerminalError: cannot process payload%\n    at poison (%handlers.js:%' FROM pqrun.jobs WHERE id = $poison"
check "validation: an accepted payload runs" 'DONE|ada' \
	"SELECT status || '|' || (result->>'notified') FROM pqrun.jobs WHERE id = $valid"
check "validation: a refused payload FAILED at once, the handler not run" 'FAILED|1|true|true' \
	"SELECT status || '|' || attempts || '|' || (result IS NULL) || '|' ||
	        (last_error LIKE 'TerminalError: invalid payload for notify: \"to\" must be a string%')
	   FROM pqrun.jobs WHERE id = $invalid"
check "chain: DONE with its result" 'DONE|pqrun keeps the job queue' \
	"SELECT status || '|' || (result->>'summary') FROM pqrun.jobs WHERE id = $chain"
check "chain: one follow-up, DONE, with the result of the embed handler" "1|DONE|$chain" \
	"SELECT count(*) || '|' || min(status::text) || '|' || min(result->>'source_job') FROM pqrun.jobs
	  WHERE job_type = 'embed' AND payload->>'source_job' = '$chain'"
check "chain whose lease was lost: CANCELLED, its follow-up rolled back" 'CANCELLED|0' \
	"SELECT status || '|' || (SELECT count(*) FROM pqrun.jobs WHERE job_type = 'embed' AND payload->>'source_job' = '$fenced')
	   FROM pqrun.jobs WHERE id = $fenced"
assert "chain whose lease was lost: the worker logged it" grep -q "lease lost.* job=$fenced " "$tmp/worker.log"
check "slow job (timeout 2 s, ran 4 s): DONE after one attempt, never reaped" 'DONE|1|done' \
	"SELECT j.status || '|' || j.attempts || '|' || string_agg(a.outcome, ',')
	   FROM pqrun.jobs j JOIN pqrun.job_attempts a ON a.job_id = j.id WHERE j.id = $slow GROUP BY j.status, j.attempts"
check "slow job: ran about 4 s" t "SELECT duration_ms BETWEEN 3900 AND 6000 FROM pqrun.jobs WHERE id = $slow"
beats=$(grep -c "heartbeat job=$slow " "$tmp/worker.log")
assert "slow job: heartbeats every 0.5 s ($beats sent)" [ "$beats" -ge 6 ]
check "every job was claimed under the worker's id (node-<host>-<pid>)" 0 \
	"SELECT count(*) FROM pqrun.job_attempts WHERE worker_id !~ '^node-.+-$worker_pid\$'"

echo "== cancel, progress and snooze, with heartbeats that wait 900 s in the server"
# timeout_seconds 3600: each heartbeat waits a quarter of it. A cancel or a
# progress report reaches the server in time only because a cancel ends a
# waiting heartbeat at once and a report cuts its wait short.
endless=$(enqueue "'slow', '{\"seconds\": 600}', timeout_seconds => 3600")
counted=$(enqueue "'count', '{\"to\": 3, \"step_ms\": 3000}', timeout_seconds => 3600")
wait_for 10 2 "SELECT count(*) FROM pqrun.jobs WHERE id IN ($endless, $counted) AND status = 'RUNNING'" ||
	die "jobs $endless and $counted did not start"
sleep 1.5 # the first heartbeat starts a second into the job
t2=$(now_ms)
q -c "SELECT pqrun.cancel($endless)" >/dev/null
stopped=
while [ $(($(now_ms) - t2)) -lt 5000 ]; do
	if grep -q "lease lost, outcome dropped job=$endless .*reason=CANCELLED" "$tmp/worker.log"; then
		stopped=$(($(now_ms) - t2))
		break
	fi
	sleep 0.05
done
echo "     the handler of job $endless stopped ${stopped:-(not within 5000)} ms after the cancel"
assert "a cancel reaches the running handler within 2 s" [ "${stopped:-5000}" -le 2000 ]
assert "the worker logged the cancel" grep -q "cancelled while running job=$endless " "$tmp/worker.log"
check "the cancelled job: CANCELLED, no result" 'CANCELLED|1|true' \
	"SELECT status || '|' || attempts || '|' || (result IS NULL) FROM pqrun.jobs WHERE id = $endless"
# A report every 3 s: each one cuts a waiting heartbeat short. Seen while
# the job runs, 3 to 9 s after it starts: long enough for the cancel above
# to end first on a loaded machine.
wait_for 10 'RUNNING|true|3' "SELECT status || '|' || (progress->>'count' IN ('1', '2')) || '|' || (progress->>'to') FROM pqrun.jobs WHERE id = $counted"
assert "progress is stored while the job runs" [ $? = 0 ]
after=$(enqueue "'greet', '{\"name\": \"after the cancel\"}'")
napped=$(enqueue "'nap', '{\"seconds\": 1}'")
wait_for 15 'DONE DONE DONE' "SELECT string_agg(status::text, ' ' ORDER BY id) FROM pqrun.jobs WHERE id IN ($counted, $after, $napped)" ||
	die "jobs $counted, $after and $napped did not finish"
check "the worker goes on after the cancel" 'DONE|hello after the cancel' \
	"SELECT status || '|' || (result->>'greeting') FROM pqrun.jobs WHERE id = $after"
check "the last progress report is kept after DONE" 'DONE|{"to": 3, "count": 3}|3' \
	"SELECT status || '|' || progress::text || '|' || (result->>'counted') FROM pqrun.jobs WHERE id = $counted"
check "snoozed once, then DONE on its one attempt, a second later" 'DONE|1|1|1|true' \
	"SELECT status || '|' || attempts || '|' || snoozes || '|' || (result->>'snoozes') || '|' || (finished_at - created_at >= interval '1 s')
	   FROM pqrun.jobs WHERE id = $napped"
check "its history holds the one attempt, no snooze" 'done' \
	"SELECT string_agg(outcome, ',') FROM pqrun.job_attempts WHERE job_id = $napped"
assert "the worker logged the snooze" grep -q "snoozed job=$napped " "$tmp/worker.log"

echo "== graceful shutdown (SIGTERM, grace period 3 s)"
# In one transaction, so that they start together: enqueued one by one on a
# loaded machine, they started over 1.1 s, and the short job had ended by
# the time the check below saw the third running.
read -r short long counting <<<"$(q -c "SELECT pqrun.enqueue('slow', '{\"seconds\": 1.5}') || ' ' ||
                                            pqrun.enqueue('slow', '{\"seconds\": 60}') || ' ' ||
                                            pqrun.enqueue('count', '{\"to\": 1000000, \"step_ms\": 100}')")"
wait_for 10 3 "SELECT count(*) FROM pqrun.jobs WHERE id IN ($short, $long, $counting) AND status = 'RUNNING'" ||
	die "jobs $short, $long and $counting did not start"
sleep 0.3
t1=$(now_ms)
kill -TERM "$worker_pid"
exited=
rc=
while [ $(($(now_ms) - t1)) -lt 15000 ]; do
	if ! kill -0 "$worker_pid" 2>/dev/null; then
		wait "$worker_pid"
		rc=$?
		exited=$(($(now_ms) - t1))
		worker_pid=
		break
	fi
	sleep 0.05
done
[ -n "$exited" ] || die "the worker did not exit within 15 s of SIGTERM"
echo "     exited $exited ms after SIGTERM with status $rc"
assert "the worker exits with status 0" [ "$rc" = 0 ]
assert "the worker exits within the grace period plus 2 s ($exited ms)" [ "$exited" -le 5000 ]
assert "the worker waited for the grace period ($exited ms)" [ "$exited" -ge 2800 ]
check "the short in-flight job finished during the grace period" 'DONE|1' \
	"SELECT status || '|' || attempts FROM pqrun.jobs WHERE id = $short"
check "the long in-flight job was released to READY, its attempt not counted, runnable now" 'READY|0|true' \
	"SELECT status || '|' || attempts || '|' || (run_after <= now()) FROM pqrun.jobs WHERE id = $long"
check "no attempt of it is in the history" 0 "SELECT count(*) FROM pqrun.job_attempts WHERE job_id = $long"
check "a released job keeps its progress for its next attempt" 'READY|0|true' \
	"SELECT status || '|' || attempts || '|' || ((progress->>'count')::int > 0) FROM pqrun.jobs WHERE id = $counting"
check "nothing is left RUNNING" 0 "SELECT count(*) FROM pqrun.jobs WHERE status = 'RUNNING'"
check "the worker's connections are closed" 0 \
	"SELECT count(*) FROM pg_stat_activity WHERE datname = '$db' AND application_name = 'pqrun-worker'"
assert "the worker logged the release" grep -q "released job=$long " "$tmp/worker.log"

echo "== SIGKILL mid-job: the dead worker's jobs come back within a round (its claims are held by its sessions)"
# Maintenance rounds every second (the test server's pqrun.reap_interval);
# the jobs' stale window is an hour. With --hold lease, they wait for it.
# The killed worker's backends end as soon as their clients are gone, even
# while they wait in a heartbeat or a pickup (client_gone.sh; before 0.22.0
# they slept on to the end of their waits, 56 to 75 s in full runs): about
# a second, 10 s allowed beside the suite's other clusters.
for hold in session lease; do
	(cd "$example" && PGDATABASE=$db exec node cli.js --handlers ./handlers.js --concurrency 2 --queues "killed-$hold" \
		--hold "$hold" --heartbeat-ms 500) >"$tmp/killed-$hold.log" 2>&1 &
	victim=$!
	q -c "SELECT pqrun.enqueue('slow', '{\"seconds\": 600}', timeout_seconds => 3600, queue => 'killed-$hold')
	        FROM generate_series(1, 2)" >/dev/null
	wait_for 30 2 "SELECT count(*) FROM pqrun.jobs WHERE queue = 'killed-$hold' AND status = 'RUNNING'" || {
		tail -n 30 "$tmp/killed-$hold.log"
		die "the two jobs of queue killed-$hold did not start"
	}
	sleep 1.2 # a heartbeat or two on the heartbeat connection too
	if [ "$hold" = session ]; then
		check "the heartbeats moved both jobs' hold from the poller's session to the heartbeat connections" 2 \
			"SELECT count(*) FROM pqrun.job_live j JOIN pg_stat_activity a ON a.pid = j.holder_pid
			  WHERE j.queue = 'killed-$hold' AND a.query LIKE '%pqrun.heartbeat(%'"
	fi
	kill -KILL "$victim"
	wait "$victim" 2>/dev/null
	killed_at=$(now_ms)
	if [ "$hold" = session ]; then
		assert "both jobs READY again, orphaned, within 10 s of the SIGKILL" \
			wait_for 10 "READY 1 orphaned,READY 1 orphaned" \
			"SELECT string_agg(status || ' ' || attempts || ' ' || split_part(last_error, ':', 1), ',') FROM pqrun.jobs WHERE queue = 'killed-$hold'"
		echo "     $(($(now_ms) - killed_at)) ms after the SIGKILL"
	else
		sleep 2.5
		check "with --hold lease, the killed worker's jobs stay RUNNING under their leases" "RUNNING,RUNNING" \
			"SELECT string_agg(status::text, ',') FROM pqrun.jobs WHERE queue = 'killed-$hold'"
	fi
	q -c "SELECT count(pqrun.cancel(id)) FROM pqrun.jobs WHERE queue = 'killed-$hold'" >/dev/null
done

echo "== one waiting pickup per worker: its poller claims for the free slots, in batches"
# A worker with 4 slots, alone on queue 'burst' and named by PGAPPNAME in
# pg_stat_activity. Its poller long-polls for as many jobs as slots are free
# (--wait '2 s': a pickup begun before every slot was free is soon asked
# again for all of them); a slot takes its next job with the mark_done of
# the last. The jobs have no timeout, so their heartbeats wait 60 s before
# their first renewal.
(cd "$example" && PGDATABASE=$db PGAPPNAME=pqrun-burst exec node cli.js --handlers ./handlers.js --concurrency 4 \
	--queues burst --worker-id burst --wait '2 s' --grace-ms 1000 --verbose) >"$tmp/burst.log" 2>&1 &
burst_pid=$!
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
# Up to 30 s for node's start and its five connections: in full runs on
# 17 (the lanes beside it) a worker's first claims or its idle state were
# not seen within 10 s of its start (twice, here and in the SIGKILL part
# above), and every later check of the same worker passed.
assert "idle with 4 slots: 5 connections, one of them waits in a pickup" wait_for 30 "5 1" "$waiting"
sleep 2.2
# Between two pickups (every 2 s) a sample may see none, never two.
most=$(for _ in $(seq 1 10); do q -c "$waiting" | cut -d' ' -f2; sleep 0.1; done | sort -n | tail -n 1)
assert "sampled 10 times over a second, never more than one waiting pickup (at most ${most:-?})" [ "$most" = 1 ]

# 12 jobs of 0.5 s at once: the poller's waiting pickup claims 4 (one per
# free slot); each slot then claims its next with the mark_done of the last.
q -c "SELECT count(pqrun.enqueue('slow', jsonb_build_object('burst', n, 'seconds', 0.5), queue => 'burst'))
        FROM generate_series(1, 12) n" >/dev/null
wait_for 15 12 "SELECT count(*) FROM pqrun.jobs WHERE queue = 'burst' AND status = 'DONE'" || die "the burst did not finish"
check "every burst job is DONE after exactly one attempt, with one attempt in its history" '12|1|12|12' \
	"SELECT count(*) || '|' || max(attempts) || '|' || (SELECT count(*) || '|' || count(DISTINCT job_id)
	   FROM pqrun.job_attempts a JOIN pqrun.jobs j ON j.id = a.job_id WHERE j.queue = 'burst')
	   FROM pqrun.jobs WHERE queue = 'burst' AND status = 'DONE'"
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
	"4 8" "$(chained true)"
check "all under the worker's id" burst "SELECT string_agg(DISTINCT locked_by, ',') FROM pqrun.jobs WHERE queue = 'burst'"
assert "the worker logged one pickup, the batch of 4" \
	[ "$(grep -o "claimed jobs=[0-9]* free=[0-9]*" "$tmp/burst.log")" = "claimed jobs=4 free=4" ]
assert "idle again, one waiting pickup" wait_for 5 "5 1" "$waiting"

# With two slots busy, the poller asks for the other two: of 6 jobs enqueued
# at once it claims 2, and the two free slots chain the rest. The jobs it
# claims are held by its session until a heartbeat renews their lease (here
# after the 60 s of its wait; the SIGKILL test above saw renewals move them).
# The two busy jobs run 10 s: long enough to be running still when the 6
# are enqueued on a loaded machine (with 3 s they had ended in a full run,
# and the poller rightly asked for 4).
q -c "SELECT pqrun.enqueue('slow', '{\"busy\": 1, \"seconds\": 10}', queue => 'burst'),
             pqrun.enqueue('slow', '{\"busy\": 2, \"seconds\": 10}', queue => 'burst')" >/dev/null
wait_for 15 2 "SELECT count(*) FROM pqrun.jobs WHERE queue = 'burst' AND status = 'RUNNING'" || die "the two busy jobs did not start"
check "the two running jobs are held by the poller's session" 2 "$(held_by pickup)"
# Their heartbeats begin, on connections of their own, and the poller waits
# again (a single sample may fall between two of its pickups).
assert "two slots busy: 7 connections (2 of them for heartbeats), one waiting pickup" wait_for 5 "7 1" "$waiting"
check "the two busy jobs still run" 2 "SELECT count(*) FROM pqrun.jobs WHERE queue = 'burst' AND payload ? 'busy' AND status = 'RUNNING'"
q -c "SELECT count(pqrun.enqueue('greet', jsonb_build_object('two_free', n), queue => 'burst')) FROM generate_series(1, 6) n" >/dev/null
wait_for 15 6 "SELECT count(*) FROM pqrun.jobs WHERE queue = 'burst' AND payload ? 'two_free' AND status = 'DONE'" ||
	die "the 6 jobs did not finish"
# In full runs of the suite this once failed as "4 by pickups, 2 chained"
# and once with the poller asking for 4: the two busy jobs (then 3 s) had
# ended before the 6 were enqueued. The log's claims and the jobs' claim
# times are printed when the pickup of 2 is missing.
assert "the poller asked for the two free slots and got 2" grep -q "claimed jobs=2 free=2" "$tmp/burst.log"
if ! grep -q "claimed jobs=2 free=2" "$tmp/burst.log"; then
	echo "note: no pickup of 2 for the 2 free slots; the burst worker's claims:"
	grep -E "claimed|picked|done" "$tmp/burst.log" | tail -n 30
	q -c "SELECT id, payload, locked_at, finished_at FROM pqrun.jobs WHERE queue = 'burst' AND payload ? 'two_free' ORDER BY id"
fi
assert "the two busy jobs finish DONE after one attempt" wait_for 15 2 \
	"SELECT count(*) FROM pqrun.jobs WHERE queue = 'burst' AND payload ? 'busy' AND status = 'DONE' AND attempts = 1"

# A worker killed while the poller's session holds its jobs (their first
# heartbeat still waiting): they come back within a round of the poller's
# backend exit, which notices the death within a second although it waits
# in a pickup. The worker is frozen first, to look at it.
q -c "SELECT pqrun.enqueue('slow', jsonb_build_object('killed', n, 'seconds', 600), queue => 'burst')
        FROM generate_series(1, 2) n" >/dev/null
wait_for 15 2 "SELECT count(*) FROM pqrun.jobs WHERE queue = 'burst' AND payload ? 'killed' AND status = 'RUNNING'" ||
	die "the two jobs to kill did not start"
# Frozen while its poller's session waits in a pickup, and killed at once:
# the frozen worker's pickup still ends at its 2 s wait, and on a loaded
# machine the checks of a full run took that long (its session was idle by
# the second one). A freeze between two pickups is thawed and tried again.
frozen=
for _ in 1 2 3 4 5; do
	wait_for 5 2 "$(held_by pickup) AND a.state = 'active'"
	kill -STOP "$burst_pid"
	frozen=$(q -c "$(held_by pickup) AND a.state = 'active'")
	[ "$frozen" = 2 ] && break
	kill -CONT "$burst_pid"
done
kill -KILL "$burst_pid"
wait "$burst_pid" 2>/dev/null
burst_pid=
killed_at=$(now_ms)
assert "killed frozen, its poller's session holding both and waiting in a pickup for the 2 free slots" [ "$frozen" = 2 ]
assert "both jobs READY again, orphaned, within 10 s of the SIGKILL" \
	wait_for 10 "READY 1 orphaned,READY 1 orphaned" \
	"SELECT string_agg(status || ' ' || attempts || ' ' || split_part(last_error, ':', 1), ',') FROM pqrun.jobs
	  WHERE queue = 'burst' AND payload ? 'killed'"
echo "     $(($(now_ms) - killed_at)) ms after the SIGKILL"
q -c "SELECT count(pqrun.cancel(id)) FROM pqrun.jobs WHERE queue = 'burst' AND payload ? 'killed'" >/dev/null

echo "== exactly once: 3 worker processes x 2 slots drain 4 waves of 100 jobs, long-polling between waves"
# Each slot marks a job done with mark_done_and_pickup, which claims its
# next job in the same transaction; between waves each worker's poller waits
# in a long-poll pickup for its free slots. Every job must end DONE after
# exactly one attempt.
drainers=()
for i in 1 2 3; do
	(cd "$example" && PGDATABASE=$db exec node cli.js --handlers ./handlers.js --concurrency 2 --queues drain \
		--wait '2 s' --grace-ms 2000) >"$tmp/drain$i.log" 2>&1 &
	drainers+=($!)
done
sleep 1
for wave in 1 2 3 4; do
	q -c "SELECT count(pqrun.enqueue('greet', jsonb_build_object('wave', $wave, 'n', n), queue => 'drain'))
	        FROM generate_series(1, 100) n" >/dev/null
	sleep 1.5
done
wait_for 30 400 "SELECT count(*) FROM pqrun.jobs WHERE queue = 'drain' AND status = 'DONE'" ||
	{ echo "FAIL the drain did not finish"; violations=$((violations + 1)); }
assert "idle, the 3 workers of 2 slots wait in 3 pickups" wait_for 5 3 \
	"SELECT count(*) FROM pg_stat_activity WHERE datname = '$db' AND application_name = 'pqrun-worker'
	   AND state = 'active' AND query LIKE '%pqrun.pickup(%'"
for pid in "${drainers[@]}"; do kill -TERM "$pid" 2>/dev/null; done
for pid in "${drainers[@]}"; do wait "$pid"; assert "a drain worker exits with status 0" [ $? = 0 ]; done
check "every drain job is DONE after exactly one attempt" '400|1' \
	"SELECT count(*) || '|' || max(attempts) FROM pqrun.jobs WHERE queue = 'drain' AND status = 'DONE'"
check "every drain job has exactly one attempt in its history" '400|400' \
	"SELECT count(*) || '|' || count(DISTINCT job_id) FROM pqrun.job_attempts a JOIN pqrun.jobs j ON j.id = a.job_id
	  WHERE j.queue = 'drain'"
check "all three workers took part" 3 "SELECT count(DISTINCT locked_by) FROM pqrun.jobs WHERE queue = 'drain'"
slots=$(for i in 1 2 3; do grep " picked job=" "$tmp/drain$i.log" | grep -o "slot=[0-9]*" | sort -u | sed "s/^/$i /"; done | wc -l)
assert "all six slots ran jobs ($slots)" [ "$slots" = 6 ]
# A job claimed by mark_done_and_pickup was locked when its predecessor
# finished: the same transaction, the same worker.
chained=$(q -c "SELECT count(*) FROM pqrun.jobs n JOIN pqrun.jobs p ON p.queue = 'drain' AND p.locked_by = n.locked_by
                 AND p.finished_at = n.locked_at AND p.id <> n.id WHERE n.queue = 'drain'")
echo "     $chained of 400 jobs were claimed by the mark_done of the job before them"
assert "most drain jobs were claimed by mark_done_and_pickup ($chained)" [ "${chained:-0}" -gt 100 ]

echo "total: $(($(now_ms) - t0)) ms, $violations violation(s)"
if [ $violations != 0 ]; then
	echo "--- worker log (last 40 lines)"
	tail -n 40 "$tmp/worker.log"
	[ -f "$tmp/burst.log" ] && { echo "--- burst worker log (last 40 lines)"; tail -n 40 "$tmp/burst.log"; }
fi
[ $violations = 0 ]

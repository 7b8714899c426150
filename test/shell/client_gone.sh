#!/usr/bin/env bash
# test/shell/client_gone.sh — a client killed while its session waits in
# pqrun (a waiting pickup, a waiting heartbeat, CALL await_jobs) ends that
# session at once, so the jobs the session held (pqrun.claim_hold =
# session) are READY again at the next maintenance round, not when its
# wait would have ended.
#
# Reproduction (0.21.0): a psql that claimed a job under claim_hold =
# session and then waited in pickup(wait => '60 s') was killed with
# SIGKILL; its backend slept on until the wait ended 60 s later (a backend
# reads its client's socket only when it next needs to), orphan rescue
# rightly saw it alive, and the job stayed RUNNING for that minute
# (node_worker.sh's SIGKILL rescue took 56 to 75 s in full runs).
#
# Against the test server (PGHOST, PGPORT, PGUSER exported), in a database
# of its own. Each case: a psql claims a job, then waits 60 s; it is killed
# once its backend waits; its backend must be gone and the job READY within
# 10 s (a maintenance round is 1 s), and the server must have logged the
# lost connection. About 10 s.
set -uo pipefail
: "${PGHOST:?PGHOST must point at the test server}" "${PGPORT:?}" "${PGUSER:?}"

db=pqrun_client_gone_$$
source "$(dirname "$0")/../lib/checks.sh"
client=
trap '[ -n "$client" ] && kill -9 $client 2>/dev/null; dropdb --if-exists --force "$db" 2>/dev/null' EXIT
createdb "$db" || exit 1
q -c "SET client_min_messages = warning" -c "CREATE EXTENSION pqrun" >/dev/null || exit 1

# gone NAME WAIT_SQL: a psql claims a job of type NAME under claim_hold =
# session (its own transaction), then runs WAIT_SQL, which waits 60 s; it
# is killed with SIGKILL while its backend waits.
gone() {
	local name=$1 wait_sql=$2 backend killed_at
	q -c "SELECT pqrun.enqueue('$name')" >/dev/null || exit 1
	PGAPPNAME=$name psql -X -qtA -d "$db" -c "SET pqrun.claim_hold = session" \
		-c "SELECT id FROM pqrun.pickup('gone', job_types => '{$name}')" -c "$wait_sql" >/dev/null 2>&1 &
	client=$!
	if ! wait_for 10 "RUNNING active" "SELECT (SELECT status FROM pqrun.jobs WHERE job_type = '$name') || ' ' ||
	                                        (SELECT state FROM pg_stat_activity WHERE application_name = '$name')"; then
		echo "FAIL $name: the client never waited"
		violations=$((violations + 1))
		return
	fi
	sleep 0.5 # into its sleep
	backend=$(q -c "SELECT pid FROM pg_stat_activity WHERE application_name = '$name'")
	kill -9 "$client"
	killed_at=$(now_ms)
	wait "$client" 2>/dev/null
	client=
	assert "$name: the killed client's backend ends and its job is READY again within 10 s" \
		wait_for 10 "0 READY" "SELECT (SELECT count(*) FROM pg_stat_activity WHERE pid = $backend) || ' ' ||
		                              (SELECT status FROM pqrun.jobs WHERE job_type = '$name')"
	echo "     $(($(now_ms) - killed_at)) ms after the SIGKILL"
}

gone waiting_pickup "SELECT id FROM pqrun.pickup('gone', job_types => '{none}', wait => '60 s')"
gone waiting_heartbeat "SELECT pqrun.heartbeat((SELECT id FROM pqrun.jobs WHERE job_type = 'waiting_heartbeat'), wait => '60 s')"
gone awaiting_jobs "CALL pqrun.await_jobs(job_types => '{none}', wait => '60 s')"

echo "$violations violation(s)"
[ $violations = 0 ]

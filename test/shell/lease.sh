#!/usr/bin/env bash
# test/shell/lease.sh — what holds a claim: its lease, and, when the worker
# asks for it (pqrun.claim_hold = session), also its session.
#
# Reproduction on 0.15.0, where every claim ended with its session: three
# `psql -c "SELECT id FROM pqrun.pickup('wN', ARRAY['t'], wait => '4 s')"`
# wait, a fourth session commits `SELECT pqrun.enqueue('t')`: the first
# psql exits holding the job, orphan rescue puts it back within a second,
# the next waiter gets it, and so on: all three got the job, attempts 3.
#
# Checked here, against the test server (PGHOST, PGPORT, PGUSER exported,
# a maintenance round every second) in a database of its own:
#   1. the three waiters get the job once; it stays RUNNING under the first
#      lease after that session ended, until its stale window
#      (timeout_seconds 10) passes; the reaper then ends the attempt
#      ("stale") and the next pickup gets attempt 2;
#   2. a lease-held job is finished from another connection with its lease;
#      a heartbeat from another session renews it and leaves it lease-held;
#   3. a claim made under pqrun.claim_hold = session (SET, or PGOPTIONS) is
#      rescued within a round or two once its session ends ("orphaned"); a
#      heartbeat moves the hold to the heartbeating session;
#   4. pqrun.orphan_rescue = off leaves a session-held job of an ended
#      session RUNNING;
#   5. reap_stale('0 s') with a reap_stale() of 20 minutes between its
#      calls reaps all of 2,500 RUNNING jobs within six calls.
# Turns the server's orphan rescue and then its workers off (ALTER SYSTEM)
# meanwhile:
# test/run.sh: alone
set -uo pipefail
: "${PGHOST:?PGHOST must point at the test server}" "${PGPORT:?}" "${PGUSER:?}"

db=pqrun_lease_$$
source "$(dirname "$0")/../lib/checks.sh"
bg=()
cleanup() {
	for p in "${bg[@]}"; do kill "$p" 2>/dev/null; done
	psql -X -q -d postgres -c "ALTER SYSTEM RESET pqrun.orphan_rescue" -c "ALTER SYSTEM RESET pqrun.enabled" \
		-c "SELECT pg_reload_conf()" >/dev/null
	dropdb --if-exists --force "$db" 2>/dev/null
	rm -f "$out".*
}
out=$(mktemp /tmp/pqrun-lease.XXXXXX)
trap cleanup EXIT
createdb "$db" || exit 1
q -c "SET client_min_messages = warning" -c "CREATE EXTENSION pqrun" >/dev/null || exit 1

# waiting N: N sessions are in a waiting pickup.
waiting() {
	[ "$(q -c "SELECT count(*) FROM pg_stat_activity WHERE datname = '$db' AND state = 'active'
		AND query LIKE '%pqrun.pickup(%wait%' AND pid <> pg_backend_pid()")" = "$1" ]
}

echo "== 1. three psql -c waiters, one job: handed out once, held by its lease"
for w in w1 w2 w3; do
	psql -X -qtA -d "$db" -c "SELECT id || ' ' || lease_token FROM pqrun.pickup('$w', ARRAY['t'], wait => '4 s')" \
		>"$out.$w" 2>&1 &
	bg+=($!)
done
for _ in $(seq 50); do waiting 3 && break; sleep 0.1; done
assert "three pickups wait" waiting 3
id=$(q -c "SELECT pqrun.enqueue('t', timeout_seconds => 10)")
picked_at=$(now_ms)
wait "${bg[@]}"
bg=()
got=$(cat "$out.w1" "$out.w2" "$out.w3" | grep .)
assert "one waiter got the job, the others nothing: [$got]" [ "$(echo "$got" | wc -l)" = 1 -a "${got%% *}" = "$id" ]
lease=${got#* }
sleep 1.5 # a round or more after the holding psql exited
check "the job stays RUNNING under the first lease, held by no session" "RUNNING 1 1 1" \
	"SELECT status || ' ' || attempts || ' ' || (lease_token = '$lease')::int || ' ' || (holder_pid IS NULL)::int
	   FROM pqrun.job_live WHERE id = $id"
check "no other pickup gets it meanwhile" 0 "SELECT count(*) FROM pqrun.pickup('w4', ARRAY['t'])"
assert "its stale window passes and the reaper puts it back" \
	wait_for 10 "READY 1 stale" "SELECT status || ' ' || attempts || ' ' || (SELECT string_agg(outcome, ',')
	   FROM pqrun.job_attempts WHERE job_id = $id) FROM pqrun.jobs WHERE id = $id"
reaped_ms=$(($(now_ms) - picked_at))
assert "not before its stale window of 10 s (reaped after $reaped_ms ms)" [ "$reaped_ms" -ge 10000 ]
check "the next pickup gets attempt 2" "$id 2" "SELECT id || ' ' || attempts FROM pqrun.pickup('w5', ARRAY['t'])"
q -c "SELECT pqrun.mark_done($id)" >/dev/null

echo "== 2. a lease-held job is finished from another connection"
id=$(q -c "SELECT pqrun.enqueue('t2')")
lease=$(q -c "SELECT lease_token FROM pqrun.pickup('w6', ARRAY['t2'])")
sleep 1.5
q -c "SET pqrun.claim_hold = session" -c "SELECT pqrun.heartbeat($id, '$lease')" >/dev/null
check "a heartbeat from another session (claim_hold = session) leaves it lease-held" "t" \
	"SELECT holder_pid IS NULL AND heartbeat_at IS NOT NULL FROM pqrun.job_live WHERE id = $id"
sleep 1.5
check "still RUNNING rounds after its picking session ended" RUNNING "SELECT status FROM pqrun.jobs WHERE id = $id"
q -c "SELECT pqrun.mark_done($id, lease_token => '$lease')" >/dev/null
check "mark_done with its lease, from a third connection" "DONE 1" "SELECT status || ' ' || attempts FROM pqrun.jobs WHERE id = $id"

echo "== 3. pqrun.claim_hold = session: a claim ends with its session"
id=$(q -c "SELECT pqrun.enqueue('t3')")
q -c "SET pqrun.claim_hold = session" -c "SELECT id FROM pqrun.pickup('w7', ARRAY['t3'])" >/dev/null
ended=$(now_ms)
assert "rescued within two rounds of the session's end" \
	wait_for 3 "READY 1 orphaned" "SELECT status || ' ' || attempts || ' ' || (SELECT string_agg(outcome, ',')
	   FROM pqrun.job_attempts WHERE job_id = $id) FROM pqrun.jobs WHERE id = $id"
echo "     rescued $(($(now_ms) - ended)) ms after the session ended"
# The same asked for in the connection's options, as a pooler-less worker may.
PGOPTIONS="-c pqrun.claim_hold=session" psql -X -qtA -d "$db" -c "SELECT id FROM pqrun.pickup('w8', ARRAY['t3'])" >/dev/null
assert "a claim of a session started with -c pqrun.claim_hold=session is rescued too" \
	wait_for 3 "READY 2" "SELECT status || ' ' || attempts FROM pqrun.jobs WHERE id = $id"
# A session-held job stays while its session lives; a heartbeat moves the hold.
psql -X -qtA -d "$db" -c "SET pqrun.claim_hold = session" -c "SELECT id FROM pqrun.pickup('w9', ARRAY['t3'])" \
	-c "SELECT pg_sleep(30)" >/dev/null 2>&1 &
holder=$!
bg+=($holder)
assert "picked up by a session that stays" wait_for 5 "RUNNING 3" "SELECT status || ' ' || attempts FROM pqrun.jobs WHERE id = $id"
sleep 1.5
check "not rescued while its holder lives" "RUNNING 3" "SELECT status || ' ' || attempts FROM pqrun.jobs WHERE id = $id"
picker=$(q -c "SELECT pid FROM pg_stat_activity WHERE datname = '$db' AND query = 'SELECT pg_sleep(30)'")
# Looked at in the heartbeat's own session: once that session ends, a round
# may rescue the job before another session looks.
moved=$(q -c "SELECT pqrun.heartbeat($id)" -c "SELECT holder_pid = pg_backend_pid() AND holder_pid <> $picker
                                               FROM pqrun.job_live WHERE id = $id" | tail -n 1)
assert "a heartbeat from another session (claim_hold = lease) makes that session the holder ($moved)" test "$moved" = t
assert "which ended: rescued although the picking session lives" \
	wait_for 3 "READY 3" "SELECT status || ' ' || attempts FROM pqrun.jobs WHERE id = $id"
kill "$holder" 2>/dev/null
q -c "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '$db' AND query = 'SELECT pg_sleep(30)'" >/dev/null

echo "== 4. pqrun.orphan_rescue = off: a session-held job waits for its stale window"
q -d postgres -c "ALTER SYSTEM SET pqrun.orphan_rescue = off" -c "SELECT pg_reload_conf()" >/dev/null
sleep 0.5
q -c "SET pqrun.claim_hold = session" -c "SELECT id FROM pqrun.pickup('w10', ARRAY['t3'])" >/dev/null
sleep 2.5
check "RUNNING two rounds after its session ended" "RUNNING 4" "SELECT status || ' ' || attempts FROM pqrun.jobs WHERE id = $id"
q -d postgres -c "ALTER SYSTEM RESET pqrun.orphan_rescue" -c "SELECT pg_reload_conf()" >/dev/null
assert "rescued once it is on again" wait_for 4 "READY 4" "SELECT status || ' ' || attempts FROM pqrun.jobs WHERE id = $id"

echo "== 5. reap_stale with its own stale window, a call after each of another's"
# 2,500 jobs RUNNING under their lease. reap_stale('0 s') and reap_stale()
# (20 minutes, as the rounds) share the cursor of the windows of 1,000; the
# workers are off meanwhile, so that no round moves it too. Reproduction
# (rounds.sh in a full run on 17, the rounds in the other's place): before a window
# found empty past the cursor started again from the first job, the calls
# of '0 s' reaped 1000, 500, then 0 for good: each reap_stale() moved the
# cursor over the 1,000 jobs left (1001-2000), and the next '0 s' call
# found only the empty tail past them.
q -d postgres -c "ALTER SYSTEM SET pqrun.enabled = off" -c "SELECT pg_reload_conf()" >/dev/null
sleep 1
q -c "SELECT count(*) FROM pqrun.enqueue_batch((SELECT jsonb_agg(jsonb_build_object('job_type', 'reaped'))
        FROM generate_series(1, 2500)))" -c "SELECT count(*) FROM pqrun.pickup('w', ARRAY['reaped'], batch_size => 2500)" >/dev/null
running="SELECT count(*) FROM pqrun.job_live WHERE job_type = 'reaped' AND status = 'RUNNING'"
calls=""
for _ in 1 2 3 4 5 6; do
	calls+="$(q -c "SELECT pqrun.reap_stale('0 s')") "
	[ "$(q -c "$running")" = 0 ] && break
	q -c "SELECT pqrun.reap_stale()" >/dev/null
done
q -d postgres -c "ALTER SYSTEM RESET pqrun.enabled" -c "SELECT pg_reload_conf()" >/dev/null
check "every job reaped within six calls, at most 1,000 a call ($calls)" "0 true" \
	"SELECT ($running) || ' ' || ($(tr ' ' '\n' <<<"$calls" | sort -n | tail -n 1) <= 1000)"

echo "$violations violation(s)"
[ $violations = 0 ]

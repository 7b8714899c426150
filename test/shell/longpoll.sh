#!/usr/bin/env bash
# test/shell/longpoll.sh — the long poll: pickup(wait => …) and CALL
# await_jobs() sleep in the backend and are woken by the commit that makes a
# matching job runnable (API.md "Consuming", docs/api.md "Which wait to use").
#
# Runs against the cluster in PGHOST/PGPORT/PGUSER (it must preload pqrun),
# in a database of its own that it drops at the end, and starts one
# throwaway cluster without shared_preload_libraries for the polling
# fallback. Takes about 30 s (45 s on a busy 2-core machine, where every
# psql start costs 0.2 s).
#
# Timing. Waiters report, from the server's clock, how long their statement
# took and when it ended; producers report the server's clock just before
# their COMMIT. "Latency" is the time from that COMMIT to the waiter's return.
# A woken waiter answers within milliseconds; the bound is LATENCY_MS
# (400 ms) for a loaded 2-core machine. Each producer commits about 0.3 s
# after its waiters started to sleep, so a wake-up replaced by polling every
# second would show a latency near 0.7 s and fail.
# Times wake-ups in fractions of a second:
# test/run.sh: alone
set -eEuo pipefail
trap 'echo "FAIL: line $LINENO: $BASH_COMMAND exited with $?"' ERR
repo=$(cd "$(dirname "$0")/../.." && pwd)
source "$repo/test/lib/cluster.sh"
: "${PGHOST:?PGHOST must point at a running cluster that preloads pqrun}"
: "${PGPORT:?}" "${PGUSER:=postgres}"
export PGUSER

LATENCY_MS=400
db=pqrun_longpoll
tmp=$(mktemp -d /tmp/pqrun-longpoll.XXXXXX)
chmod 755 "$tmp"
nodir=                     # the cluster without preload, once started
pids=()                    # background psql clients we started

cleanup() {
	local p
	for p in "${pids[@]}" ${CTL_PID:-}; do kill "$p" 2>/dev/null || true; done
	psql -X -q -d postgres -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null 2>&1 || true
	[ -n "$nodir" ] && cluster_stop "$nodir" immediate
	rm -rf "$tmp" ${nodir:+"$nodir"}
}
trap cleanup EXIT

fail() {
	echo "FAIL: $*"
	local f
	for f in "$tmp"/*.err; do [ -s "$f" ] && { echo "--- $f"; cat "$f"; }; done
	exit 1
}
q() { psql -X -qtA -v ON_ERROR_STOP=1 -d "$db" "$@"; }
now_ms() { echo $(($(date +%s%N) / 1000000)); }

# ctl SQL: run SQL (one or more statements) in the control session, a psql
# kept open for the whole test (starting a psql costs up to 0.2 s on a busy
# machine), and print its output, errors included.
ctl_done=__longpoll_ctl_done__
ctl() {
	printf '%s;\n\\echo %s\n' "$1" "$ctl_done" >&"${CTL[1]}"
	local line out=""
	while :; do
		IFS= read -r -t 30 line <&"${CTL[0]}" || fail "no answer from the control session to [$1]"
		[ "$line" = "$ctl_done" ] && break
		out+="${out:+$'\n'}$line"
	done
	printf '%s\n' "$out"
}
# sql SQL: what the helpers below run their statements with.
sql() { ctl "$1"; }

# The query every waiter runs: one row "ids|statement ms|end (epoch ms)",
# ids "-" when it got nothing.
pick_sql() { # WORKER ARGS
	echo "SELECT coalesce(string_agg(id::text, ','), '-'),
	        (extract(epoch FROM clock_timestamp() - statement_timestamp()) * 1000)::int,
	        (extract(epoch FROM clock_timestamp()) * 1000)::bigint
	   FROM pqrun.pickup('$1', $2)"
}

# start NAME SQL...: run the statements in the background in one session
# whose application_name is lp_NAME. Output goes to $tmp/NAME.out and .err;
# $tmp/NAME.res gets "client-side milliseconds exit-status".
start() {
	local name=$1
	shift
	local args=() s
	for s in "$@"; do args+=(-c "$s"); done
	(
		t0=$(now_ms)
		rc=0
		PGAPPNAME=lp_$name psql -X -qtA -v ON_ERROR_STOP=1 -v VERBOSITY=sqlstate -d "$db" "${args[@]}" \
			>"$tmp/$name.out" 2>"$tmp/$name.err" || rc=$?
		echo "$(($(now_ms) - t0)) $rc" >"$tmp/$name.res"
	) &
	pids+=($!)
	eval "pid_$name=$!"
}

# waiter NAME WAIT [ARGS]: a worker lp_NAME long-polls for a job with
# pickup(wait => WAIT, ARGS) and marks what it got DONE in the same session
# (so that the orphan rescue of the background workers never puts it back).
waiter() {
	local name=$1 wait=$2 args=${3:+, $3}
	start "$name" "$(pick_sql "$name" "wait => '$wait'$args")" \
		"SELECT count(pqrun.mark_done(id)) FROM pqrun.jobs WHERE status = 'RUNNING' AND locked_by = '$name'"
}

# finish NAME [SECONDS]: wait (at most SECONDS, default 15) for lp_NAME to
# end; sets OUT (first output line), ERR, CLIENT_MS and RC.
finish() {
	local name=$1 seconds=${2:-15} pid
	eval "pid=\$pid_$name"
	local deadline=$((SECONDS + seconds))
	while kill -0 "$pid" 2>/dev/null; do
		[ $SECONDS -lt $deadline ] || { kill "$pid"; fail "$name still running after ${seconds}s"; }
		sleep 0.02
	done
	wait "$pid" || true
	read -r CLIENT_MS RC <"$tmp/$name.res"
	OUT=$(head -n 1 "$tmp/$name.out")
	ERR=$(cat "$tmp/$name.err")
}

# finish_pick NAME [SECONDS]: finish a waiter and split its answer into
# IDS, STMT_MS (statement duration) and END_MS (when it returned).
finish_pick() {
	finish "$1" "${2:-15}"
	[ "$RC" = 0 ] || fail "$1 failed: $ERR"
	local line
	line=$(grep -E '^[-0-9,]+[|][0-9]+[|][0-9]+$' "$tmp/$1.out" || true)
	IFS='|' read -r IDS STMT_MS END_MS <<<"$line"
	[ -n "$END_MS" ] || fail "$1 printed [$(cat "$tmp/$1.out")]"
}

# sleeping NAME...: wait until every lp_NAME sleeps in the long poll's wait
# (pg_stat_activity.wait_event_type 'Extension', wait_event WAIT_EVENT).
sleeping() {
	local names="" n deadline=$((SECONDS + 10)) got
	for n in "$@"; do names+="${names:+,}'lp_$n'"; done
	while [ $SECONDS -lt $deadline ]; do
		got=$(sql "SELECT count(*) FROM pg_stat_activity WHERE application_name IN ($names)
		              AND wait_event_type = 'Extension' AND wait_event = '$WAIT_EVENT'")
		[ "$got" = $# ] && return 0
		sleep 0.02
	done
	fail "not all of [$*] sleep in wait event Extension/$WAIT_EVENT"
}

# commit SQL: run SQL in a transaction of its own; sets RESULT (its first
# column) and COMMIT_MS (the server's clock right before COMMIT).
commit() {
	local out
	out=$(sql "BEGIN; SELECT ($1)::text, (extract(epoch FROM clock_timestamp()) * 1000)::bigint; COMMIT")
	IFS='|' read -r RESULT COMMIT_MS <<<"$out"
	[[ "$COMMIT_MS" =~ ^[0-9]+$ ]] || fail "the transaction [$1] failed: $out"
}

reset() { sql "TRUNCATE pqrun.job_live, pqrun.job_done, pqrun.attempt_log, pqrun.job_dep" >/dev/null; }

# assert_woken NAME JOB: waiter NAME returned exactly JOB within LATENCY_MS
# of the commit.
assert_woken() {
	local latency=$((END_MS - COMMIT_MS))
	[ "$IDS" = "$2" ] || fail "$1 returned [$IDS], expected job $2"
	[ $latency -lt $LATENCY_MS ] || fail "$1 returned job $2 ${latency} ms after the commit (bound ${LATENCY_MS} ms)"
	echo "   $1 got job $2 ${latency} ms after the commit"
}

# assert_timed_out NAME WAIT_MS: waiter NAME returned nothing, at its timeout.
assert_timed_out() {
	[ "$IDS" = "-" ] || fail "$1 returned job [$IDS], expected none"
	[ "$STMT_MS" -ge $(($2 - 100)) ] || fail "$1 returned after $STMT_MS ms, before its $2 ms wait"
	[ "$STMT_MS" -lt $(($2 + 1500)) ] || fail "$1 returned after $STMT_MS ms, long after its $2 ms wait"
	echo "   $1 got nothing after $STMT_MS ms"
}

psql -X -q -d postgres -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null 2>&1
psql -X -q -d postgres -c "CREATE DATABASE $db" >/dev/null
q -c "CREATE EXTENSION pqrun" >/dev/null
coproc CTL { psql -X -qtA -d "$db" 2>&1; }
[ "$(ctl "SELECT current_setting('shared_preload_libraries') ~ 'pqrun'")" = t ] ||
	fail "the cluster at $PGHOST:$PGPORT does not preload pqrun"
# PostgreSQL 17 shows an extension's own wait event names; before, "Extension".
WAIT_EVENT=$(ctl "SELECT CASE WHEN current_setting('server_version_num')::int >= 170000
                              THEN 'PqrunLongPoll' ELSE 'Extension' END")

echo "-- wake on commit: a 10 s pickup returns the job committed 0.3 s later"
reset
waiter A '10 s'
sleeping A
sleep 0.3
commit "pqrun.enqueue('t')"
job=$RESULT
finish_pick A
assert_woken A "$job"
[ "$STMT_MS" -lt 2000 ] || fail "A took $STMT_MS ms"
[ "$(ctl "SELECT status || ':' || attempts || ':' || locked_by FROM pqrun.jobs WHERE id = $job")" = "DONE:1:A" ] ||
	fail "job $job was not picked once by A"

echo "-- no wake on rollback: a 1.5 s pickup returns nothing at its timeout"
reset
waiter A '1.5 s'
sleeping A
sleep 0.3
ctl "BEGIN; SELECT pqrun.enqueue('t'); ROLLBACK" >/dev/null
finish_pick A
assert_timed_out A 1500
[ "$STMT_MS" -ge 1400 ] || fail "A returned after $STMT_MS ms"

echo "-- timeout: a 300 ms pickup with nothing to do returns no row after about 300 ms"
waiter A '300 ms'
finish_pick A
assert_timed_out A 300
[ "$STMT_MS" -lt 1000 ] || fail "A returned after $STMT_MS ms"

echo "-- filters: jobs of other types or queues do not end the wait"
reset
waiter X '1.5 s' "job_types => '{x}'"
waiter Q '1.5 s' "queues => '{q1}'"
sleeping X Q
sleep 0.3
commit "pqrun.enqueue('y')"
other=$RESULT
finish_pick X
assert_timed_out X 1500
finish_pick Q
assert_timed_out Q 1500
[ "$(ctl "SELECT status FROM pqrun.jobs WHERE id = $other")" = READY ] || fail "job $other (type y) was taken"

echo "-- filters: the matching job wakes each waiter, the others do not"
reset
waiter X '10 s' "job_types => '{x}'"
waiter Q '10 s' "queues => '{q1}'"
sleeping X Q
sleep 0.3
commit "pqrun.enqueue('y')"
sleep 0.2
commit "pqrun.enqueue('x', queue => 'q2')"
finish_pick X
assert_woken X "$RESULT"
sleeping Q
sleep 0.2
commit "pqrun.enqueue('z', queue => 'q1')"
finish_pick Q
assert_woken Q "$RESULT"
[ "$(ctl "SELECT string_agg(job_type || ':' || status || ':' || coalesce(locked_by, '-'), ',' ORDER BY id) FROM pqrun.jobs")" = \
	"y:READY:-,x:DONE:X,z:DONE:Q" ] || fail "unexpected jobs: $(ctl "SELECT id, job_type, status, locked_by FROM pqrun.jobs")"

# herd N: four waiters, a commit of N jobs; N waiters get one each at once,
# the others sleep on until their timeout; no job is handed out twice.
herd() {
	local n=$1 w got=() timed_out=0
	reset
	for w in H1 H2 H3 H4; do waiter $w '3 s'; done
	sleeping H1 H2 H3 H4
	sleep 0.3
	commit "(SELECT string_agg(id::text, ',') FROM pqrun.enqueue_batch(
	          (SELECT jsonb_agg(jsonb_build_object('job_type', 'h')) FROM generate_series(1, $n))) id)"
	local jobs=$RESULT
	for w in H1 H2 H3 H4; do
		finish_pick $w
		if [ "$IDS" = - ]; then
			assert_timed_out $w 3000
			timed_out=$((timed_out + 1))
		else
			[[ ",$jobs," == *",$IDS,"* ]] || fail "$w returned [$IDS], not one of jobs $jobs"
			assert_woken $w "$IDS"
			got+=("$IDS")
		fi
	done
	[ ${#got[@]} = "$n" ] && [ $timed_out = $((4 - n)) ] ||
		fail "$n jobs, 4 waiters: ${#got[@]} got a job, $timed_out timed out"
	[ "$(printf '%s\n' "${got[@]}" | sort -u | wc -l)" = "$n" ] || fail "a job was handed out twice: ${got[*]}"
	[ "$(ctl "SELECT count(*) FILTER (WHERE status = 'DONE' AND attempts = 1) || '/' || count(*) FROM pqrun.jobs")" = "$n/$n" ] ||
		fail "jobs picked more than once: $(ctl "SELECT id, status, attempts FROM pqrun.jobs")"
	[ "$(ctl "SELECT count(*) FROM pqrun.job_attempts")" = "$n" ] || fail "more attempts than jobs"
}
echo "-- thundering herd: 4 waiters, 1 job committed: one waiter gets it, three sleep on"
herd 1
echo "-- 4 waiters, 2 jobs committed in one transaction: two waiters get one each"
herd 2

# A commit wakes one waiter for each batch of its jobs, not one for each
# job. Reproduction on 0.22.0: four waiters asking for 4, and 4 jobs
# committed at once, woke all four; the first to look took the 4 and the
# three others looked, found nothing and slept again (in a fleet of 64
# waiters asking for 8, a commit of 128 jobs woke 48 for nothing). A
# backend's voluntary context switches (/proc/<pid>/status) count its
# sleeps: a waiter not woken makes none.
echo "-- 4 waiters asking for 4, 4 jobs committed at once: one waiter gets them, the other three are not woken"
switches() { # PID: the backend's voluntary context switches so far
	sed -n 's/^voluntary_ctxt_switches:[[:space:]]*//p' "/proc/$1/status" 2>/dev/null
}
reset
for w in B1 B2 B3 B4; do waiter $w '5 s' "batch_size => 4"; done
sleeping B1 B2 B3 B4
declare -A backend before
for w in B1 B2 B3 B4; do
	backend[$w]=$(sql "SELECT pid FROM pg_stat_activity WHERE application_name = 'lp_$w'")
	[ -r "/proc/${backend[$w]}/status" ] || fail "cannot read the server's /proc/<pid>/status here"
	before[$w]=$(switches "${backend[$w]}")
done
commit "(SELECT count(*) FROM pqrun.enqueue_batch((SELECT jsonb_agg(jsonb_build_object('job_type', 'h')) FROM generate_series(1, 4))))"
deadline=$((SECONDS + 10))
until [ "$(sql "SELECT count(*) FROM pqrun.jobs WHERE status = 'DONE'")" = 4 ]; do
	[ $SECONDS -lt $deadline ] || fail "the 4 jobs were not taken: $(sql "SELECT id, status, locked_by FROM pqrun.jobs")"
	sleep 0.05
done
sleep 0.3
taker=$(sql "SELECT string_agg(DISTINCT locked_by, ',') FROM pqrun.jobs")
[[ "$taker" =~ ^B[1-4]$ ]] || fail "the 4 jobs went to [$taker], not to one waiter"
woken=
for w in B1 B2 B3 B4; do
	[ "$w" = "$taker" ] && continue
	[ "$(switches "${backend[$w]}")" = "${before[$w]}" ] || woken+=" $w"
done
[ -z "$woken" ] || fail "$taker took the 4 jobs, and$woken were woken for nothing"
echo "   $taker got the 4 jobs; the other three slept on"
for w in B1 B2 B3 B4; do finish $w; done

echo "-- delayed job: a 5 s pickup returns a job enqueued with run_after 1 s ahead when it falls due"
reset
waiter A '5 s'
sleeping A
sleep 0.2
commit "pqrun.enqueue('t', run_after => clock_timestamp() + interval '1 s')"
job=$RESULT
finish_pick A
[ "$IDS" = "$job" ] || fail "A returned [$IDS], expected the delayed job $job"
latency=$((END_MS - COMMIT_MS))
[ $latency -ge 900 ] && [ $latency -le 2000 ] || fail "A returned the delayed job ${latency} ms after the commit"
echo "   A got job $job ${latency} ms after the commit"

echo "-- wait event: a sleeping pickup shows wait_event_type/wait_event Extension/$WAIT_EVENT"
reset
waiter A '30 s'
sleeping A
ev=$(ctl "SELECT state || ':' || wait_event_type || ':' || wait_event FROM pg_stat_activity WHERE application_name = 'lp_A'")
[ "$ev" = "active:Extension:$WAIT_EVENT" ] || fail "pg_stat_activity shows [$ev]"

echo "-- query cancel: pg_cancel_backend ends a 30 s pickup at once with 57014"
t0=$(now_ms)
[ "$(ctl "SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE application_name = 'lp_A'")" = t ] || fail "no backend to cancel"
finish A 5
ms=$(($(now_ms) - t0))
[ "$RC" != 0 ] && [[ "$ERR" == *57014* ]] || fail "cancelled pickup: exit $RC, [$ERR]"
[ $ms -lt 3000 ] || fail "the cancelled pickup ended $ms ms after the cancel"
echo "   ended $ms ms after the cancel: $ERR"

echo "-- statement_timeout = 500ms ends a 10 s pickup with 57014 after about 0.5 s"
start T "SET statement_timeout = '500ms'" "$(pick_sql T "wait => '10 s'")"
finish T 5
[ "$RC" != 0 ] && [[ "$ERR" == *57014* ]] || fail "timed-out pickup: exit $RC, [$ERR]"
[ "$CLIENT_MS" -ge 450 ] && [ "$CLIENT_MS" -lt 2000 ] || fail "statement_timeout ended the pickup after $CLIENT_MS ms"
echo "   ended after $CLIENT_MS ms: $ERR"

echo "-- a waiter ended by an error is gone: the next commit wakes the next waiter"
waiter A '10 s'
sleeping A
sleep 0.3
commit "pqrun.enqueue('t')"
finish_pick A
assert_woken A "$RESULT"

echo "-- pg_terminate_backend ends sleeping pickups at once, and leaves nothing behind"
# Waiters C1..C4 and victims K1..K3 connect alternately (C1 K1 C2 K2 C3 K3
# C4) and all sleep; the victims are terminated (FATAL: no error cleanup
# runs), then one commit of four jobs must wake all four C. A victim that
# stayed registered in the waiter table (its slot is indexed by the PGPROC
# number, which connections take LIFO from a free list) would take a wake-up
# meant for a C it precedes; alternating makes it all but certain that some
# victim precedes some C. The C wait 20 s so that a slow start cannot make
# them time out before that commit; they return at once when all is well.
reset
for w in C1 K1 C2 K2 C3 K3 C4; do
	case $w in C*) waiter $w '20 s' ;; K*) waiter $w '30 s' ;; esac
	sleeping $w
done
t0=$(now_ms)
[ "$(ctl "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity
           WHERE application_name IN ('lp_K1', 'lp_K2', 'lp_K3')")" = 3 ] || fail "not 3 backends terminated"
for w in K1 K2 K3; do
	finish $w 5
	[ "$RC" != 0 ] && [[ "$ERR" == *57P01* ]] || fail "terminated pickup $w: exit $RC, [$ERR]"
done
ms=$(($(now_ms) - t0))
[ $ms -lt 3000 ] || fail "the terminated pickups ended $ms ms after pg_terminate_backend"
echo "   3 pickups ended within $ms ms of pg_terminate_backend (FATAL 57P01)"
sleep 0.3
commit "(SELECT string_agg(id::text, ',') FROM pqrun.enqueue_batch(
          (SELECT jsonb_agg(jsonb_build_object('job_type', 't')) FROM generate_series(1, 4))) id)"
jobs=$RESULT
got=()
for w in C1 C2 C3 C4; do
	finish_pick $w 25
	[ "$IDS" != - ] || fail "$w got nothing (after $STMT_MS ms) although 4 jobs ($jobs) were committed for 4 waiters;" \
		"jobs now: $(ctl "SELECT id, status, locked_by FROM pqrun.jobs ORDER BY id" | tr '\n' ' ')"
	[[ ",$jobs," == *",$IDS,"* ]] || fail "$w returned [$IDS], not one of $jobs"
	assert_woken $w "$IDS"
	got+=("$IDS")
done
[ "$(printf '%s\n' "${got[@]}" | sort -u | wc -l)" = 4 ] || fail "a job was handed out twice: ${got[*]}"

echo "-- await_jobs: waits without a snapshot (backend_xmin NULL) and answers ready = true on a commit"
reset
start W "CALL pqrun.await_jobs(wait => '5 s')" "SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint"
sleeping W
xmin=$(ctl "SELECT (backend_xmin IS NULL) || ':' || (backend_xid IS NULL) || ':' || state FROM pg_stat_activity WHERE application_name = 'lp_W'")
[ "$xmin" = "true:true:active" ] || fail "waiting await_jobs: backend_xmin is null, backend_xid is null, state = [$xmin]"
sleep 0.3
commit "pqrun.enqueue('t')"
job=$RESULT
finish W 10
[ "$RC" = 0 ] && [ "$OUT" = t ] || fail "await_jobs answered [$OUT] (exit $RC, $ERR)"
latency=$(($(sed -n 2p "$tmp/W.out") - COMMIT_MS))
[ $latency -lt $LATENCY_MS ] || fail "await_jobs answered ${latency} ms after the commit (bound ${LATENCY_MS} ms)"
echo "   ready = t ${latency} ms after the commit"
[ "$(ctl "SELECT id FROM pqrun.pickup('w')")" = "$job" ] || fail "pickup after await_jobs did not get job $job"

echo "-- await_jobs: ready = false at its timeout, also with a READY job of another type"
reset
start W "CALL pqrun.await_jobs(wait => '300 ms')"
finish W 5
[ "$RC" = 0 ] && [ "$OUT" = f ] || fail "await_jobs answered [$OUT] (exit $RC, $ERR)"
[ "$CLIENT_MS" -ge 290 ] || fail "await_jobs(wait => 300 ms) took $CLIENT_MS ms"
echo "   ready = f after $CLIENT_MS ms with nothing to do"
ctl "SELECT pqrun.enqueue('y')" >/dev/null
start W "CALL pqrun.await_jobs(job_types => '{x}', wait => '500 ms')"
finish W 5
[ "$RC" = 0 ] && [ "$OUT" = f ] || fail "await_jobs answered [$OUT] (exit $RC, $ERR)"
[ "$CLIENT_MS" -ge 480 ] && [ "$CLIENT_MS" -lt 2000 ] || fail "await_jobs(wait => 500 ms) took $CLIENT_MS ms"
echo "   ready = f after $CLIENT_MS ms with only a job of type y READY"

echo "-- await_jobs inside a transaction block: 2D000"
err=$(q -v VERBOSITY=sqlstate -c "BEGIN" -c "CALL pqrun.await_jobs(wait => '1 s')" 2>&1 >/dev/null || true)
[[ "$err" == *2D000* ]] || fail "await_jobs in a transaction block: [$err]"

# The function form is one statement, so it holds that statement's snapshot
# while it sleeps (backend_xmin is set, vacuum is held back); docs/api.md ("Which
# wait to use") says so, and this is why await_jobs exists.
echo "-- pickup(wait => …) holds a snapshot while it sleeps (backend_xmin IS NOT NULL), as docs/api.md says"
reset
waiter A '5 s'
sleeping A
xmin=$(ctl "SELECT backend_xmin IS NOT NULL FROM pg_stat_activity WHERE application_name = 'lp_A'")
[ "$xmin" = t ] || fail "a sleeping pickup has no backend_xmin"
commit "pqrun.enqueue('t')"
finish_pick A
assert_woken A "$RESULT"

# cancel_in_look: a statement timeout or a cancel that lands inside a look
# (its internal subtransaction) ends the pickup with 57014 and leaves the
# session usable. Once it left the subtransaction open and aborted: psql -c
# "SET statement_timeout = '1s'" -c "SELECT * FROM pqrun.pickup('x',
# ARRAY['never'], wait => '10 s')" -c "SELECT 'ALIVE'" failed its last
# statement with 25P02 whenever the timeout hit a look (often without the
# preloaded library, which polls). Here the look is made to block on a table
# lock, so that the timeout and the cancel always land inside it.
cancel_in_look() {
	start LK "BEGIN" "LOCK TABLE pqrun.job_live IN EXCLUSIVE MODE" "SELECT pg_sleep(4)" "ROLLBACK"
	local deadline=$((SECONDS + 5))
	until [ "$(sql "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a USING (pid)
	                 WHERE a.application_name = 'lp_LK' AND l.mode = 'ExclusiveLock' AND l.granted
	                   AND l.relation = 'pqrun.job_live'::regclass")" = 1 ]; do
		[ $SECONDS -lt $deadline ] || fail "the table lock was not taken"
		sleep 0.05
	done
	# Each session goes on after the error, as psql -c does without
	# ON_ERROR_STOP, and must run its next statement.
	local name
	for name in TL CL; do
		(
			rc=0
			PGAPPNAME=lp_$name psql -X -qtA -v VERBOSITY=sqlstate -d "$db" \
				-c "SET statement_timeout = '$([ $name = TL ] && echo 300ms || echo 0)'" \
				-c "SELECT * FROM pqrun.pickup('x', ARRAY['never'], wait => '10 s')" -c "SELECT 'ALIVE'" \
				>"$tmp/$name.out" 2>"$tmp/$name.err" || rc=$?
			echo "0 $rc" >"$tmp/$name.res"
		) &
		pids+=($!)
		eval "pid_$name=$!"
	done
	deadline=$((SECONDS + 5))
	until [ "$(sql "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'lp_CL' AND wait_event_type = 'Lock'")" = 1 ]; do
		[ $SECONDS -lt $deadline ] || fail "the pickup did not block in its look"
		sleep 0.05
	done
	sql "SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE application_name = 'lp_CL'" >/dev/null
	for name in TL CL; do
		finish $name 10
		[[ "$ERR" == *57014* ]] && [[ "$ERR" != *25P02* ]] && grep -qx ALIVE "$tmp/$name.out" ||
			fail "pickup $name cancelled in its look: [$ERR] [$(cat "$tmp/$name.out")]"
	done
	finish LK 10
	echo "   a timeout and a cancel inside a look: 57014, and the session's next statement runs"
}

echo "-- a timeout or cancel inside a look leaves no aborted transaction behind"
cancel_in_look

echo "-- REPEATABLE READ: a waiting pickup raises 0A000 (its snapshot could never show a new job)"
err=$(q -v VERBOSITY=sqlstate -c "BEGIN ISOLATION LEVEL REPEATABLE READ" \
	-c "SELECT * FROM pqrun.pickup('rr', wait => '1 s')" 2>&1 >/dev/null || true)
[[ "$err" == *0A000* ]] || fail "a waiting pickup under REPEATABLE READ: [$err]"
err=$(q -v VERBOSITY=sqlstate -c "BEGIN ISOLATION LEVEL REPEATABLE READ" \
	-c "SELECT count(*) FROM pqrun.pickup('rr')" -c "COMMIT" 2>&1 || true)
[[ "$err" == 0 ]] || fail "a pickup without wait under REPEATABLE READ: [$err]"

# Two waiters and one job, with sessions that end right after their pickup
# (psql -c). By default a claim is held by its lease: one waiter gets the
# job, the other nothing, and the job stays RUNNING under the first lease
# after that session ended (0.15.0 bound every claim to its session: orphan
# rescue ended the attempt within a round and the other waiter got the job
# too, "both got the one job"). Under pqrun.claim_hold = session, asked for
# by workers that keep their connection, the session ending is the worker
# dying: orphan rescue ends that attempt within a round (about a second) and
# the next waiter gets the job's next attempt, with a new lease.
echo "-- two psql -c waiters, one job: one gets it, held by its lease after its session ended"
reset
start O1 "$(pick_sql O1 "job_types => '{o}', wait => '3 s'")"
start O2 "$(pick_sql O2 "job_types => '{o}', wait => '3 s'")"
sleeping O1 O2
sleep 0.3
commit "pqrun.enqueue('o')"
job=$RESULT
got=
for w in O1 O2; do
	finish_pick $w
	got="$got $IDS"
done
[ "$(echo $got | tr ' ' '\n' | LC_ALL=C sort | paste -sd' ')" = "- $job" ] || fail "the waiters returned [$got], expected job $job once"
sleep 1.5 # a round or more after both sessions ended
held=$(ctl "SELECT status || ' ' || attempts || ' ' || (holder_pid IS NULL) FROM pqrun.job_live WHERE id = $job")
[ "$held" = "RUNNING 1 true" ] || fail "job $job after its picking session ended: [$held], expected RUNNING 1 true"
ctl "SELECT pqrun.cancel($job)" >/dev/null
echo "   one waiter got job $job; RUNNING under its lease after the session ended"

echo "-- a waiter whose session-held job outlives its session: orphan rescue gives the next attempt to the next waiter"
reset
start O1 "SET pqrun.claim_hold = session" "$(pick_sql O1 "job_types => '{o}', wait => '10 s'")"
start O2 "SET pqrun.claim_hold = session" "$(pick_sql O2 "job_types => '{o}', wait => '10 s'")" "SELECT pg_sleep(3)"
sleeping O1 O2
sleep 0.3
commit "pqrun.enqueue('o')"
job=$RESULT
for w in O1 O2; do
	finish_pick $w
	[ "$IDS" = "$job" ] || fail "$w returned [$IDS], expected job $job (its first or second attempt)"
done
# Both sessions end (O2 three seconds after its pickup): both attempts end
# orphaned, each with its own waiter.
deadline=$((SECONDS + 10))
until attempts=$(ctl "SELECT string_agg(attempt || ':' || worker_id || ':' || coalesce(outcome, '-'), ',' ORDER BY attempt)
                        FROM pqrun.job_attempts WHERE job_id = $job") &&
	[[ "$attempts" =~ ^1:O([12]):orphaned,2:O([12]):orphaned$ ]] && [ "${BASH_REMATCH[1]}" != "${BASH_REMATCH[2]}" ]; do
	[ $SECONDS -lt $deadline ] || fail "the attempts of job $job: [$attempts]"
	sleep 0.2
done
echo "   each waiter got its own attempt, each orphaned when its session ended: [$attempts]"

# A claim that rolls back makes its job READY again, and wakes a waiter for
# it. Once it woke nobody: A: BEGIN; SELECT * FROM pqrun.pickup('A',
# job_types => '{rw}') (claims J); C: SELECT * FROM pqrun.pickup('C',
# job_types => '{rw}', wait => '8 s'); A: ROLLBACK; C returned J only after
# its full 8 s.
echo "-- a claim rolled back wakes a waiter for its job"
reset
commit "pqrun.enqueue('rw')"
job=$RESULT
start RA "BEGIN" "SELECT id FROM pqrun.pickup('A', job_types => '{rw}')" "SELECT pg_sleep(2)" \
	"SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint" "ROLLBACK"
sleep 0.3
waiter C '8 s' "job_types => '{rw}'"
sleeping C
finish RA
[ "$OUT" = "$job" ] || fail "A did not claim job $job: [$OUT] [$ERR]"
COMMIT_MS=$(tail -n 1 "$tmp/RA.out")
finish_pick C
assert_woken C "$job"

# A waiter woken for a job that leaves without taking it (cancelled,
# terminated) passes the wake-up on. Once the next waiter slept its full
# wait with the job READY. Here the woken one is made to block in its look
# on a table lock (both waiters are stopped with SIGSTOP while the commit
# wakes one of them and the lock is taken), then cancelled.
echo "-- a woken waiter that is cancelled before it claims passes the wake-up on"
reset
waiter P1 '15 s' "job_types => '{pw}'"
waiter P2 '15 s' "job_types => '{pw}'"
sleeping P1 P2
backends=$(ctl "SELECT string_agg(pid::text, ' ') FROM pg_stat_activity WHERE application_name IN ('lp_P1', 'lp_P2')")
kill -STOP $backends
commit "pqrun.enqueue('pw')"
job=$RESULT
ctl "BEGIN; SET LOCAL lock_timeout = '5s'; LOCK TABLE pqrun.job_live IN EXCLUSIVE MODE" >/dev/null
kill -CONT $backends
deadline=$((SECONDS + 5))
until woken=$(ctl "SELECT application_name FROM pg_stat_activity WHERE application_name IN ('lp_P1', 'lp_P2') AND wait_event_type = 'Lock'") && [ -n "$woken" ]; do
	[ $SECONDS -lt $deadline ] || { ctl "ROLLBACK" >/dev/null; fail "no woken waiter blocked in its look"; }
	sleep 0.05
done
ctl "SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE application_name = '$woken'" >/dev/null
other=P1; [ "$woken" = lp_P1 ] && other=P2
finish "${woken#lp_}" 10
[[ "$ERR" == *57014* ]] || fail "the woken waiter was not cancelled: [$ERR]"
deadline=$((SECONDS + 5))
until [ "$(ctl "SELECT wait_event_type FROM pg_stat_activity WHERE application_name = 'lp_$other'")" = Lock ]; do
	[ $SECONDS -lt $deadline ] || { ctl "ROLLBACK" >/dev/null; fail "the wake-up was not passed on to $other"; }
	sleep 0.05
done
COMMIT_MS=$(ctl "SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint; ROLLBACK")
finish_pick $other
assert_woken $other "$job"

# NOTIFY payloads are readable by any role that can connect
# (docs/permissions.md): pqrun.notify is off by default (0.15.0 had it on, and a
# role granted nothing learnt every queue name) and then sends none. A
# queue name of 8000 bytes or more made enqueue fail ("payload string too
# long"); PREPARE TRANSACTION after an enqueue failed with 0A000.
echo "-- NOTIFY: a role granted nothing by pqrun learns no queue name by default"
psql -X -q -d postgres -c "DROP ROLE IF EXISTS lp_outsider" -c "CREATE ROLE lp_outsider LOGIN" >/dev/null
# listen_while SQL: what a session of lp_outsider that LISTENs hears while SQL commits.
listen_while() {
	psql -X -qtA -d "$db" -U lp_outsider -c "LISTEN pqrun_jobs" -c "SELECT pg_sleep(1.5)" -c "SELECT 'end'" \
		>"$tmp/outsider.out" 2>&1 &
	local listener=$!
	local deadline=$((SECONDS + 5))
	until [ "$(q -c "SELECT count(*) FROM pg_stat_activity WHERE usename = 'lp_outsider' AND query = 'SELECT pg_sleep(1.5)'")" = 1 ]; do
		[ $SECONDS -lt $deadline ] || break
		sleep 0.05
	done
	q -c "$1" >/dev/null
	wait "$listener"
	cat "$tmp/outsider.out"
}
heard=$(listen_while "SELECT pqrun.enqueue('t', queue => 'payroll-acme-layoffs')")
[[ "$heard" == *end* && "$heard" != *Asynchronous* ]] || fail "by default, an outsider heard: [$heard]"
heard=$(listen_while "SET pqrun.notify = on; SELECT pqrun.enqueue('t', queue => 'payroll-acme-layoffs')")
[[ "$heard" == *'with payload "payroll-acme-layoffs"'* ]] ||
	fail "positive control: with pqrun.notify on, the outsider should hear the queue name: [$heard]"
psql -X -q -d postgres -c "DROP ROLE lp_outsider" >/dev/null
echo "-- NOTIFY: none with pqrun.notify off; the longest queue name is sent whole"
notified=$(q -c "SET pqrun.notify = off" -c "LISTEN pqrun_jobs" -c "SELECT pqrun.enqueue('t', queue => 'quiet') > 0")
[[ "$notified" != *Asynchronous* ]] || fail "notified with pqrun.notify off: [$notified]"
# (Queue names are at most 1,000 bytes since 0.16.0: each is sent whole.)
long=$(printf 'q%.0s' $(seq 1 1000))
notified=$(q -c "SET pqrun.notify = on" -c "LISTEN pqrun_jobs" -c "SELECT pqrun.enqueue('t', queue => '$long') > 0" 2>&1)
[[ "$notified" == *"Asynchronous notification \"pqrun_jobs\" with payload \"$long\" received from server process"* ]] ||
	fail "a queue name of 1,000 bytes: [${notified:0:300}]"
notified=$(q -c "SET pqrun.notify = on" -c "LISTEN pqrun_jobs" -c "BEGIN" -c "SELECT pqrun.enqueue('t', queue => 'px') > 0" \
	-c "PREPARE TRANSACTION 'lp_notify'" -c "COMMIT PREPARED 'lp_notify'" 2>&1)
[[ "$notified" != *ERROR* ]] || fail "PREPARE TRANSACTION of an enqueue with pqrun.notify on: [$notified]"

echo "-- without shared_preload_libraries: CREATE EXTENSION works, pickup(wait) polls and NOTIFY (when on) still works"
nodir=$(mktemp -d /tmp/pqrun-longpoll-nopreload.XXXXXX)
chmod 755 "$nodir"
{
	cat "$repo/test/pqrun.conf"
	echo "shared_preload_libraries = ''"
	echo "listen_addresses = ''"     # Unix socket only: the port number cannot collide
} >"$tmp/nopreload.conf"
cluster_init "$nodir" 54359 "$tmp/nopreload.conf" || fail "initdb failed"
cluster_start "$nodir" || fail "the cluster without preload did not start"
(
	export PGHOST=$nodir PGPORT=54359
	sql() { q -c "$1"; }
	psql -X -q -d postgres -c "CREATE DATABASE $db" >/dev/null
	[ "$(q -c "SHOW shared_preload_libraries")" = "" ] || fail "pqrun is preloaded"
	q -c "CREATE EXTENSION pqrun" >/dev/null || fail "CREATE EXTENSION failed without preload"
	waiter A '5 s'
	sleeping A
	sleep 0.3
	commit "pqrun.enqueue('t')"
	finish_pick A
	[ "$IDS" = "$RESULT" ] || fail "A returned [$IDS], expected job $RESULT"
	latency=$((END_MS - COMMIT_MS))
	[ $latency -lt 250 ] || fail "polling pickup returned ${latency} ms after the commit (it re-checks every 50 ms)"
	echo "   A got job $RESULT ${latency} ms after the commit"
	# psql shows the notifications its own session receives, self-notifies too
	notified=$(q -c "SET pqrun.notify = on" -c "LISTEN pqrun_jobs" -c "SELECT pqrun.enqueue('t', queue => 'np') > 0")
	[[ "$notified" == *'Asynchronous notification "pqrun_jobs" with payload "np"'* ]] ||
		fail "no NOTIFY without preload: [$notified]"
	cancel_in_look
	reset
	waiter A '300 ms'
	finish_pick A
	assert_timed_out A 300
)
cluster_stop "$nodir" fast
rm -rf "$nodir"
nodir=

echo "longpoll: all checks passed"

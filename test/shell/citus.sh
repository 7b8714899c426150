#!/usr/bin/env bash
# test/shell/citus.sh — pqrun on a Citus cluster of three servers on this
# machine: a coordinator and two workers, each with Citus and pqrun
# preloaded (Citus built from ../shared/vendor when not installed,
# test/lib/citus.sh; skipped, exit status 77, before PostgreSQL 16 and
# where there is no source).
#
# What it proves, in database app: CREATE EXTENSION pqrun on the
# coordinator reaches every node, and each node runs pqrun on its own
# tables (its jobs, its maintenance worker, each job handed out once);
# pqrun.distribute() refuses while workers hold jobs of their own (and, in
# dist, while the coordinator has a schedule).
#
# In database dist, after pqrun.distribute() (docs/citus.md):
# enqueues through the coordinator are delegated to the node that holds
# their queue and written into its shard (the shells stay empty, ids are
# unique across the nodes); eight clients drain eight queues spread over
# both workers, each on its queue's node, with rollbacks, each job handed
# out once per attempt; a long poll on a worker is woken by an enqueue
# through the coordinator; four clients drain two queues through the
# coordinator (pickup_from and the job-id calls given their queue,
# delegated), each job handed out once per attempt; a long poll through
# the coordinator is woken by an enqueue through it, and one cut short by
# its statement_timeout claims nothing; each worker's maintenance worker rescues the
# jobs of an exited holder (claimed with pqrun.claim_hold = session) on its
# shards, and leaves those held by their leases; a worker stopped (immediate) and
# started again while clients run on both: its queues pause, the other's
# go on, nothing is lost or doubled; a shard moved to the other worker
# (block_writes) while two clients drain its queue: they follow it, each
# job done once; a distributed install of the previous version, updated
# and distributed again, delegates the new calls; a NULL queue is never
# delegated (Citus would crash hashing it); what the design cannot do (a pickup
# without queues or of another node's queue, dependencies, schedules, the
# calls of a whole database) refuses with 0A000, never XX, never a crash.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
source "$repo/test/lib/cluster.sh"
source "$repo/test/lib/citus.sh"

rc=0
why=$(citus_ensure "$repo" 2>&1) || rc=$?
case $rc in
0) ;;
1) echo "$why" | tail -n 1; exit 77 ;;
*) echo "$why"; exit 1 ;;
esac

base=${PQRUN_CITUS_PORT:-54391}
top=$(mktemp -d /tmp/pqrun-citus.XXXXXX)
chmod 755 "$top"
[ "$(id -u)" = 0 ] && chown postgres: "$top"
nodes=(coordinator worker1 worker2)
stop_all() {
	for n in "${nodes[@]}"; do cluster_stop "$top/$n" immediate; done
	rm -rf "$top"
}
trap stop_all EXIT

conf=$top/extra.conf
cat "$repo/test/pqrun.conf" >"$conf"
{
	echo "shared_preload_libraries = 'citus,pqrun'"
	# Citus commits a change on several nodes with two-phase commit.
	echo "max_prepared_transactions = 20"
	echo "pqrun.reap_interval = '200ms'"
	# A worker is stopped (immediate) under load: what it answered as
	# committed must be there when it is back.
	echo "synchronous_commit = on"
} >>"$conf"
for i in 0 1 2; do
	cluster_init "$top/${nodes[$i]}" $((base + i)) "$conf"
	cluster_start "$top/${nodes[$i]}"
done

# q NODE SQL...: one node's answer.
q() {
	local i=$1
	shift
	psql -X -qtA -v ON_ERROR_STOP=1 -h "$top/${nodes[$i]}" -p $((base + i)) -U postgres -d "${db:-app}" "$@"
}
fail() {
	echo "FAIL: $*"
	for n in "${nodes[@]}"; do tail -n 15 "$top/$n/server.log"; done
	exit 1
}

# cluster_db DB [VERSION]: database DB on the three nodes, Citus and pqrun
# (at VERSION) in it.
cluster_db() {
	for i in 0 1 2; do
		psql -X -q -h "$top/${nodes[$i]}" -p $((base + i)) -U postgres -d postgres -c "CREATE DATABASE $1"
		db=$1 q $i -c "CREATE EXTENSION citus"
	done
	db=$1 q 0 -c "SELECT citus_set_coordinator_host('127.0.0.1', $base)" \
		-c "SELECT citus_add_node('127.0.0.1', $((base + 1)))" \
		-c "SELECT citus_add_node('127.0.0.1', $((base + 2)))" >/dev/null
	db=$1 q 0 -c "CREATE EXTENSION pqrun${2:+ VERSION '$2'}"
}
echo "-- a cluster of three, pqrun created on the coordinator"
cluster_db app
version=$(sed -n "s/^default_version[[:space:]]*=[[:space:]]*'\([^']*\)'.*/\1/p" "$repo/pqrun.control")
for i in 0 1 2; do
	got=$(q $i -c "SELECT extversion FROM pg_extension WHERE extname = 'pqrun'")
	[ "$got" = "$version" ] || fail "pqrun on ${nodes[$i]} is [$got], not $version"
done

# wait_for NODE SQL EXPECTED SECONDS
wait_for() {
	local i=$1 sql=$2 expected=$3 deadline=$((SECONDS + $4)) got=
	while [ $SECONDS -le $deadline ]; do
		got=$(q "$i" -c "$sql" 2>/dev/null || true)
		[ "$got" = "$expected" ] && return 0
		sleep 0.2
	done
	fail "waited for [$sql] = [$expected] on ${nodes[$i]}, last answer [$got]"
}

echo "-- each node runs pqrun on its own tables, with its own maintenance worker"
for i in 0 1 2; do
	wait_for $i "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'pqrun maintenance' AND datname = 'app'" 1 10
done
for i in 1 2; do
	q $i -c "SELECT pqrun.enqueue('on_${nodes[$i]}', queue => 'q$i') FROM generate_series(1, 20)" >/dev/null
done
for i in 1 2; do
	# Four clients drain the node's queue; each job is handed out once.
	for c in 1 2 3 4; do
		q $i -c "SELECT pqrun.mark_done(id, NULL, lease_token) FROM pqrun.pickup('c$c', queues => '{q$i}', batch_size => 3)" \
			-c "SELECT pqrun.mark_done(id, NULL, lease_token) FROM pqrun.pickup('c$c', queues => '{q$i}', batch_size => 3)" >/dev/null &
	done
	wait
	while [ "$(q $i -c "SELECT count(*) FROM pqrun.pickup('last', queues => '{q$i}', batch_size => 20) p,
		LATERAL pqrun.mark_done(p.id, NULL, p.lease_token)")" != 0 ]; do :; done
	got=$(q $i -c "SELECT count(*), count(DISTINCT id), bool_and(status = 'DONE' AND attempts = 1 AND job_type = 'on_${nodes[$i]}')
		FROM pqrun.jobs")
	[ "$got" = "20|20|t" ] || fail "${nodes[$i]}'s jobs are [$got]"
done
got=$(q 0 -c "SELECT count(*) FROM pqrun.jobs")
[ "$got" = 0 ] || fail "the coordinator has $got jobs of the workers"

# state NODE SQL: the SQLSTATE SQL ends with on NODE, or "ok:VALUE" when it
# succeeds (VALUE: the last line it printed, empty for a void result).
# Anything else psql says (a refused connection, a FATAL, a backend that
# crashed) comes back as "[...]", which no check expects: read as "ok",
# each of them passed a check that expected success.
state() {
	local out err=$top/state.$BASHPID.err status=0
	out=$(psql -X -qtA -v ON_ERROR_STOP=1 -h "$top/${nodes[$1]}" -p $((base + $1)) -U postgres -d "${db:-app}" \
		-c "\\set VERBOSITY sqlstate" -c "$2" 2>"$err") || status=$?
	# (Notices, such as a second distribute()'s, are no answer.)
	sed -i -E '/^(NOTICE|WARNING|INFO|LOG):  [0-9A-Z]{5}$/d' "$err"
	if [ $status = 0 ] && [ ! -s "$err" ]; then
		echo "ok:$(tail -n 1 <<<"$out")"
	elif [ $status != 0 ] && [ "$(wc -l <"$err")" = 1 ] && grep -qxE 'ERROR:  [0-9A-Z]{5}' "$err"; then
		sed 's/^ERROR:  //' "$err"
	else
		echo "[psql exit status $status: $(cat "$err")]"
	fi
	rm -f "$err"
}

echo "-- pqrun.distribute() refuses while workers hold jobs of their own"
got=$(state 0 "SELECT pqrun.distribute(8)")
[ "$got" = 55000 ] || fail "distribute() with jobs on the workers answered [$got]"
got=$(q 0 -c "SELECT count(*) FROM pg_dist_partition WHERE logicalrelid::text LIKE 'pqrun.%'")
[ "$got" = 0 ] || fail "a refused distribute() distributed $got tables"

echo "-- database dist: pqrun.distribute() spreads the queues over the workers"
db=dist
cluster_db dist
got=$(state 1 "SELECT pqrun.distribute(8)")
[ "$got" = 0A000 ] || fail "distribute() on a worker answered [$got]"
q 0 -c "SELECT pqrun.schedule('early', 't', run_every => '1 hour')" >/dev/null
got=$(state 0 "SELECT pqrun.distribute(8)")
[ "$got" = 55000 ] || fail "distribute() with a schedule on the coordinator answered [$got]"
q 0 -c "SELECT pqrun.unschedule('early')" >/dev/null
q 0 -c "SELECT pqrun.distribute(8)" >/dev/null
# A second one changes nothing (a NOTICE says so); job_live and job_done
# stay distributed.
got=$(state 0 "SELECT pqrun.distribute(8);
	SELECT count(*) FROM pg_dist_partition WHERE logicalrelid IN ('pqrun.job_live'::regclass, 'pqrun.job_done'::regclass)")
[ "$got" = ok:2 ] || fail "a second distribute() answered [$got]"
# Four queues, two on each worker.
queues=() qnode=() n1=0 n2=0
for k in $(seq 1 100); do
	i=$(($(q 0 -c "SELECT port FROM pqrun.queue_node('q$k')") - base))
	if { [ $i = 1 ] && [ $n1 -lt 2 ] && n1=$((n1 + 1)); } || { [ $i = 2 ] && [ $n2 -lt 2 ] && n2=$((n2 + 1)); }; then
		queues+=("q$k")
		qnode+=("$i")
	fi
	[ ${#queues[@]} = 4 ] && break
done
[ ${#queues[@]} = 4 ] || fail "no two queues on each worker among q1..q100"
echo "queues ${queues[*]} on nodes ${qnode[*]}"

echo "-- enqueues through the coordinator are delegated to their queue's node"
for j in 0 1 2 3; do
	for n in $(seq 1 100); do
		echo "SELECT pqrun.enqueue('t', '{\"n\": $n}', queue => '${queues[$j]}');"
	done
done >"$top/enqueue.sql"
q 0 -f "$top/enqueue.sql" >"$top/enqueued"
got=$(sort -u "$top/enqueued" | wc -l)
[ "$got" = 400 ] || fail "400 enqueues answered $got distinct ids"
got=$(q 0 -c "SELECT count(*), count(DISTINCT id), bool_and(id >= 1::bigint << 48) FROM pqrun.job_live")
[ "$got" = "400|400|t" ] || fail "the shards hold [$got]"
for i in 0 1 2; do
	got=$(q $i -c "SELECT pg_relation_size('pqrun.job_live') + pg_relation_size('pqrun.job_done_default')")
	[ "$got" = 0 ] || fail "the shells on ${nodes[$i]} hold $got bytes"
done
# A delegated call is a lone SELECT of the function (or CALL).
got=$(for k in 1 2; do q 0 -c "SELECT pqrun.enqueue('t', dedupe_key => 'k', queue => '${queues[0]}')"; done | sort -u | wc -l)
[ "$got" = 1 ] || fail "a dedupe key in one queue gave $got jobs"
got=$(state 0 "SELECT pqrun.enqueue('t', dedupe_key => 'k', queue => '${queues[0]}') + 1")
[ "$got" = 0A000 ] || fail "an enqueue on the coordinator not delegated answered [$got]"
id=$(q 0 -c "SELECT id FROM pqrun.job_live WHERE dedupe_key = 'k'")
got=$(state "${qnode[0]}" "SELECT pqrun.cancel($id)")
[ "$got" = ok:t ] || fail "cancel on the queue's node answered [$got]"

echo "-- what a queue-sharded cluster cannot do refuses with 0A000"
other=$((3 - qnode[0]))
checks=(
	"0|SELECT * FROM pqrun.pickup('w', queues => '{${queues[0]}}')|0A000"
	"${qnode[0]}|SELECT * FROM pqrun.pickup('w')|0A000"
	"$other|SELECT * FROM pqrun.pickup('w', queues => '{${queues[0]}}')|0A000"
	"${qnode[0]}|SELECT pqrun.enqueue('t', queue => '${queues[0]}', depends_on => '{1}')|0A000"
	"${qnode[0]}|SELECT pqrun.run_maintenance()|0A000"
	"${qnode[0]}|SELECT pqrun.purge('1 day')|0A000"
	"${qnode[0]}|SELECT pqrun.reap_stale()|0A000"
	"${qnode[0]}|CALL pqrun.await_jobs(wait => '1 second')|0A000"
	"0|SELECT pqrun.mark_done(1)|P0002"
	"${qnode[0]}|SELECT pqrun.mark_done(1)|P0002"
	"0|SELECT pqrun.distribute(0)|22023"
	# A NULL queue is not delegated (Citus would crash hashing it): the
	# call runs where it is made, and refuses.
	"0|SELECT pqrun.enqueue('t', queue => NULL)|22023"
	"0|SELECT pqrun.enqueue('t', queue => nullif('a', 'a'))|22023"
	"${qnode[0]}|SELECT pqrun.enqueue('t', queue => NULL)|22023"
	"0|SELECT * FROM pqrun.pickup_from('w', NULL)|22023"
	"0|SELECT pqrun.pause_queue(NULL)|22023"
	"0|SELECT pqrun.set_concurrency_limit(NULL, 1)|22023"
	"0|SELECT pqrun.schedule('n', 't', run_every => '1 hour', queue => NULL)|22023"
	"0|SELECT pqrun.mark_done(1, queue => NULL)|P0002"
	"0|SELECT pqrun.cancel(1)|P0002"
)
for check in "${checks[@]}"; do
	IFS='|' read -r i call want <<<"$check"
	got=$(state "$i" "$call")
	[ "$got" = "$want" ] || fail "[$call] on ${nodes[$i]} answered [$got], not $want"
done
# ... nor a NULL parameter of a prepared statement (a custom plan for each
# of the first five executions, then a generic one).
got=$({
	echo "\\set VERBOSITY sqlstate"
	echo "PREPARE done_in(bigint, text) AS SELECT pqrun.mark_done(\$1, queue => \$2);"
	for k in 1 2 3 4 5 6 7; do echo "EXECUTE done_in(1, NULL);"; done
} | psql -X -qtA -h "$top/${nodes[0]}" -p $base -U postgres -d dist 2>&1 | sed "s/^psql:<stdin>:[0-9]*: //" | sort | uniq -c | sed 's/^ *//')
[ "$got" = "7 ERROR:  P0002" ] || fail "a prepared mark_done with a NULL queue answered [$got]"

echo "-- eight clients drain the four queues on their nodes, with rollbacks and retries"
rm -f "$top"/claims.* "$top/client_errors"
# drain CLIENT QUEUE NODE: claims and finishes until the queue is empty;
# every fourth pickup is rolled back, and a job whose n ends in 0 fails its
# first attempt (retried at once).
drain() {
	local c=$1 qn=$2 i=$3 k=0 out
	while :; do
		k=$((k + 1))
		if [ $((k % 4)) = 0 ]; then
			q "$i" -c "BEGIN" -c "SELECT count(*) FROM pqrun.pickup('c$c', queues => '{$qn}', batch_size => 3)" \
				-c "ROLLBACK" >/dev/null || echo "client $c: rollback failed" >>"$top/client_errors"
			continue
		fi
		out=$(q "$i" -c "SELECT p.id || ':' || p.attempts || ':' || CASE
			WHEN (p.payload->>'n')::int % 10 = 0 AND p.attempts = 1
			THEN pqrun.mark_error(p.id, 'once', lease_token => p.lease_token, retry_after => '0')::text
			ELSE (pqrun.mark_done(p.id, NULL, p.lease_token) IS NULL)::text END
			FROM pqrun.pickup('c$c', queues => '{$qn}', batch_size => 3) p") ||
			{ echo "client $c: $out" >>"$top/client_errors"; return; }
		[ -n "$out" ] || break
		echo "$out" >>"$top/claims.$c"
	done
}
for c in 0 1 2 3 4 5 6 7; do
	drain $c "${queues[$((c % 4))]}" "${qnode[$((c % 4))]}" &
done
wait
[ ! -s "$top/client_errors" ] || fail "clients failed: $(head -5 "$top/client_errors")"
got=$(cat "$top"/claims.* | cut -d: -f1,2 | sort | uniq -d | head -3)
[ -z "$got" ] || fail "jobs handed out twice in one attempt: $got"
got=$(cat "$top"/claims.* | wc -l)
[ "$got" = 440 ] || fail "$got claims, not 400 + 40 retries"
got=$(q 0 -c "SELECT status, count(*), count(DISTINCT id), max(attempts) FROM pqrun.jobs
	WHERE job_type = 't' AND dedupe_key IS NULL GROUP BY status")
[ "$got" = "DONE|400|400|2" ] || fail "after the drain: [$got]"
for i in 1 2; do
	got=$(q $i -c "SELECT count(*) FROM pg_stat_activity WHERE state = 'idle in transaction (aborted)'")
	[ "$got" = 0 ] || fail "${nodes[$i]} has $got sessions in an aborted transaction"
done

echo "-- a long poll on a worker is woken by an enqueue through the coordinator"
qn=${queues[1]} i=${qnode[1]}
(
	start=$(date +%s%3N)
	id=$(q "$i" -c "SELECT p.id FROM pqrun.pickup('poll', queues => '{$qn}', wait => '20 s') p,
		LATERAL pqrun.mark_done(p.id, NULL, p.lease_token)")
	echo "$id $(($(date +%s%3N) - start))" >"$top/poll"
) &
sleep 1
id=$(q 0 -c "SELECT pqrun.enqueue('poll', queue => '$qn')")
wait
read -r got ms <"$top/poll"
[ "$got" = "$id" ] && [ "$ms" -lt 5000 ] || fail "the long poll answered [$got] after $ms ms, not job $id"

echo "-- through the coordinator: pickup_from and the job-id calls given their queue run on its node"
# Two queues, one on each worker, 150 jobs each; four clients on the
# coordinator, two per queue, each job in a session of its own (a session
# that ends holding a job is a dead worker): pickup_from (a lone SELECT
# ... FROM the function, delegated by its queue), then mark_done, or
# mark_error once for a job whose n ends in 0, given the queue.
rm -f "$top"/via.* "$top/client_errors"
for k in 0 1; do
	q "${qnode[$k]}" -c "SELECT count(*) FROM pqrun.enqueue_batch((SELECT jsonb_agg(jsonb_build_object(
		'job_type', 'via', 'payload', jsonb_build_object('n', n), 'queue', '${queues[$k]}')) FROM generate_series(1, 150) AS n))" >/dev/null
done
# via CLIENT QUEUE: claims and finishes through the coordinator until the
# queue is empty.
via() {
	local c=$1 qn=$2 out
	while :; do
		out=$(q 0 <<SQL
SELECT count(*) AS got, max(id) AS id, max(attempts) AS attempts,
       bool_or((payload->>'n')::int % 10 = 0 AND attempts = 1) AS fails
  FROM pqrun.pickup_from('v$c', '$qn') \gset
\if :got
\if :fails
SELECT pqrun.mark_error(:id, 'once', retry_after => '0', queue => '$qn') \gset
\else
SELECT pqrun.mark_done(:id, queue => '$qn') \gset
\endif
\echo :id:attempts
\endif
SQL
		) || { echo "client $c: $out" >>"$top/client_errors"; return; }
		[ -n "$out" ] || break
		echo "$out" >>"$top/via.$c"
	done
}
for c in 0 1 2 3; do
	via $c "${queues[$((c % 2))]}" &
done
wait
[ ! -s "$top/client_errors" ] || fail "clients through the coordinator failed: $(head -5 "$top/client_errors")"
got=$(cat "$top"/via.* | sort | uniq -d | head -3)
[ -z "$got" ] || fail "jobs handed out twice in one attempt through the coordinator: $got"
got=$(cat "$top"/via.* | wc -l)
[ "$got" = 330 ] || fail "$got claims through the coordinator, not 300 + 30 retries"
got=$(q 0 -c "SELECT status, count(*), max(attempts) FROM pqrun.jobs WHERE job_type = 'via' GROUP BY status")
[ "$got" = "DONE|300|2" ] || fail "after the drain through the coordinator: [$got]"
# The calls ran on the workers: the coordinator's own tables stay empty.
got=$(q 0 -c "SELECT pg_relation_size('pqrun.job_live') + pg_relation_size('pqrun.job_done_default')")
[ "$got" = 0 ] || fail "the coordinator's shells hold $got bytes"
# A long poll through the coordinator, woken by an enqueue through it; its
# session sends a heartbeat and finishes the job, given its queue.
qn=${queues[2]}
(
	start=$(date +%s%3N)
	out=$(q 0 <<SQL
SELECT id FROM pqrun.pickup_from('poll', '$qn', wait => '20 s') \gset
\echo :id
SELECT pqrun.heartbeat(:id, queue => '$qn') \gset
SELECT pqrun.mark_done(:id, queue => '$qn') \gset
SQL
	)
	echo "$out $(($(date +%s%3N) - start))" >"$top/poll"
) &
sleep 1
id=$(q 0 -c "SELECT pqrun.enqueue('poll', queue => '$qn')")
wait
read -r got ms <"$top/poll"
[ "$got" = "$id" ] && [ "${ms:-99999}" -lt 5000 ] || fail "the long poll through the coordinator answered [$(cat "$top/poll")], not job $id"
got=$(q 0 -c "SELECT status FROM pqrun.jobs WHERE id = $id")
[ "$got" = DONE ] || fail "job $id is $got after its heartbeat and mark_done through the coordinator"
checks=(
	"SELECT pqrun.mark_done($id, queue => '${queues[0]}')|P0002"
	"SELECT pqrun.mark_done($id)|P0002"
	"SELECT pqrun.retry($id, queue => '${queues[0]}')|P0002"
	# Given its queue, the calls find the job on its node: it is DONE, which
	# retry() and cancel() leave as it is (false).
	"SELECT pqrun.retry($id, queue => '$qn')|ok:f"
	"SELECT pqrun.cancel($id, queue => '$qn')|ok:f"
	"SELECT * FROM pqrun.pickup_from('w', '$qn', batch_size => 0)|22023"
	# In a transaction block Citus does not delegate: the call runs on the
	# coordinator, which holds no jobs, and refuses.
	"BEGIN; SELECT * FROM pqrun.pickup_from('w', '$qn'); COMMIT|0A000"
)
for check in "${checks[@]}"; do
	IFS='|' read -r call want <<<"$check"
	got=$(state 0 "$call")
	[ "$got" = "$want" ] || fail "[$call] through the coordinator answered [$got], not $want"
done
# A long poll through the coordinator cut short by its statement_timeout
# (alone in its statement, as a delegated call must be) claims nothing
# afterwards: a job enqueued after it stays READY.
got=$(PGOPTIONS="-c statement_timeout=1s" state 0 "SELECT * FROM pqrun.pickup_from('cut', '$qn', wait => '10 s')")
[ "$got" = 57014 ] || fail "a long poll through the coordinator past its statement_timeout answered [$got]"
id=$(q 0 -c "SELECT pqrun.enqueue('after_cut', queue => '$qn')")
sleep 1.5
got=$(q 0 -c "SELECT status FROM pqrun.jobs WHERE id = $id")
[ "$got" = READY ] || fail "a job enqueued after a cut long poll is $got"
q 0 -c "SELECT pqrun.cancel($id, queue => '$qn')" >/dev/null

echo "-- the other calls on one queue's jobs work on its node"
qn=${queues[3]} i=${qnode[3]}
for k in 1 2 3; do q 0 -c "SELECT pqrun.enqueue('more', queue => '$qn')" >/dev/null; done
got=$(q "$i" -c "SELECT count(*) FROM pqrun.enqueue_batch('[{\"job_type\": \"more\", \"queue\": \"$qn\"},
	{\"job_type\": \"more\", \"queue\": \"$qn\", \"dedupe_key\": \"m\"}]')")
[ "$got" = 2 ] || fail "enqueue_batch on the queue's node answered [$got]"
got=$(q "$i" -c "CALL pqrun.await_jobs(queues => '{$qn}', wait => '1 s')")
[ "$got" = t ] || fail "await_jobs answered [$got]"
# One session picks up and then calls on the jobs (their holder must stay).
out=$(q "$i" <<SQL
SELECT ids[1] AS a, ids[2] AS b, ids[3] AS c, ids[4] AS d, ids[5] AS e
  FROM (SELECT array_agg(id ORDER BY id) AS ids FROM pqrun.pickup('o', queues => '{$qn}', batch_size => 5)) p \gset
SELECT pqrun.heartbeat(:a);
SELECT pqrun.release(:b);
SELECT pqrun.snooze(:c, '0');
SELECT pqrun.mark_error(:d, 'x', terminal => true);
SELECT pqrun.mark_done_batch(ARRAY[:e]::bigint[]);
SELECT count(*) FROM pqrun.mark_done_and_pickup('o', ARRAY[:a]::bigint[], queues => '{$qn}', batch_size => 5) p,
	LATERAL pqrun.mark_done(p.id, NULL, p.lease_token);
SELECT pqrun.retry(:d);
SELECT pqrun.cancel(:d);
\echo ids :a :b :c :d :e
SQL
)
read -r _ a b c d e <<<"$(echo "$out" | grep '^ids ')"
[ -n "$e" ] && [ "$(echo "$out" | grep -v '^ids ' | tail -n 1)" = t ] || fail "the calls on $qn's node answered [$out]"
got=$(q 0 -c "SELECT string_agg(status::text, ',' ORDER BY id) FROM pqrun.jobs WHERE id IN ($a, $b, $c, $d, $e)")
[ "$got" = DONE,DONE,DONE,CANCELLED,DONE ] || fail "after the calls on $qn's node: [$got]"
# A pause made through the coordinator holds the queue on its node.
id=$(q 0 -c "SELECT pqrun.enqueue('more', queue => '$qn')")
got=$(q 0 -c "SELECT pqrun.pause_queue('$qn')")
[ "$got" = t ] || fail "pause_queue through the coordinator answered [$got]"
got=$(q "$i" -c "SELECT count(*) FROM pqrun.pickup('o', queues => '{$qn}')")
[ "$got" = 0 ] || fail "a paused queue handed out $got jobs"
q 0 -c "SELECT pqrun.resume_queue('$qn')" >/dev/null
got=$(q "$i" -c "SELECT p.id FROM pqrun.pickup('o', queues => '{$qn}') p, LATERAL pqrun.mark_done(p.id, NULL, p.lease_token)")
[ "$got" = "$id" ] || fail "the resumed queue handed out [$got], not $id"
got=$(state "$i" "SELECT pqrun.enqueue_batch('[{\"job_type\": \"t\", \"queue\": \"$qn\"},
	{\"job_type\": \"t\", \"queue\": \"${queues[0]}\"}]')")
[ "$got" = 0A000 ] || fail "an enqueue_batch over two nodes' queues answered [$got]"

echo "-- each worker's maintenance worker rescues the jobs of a holder that exited"
for j in 0 2; do
	q 0 -c "SELECT pqrun.enqueue('orphan', queue => '${queues[$j]}')" -c "SELECT pqrun.enqueue('leased', queue => '${queues[$j]}')" >/dev/null
	q "${qnode[$j]}" -c "SET pqrun.claim_hold = session" \
		-c "SELECT count(*) FROM pqrun.pickup('gone', job_types => '{orphan}', queues => '{${queues[$j]}}')" >/dev/null
	q "${qnode[$j]}" -c "SELECT count(*) FROM pqrun.pickup('gone', job_types => '{leased}', queues => '{${queues[$j]}}')" >/dev/null
done
wait_for 0 "SELECT count(*) FILTER (WHERE status = 'READY' AND last_error LIKE 'orphaned%')
	FROM pqrun.job_live WHERE job_type = 'orphan'" 2 10
got=$(q 0 -c "SELECT string_agg(status::text, ',') FROM pqrun.job_live WHERE job_type = 'leased'")
[ "$got" = RUNNING,RUNNING ] || fail "lease-held jobs of an exited session: [$got]"
for job in $(q 0 -c "SELECT id || ':' || queue FROM pqrun.job_live WHERE job_type = 'leased'"); do
	q 0 -c "SELECT pqrun.cancel(${job%%:*}, queue => '${job#*:}')" >/dev/null
done

echo "-- schedules made through the coordinator fire once per slot, on their queue's node"
for j in 0 2; do
	q 0 -c "SELECT pqrun.schedule('tick', 'tick', run_every => '1 second', key => '${queues[$j]}', queue => '${queues[$j]}')" >/dev/null
done
start=$SECONDS
sleep 4.5
for j in 0 2; do
	got=$(q "${qnode[$j]}" -c "SELECT pqrun.unschedule('tick', '${queues[$j]}')")
	[ "$got" = t ] || fail "unschedule on ${nodes[${qnode[$j]}]} answered [$got]"
done
elapsed=$((SECONDS - start))
for j in 0 2; do
	# A slot fired twice (say, by two nodes) would make about twice as many.
	n=$(q 0 -c "SELECT count(*) FROM pqrun.job_live WHERE job_type = 'tick' AND queue = '${queues[$j]}'")
	[ "$n" -ge 3 ] && [ "$n" -le $((elapsed + 1)) ] || fail "${queues[$j]}'s schedule fired $n times in $elapsed s"
done
got=$(q 0 -c "SELECT count(*) FROM pqrun.periodic")
[ "$got" = 0 ] || fail "the coordinator holds $got schedules"

echo "-- retention on a worker deletes its shards' finished jobs"
i=${qnode[0]}
q "$i" -c "ALTER SYSTEM SET pqrun.retention = '1s'" -c "SELECT pg_reload_conf()" >/dev/null
wait_for 0 "SELECT count(*) FROM pqrun.job_done WHERE queue IN ('${queues[0]}', '${queues[1]}')" 0 15
got=$(q 0 -c "SELECT count(*) FROM pqrun.job_done WHERE queue IN ('${queues[2]}', '${queues[3]}')")
[ "$got" -ge 200 ] || fail "worker2 kept [$got] finished jobs"
q "$i" -c "ALTER SYSTEM RESET pqrun.retention" -c "SELECT pg_reload_conf()" >/dev/null

echo "-- worker2 stopped and started again while clients run on both workers"
rm -f "$top"/claims.* "$top"/produce_errors.* "$top/client_errors" "$top/produced" "$top/produced_enough"
# produce QUEUE: enqueues through the coordinator until told to stop (at
# most 60 s); a failed enqueue (its node is down) is not counted.
produce() {
	local end=$((SECONDS + 60)) id
	while [ $SECONDS -lt $end ] && [ ! -e "$top/produced_enough" ]; do
		id=$(q 0 -c "SELECT pqrun.enqueue('s', queue => '$1')" 2>>"$top/produce_errors.$1") && echo "$id" >>"$top/produced"
	done
}
# consume CLIENT QUEUE NODE: claims and finishes until the producers stop
# and the queue is empty; errors while the node is down are retried (for
# at most 60 s).
consume() {
	local c=$1 qn=$2 i=$3 end=$((SECONDS + 60)) out
	while :; do
		if out=$(q "$i" -c "SELECT p.id || ':' || p.attempts || ':' || (pqrun.mark_done(p.id, NULL, p.lease_token) IS NULL)
			FROM pqrun.pickup('s$c', queues => '{$qn}', batch_size => 2, wait => '200 ms') p" 2>/dev/null); then
			[ -n "$out" ] && echo "$out" >>"$top/claims.$c"
			[ -z "$out" ] && [ -e "$top/produced_enough" ] && break
		else
			sleep 0.2
			[ $SECONDS -ge $end ] && { echo "client $c: node $i not back" >>"$top/client_errors"; break; }
		fi
	done
}
# The claims and enqueue errors of worker1's queues' clients.
worker1_files=() worker1_errors=()
for c in 0 1 2 3; do
	if [ "${qnode[$c]}" = 1 ]; then
		worker1_files+=("$top/claims.$c")
		worker1_errors+=("$top/produce_errors.${queues[$c]}")
	fi
done
worker1_claims() { { cat "${worker1_files[@]}" 2>/dev/null || true; } | wc -l; }
for j in 0 1 2 3; do produce "${queues[$j]}" & done
for c in 0 1 2 3; do consume $c "${queues[$c]}" "${qnode[$c]}" & done
sleep 2
cluster_stop "$top/worker2" immediate
sleep 1
# The queues of worker1 go on meanwhile (the producers run until told).
before=$(worker1_claims) deadline=$((SECONDS + 10))
while [ "$(worker1_claims)" -le "$before" ] && [ $SECONDS -le $deadline ]; do sleep 0.2; done
after=$(worker1_claims)
[ "$after" -gt "$before" ] ||
	fail "worker1's queues stopped while worker2 was down ($before, $after claims in 10 s); enqueues into them: $(
		grep -h ERROR "${worker1_errors[@]}" 2>/dev/null | sort | uniq -c | head -3)"
cluster_start "$top/worker2"
sleep 2
touch "$top/produced_enough"
wait
[ ! -s "$top/client_errors" ] || fail "clients failed: $(head -5 "$top/client_errors")"
# A job claimed when worker2 stopped is rescued (its holder is gone) and
# claimed again by the client still running, or by this last drain.
for j in 0 1 2 3; do
	wait_for 0 "SELECT count(*) FROM pqrun.job_live WHERE job_type = 's' AND queue = '${queues[$j]}' AND status = 'RUNNING'" 0 10
	q "${qnode[$j]}" -c "SELECT count(pqrun.mark_done(p.id, NULL, p.lease_token)) FROM
		pqrun.pickup('last', queues => '{${queues[$j]}}', batch_size => 1000) p" >/dev/null
done
# Every job an enqueue answered is there, and done (an enqueue whose node
# stopped after its commit, before its answer, leaves a job no one was
# told of: done as well).
produced=$(sort -u "$top/produced" | wc -l)
got=$(q 0 -c "SELECT count(*) FILTER (WHERE id IN ($(sort -u "$top/produced" | paste -sd,))), count(*) FILTER (WHERE status <> 'DONE')
	FROM pqrun.jobs WHERE job_type = 's'")
[ "$got" = "$produced|0" ] || fail "$produced jobs enqueued; after the restart [$got] (of them there, not done)"
got=$(cat "$top"/claims.* | cut -d: -f1,2 | sort | uniq -d | head -3)
[ -z "$got" ] || fail "jobs handed out twice in one attempt: $got"
echo "$produced jobs through the restart"

echo "-- a shard moved to the other worker while clients drain its queue"
qn=${queues[0]}
rm -f "$top"/moved.* "$top/switched" "$top/client_errors"
# follow CLIENT QUEUE: claims and finishes until the queue has no job left,
# on the node that holds it, asking the coordinator again when told the
# jobs are on another node.
follow() {
	local c=$1 qn=$2 i out
	i=$(($(q 0 -c "SELECT port FROM pqrun.queue_node('$qn')") - base))
	while :; do
		if out=$(q "$i" -c "SELECT p.id || ':' || p.attempts || ':' || (pqrun.mark_done(p.id, NULL, p.lease_token) IS NULL)
			FROM pqrun.pickup('m$c', queues => '{$qn}') p" 2>"$top/follow.$c.err"); then
			[ -n "$out" ] && { echo "$out" >>"$top/moved.$c"; continue; }
			[ "$(q 0 -c "SELECT count(*) FROM pqrun.job_live WHERE job_type = 'mv'")" = 0 ] && break
			sleep 0.1
		elif grep -q "on another node" "$top/follow.$c.err"; then
			echo "$c" >>"$top/switched"
			i=$(($(q 0 -c "SELECT port FROM pqrun.queue_node('$qn')") - base))
		else
			echo "client $c: $(cat "$top/follow.$c.err")" >>"$top/client_errors"
			return
		fi
	done
}
for n in $(seq 1 600); do echo "SELECT pqrun.enqueue('mv', queue => '$qn');"; done | q 0 >/dev/null
shard=$(q 0 -c "SELECT get_shard_id_for_distribution_column('pqrun.job_live', '$qn')")
for c in 0 1; do follow $c "$qn" & done
sleep 0.5
# block_writes: Citus takes the shard group's metadata lock (EXCLUSIVE),
# which waits for the clients' transactions (SHARE) and holds off the next.
q 0 -c "SELECT citus_move_shard_placement($shard, '127.0.0.1', $((base + 1)), '127.0.0.1', $((base + 2)),
	shard_transfer_mode => 'block_writes')" >/dev/null
wait
[ ! -s "$top/client_errors" ] || fail "clients failed: $(head -5 "$top/client_errors")"
[ -s "$top/switched" ] || fail "no client was sent to the new node (the queue drained before the move?)"
got=$(q 0 -c "SELECT port FROM pqrun.queue_node('$qn')")
[ "$got" = $((base + 2)) ] || fail "$qn is on port [$got] after the move"
got=$(cat "$top"/moved.* | cut -d: -f1,2 | sort | uniq -d | head -3)
[ -z "$got" ] || fail "jobs handed out twice in one attempt across the move: $got"
got=$(q 0 -c "SELECT count(*), count(*) FILTER (WHERE status = 'DONE' AND attempts = 1) FROM pqrun.jobs WHERE job_type = 'mv'")
[ "$got" = "600|600" ] || fail "after the move: [$got] (jobs, done at the first attempt)"
echo "$(sort -u "$top/switched" | wc -l) clients followed the move; $(cat "$top"/moved.* | wc -l) claims"

echo "-- a distributed install of the previous version, updated, then distribute() again"
previous=$(cd "$repo/sql" && ls pqrun--*--"$version".sql | sed -n 's/^pqrun--\([0-9.]*\)--.*/\1/p')
db=upd
cluster_db upd "$previous"
q 0 -c "SELECT pqrun.distribute(8)" >/dev/null
qn=${queues[0]}
id=$(q 0 -c "SELECT pqrun.enqueue('u', queue => '$qn')")
q 0 -c "ALTER EXTENSION pqrun UPDATE" >/dev/null
for i in 0 1 2; do
	got=$(q $i -c "SELECT extversion FROM pg_extension WHERE extname = 'pqrun'")
	[ "$got" = "$version" ] || fail "after ALTER EXTENSION pqrun UPDATE from $previous, pqrun on ${nodes[$i]} is [$got]"
done
got=$(state 0 "SELECT pqrun.mark_done($id)")
[ "$got" = P0002 ] || fail "a job-id call without its queue after the update answered [$got]"
q 0 -c "SELECT pqrun.distribute()" >/dev/null 2>&1
got=$(q 0 -c "SELECT id FROM pqrun.pickup_from('u', '$qn')")
[ "$got" = "$id" ] || fail "pickup_from through the coordinator after the update answered [$got], not $id"
got=$(state 0 "SELECT pqrun.cancel($id, queue => '$qn')")
[ "$got" = ok:t ] || fail "cancel through the coordinator after the update answered [$got]"
db=dist

echo "-- no crash, the maintenance workers up"
for i in 0 1 2; do
	wait_for $i "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'pqrun maintenance' AND datname IN ('app', 'dist')" 2 10
done
for n in "${nodes[@]}"; do
	! grep -E "PANIC|TRAP|terminated by signal" "$top/$n/server.log" || fail "$n logged a crash or an internal error"
done
echo "ok"

#!/usr/bin/env bash
# bench/citus.sh — pqrun on a Citus cluster against single-server pqrun
# (README, "Running on Citus"), back to back on this machine. PostgreSQL 16
# or later with Citus (built from ../shared/vendor by test/lib/citus.sh
# when it is not installed); on this machine, in a version's root:
#
#   source test/lib/pg_root.sh; pg_root_run 17 "$PWD" "bash bench/citus.sh"
#
# Four servers on loopback, durability on (bench/lib/bench.conf, smaller
# shared buffers): a single server with pqrun, and a coordinator with two
# workers with Citus and pqrun after pqrun.distribute(). Each measurement
# (BENCH_SECONDS, for each of BENCH_CLIENTS, the systems in turn) uses a
# queue of its own, held by the first worker on Citus:
#
#   E1single  one enqueue per transaction: on the single server; through the
#             coordinator (delegated to the worker that holds the queue);
#             on that worker itself.
#   W1        pickup, then mark_done, each its own transaction, from a queue
#             of BENCH_JOBS jobs: on the single server; on the worker;
#             through the coordinator (pickup_from, then mark_done given
#             the queue: each delegated to the worker).
#   W1b       pickup of 100 and mark_done_batch in one statement: on the
#             single server; on the worker; through the coordinator
#             (pickup_from of 100, then mark_done_batch given the queue:
#             two delegated calls, as one statement cannot be delegated).
#
# Rates are jobs per second: enqueues counted by pgbench, drains by the
# jobs finished over the span of their finish times. Prints a
# markdown report and writes it to bench/results/citus-<time>.md.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
source test/lib/cluster.sh
source test/lib/citus.sh
rc=0
why=$(citus_ensure "$repo" 2>&1) || rc=$?
[ $rc = 0 ] || { echo "$why" | tail -n 1; exit 1; }
make -s -j2 >/dev/null && make -s install >/dev/null

seconds=${BENCH_SECONDS:-10}
clients_list=${BENCH_CLIENTS:-"1 4"}
jobs=${BENCH_JOBS:-200000}
base=${BENCH_PORT:-55460}
top=$(mktemp -d /tmp/pqrun-citus-bench.XXXXXX)
chmod 755 "$top"
[ "$(id -u)" = 0 ] && chown postgres: "$top"
nodes=(single coordinator worker1 worker2)
stop_all() {
	for n in "${nodes[@]}"; do cluster_stop "$top/$n" immediate; done
	rm -rf "$top"
}
trap stop_all EXIT

for i in 0 1 2 3; do
	conf=$top/${nodes[$i]}.conf
	cat bench/lib/bench.conf >"$conf"
	{
		echo "shared_buffers = 512MB"
		echo "max_prepared_transactions = 20"
		[ $i = 0 ] || echo "shared_preload_libraries = 'citus,pqrun'"
	} >>"$conf"
	cluster_init "$top/${nodes[$i]}" $((base + i)) "$conf"
	cluster_start "$top/${nodes[$i]}"
done
q() {
	local i=$1
	shift
	psql -X -qtA -v ON_ERROR_STOP=1 -h "$top/${nodes[$i]}" -p $((base + i)) -U postgres -d bench "$@"
}
for i in 0 1 2 3; do
	psql -X -q -h "$top/${nodes[$i]}" -p $((base + i)) -U postgres -d postgres -c "CREATE DATABASE bench"
	[ $i = 0 ] || q $i -c "CREATE EXTENSION citus"
done
q 0 -c "CREATE EXTENSION pqrun"
q 1 -c "SELECT citus_set_coordinator_host('127.0.0.1', $((base + 1)))" \
	-c "SELECT citus_add_node('127.0.0.1', $((base + 2)))" -c "SELECT citus_add_node('127.0.0.1', $((base + 3)))" \
	-c "CREATE EXTENSION pqrun" -c "SELECT pqrun.distribute()" >/dev/null
worker=2

# queue_on_worker: a new queue name that the first worker holds.
k=0
queue_on_worker() {
	while :; do
		k=$((k + 1))
		[ "$(q 1 -c "SELECT port FROM pqrun.queue_node('b$k')")" = $((base + worker)) ] && { echo "b$k"; return; }
	done
}
# fill NODE QUEUE: BENCH_JOBS jobs in QUEUE, then VACUUM ANALYZE, CHECKPOINT.
fill() {
	local i=$1 qn=$2 left=$jobs n
	while [ "$left" -gt 0 ]; do
		n=$((left < 10000 ? left : 10000))
		q "$i" -c "SET synchronous_commit = off" -c "SELECT count(*) FROM pqrun.enqueue_batch((SELECT
			jsonb_agg(jsonb_build_object('job_type', 'j', 'queue', '$qn')) FROM generate_series(1, $n)))" >/dev/null
		left=$((left - n))
	done
	q "$i" -c "VACUUM ANALYZE pqrun.job_live" -c "CHECKPOINT" >/dev/null 2>&1 || q "$i" -c "CHECKPOINT" >/dev/null
}
# run NODE CLIENTS SCRIPT QUEUE: pgbench; prints its tps.
run() {
	local i=$1 n=$2 script=$3 qn=$4 out
	printf '%s\n' "$script" >"$top/script.sql"
	out=$("$PG_BINDIR/pgbench" -n -M prepared -c "$n" -j $((n < 2 ? n : 2)) -T "$seconds" -D queue="$qn" \
		-h "$top/${nodes[$i]}" -p $((base + i)) -U postgres -f "$top/script.sql" bench 2>&1) ||
		{ echo "$out" >&2; return 1; }
	echo "$out" | sed -n 's/^tps = \([0-9.]*\).*/\1/p'
}
# drained NODE QUEUE: jobs of QUEUE finished per second of their finish times.
drained() {
	q "$1" -c "SELECT round(count(*) / greatest(extract(epoch FROM max(finished_at) - min(finished_at)), 0.001))
		FROM pqrun.job_done WHERE queue = '$2'"
}

e1="SELECT pqrun.enqueue('e1', jsonb_build_object('n', :client_id::int), queue => :queue);"
w1="SELECT coalesce((SELECT id FROM pqrun.pickup('w' || :client_id::text, queues => ARRAY[:queue]::text[])), 0) AS id \\gset
\\if :id > 0
SELECT pqrun.mark_done(:id);
\\endif"
w1b="SELECT pqrun.mark_done_batch(coalesce(array_agg(id), '{}')) AS n
  FROM pqrun.pickup('w' || :client_id::text, queues => ARRAY[:queue]::text[], batch_size => 100);"
# Through the coordinator: each call alone in its statement (delegated).
w1c="SELECT count(*) AS n, max(id) AS id FROM pqrun.pickup_from('w' || :client_id::text, :queue) \\gset
\\if :n > 0
SELECT pqrun.mark_done(:id, queue => :queue);
\\endif"
w1bc="SELECT count(*) AS n, coalesce(array_agg(id), '{}') AS ids
  FROM pqrun.pickup_from('w' || :client_id::text, :queue, batch_size => 100) \\gset
\\if :n > 0
SELECT pqrun.mark_done_batch(:ids::bigint[], queue => :queue);
\\endif"

declare -A rate
for n in $clients_list; do
	for sys in single coordinator worker; do
		case $sys in single) i=0 ;; coordinator) i=1 ;; worker) i=$worker ;; esac
		qn=$(queue_on_worker)
		rate[E1single,$sys,$n]=$(run $i "$n" "$e1" "$qn" | cut -d. -f1)
		echo "E1single $sys c$n: ${rate[E1single,$sys,$n]} jobs/s" >&2
	done
	for w in W1 W1b; do
		for sys in single worker coordinator; do
			# i: where the clients connect; f: where the jobs are.
			case $sys in single) i=0 f=0 ;; worker) i=$worker f=$worker ;; coordinator) i=1 f=$worker ;; esac
			qn=$(queue_on_worker)
			fill $f "$qn"
			case $w,$sys in
			W1,coordinator) script=$w1c ;;
			W1b,coordinator) script=$w1bc ;;
			W1,*) script=$w1 ;;
			W1b,*) script=$w1b ;;
			esac
			run $i "$n" "$script" "$qn" >/dev/null
			rate[$w,$sys,$n]=$(drained $f "$qn")
			echo "$w $sys c$n: ${rate[$w,$sys,$n]} jobs/s" >&2
		done
	done
done

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }'; }
mkdir -p bench/results
report=bench/results/citus-$(date -u +%Y%m%d-%H%M%S).md
{
	echo "# pqrun on Citus against single-server pqrun"
	echo
	echo "- PostgreSQL $("$PG_BINDIR/postgres" --version | awk '{print $3}'), Citus $(q 1 -c "SELECT extversion FROM pg_extension WHERE extname = 'citus'"), pqrun $(q 0 -c "SELECT extversion FROM pg_extension WHERE extname = 'pqrun'"); $(nproc) cores; four servers on this machine (single; coordinator, worker1, worker2), durability on"
	echo "- ${seconds}s per measurement; W1/W1b drain queues of $jobs jobs; rates in jobs/s"
	echo
	echo "| workload | clients | single server | on the worker | ratio | through the coordinator | ratio |"
	echo "|---|---|---|---|---|---|---|"
	for n in $clients_list; do
		s=${rate[E1single,single,$n]} w=${rate[E1single,worker,$n]} c=${rate[E1single,coordinator,$n]}
		echo "| E1single | $n | $s | $w | $(ratio "$w" "$s") | $c | $(ratio "$c" "$s") |"
	done
	for w in W1 W1b; do
		for n in $clients_list; do
			s=${rate[$w,single,$n]} x=${rate[$w,worker,$n]} c=${rate[$w,coordinator,$n]}
			echo "| $w | $n | $s | $x | $(ratio "$x" "$s") | $c | $(ratio "$c" "$s") |"
		done
	done
} | tee "$report"

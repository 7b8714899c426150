#!/usr/bin/env bash
# test/shell/citus.sh — pqrun on a Citus cluster of three servers on this
# machine: a coordinator and two workers, each with Citus and pqrun
# preloaded (Citus built from ../shared/vendor when not installed,
# test/lib/citus.sh; skipped, exit status 77, before PostgreSQL 16 and
# where there is no source).
#
# What it proves: CREATE EXTENSION pqrun on the coordinator reaches every
# node, and each node runs pqrun on its own tables (its jobs, its
# maintenance worker, each job handed out once); the job tables as Citus
# tables are never written below the executor: with them distributed by
# queue, every public function refuses with 0A000 (never XX, never a
# crash), the shells stay empty, and the maintenance workers leave them
# alone.
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
} >>"$conf"
for i in 0 1 2; do
	cluster_init "$top/${nodes[$i]}" $((base + i)) "$conf"
	cluster_start "$top/${nodes[$i]}"
done

# q NODE SQL...: one node's answer.
q() {
	local i=$1
	shift
	psql -X -qtA -v ON_ERROR_STOP=1 -h "$top/${nodes[$i]}" -p $((base + i)) -U postgres -d app "$@"
}
fail() {
	echo "FAIL: $*"
	for n in "${nodes[@]}"; do tail -n 15 "$top/$n/server.log"; done
	exit 1
}

echo "-- a cluster of three, pqrun created on the coordinator"
for i in 0 1 2; do
	psql -X -q -h "$top/${nodes[$i]}" -p $((base + i)) -U postgres -d postgres -c "CREATE DATABASE app"
	q $i -c "CREATE EXTENSION citus"
done
q 0 -c "SELECT citus_set_coordinator_host('127.0.0.1', $base)" \
	-c "SELECT citus_add_node('127.0.0.1', $((base + 1)))" -c "SELECT citus_add_node('127.0.0.1', $((base + 2)))" >/dev/null
q 0 -c "CREATE EXTENSION pqrun"
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

echo "-- job tables distributed by queue: every function refuses with 0A000, nothing is written"
q 0 -c "ALTER TABLE pqrun.job_live DROP CONSTRAINT job_live_pkey, ADD PRIMARY KEY (id, queue)" \
	-c "DROP INDEX pqrun.job_live_dedupe" \
	-c "CREATE UNIQUE INDEX job_live_dedupe ON pqrun.job_live (dedupe_key, queue) WHERE dedupe_key IS NOT NULL" \
	-c "SELECT create_distributed_table('pqrun.job_live', 'queue', shard_count := 4)" \
	-c "SELECT create_distributed_table('pqrun.job_done', 'queue', colocate_with := 'pqrun.job_live')" >/dev/null
calls=(
	"SELECT pqrun.enqueue('t', queue => 'q1')"
	"SELECT pqrun.enqueue_batch('[{\"job_type\": \"t\"}]')"
	"SELECT * FROM pqrun.pickup('w')"
	"SELECT * FROM pqrun.pickup('w', queues => '{q1}', wait => '1 second')"
	"SELECT pqrun.mark_done(1)"
	"SELECT pqrun.mark_done_batch('{1,2}')"
	"SELECT * FROM pqrun.mark_done_and_pickup('w', '{1}')"
	"SELECT pqrun.mark_error(1, 'e')"
	"SELECT pqrun.heartbeat(1)"
	"SELECT pqrun.release(1)"
	"SELECT pqrun.snooze(1, '1 minute')"
	"SELECT pqrun.cancel(1)"
	"SELECT pqrun.retry(1)"
	"SELECT pqrun.purge('1 day')"
	"SELECT pqrun.reap_stale()"
	"SELECT pqrun.run_maintenance()"
	"CALL pqrun.await_jobs(wait => '1 second')"
	"SELECT pqrun.schedule('s', 't', run_every => '1 minute')"
)
for i in 0 1 2; do
	for call in "${calls[@]}"; do
		state=$(psql -X -qtA -h "$top/${nodes[$i]}" -p $((base + i)) -U postgres -d app \
			-c "\\set VERBOSITY sqlstate" -c "$call" 2>&1 >/dev/null || true)
		[ "$state" = "ERROR:  0A000" ] || fail "[$call] on ${nodes[$i]} answered [$state], not 0A000"
	done
done
got=$(q 0 -c "SELECT pg_relation_size('pqrun.job_live') + pg_relation_size('pqrun.job_done_default')")
[ "$got" = 0 ] || fail "the coordinator's shells hold $got bytes"
got=$(q 0 -c "SELECT count(*) FROM pqrun.jobs")
[ "$got" = 0 ] || fail "the shards hold $got jobs"

echo "-- the maintenance workers leave the distributed tables alone"
errors() { cat "$top"/*/server.log | grep -c "ERROR" || true; }
before=$(errors)
sleep 1
after=$(errors)
[ "$before" = "$after" ] || fail "errors logged while only the workers ran: $before then $after"
for i in 0 1 2; do
	wait_for $i "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'pqrun maintenance' AND datname = 'app'" 1 5
done
for n in "${nodes[@]}"; do
	! grep -E "PANIC|TRAP|terminated by signal" "$top/$n/server.log" || fail "$n logged a crash or an internal error"
done
echo "ok"

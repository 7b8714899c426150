#!/usr/bin/env bash
# test/shell/many_databases.sh — a cluster with more connectable databases
# than the launcher has slots (shmem::kMaxDatabases = 64) still gets a
# maintenance worker in every database where pqrun is installed.
#
# The launcher probes each database by starting a worker there. Databases
# without pqrun must not keep their slot after the probe, or the 64 first
# databases of pg_database take every slot and a later one never gets its
# worker: neither at start nor at CREATE EXTENSION.
#
# Starts a throwaway cluster of its own (Unix socket only) with 72
# connectable databases: postgres, template1, d01 .. d70. Takes about a
# minute.
set -uo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
source "$repo/test/lib/cluster.sh"

dir=$(mktemp -d /tmp/pqrun-manydb.XXXXXX)
chmod 755 "$dir"
[ "$(id -u)" = 0 ] && chown postgres: "$dir"
port=54373
trap 'cluster_stop "$dir" immediate; rm -rf "$dir"' EXIT
{
	cat "$repo/test/pqrun.conf"
	echo "listen_addresses = ''" # Unix socket only: the port number cannot collide
	echo "max_connections = 100"
} >"$dir/extra.conf"
cluster_init "$dir" $port "$dir/extra.conf" || exit 1
cluster_start "$dir" || exit 1
q() { psql -X -qtA -v ON_ERROR_STOP=1 -h "$dir" -p $port -U postgres "$@"; }

failures=0
# has_worker DB SECONDS: a maintenance worker of DB shows up within SECONDS.
has_worker() {
	local deadline=$((SECONDS + $2)) got=
	while [ $SECONDS -le $deadline ]; do
		got=$(q -d postgres -c "SELECT count(*) FROM pg_stat_activity
			WHERE backend_type = 'pqrun maintenance' AND datname = '$1'" 2>/dev/null)
		[ "$got" = 1 ] && return 0
		sleep 0.2
	done
	return 1
}
expect_worker() {
	if has_worker "$1" "$2"; then
		echo "ok   $3"
	else
		echo "FAIL $3: no maintenance worker in $1 after $2 s"
		failures=$((failures + 1))
	fi
}

for i in $(seq -w 1 70); do echo "CREATE DATABASE d$i;"; done | q -d postgres >/dev/null || exit 1

# A restart makes the launcher probe all 72 databases from scratch, the
# first 64 in one go; then a database it probed beyond them, and one
# among them, get pqrun.
cluster_stop "$dir" fast && cluster_start "$dir" || exit 1
sleep 3
q -d d70 -c "CREATE EXTENSION pqrun" >/dev/null || exit 1
expect_worker d70 10 "CREATE EXTENSION in the 72nd database starts its worker"
q -d d05 -c "CREATE EXTENSION pqrun" >/dev/null || exit 1
expect_worker d05 10 "CREATE EXTENSION in a database probed without pqrun starts its worker"

# After another restart the launcher finds both again, d70 behind 64 others.
cluster_stop "$dir" fast && cluster_start "$dir" || exit 1
expect_worker d05 20 "after a restart, d05 has its worker again"
expect_worker d70 40 "after a restart, d70 (beyond the first 64 databases) has its worker again"

# And jobs there are looked after: a stale job in d70 is reaped by its worker.
q -d d70 -c "SELECT pqrun.enqueue('t', '{}', timeout_seconds => 1);
	SELECT id FROM pqrun.pickup('gone')" >/dev/null || exit 1
deadline=$((SECONDS + 15))
while [ $SECONDS -le $deadline ] &&
	[ "$(q -d d70 -c "SELECT status FROM pqrun.jobs")" != READY ]; do sleep 0.2; done
if [ "$(q -d d70 -c "SELECT status FROM pqrun.jobs")" = READY ]; then
	echo "ok   d70's worker reaps its stale job"
else
	echo "FAIL d70's stale job was not reaped: $(q -d d70 -c "SELECT status FROM pqrun.jobs")"
	failures=$((failures + 1))
fi

if [ $failures -gt 0 ]; then
	tail -n 30 "$dir/server.log"
	exit 1
fi

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
# Mostly waits for its cluster's workers:
# test/run.sh: beside the others
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
export PGHOST=$dir PGPORT=$port PGUSER=postgres
source "$repo/test/lib/checks.sh"
db=postgres
# workers_in DB: how many maintenance workers serve DB.
workers_in() {
	echo "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'pqrun maintenance' AND datname = '$1'"
}

for i in $(seq -w 1 70); do echo "CREATE DATABASE d$i;"; done | q >/dev/null || exit 1

# A restart makes the launcher probe all 72 databases from scratch, the
# first 64 in one go; then a database it probed beyond them, and one
# among them, get pqrun.
cluster_stop "$dir" fast && cluster_start "$dir" || exit 1
sleep 3
db=d70 q -c "CREATE EXTENSION pqrun" >/dev/null || exit 1
assert "CREATE EXTENSION in the 72nd database starts its worker" wait_for 10 1 "$(workers_in d70)"
db=d05 q -c "CREATE EXTENSION pqrun" >/dev/null || exit 1
assert "CREATE EXTENSION in a database probed without pqrun starts its worker" wait_for 10 1 "$(workers_in d05)"

# After another restart the launcher finds both again, d70 behind 64 others.
cluster_stop "$dir" fast && cluster_start "$dir" || exit 1
assert "after a restart, d05 has its worker again" wait_for 20 1 "$(workers_in d05)"
assert "after a restart, d70 (beyond the first 64 databases) has its worker again" wait_for 40 1 "$(workers_in d70)"

# And jobs there are looked after: a stale job in d70 is reaped by its worker.
db=d70
q -c "SELECT pqrun.enqueue('t', '{}', timeout_seconds => 1)" -c "SELECT id FROM pqrun.pickup('gone')" >/dev/null || exit 1
assert "d70's worker reaps its stale job" wait_for 15 READY "SELECT status FROM pqrun.jobs"

if [ $violations -gt 0 ]; then
	tail -n 30 "$dir/server.log"
	exit 1
fi

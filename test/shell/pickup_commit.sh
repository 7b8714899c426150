#!/usr/bin/env bash
# test/shell/pickup_commit.sh — a transaction that did nothing but claim jobs
# commits asynchronously (docs/api.md "Durability of claims"); any other write,
# before or after the pickup, keeps its commit synchronous, and
# pqrun.synchronous_pickup = on makes every pickup's commit synchronous.
#
# Runs against the cluster in PGHOST/PGPORT/PGUSER, in a database of its
# own, with synchronous_commit = on in every session. A commit waited for
# its flush when, right after it, pg_current_wal_flush_lsn() has reached the
# insert position read just before the COMMIT. An asynchronous commit may
# still look flushed (the WAL writer, woken by it, can be quicker than the
# next statement), so a case expected asynchronous needs only one of its
# TRIALS commits to return unflushed, while a case expected synchronous
# must have every commit flushed. Takes a few seconds.
set -eEuo pipefail
trap 'echo "FAIL: line $LINENO: $BASH_COMMAND exited with $?"' ERR
: "${PGHOST:?PGHOST must point at a running cluster}"
: "${PGPORT:?}" "${PGUSER:=postgres}"
export PGUSER

TRIALS=20
db=pqrun_pickup_commit
failures=0
cleanup() { psql -X -q -d postgres -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null 2>&1 || true; }
trap cleanup EXIT
cleanup
psql -X -q -d postgres -c "CREATE DATABASE $db" >/dev/null
psql -X -q -v ON_ERROR_STOP=1 -d "$db" >/dev/null <<'SQL'
CREATE EXTENSION pqrun;
CREATE TABLE side (n int);
SELECT count(*) FROM pqrun.enqueue_batch(
	(SELECT jsonb_agg(jsonb_build_object('job_type', 'c')) FROM generate_series(1, 1000)));
SQL

# flushed SETTINGS BODY: run TRIALS transactions "BEGIN; BODY; COMMIT" in one
# session and print how many had their WAL flushed when COMMIT returned.
# BODY may use :t, the trial number.
flushed() {
	local settings=$1 body=$2 t
	{
		echo "SET synchronous_commit = on; ${settings:+$settings;}"
		echo "CREATE TEMP TABLE scratch (n int); CREATE TEMP TABLE result (flushed bool);"
		for t in $(seq "$TRIALS"); do
			echo "\\set t $t"
			echo "BEGIN; $body; SELECT pg_current_wal_insert_lsn() AS lsn \\gset"
			echo "COMMIT; INSERT INTO result SELECT pg_current_wal_flush_lsn() >= :'lsn';"
		done
		echo "SELECT count(*) FILTER (WHERE flushed) FROM result;"
	} | psql -X -qtA -v ON_ERROR_STOP=1 -d "$db" | tail -n 1
}

# expect sync|async NAME SETTINGS BODY
expect() {
	local want=$1 name=$2 n
	n=$(flushed "$3" "$4")
	if { [ "$want" = sync ] && [ "$n" = "$TRIALS" ]; } || { [ "$want" = async ] && [ "$n" -lt "$TRIALS" ]; }; then
		echo "ok: $name: $want ($n of $TRIALS commits flushed on return)"
	else
		echo "FAIL: $name: expected $want, but $n of $TRIALS commits were flushed on return"
		failures=$((failures + 1))
	fi
}

pick="SELECT count(*) FROM pqrun.pickup('w')"
expect async "a pickup alone" "" "$pick"
expect async "two pickups" "" "$pick; $pick"
expect async "a waiting pickup" "" "SELECT count(*) FROM pqrun.pickup('w', wait => '1s')"
expect async "a pickup after a read" "" "SELECT count(*) FROM side; $pick"
expect sync "a pickup, then an INSERT" "" "$pick; INSERT INTO side VALUES (:t)"
expect sync "an INSERT, then a pickup" "" "INSERT INTO side VALUES (:t); $pick"
expect sync "a pickup, then mark_done" "" \
	"SELECT pqrun.mark_done(id) FROM pqrun.pickup('w')"
expect sync "a temporary table INSERT, then a pickup" "" "INSERT INTO scratch VALUES (:t); $pick"
expect sync "an enqueue, then a pickup" "" "SELECT pqrun.enqueue('c'); $pick"
expect sync "a pickup, a rolled-back savepoint with a write" "" \
	"$pick; SAVEPOINT s; INSERT INTO side VALUES (:t); ROLLBACK TO s"
# Batch pickups defer their claims (docs/api.md "Batches claimed and
# finished together"); written at commit or by a read of the queue, they
# are claims all the same.
batch="SELECT count(*) FROM pqrun.pickup('w', batch_size => 3)"
expect async "a batch pickup, claims written at commit" "" "$batch"
expect async "a batch pickup, claims written by a read of pqrun.jobs" "" \
	"$batch; SELECT count(*) FROM pqrun.jobs WHERE status = 'RUNNING'"
expect sync "a batch pickup, then an INSERT" "" "$batch; INSERT INTO side VALUES (:t)"
expect sync "a batch pickup finished by mark_done_batch" "" \
	"SELECT pqrun.mark_done_batch(array_agg(id)) FROM pqrun.pickup('w', batch_size => 3)"
expect sync "a pickup with pqrun.synchronous_pickup = on" "SET pqrun.synchronous_pickup = on" "$pick"
expect sync "a pickup with SET LOCAL pqrun.synchronous_pickup = on" "" \
	"SET LOCAL pqrun.synchronous_pickup = on; $pick"

# The SET LOCAL behind an asynchronous commit ends with the transaction.
got=$(psql -X -qtA -d "$db" -c "SET synchronous_commit = on" \
	-c "SELECT count(*) FROM pqrun.pickup('w')" -c "SHOW synchronous_commit" | tail -n 1)
[ "$got" = on ] || { echo "FAIL: synchronous_commit is [$got] after a pickup, not on"; failures=$((failures + 1)); }

[ "$failures" = 0 ] || { echo "$failures case(s) failed"; exit 1; }
echo "pickup_commit: all cases passed"

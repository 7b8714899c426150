#!/usr/bin/env bash
# test/shell/pgaudit.sh — with pgaudit loaded (Debian: postgresql-NN-pgaudit)
# every row pqrun's API reads for update or writes is in the audit log.
#
# pqrun's direct paths (enqueue_direct, pick_direct, claim_direct,
# finish_direct) lock and write rows below the executor, where no executor
# hook sees them. A module that checks every statement's tables
# (ExecutorCheckPerms_hook: pgaudit, sepgsql) sends them all through their
# SQL statements instead (direct_rows::GoDirect).
#
# Starts a throwaway cluster of its own (Unix socket only) with
# shared_preload_libraries = 'pqrun,pgaudit', pgaudit.log = 'read, write'
# and pgaudit.log_relation = on, runs a single enqueue, a pickup and
# mark_done, an enqueue_batch and a batch pickup finished by
# mark_done_batch in the same statement, and requires, for each API call,
# the audit lines of the tables it touches. Takes a few seconds.
set -uo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
source "$repo/test/lib/cluster.sh"

if [ ! -f "$(pg_config --pkglibdir)/pgaudit.so" ]; then
	echo "FAIL: pgaudit is not installed (Debian: apt-get install postgresql-NN-pgaudit)"
	exit 1
fi

dir=$(mktemp -d /tmp/pqrun-pgaudit.XXXXXX)
chmod 755 "$dir"
[ "$(id -u)" = 0 ] && chown postgres: "$dir"
cleanup() {
	cluster_stop "$dir" immediate
	rm -rf "$dir"
}
trap cleanup EXIT

{
	cat "$repo/test/pqrun.conf"
	echo "listen_addresses = ''" # Unix socket only: the port number cannot collide
	echo "shared_preload_libraries = 'pqrun,pgaudit'"
	echo "pgaudit.log = 'read, write'"
	echo "pgaudit.log_relation = on"
} >"$dir/extra.conf"
cluster_init "$dir" 54371 "$dir/extra.conf" || exit 1
cluster_start "$dir" || exit 1
q() { psql -X -qtA -v ON_ERROR_STOP=1 -h "$dir" -p 54371 -U postgres "$@"; }
q -d postgres -c "CREATE DATABASE audited" >/dev/null || exit 1
q -d audited -c "CREATE EXTENSION pqrun" >/dev/null || exit 1

# One session (application_name workload, in the log line prefix), one API
# call per top-level statement; `audit_of N` prints the audit lines of its
# statement N as "CLASS,COMMAND,OBJECT,statement text".
PGAPPNAME=workload q -d audited >/dev/null <<'SQL' || { echo "FAIL: the workload failed"; exit 1; }
SELECT pqrun.enqueue('single', '{}');
SELECT id FROM pqrun.pickup('w1') \gset
SELECT pqrun.mark_done(:id);
SELECT count(*) FROM pqrun.enqueue_batch('[{"job_type": "batch"}, {"job_type": "batch"}]');
SELECT pqrun.mark_done_batch(array_agg(id)) FROM pqrun.pickup('w2', batch_size => 2);
SELECT 'end';
SQL
audit_of() {
	grep -o ' workload LOG:  AUDIT: SESSION,.*' "$dir/server.log" |
		awk -F, -v n="$1" '$2 == n && $6 == "TABLE" {
			line = $4 "," $5 "," $7
			for (i = 8; i <= NF; i++) line = line "," $i
			print line
		}'
}
# expect N WHAT PATTERN: statement N logged a line matching PATTERN.
failures=0
expect() {
	local lines
	lines=$(audit_of "$1")
	if grep -Eq "$3" <<<"$lines"; then
		echo "ok: $2"
	else
		echo "FAIL: $2: no audit line like [$3] for statement $1: $lines"
		failures=$((failures + 1))
	fi
}

expect 1 "enqueue inserts into job_live" '^WRITE,INSERT,pqrun\.job_live,'
expect 2 "pickup locks in job_live" '^READ,SELECT,pqrun\.job_live,"?SELECT .*FOR UPDATE SKIP LOCKED'
expect 3 "the pickup's claim updates job_live" '^WRITE,UPDATE,pqrun\.job_live,'
expect 4 "mark_done deletes from job_live" '^WRITE,DELETE,pqrun\.job_live,'
expect 4 "mark_done inserts into job_done" '^WRITE,INSERT,pqrun\.job_done,'
expect 5 "enqueue_batch inserts into job_live" '^WRITE,INSERT,pqrun\.job_live,'
expect 6 "the batch pickup locks in job_live" '^READ,SELECT,pqrun\.job_live,"?SELECT .*FOR UPDATE SKIP LOCKED'
expect 6 "mark_done_batch deletes from job_live" '^WRITE,DELETE,pqrun\.job_live,'
expect 6 "mark_done_batch inserts into job_done" '^WRITE,INSERT,pqrun\.job_done,'

got=$(q -d audited -c "SELECT string_agg(job_type || ':' || status || ':' || attempts, ' ' ORDER BY id) FROM pqrun.jobs")
if [ "$got" = "single:DONE:1 batch:DONE:1 batch:DONE:1" ]; then
	echo "ok: every job done once"
else
	echo "FAIL: jobs after the workload: [$got]"
	failures=$((failures + 1))
fi

if [ $failures -gt 0 ]; then
	echo "$failures failure(s); server log:"
	tail -n 40 "$dir/server.log"
	exit 1
fi
echo "all pgaudit checks passed"

#!/usr/bin/env bash
# test/shell/planner.sh — the planner never takes a table of pqrun (job_live,
# job_done's partitions) for empty, whatever its statistics say
# (src/pg/plan_size.hpp).
#
# Reproduction on 0.22.0: job_live VACUUM ANALYZEd while empty (a drained
# queue, a fresh install: relpages 0, reltuples 0) made every plan built
# then a sequential scan at cost 0, and pqrun keeps its statements' generic
# plans: in the W7 benchmark (64 waiting workers, job_live analyzed empty
# before each cell) every look that found fewer jobs than it asked for read
# all of job_live ("pick due"), and so did the SQL finish's DELETE by id, as
# churn grew the table to hundreds of pages.
#
# Here, in a database of its own on the running test server: job_live
# analyzed empty, then the plans of statements of the shapes pqrun runs (by
# id, the generic plan of a prepared DELETE by id, the delayed jobs that
# fell due) use their indexes, while a table of the same shape outside pqrun
# keeps PostgreSQL's plan (a sequential scan: it is empty); job_done's
# partitions analyzed empty or small are read by their indexes. Then 2,000
# jobs are enqueued and claimed, and a session whose generic plans were
# made before finishes them: seq_tup_read of job_live does not move.
set -uo pipefail
: "${PGHOST:?PGHOST must point at the test server}" "${PGPORT:?}" "${PGUSER:?}"

db=pqrun_planner_$$
source "$(dirname "$0")/../lib/checks.sh"
trap 'dropdb --if-exists --force "$db" 2>/dev/null' EXIT
createdb "$db" || exit 1
q -c "SET client_min_messages = warning" -c "CREATE EXTENSION pqrun" \
	-c "CREATE TABLE other (LIKE pqrun.job_live INCLUDING INDEXES)" >/dev/null || exit 1
q -c "VACUUM ANALYZE pqrun.job_live" -c "VACUUM ANALYZE other" >/dev/null

check "job_live and the other table are empty by their statistics" "0 0|0 0" \
	"SELECT string_agg(relpages || ' ' || reltuples, '|' ORDER BY relname) FROM pg_class
	  WHERE oid IN ('pqrun.job_live'::regclass, 'other'::regclass)"
# plan SQL...: the scan nodes of the plan of the last statement, one line.
plan() {
	q "$@" | grep -oE "(Seq Scan|Index Scan|Index Only Scan|Bitmap Heap Scan)( using [a-z_]+)? on [a-z_]+" | paste -sd ','
}
# by_index PLAN: "index" for a plan of index scans only, else the plan.
by_index() {
	case $1 in *"Seq Scan"* | "") echo "${1:-no plan}" ;; *) echo index ;; esac
}
check "a job by id: an index" index \
	"SELECT '$(by_index "$(plan -c "EXPLAIN (COSTS OFF) SELECT payload FROM pqrun.job_live WHERE id = 42")")'"
check "the generic plan of a DELETE by id: an index" index \
	"SELECT '$(by_index "$(plan -c "PREPARE d(bigint) AS DELETE FROM pqrun.job_live WHERE id = \$1 AND status = 'RUNNING'" \
		-c "SET plan_cache_mode = force_generic_plan" -c "EXPLAIN (COSTS OFF) EXECUTE d(1)")")'"
check "delayed jobs that fell due: an index" index \
	"SELECT '$(by_index "$(plan -c "EXPLAIN (COSTS OFF) SELECT id FROM pqrun.job_live WHERE delayed AND run_after <= now()
	                                   ORDER BY run_after LIMIT 8 FOR UPDATE SKIP LOCKED")")'"
check "a table outside pqrun keeps PostgreSQL's plan" "Seq Scan on other" \
	"SELECT '$(plan -c "EXPLAIN (COSTS OFF) SELECT payload FROM other WHERE id = 42")'"

# job_done's partitions analyzed (the default one empty, the day's with 7
# rows), then 7 more jobs finished: a finished job by id is read by the
# partitions' indexes (scans.sh on PostgreSQL 17, where VACUUM ANALYZE left
# the day's partition at reltuples 0: a cancel, a retry and the maintenance
# rounds read its few rows by sequential scans; here, on 0.22.0's
# a9760c0, the empty default partition is read so).
# (Enqueued before a maintenance round, which makes the partitions from
# today on once there is a job: jobs finished before it go to the default
# one.)
q -c "SELECT count(*) FROM pqrun.enqueue_batch((SELECT jsonb_agg(jsonb_build_object('job_type', 'f')) FROM generate_series(1, 14)))" \
	-c "SELECT pqrun.run_maintenance()" \
	-c "SELECT count(pqrun.mark_done(id)) FROM pqrun.pickup('f', job_types => '{f}', batch_size => 7)" >/dev/null
q -c "SELECT format('ANALYZE %s;', oid::regclass) FROM pg_class
        WHERE oid IN (SELECT relid FROM pg_partition_tree('pqrun.job_done')) AND relkind = 'r'" | q -f - >/dev/null
q -c "SELECT count(pqrun.mark_done(id)) FROM pqrun.pickup('f', job_types => '{f}', batch_size => 7)" >/dev/null
check "the finished jobs' partition: 7 rows by its statistics, 14 in it" "1 7 14" \
	"SELECT string_agg(relpages || ' ' || reltuples || ' ' || n, ', ') FROM pg_class
	   JOIN (SELECT tableoid, count(*) n FROM pqrun.job_done GROUP BY 1) d ON d.tableoid = pg_class.oid"
check "a finished job by id: indexes" index \
	"SELECT '$(by_index "$(plan -c "EXPLAIN (COSTS OFF) SELECT payload FROM pqrun.job_done WHERE id = 3")")'"

# One session makes its plans while job_live is empty by its statistics
# (six calls of each kind, a generic plan from the sixth: they find
# nothing), then enqueues 2,000 jobs, claims and finishes them: its
# statements do not read job_live by a sequential scan.
seq_read() {
	q -c "SELECT pg_stat_force_next_flush()" >/dev/null 2>&1
	q -c "SELECT seq_tup_read FROM pg_stat_user_tables WHERE relid = 'pqrun.job_live'::regclass"
}
before=$(seq_read)
{
	for i in $(seq 1 6); do
		echo "SELECT pqrun.mark_done(-$i);"
		echo "SELECT count(*) FROM pqrun.pickup('p', batch_size => 10);"
	done
	echo "SELECT count(*) FROM pqrun.enqueue_batch((SELECT jsonb_agg(jsonb_build_object('job_type', 'p')) FROM generate_series(1, 2000)));"
	echo "CREATE TEMP TABLE claimed AS SELECT id FROM pqrun.pickup('p', batch_size => 2000);"
	echo "SELECT count(pqrun.mark_done(id)) FROM claimed;"
} | psql -X -qtA -d "$db" >/dev/null 2>&1
after=$(seq_read)
check "2,000 jobs claimed and finished without reading job_live by a sequential scan" "0 0" \
	"SELECT ($after - $before) || ' ' || count(*) FROM pqrun.job_live"

echo "total: $violations violation(s)"
[ "$violations" = 0 ]

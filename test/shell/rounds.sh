#!/usr/bin/env bash
# test/shell/rounds.sh — a maintenance round looks at a window of 1,000
# RUNNING jobs, in turn, and still finds every stale and orphaned one
# (0.19.0): before, each round (and reap_stale) read every RUNNING job, so
# that a fleet's running jobs cost every round of every database; so with
# BLOCKED jobs and dependency edges.
#
#   1. 2,500 jobs RUNNING under their lease: reap_stale('0 s') reaps at most
#      1,000 a call, going on where the last call or round stopped, and all
#      of them within a few calls.
#   2. 2,500 jobs claimed under pqrun.claim_hold = session by a session that
#      then exits: the workers' rounds put every one back within a few
#      seconds (1,000 a round).
#   3. 2,500 BLOCKED jobs whose dependency is gone without telling them (a
#      manual DELETE of their edges): the rounds release every one.
#   4. 2,500 edges to a dependency that finished without releasing them:
#      the rounds, which look at 1,000 edges each, release every job.
#
# Runs against the already running test server (test/run.sh exports PGHOST,
# PGPORT, PGUSER) in a database of its own.
# test/run.sh: beside the others
set -uo pipefail

export PGHOST=${PGHOST:?PGHOST must point at the running test server} PGPORT=${PGPORT:-5432} PGUSER=${PGUSER:-postgres}
db=pqrun_rounds_$$
source "$(dirname "$0")/../lib/checks.sh"
trap 'psql -X -q -d postgres -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null' EXIT
createdb "$db" || exit 1
q -c "SET client_min_messages = warning" -c "CREATE EXTENSION pqrun" >/dev/null || exit 1
fill() { q -c "SELECT count(*) FROM pqrun.enqueue_batch((SELECT jsonb_agg(jsonb_build_object('job_type', '$1')) FROM generate_series(1, $2)))" >/dev/null; }

echo "-- 1. reap_stale, a window a call"
fill lease 2500
q -c "SELECT count(*) FROM pqrun.pickup('w', ARRAY['lease'], batch_size => 2500)" >/dev/null
calls=""
for i in 1 2 3 4 5 6; do
	calls+="$(q -c "SELECT pqrun.reap_stale('0 s')") "
	[ "$(q -c "SELECT count(*) FROM pqrun.job_live WHERE job_type = 'lease' AND status = 'RUNNING'")" = 0 ] && break
done
assert "every call reaps at most 1,000 ($calls)" test "$(tr ' ' '\n' <<<"$calls" | sort -n | tail -n 1)" -le 1000
check "and all 2,500 are READY again within six calls" 2500 \
	"SELECT count(*) FROM pqrun.job_live WHERE job_type = 'lease' AND status = 'READY'"

echo "-- 2. orphan rescue by the workers' rounds"
fill orphan 2500
PGOPTIONS="-c pqrun.claim_hold=session" q -c "SELECT count(*) FROM pqrun.pickup('w', ARRAY['orphan'], batch_size => 2500)" >/dev/null
assert "the rounds put back all 2,500 jobs of the session that exited" wait_for 20 2500 \
	"SELECT count(*) FROM pqrun.job_live WHERE job_type = 'orphan' AND status = 'READY'"

echo "-- 3. the unblock backstop"
root=$(q -c "SELECT pqrun.enqueue('root')")
q -c "SELECT count(pqrun.enqueue('child', depends_on => ARRAY[$root]::bigint[])) FROM generate_series(1, 2500)" \
	-c "DELETE FROM pqrun.job_dep" >/dev/null
assert "the rounds release all 2,500 BLOCKED jobs" wait_for 20 2500 \
	"SELECT count(*) FROM pqrun.job_live WHERE job_type = 'child' AND status = 'READY'"

echo "-- 4. the backstop of edges whose dependency finished"
root=$(q -c "SELECT pqrun.enqueue('root2')")
q -c "SELECT count(pqrun.enqueue('grandchild', depends_on => ARRAY[$root]::bigint[])) FROM generate_series(1, 2500)" >/dev/null
# The edges out of the way while the dependency finishes, then back: as if
# its finish had not released them.
q -c "CREATE TABLE edges AS SELECT * FROM pqrun.job_dep WHERE dep_id = $root" -c "DELETE FROM pqrun.job_dep WHERE dep_id = $root" \
	-c "SELECT count(pqrun.mark_done(id)) FROM pqrun.pickup('w', ARRAY['root2'])" \
	-c "INSERT INTO pqrun.job_dep SELECT * FROM edges" >/dev/null
assert "the rounds release all 2,500 jobs whose dependency finished" wait_for 20 2500 \
	"SELECT count(*) FROM pqrun.job_live WHERE job_type = 'grandchild' AND status = 'READY'"

echo "$violations violation(s)"
[ "$violations" = 0 ]

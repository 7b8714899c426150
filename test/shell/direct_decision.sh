#!/usr/bin/env bash
# test/shell/direct_decision.sh — a job operation runs below the executor
# only where it provably does what the SQL statement would
# (direct_rows::GoDirect, the one place that decides); everywhere else the
# SQL path runs, enforces what the executor enforces and raises its
# documented SQLSTATE. Each check below failed before that decision existed:
#
#  - a column added to both tables with different types:
#      ALTER TABLE pqrun.job_live ADD COLUMN tenant bigint DEFAULT 42;
#      ALTER TABLE pqrun.job_done ADD COLUMN tenant text;
#      SELECT pqrun.enqueue('a'); SELECT pqrun.mark_done(id) FROM pqrun.pickup('w');
#    crashed the backend (signal 11: the direct finish copied the column by
#    name), and the server with it; a column only in job_done failed every
#    mark_done with XX000; a column in both, of one type, got job_live's value
#    from the direct finish and job_done's default from the SQL one;
#    and with them a job of max_attempts 1 whose worker died crashed the
#    maintenance worker at every round: the server restarted 73 times in
#    30 s (its orphan rescue finished the job below the executor);
#  - a domain's NOT NULL: CREATE DOMAIN tenant_t AS text NOT NULL; ALTER TABLE
#    pqrun.job_live ADD COLUMN tenant tenant_t; then enqueue stored NULL;
#  - a read-only transaction: BEGIN; pickup; SELECT
#    set_config('transaction_read_only', 'on', true); mark_done_batch(...)
#    committed the jobs as DONE instead of raising 25006;
#  - a published job_live without a replica identity: the direct finish
#    deleted its rows where the executor raises 55000;
#  - two-phase commit: PREPARE TRANSACTION after an enqueue failed with
#    0A000 (its NOTIFY), COMMIT PREPARED of a mark_done left
#    queue_stats.done one short, and woke no waiting pickup.
# It also shows that a maintenance round that fails (here a trigger that
# raises) is logged and retried without taking the server down, and that
# row security on pqrun's tables is ignored, alike on
# every path (docs/permissions.md: pqrun's functions run as the extension
# owner, a superuser).
#
# Runs against the cluster in PGHOST/PGPORT (it must preload pqrun and
# allow prepared transactions), in a database of its own that it drops at
# the end. Takes about 15 s.
set -uo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
: "${PGHOST:?PGHOST must point at a running cluster that preloads pqrun}"
: "${PGPORT:?}" "${PGUSER:=postgres}"
export PGUSER
db=pqrun_direct_decision
source "$repo/test/lib/checks.sh"
tmp=
cleanup() {
	psql -X -q -d "$db" -c "ROLLBACK PREPARED 'dd_enqueue'" >/dev/null 2>&1
	psql -X -q -d postgres -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null 2>&1
	psql -X -q -d postgres -c "DROP ROLE IF EXISTS dd_worker" >/dev/null 2>&1
	[ -z "$tmp" ] || rm -rf "$tmp"
}
trap cleanup EXIT
cleanup
tmp=$(mktemp -d /tmp/pqrun-direct-decision.XXXXXX)
psql -X -q -d postgres -c "CREATE DATABASE $db" >/dev/null || exit 1
q -c "CREATE EXTENSION pqrun" -c "CREATE ROLE dd_worker" -c "SELECT pqrun.grant_worker('dd_worker')" >/dev/null || exit 1

# sqlstate SQL...: the SQLSTATE the statements (one session, one line each,
# as psql reads a script) end with; "ok" when none.
sqlstate() {
	local out s
	out=$(for s in "$@"; do [[ "$s" == *'\gset' ]] && echo "$s" || echo "$s;"; done | psql -X -qtA -v ON_ERROR_STOP=1 -v VERBOSITY=sqlstate -d "$db" 2>&1 >/dev/null) &&
		{ echo ok; return; }
	grep -oE '(ERROR|FATAL|PANIC): +[0-9A-Z]{5}' <<<"$out" | head -n 1 | grep -oE '[0-9A-Z]{5}$' || echo "[$out]"
}
# The server log: test/run.sh's in PQRUN_WORK, else cluster_start's beside
# the socket in PGHOST. Without one the crash check would compare nothing
# with nothing, so the test stops here instead.
log=${PQRUN_WORK:+$PQRUN_WORK/server.log}
[ -n "$log" ] && [ -r "$log" ] || log=$PGHOST/server.log
[ -r "$log" ] || { echo "FAIL no server log to check for crashes (set PQRUN_WORK to the cluster's directory)"; exit 1; }
# crashes: how many processes the server log shows terminated by a signal;
# nothing (and false) when the log cannot be read.
crashes() { grep -cE "terminated by signal|server process .* was terminated" "$log" || [ $? = 1 ]; }
crashes_before=$(crashes)
[[ "$crashes_before" =~ ^[0-9]+$ ]] || { echo "FAIL cannot count the crashes in $log: [$crashes_before]"; exit 1; }

# writes API_CALLS: which of pqrun's writes ran as SQL statements (the SQL
# paths) while the calls ran, as auto_explain sees them in a session of
# their own: "Insert on job_live" and the like, sorted; empty when every
# write went below the executor. The promotion of delayed jobs that a
# pickup may run first (a statement of its own, never below the executor)
# is left out.
writes() {
	{
		echo "LOAD 'auto_explain';"
		echo "SET auto_explain.log_min_duration = 0; SET auto_explain.log_nested_statements = on;"
		echo "SET auto_explain.log_level = notice; SET client_min_messages = notice;"
		printf '%s\n' "$@"
	} | psql -X -qtA -v ON_ERROR_STOP=1 -d "$db" 2>&1 >/dev/null |
		awk '/^NOTICE:/ { if (plan !~ /SET delayed = false/) printf "%s", plan; plan = "" } { plan = plan $0 "\n" }
		     END { if (plan !~ /SET delayed = false/) printf "%s", plan }' |
		grep -oE "(Insert|Update|Delete) on (job_live|job_done)|LockRows" | sort -u | tr '\n' ' ' | sed 's/ $//'
}
path_calls=("SELECT pqrun.enqueue('path1');"
	"SELECT pqrun.enqueue_batch('[{\"job_type\": \"path2\"}, {\"job_type\": \"path2\"}]');"
	"SELECT id FROM pqrun.pickup('w', ARRAY['path1']) \\gset"
	"SELECT pqrun.mark_done(:id);"
	"SELECT pqrun.mark_done_batch(array_agg(id)) FROM pqrun.pickup('w', ARRAY['path2'], batch_size => 2);")
# Every PostgreSQL version must take the direct paths where they are
# allowed: a version difference that made the decision refuse them would
# leave the tests passing on the SQL paths alone.
echo "-- the direct paths run where they are allowed, the SQL paths where not"
# A finish goes below the executor into job_done's partition by time for
# now, which the workers make once job_done holds a job (0.12.0).
q -c "SELECT pqrun.enqueue('first')" -c "SELECT pqrun.mark_done(id) FROM pqrun.pickup('w', ARRAY['first'])" \
	-c "SELECT pqrun.run_maintenance()" >/dev/null
assert "enqueue, enqueue_batch, pickup, mark_done, mark_done_batch: no SQL write" [ -z "$(writes "${path_calls[@]}")" ]
check "... and the jobs are DONE" 3 "SELECT count(*) FROM pqrun.job_done WHERE job_type IN ('path1', 'path2') AND status = 'DONE'"
q -c "CREATE FUNCTION public.dd_noop() RETURNS trigger LANGUAGE plpgsql AS 'BEGIN RETURN NEW; END'" \
	-c "CREATE TRIGGER dd_noop BEFORE INSERT OR UPDATE ON pqrun.job_live FOR EACH ROW EXECUTE FUNCTION public.dd_noop()" \
	-c "CREATE TRIGGER dd_noop BEFORE INSERT ON pqrun.job_done FOR EACH ROW EXECUTE FUNCTION public.dd_noop()"
got=$(writes "${path_calls[@]}")
assert "with row triggers, all of them through SQL [$got]" \
	[ "$got" = "Delete on job_live Insert on job_done Insert on job_live LockRows Update on job_live" ]
check "... and the jobs are DONE" 6 "SELECT count(*) FROM pqrun.job_done WHERE job_type IN ('path1', 'path2') AND status = 'DONE'"
q -c "DROP TRIGGER dd_noop ON pqrun.job_live" -c "DROP TRIGGER dd_noop ON pqrun.job_done" -c "DROP FUNCTION public.dd_noop()"

echo "-- job_done's partitions by finish time (0.12.0): a finish writes to the one for now"
part_calls=("SELECT pqrun.enqueue('part');" "SELECT id FROM pqrun.pickup('w', ARRAY['part']) \\gset" "SELECT pqrun.mark_done(:id);")
q -c "SELECT pqrun.run_maintenance()" >/dev/null # job_done holds jobs: its partitions are made
assert "mark_done into a partition: no SQL write" [ -z "$(writes "${part_calls[@]}")" ]
leaf=$(q -c "SELECT tableoid::regclass FROM pqrun.job_done WHERE job_type = 'part'")
check "... into the partition for now, made by the round" t \
	"SELECT '$leaf' ~ '^pqrun\.job_done_[0-9]{8}_[0-9]{6}(_[0-9]{6})?$' AND '$leaf'::regclass IN (SELECT relid FROM pg_partition_tree('pqrun.job_done'))"
q -c "CREATE FUNCTION public.dd_noop() RETURNS trigger LANGUAGE plpgsql AS 'BEGIN RETURN NEW; END'" \
	-c "CREATE TRIGGER dd_noop BEFORE INSERT ON $leaf FOR EACH ROW EXECUTE FUNCTION public.dd_noop()" >/dev/null
got=$(writes "${part_calls[@]}")
assert "with a row trigger on that partition only, the finish through SQL [$got]" \
	[ "$got" = "Delete on job_live Insert on job_done" ]
q -c "DROP TRIGGER dd_noop ON $leaf" -c "DROP FUNCTION public.dd_noop()" \
	-c "ALTER TABLE $leaf ADD CONSTRAINT dd_refuse CHECK (job_type <> 'refused')" >/dev/null
assert "a CHECK constraint of the partition alone is enforced below the executor (23514)" [ "$(sqlstate \
	"SELECT pqrun.enqueue('refused')" "SELECT id FROM pqrun.pickup('w', ARRAY['refused']) \gset" "SELECT pqrun.mark_done(:id)")" = 23514 ]
# Its session has ended: the next round may rescue it as an orphan
# already, but nothing may have finished it.
check "... and the job is not finished (RUNNING, or READY as an orphan)" t \
	"SELECT status = 'RUNNING' OR (status = 'READY' AND last_error LIKE 'orphaned%') FROM pqrun.jobs WHERE job_type = 'refused'"
# (Cancelled: orphan rescue may have put it back since its session ended.)
q -c "ALTER TABLE $leaf DROP CONSTRAINT dd_refuse" -c "SELECT pqrun.cancel(id) FROM pqrun.jobs WHERE job_type = 'refused'" >/dev/null
# Detached, the partition keeps its name, so the workers cannot make it
# again until it is dropped: finishes go to job_done_default meanwhile.
q -c "ALTER TABLE pqrun.job_done DETACH PARTITION $leaf" >/dev/null
got=$(writes "${part_calls[@]}")
assert "into job_done_default through SQL (the executor checks its constraint again) [$got]" \
	[ "$got" = "Delete on job_live Insert on job_done" ]
q -c "DROP TABLE $leaf" -c "SELECT pqrun.run_maintenance()" >/dev/null
# (0.17.0: the jobs stay where they are, and the partition starts past them.)
check "the next round makes a partition for now again, starting past the jobs" t \
	"SELECT bool_and(tableoid = 'pqrun.job_done_default'::regclass)
	        AND max(finished_at) + interval '1 microsecond' =
	            (SELECT lo FROM pqrun._history_partitions() WHERE lo <= now() AND hi > now())
	   FROM pqrun.job_done WHERE job_type = 'part'"

echo "-- added columns of different types in job_live and job_done: no crash, job_done's own default"
q -c "ALTER TABLE pqrun.job_live ADD COLUMN tenant bigint DEFAULT 42" -c "ALTER TABLE pqrun.job_done ADD COLUMN tenant text"
check "enqueue" ok "SELECT CASE WHEN pqrun.enqueue('cols') > 0 THEN 'ok' END"
check "pickup and mark_done" 1 "SELECT count(pqrun.mark_done(id)) FROM pqrun.pickup('w', ARRAY['cols'])"
check "job_done.tenant is job_done's default" "DONE:" "SELECT status || ':' || coalesce(tenant, '') FROM pqrun.job_done WHERE job_type = 'cols'"
# With these columns a job of max_attempts 1 whose worker died crashed the
# maintenance worker at every round (73 server restarts in 30 s).
psql -X -qtA -d "$db" -c "SET pqrun.claim_hold = session" -c "SELECT pqrun.enqueue('died', max_attempts => 1)" -c "SELECT id FROM pqrun.pickup('w', ARRAY['died'])" >/dev/null
assert "orphan rescue fails the job of a worker that died" wait_for 15 "FAILED:orphaned" \
	"SELECT status || ':' || outcome FROM pqrun.job_done WHERE job_type = 'died'"
q -c "SELECT pqrun.enqueue('cols2') + pqrun.enqueue('cols2')" >/dev/null
check "batch in one statement" 2 \
	"SELECT pqrun.mark_done_batch(array_agg(id)) FROM pqrun.pickup('w', ARRAY['cols2'], batch_size => 2)"
q -c "ALTER TABLE pqrun.job_live DROP COLUMN tenant"
echo "-- a column only in job_done gets its default"
q -c "ALTER TABLE pqrun.job_done ALTER COLUMN tenant SET DEFAULT 'none'" -c "SELECT pqrun.enqueue('only_done')" \
	-c "SELECT pqrun.mark_done(id) FROM pqrun.pickup('w', ARRAY['only_done'])" >/dev/null
check "mark_done" "DONE:none" "SELECT status || ':' || tenant FROM pqrun.job_done WHERE job_type = 'only_done'"
echo "-- a column of the same type in both: the SQL path's result on every path"
q -c "ALTER TABLE pqrun.job_live ADD COLUMN tenant text DEFAULT 'live'"
q -c "SELECT pqrun.enqueue('same')" -c "SELECT pqrun.mark_done(id) FROM pqrun.pickup('w', ARRAY['same'])" \
	-c "SELECT pqrun.enqueue('same2')" -c "SELECT pqrun.mark_done_batch(array_agg(id)) FROM pqrun.pickup('w', ARRAY['same2'])" >/dev/null
check "mark_done" "none" "SELECT tenant FROM pqrun.job_done WHERE job_type = 'same'"
check "mark_done_batch after the pickup" "none" "SELECT tenant FROM pqrun.job_done WHERE job_type = 'same2'"
q -c "ALTER TABLE pqrun.job_live DROP COLUMN tenant" -c "ALTER TABLE pqrun.job_done DROP COLUMN tenant"

echo "-- a domain's NOT NULL on an added column: 23502, nothing stored"
q -c "CREATE DOMAIN tenant_t AS text NOT NULL" -c "ALTER TABLE pqrun.job_live ADD COLUMN tenant tenant_t"
assert "enqueue raises 23502" [ "$(sqlstate "SELECT pqrun.enqueue('dom')")" = 23502 ]
assert "enqueue_batch raises 23502" [ "$(sqlstate "SELECT pqrun.enqueue_batch('[{\"job_type\": \"dom\"}]')")" = 23502 ]
check "no job stored" 0 "SELECT count(*) FROM pqrun.job_live WHERE job_type = 'dom'"
q -c "ALTER TABLE pqrun.job_live DROP COLUMN tenant"

echo "-- a read-only transaction: 25006 from every finish, nothing finished"
q -c "SELECT pqrun.enqueue('ro')" -c "SELECT pqrun.enqueue('ro')" >/dev/null
assert "mark_done_batch after a pickup in the same transaction" [ "$(sqlstate "BEGIN" \
	"SELECT pqrun.mark_done_batch(array_agg(id)) FROM (SELECT id FROM pqrun.pickup('w', ARRAY['ro'])) p
	   WHERE set_config('transaction_read_only', 'on', true) = 'on'")" = 25006 ]
assert "mark_done_batch in a later statement" [ "$(sqlstate "BEGIN" \
	"SELECT id FROM pqrun.pickup('w', ARRAY['ro']) \gset" \
	"SELECT set_config('transaction_read_only', 'on', true)" "SELECT pqrun.mark_done_batch(ARRAY[:id]::bigint[])")" = 25006 ]
assert "mark_done of a running job" [ "$(sqlstate "SELECT id FROM pqrun.pickup('w', ARRAY['ro']) \gset" \
	"BEGIN READ ONLY" "SELECT pqrun.mark_done(:id)")" = 25006 ]
check "nothing finished" "0" "SELECT count(*) FROM pqrun.job_done WHERE job_type = 'ro'"
q -c "SELECT pqrun.cancel(id) FROM pqrun.job_live WHERE job_type = 'ro'" >/dev/null

echo "-- a publication of job_live without a replica identity: the executor's 55000"
q -c "SET client_min_messages = error" -c "ALTER TABLE pqrun.job_live REPLICA IDENTITY NOTHING" -c "CREATE PUBLICATION dd_pub FOR TABLE pqrun.job_live" \
	-c "SELECT pqrun.enqueue('pub')" >/dev/null
assert "mark_done_batch after the pickup raises 55000" \
	[ "$(sqlstate "SELECT pqrun.mark_done_batch(array_agg(id)) FROM pqrun.pickup('w', ARRAY['pub'])")" = 55000 ]
check "the job is still READY" READY "SELECT status FROM pqrun.job_live WHERE job_type = 'pub'"
q -c "DROP PUBLICATION dd_pub" -c "ALTER TABLE pqrun.job_live REPLICA IDENTITY DEFAULT" >/dev/null

echo "-- two-phase commit"
assert "PREPARE TRANSACTION after an enqueue, with pqrun.notify on" [ "$(sqlstate "SET pqrun.notify = on" "BEGIN" \
	"SELECT pqrun.enqueue('xa')" "PREPARE TRANSACTION 'dd_enqueue'" "COMMIT PREPARED 'dd_enqueue'")" = ok ]
q -c "SELECT pqrun.enqueue('xa')" >/dev/null
before=$(q -c "SELECT coalesce(sum(done), 0) FROM pqrun.queue_stats")
assert "PREPARE TRANSACTION after mark_done" [ "$(sqlstate "BEGIN" \
	"SELECT count(pqrun.mark_done(id)) FROM pqrun.pickup('w', ARRAY['xa'], batch_size => 2)" \
	"PREPARE TRANSACTION 'dd_enqueue'" "SELECT 1 FROM pqrun.queue_stats" "COMMIT PREPARED 'dd_enqueue'")" = ok ]
check "queue_stats.done counts the prepared transaction's jobs" "$((before + 2)):2" \
	"SELECT sum(done) || ':' || (SELECT count(*) FROM pqrun.job_done WHERE job_type = 'xa') FROM pqrun.queue_stats"
# The waiter must be asleep in the long poll before the enqueue: a pickup
# that failed or returned at once would otherwise pass as woken.
PGAPPNAME=dd_waiter psql -X -qtA -v ON_ERROR_STOP=1 -d "$db" -c "SELECT id FROM pqrun.pickup('w', ARRAY['xw'], wait => '10 s')" >"$tmp/waiter.out" 2>&1 &
waiter=$!
assert "a pickup waits for a job of type xw" wait_for 5 1 \
	"SELECT count(*) FROM pg_stat_activity WHERE application_name = 'dd_waiter' AND wait_event_type = 'Extension'"
t0=$(now_ms)
xw=$(q -c "BEGIN" -c "SELECT pqrun.enqueue('xw')" -c "PREPARE TRANSACTION 'dd_enqueue'" -c "COMMIT PREPARED 'dd_enqueue'")
wait "$waiter"
status=$?
ms=$(($(now_ms) - t0))
got=$(cat "$tmp/waiter.out")
assert "COMMIT PREPARED wakes a waiting pickup (${ms} ms)" [ "$ms" -lt 2000 ]
assert "... which returns the job enqueued, $xw [$got, exit status $status]" [ -n "$xw" -a "$status:$got" = "0:$xw" ]

echo "-- row security on pqrun's tables is ignored, alike on every path"
q -c "ALTER TABLE pqrun.job_live ENABLE ROW LEVEL SECURITY" -c "ALTER TABLE pqrun.job_live FORCE ROW LEVEL SECURITY" \
	-c "CREATE POLICY only_a ON pqrun.job_live USING (queue = 'a')" \
	-c "SELECT pqrun.enqueue('rls', queue => 'b')" >/dev/null
check "a worker picks a queue-b job" b "SET ROLE dd_worker; SELECT queue FROM pqrun.pickup('w', ARRAY['rls'])"
check "and enqueues into queue c" 1 "SET ROLE dd_worker; SELECT count(pqrun.enqueue('rls', queue => 'c'))"
q -c "DROP POLICY only_a ON pqrun.job_live" -c "ALTER TABLE pqrun.job_live NO FORCE ROW LEVEL SECURITY" \
	-c "ALTER TABLE pqrun.job_live DISABLE ROW LEVEL SECURITY" >/dev/null

echo "-- a failing maintenance round is logged and retried; the server stays up"
q -c "CREATE FUNCTION public.refuse() RETURNS trigger LANGUAGE plpgsql AS \$\$BEGIN RAISE EXCEPTION 'dd refuses'; END\$\$" \
	-c "CREATE TRIGGER refuse BEFORE INSERT ON pqrun.job_done FOR EACH ROW EXECUTE FUNCTION public.refuse()" >/dev/null
psql -X -qtA -d "$db" -c "SET pqrun.claim_hold = session" -c "SELECT pqrun.enqueue('died2', max_attempts => 1)" -c "SELECT id FROM pqrun.pickup('w', ARRAY['died2'])" >/dev/null
sleep 3
check "the job stays RUNNING while the rounds fail" RUNNING "SELECT status FROM pqrun.jobs WHERE job_type = 'died2'"
q -c "DROP TRIGGER refuse ON pqrun.job_done" -c "DROP FUNCTION public.refuse()" >/dev/null
assert "the next round fails it" wait_for 70 FAILED "SELECT status FROM pqrun.jobs WHERE job_type = 'died2'"
# stress.sh's look for a background worker's errors finds these.
assert "the failed rounds' errors name the maintenance worker in the server log" \
	grep -qE "\] pqrun (maintenance|launcher) +(ERROR|FATAL):.*dd refuses" "$log"
assert "no backend crashed" [ "$(crashes)" = "$crashes_before" ]
echo "direct_decision: $violations violations"
[ "$violations" = 0 ]

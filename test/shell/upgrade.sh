#!/usr/bin/env bash
# test/shell/upgrade.sh — ALTER EXTENSION pqrun UPDATE from every released
# version, with jobs, schedules and a running worker in flight.
#
# Runs against the already running test server (test/run.sh exports PGHOST,
# PGPORT, PGUSER) in databases of its own. For each released version V older
# than the default (the sources of the update scripts sql/pqrun--V--W.sql),
# installed as the repository's one base script and the updates up to V
# (CREATE EXTENSION ... VERSION of the base, ALTER EXTENSION ... UPDATE TO
# 'V'), never by a base script of V an older build left installed:
#   1. pqrun at version V; a worker and monitor role; jobs in every state
#      (DONE, FAILED, CANCELLED, READY, delayed, BLOCKED on a dependency,
#      FIFO-blocked, RUNNING held by a live session) and an interval
#      schedule. The library serves V's SQL when V is the release before
#      the current one: V's API makes the jobs, a session picks one up, and
#      the background worker fires the schedule every second. Any older V it
#      refuses: a call of V's API gets 55000 with the hint to update, the
#      maintenance worker waits (a WARNING in the server log, no schedule
#      fired), and the same jobs are written as rows (those the current
#      API makes in a database of its own, in the columns V has), the
#      running one held by a live session;
#   2. ALTER EXTENSION pqrun UPDATE while the maintenance worker is connected
#      and the RUNNING job's session is still alive;
#   3. nothing was lost: every job row, attempt and schedule is as before
#      (fingerprinted), and the catalog of the updated extension is the same
#      as a fresh CREATE EXTENSION of the new version (functions with their
#      arguments, security and settings, columns, indexes, constraints,
#      views, privileges, extension members, what pg_dump keeps);
#   4. it keeps working: the schedule goes on firing, the held job is
#      finished by its worker role through the new version's functions, the
#      dependent job is released, and the role granted under V can call what
#      the new version added or replaced (mark_done_batch, heartbeat with
#      progress, snooze, release, enqueue with a key and a weight).
# The jobs come from test/lib/jobs_in_every_state.sql.
# Mostly waits for the workers' rounds, in databases of its own:
# test/run.sh: beside the others
set -uo pipefail

export PGHOST=${PGHOST:?PGHOST must point at the running test server} PGPORT=${PGPORT:-5432} PGUSER=${PGUSER:-postgres}
repo=$(cd "$(dirname "$0")/../.." && pwd)
current=$(sed -n "s/^default_version[[:space:]]*=[[:space:]]*'\([^']*\)'.*/\1/p" "$repo/pqrun.control")
fresh=pqrun_upgrade_fresh_$$
role=pqrun_upgrade_worker_$$
holder_pid=

source "$(dirname "$0")/../lib/checks.sh"

cleanup() {
	[ -n "$holder_pid" ] && kill "$holder_pid" 2>/dev/null
	for d in $(psql -X -qtA -d postgres -c "SELECT datname FROM pg_database WHERE datname LIKE 'pqrun_upgrade_%_$$'"); do
		psql -X -q -d postgres -c "DROP DATABASE IF EXISTS $d WITH (FORCE)" >/dev/null
	done
	psql -X -q -d postgres -c "DROP ROLE IF EXISTS $role" >/dev/null 2>&1
}
trap cleanup EXIT

# The catalog of the extension in database $db, one line per fact.
catalog() {
	q <<'SQL'
WITH ext AS (SELECT oid FROM pg_extension WHERE extname = 'pqrun'),
-- job_done's partitions by time are data, made by the workers (and the
-- update's partition of the jobs finished before it), not the extension's.
data_parts AS (
	SELECT inhrelid AS oid FROM pg_inherits
	 WHERE inhparent = 'pqrun.job_done'::regclass AND inhrelid <> 'pqrun.job_done_default'::regclass
	UNION ALL
	SELECT indexrelid FROM pg_index WHERE indrelid IN (SELECT inhrelid FROM pg_inherits
	 WHERE inhparent = 'pqrun.job_done'::regclass AND inhrelid <> 'pqrun.job_done_default'::regclass)),
members AS (
	SELECT pg_describe_object(classid, objid, objsubid) AS fact FROM pg_depend, ext
	 WHERE refclassid = 'pg_extension'::regclass AND refobjid = ext.oid AND deptype = 'e'),
functions AS (
	SELECT format('%s -> %s %s secdef=%s config=%s volatile=%s strict=%s rows=%s acl=%s', p.oid::regprocedure,
	              pg_get_function_result(p.oid), pg_get_function_arguments(p.oid), p.prosecdef, p.proconfig,
	              p.provolatile, p.proisstrict, p.prorows, p.proacl)
	  FROM pg_proc p WHERE p.pronamespace = 'pqrun'::regnamespace),
columns AS (
	SELECT format('%s.%s %s notnull=%s default=%s', a.attrelid::regclass, a.attname,
	              format_type(a.atttypid, a.atttypmod), a.attnotnull, pg_get_expr(d.adbin, d.adrelid))
	  FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
	  LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
	 WHERE c.relnamespace = 'pqrun'::regnamespace AND a.attnum > 0 AND NOT a.attisdropped
	   AND c.oid NOT IN (SELECT oid FROM data_parts)),
relations AS (
	SELECT format('%s kind=%s acl=%s options=%s view=%s', c.oid::regclass, c.relkind, c.relacl, c.reloptions,
	              CASE WHEN c.relkind = 'v' THEN pg_get_viewdef(c.oid) END)
	  FROM pg_class c WHERE c.relnamespace = 'pqrun'::regnamespace AND c.oid NOT IN (SELECT oid FROM data_parts)),
indexes AS (
	SELECT pg_get_indexdef(i.indexrelid) FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid
	 WHERE c.relnamespace = 'pqrun'::regnamespace AND c.oid NOT IN (SELECT oid FROM data_parts)),
constraints AS (
	SELECT format('%s %s %s', conrelid::regclass, conname, pg_get_constraintdef(oid)) FROM pg_constraint
	 WHERE connamespace = 'pqrun'::regnamespace AND conrelid NOT IN (SELECT oid FROM data_parts)),
triggers AS (
	SELECT pg_get_triggerdef(t.oid) FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
	 WHERE c.relnamespace = 'pqrun'::regnamespace AND NOT t.tgisinternal AND c.oid NOT IN (SELECT oid FROM data_parts)),
types AS (
	SELECT format('%s %s', enumtypid::regtype, string_agg(enumlabel, ',' ORDER BY enumsortorder)) FROM pg_enum
	 WHERE enumtypid::regtype::text LIKE 'pqrun.%' GROUP BY enumtypid),
dumped AS (
	SELECT format('pg_dump keeps %s %s', c.rel::regclass, c.cond)
	  FROM pg_extension e, unnest(e.extconfig, e.extcondition) AS c(rel, cond) WHERE e.extname = 'pqrun')
SELECT fact FROM (SELECT fact FROM members UNION ALL TABLE functions UNION ALL TABLE columns
                  UNION ALL TABLE relations UNION ALL TABLE indexes UNION ALL TABLE constraints UNION ALL TABLE triggers
                  UNION ALL TABLE types UNION ALL TABLE dumped) AS f(fact)
 ORDER BY 1;
SQL
}

# Everything that must survive the update untouched.
contents() { q -f "$repo/test/lib/queue_contents.sql"; }
# fingerprinted CONTENTS: CONTENTS has the shape of contents' four lines for
# these jobs (an md5 sum of the jobs, one of the attempts, the schedule, the
# edge of job 7 to job 6): a query that failed prints less, and two empty
# answers would compare equal.
fingerprinted() { [[ "$1" =~ ^[0-9a-f]{32}$'\n'[0-9a-f]{32}$'\n'tick/[^$'\n']+$'\n'7\>6$ ]]; }

psql -X -q -d postgres -c "CREATE ROLE $role LOGIN" || exit 1
db=$fresh
createdb "$fresh" || exit 1
q -c "SET client_min_messages = warning; CREATE EXTENSION pqrun" -c "SELECT pqrun.grant_worker('$role')" \
	-c "SELECT pqrun.grant_monitor('$role')" >/dev/null || exit 1
catalog >"/tmp/pqrun-upgrade-fresh-$$.txt"

released=$(cd "$repo/sql" && ls pqrun--*--*.sql | sed -n 's/^pqrun--\([0-9.]*\)--[0-9.]*\.sql$/\1/p' | sort -uV)
[ -n "$released" ] || { echo "FAIL: no released version to update from (sql/pqrun--<version>--<next>.sql)"; exit 1; }
base=$(head -n 1 <<<"$released") # the oldest, the only one with a base script
# The release before the current one: the oldest whose SQL the library serves.
previous=$(cd "$repo/sql" && ls pqrun--*--"$current".sql | sed -n 's/^pqrun--\([0-9.]*\)--.*$/\1/p')
[ "$previous" = "$(tail -n 1 <<<"$released")" ] || { echo "FAIL: the update to $current starts from [$previous]"; exit 1; }
log=${PQRUN_WORK:+$PQRUN_WORK/server.log}
[ -n "$log" ] && [ -r "$log" ] || log=$PGHOST/server.log

# The jobs of jobs_in_every_state.sql as the current API makes them, as JSON
# (job_live, job_done, attempt_log, job_dep, periodic), for the versions
# whose API the library refuses: each takes the columns it has (no release
# dropped or renamed one).
db=pqrun_upgrade_rows_$$
createdb "$db" || exit 1
q -c "SET client_min_messages = warning; CREATE EXTENSION pqrun" -f "$repo/test/lib/jobs_in_every_state.sql" >/dev/null ||
	exit 1
rows=$(q -c "SELECT jsonb_build_object(
	'job_live', (SELECT jsonb_agg(to_jsonb(t) ORDER BY id) FROM pqrun.job_live t WHERE job_type <> 'tick'),
	'job_done', (SELECT jsonb_agg(to_jsonb(t) ORDER BY id) FROM pqrun.job_done t WHERE job_type <> 'tick'),
	'attempt_log', (SELECT jsonb_agg(to_jsonb(t)) FROM pqrun.attempt_log t),
	'job_dep', (SELECT jsonb_agg(to_jsonb(t)) FROM pqrun.job_dep t),
	'periodic', (SELECT jsonb_agg(to_jsonb(t) - '{last_run,last_job_id}'::text[]) FROM pqrun.periodic t))")
psql -X -q -d postgres -c "DROP DATABASE $db WITH (FORCE)" >/dev/null
# write_rows: those jobs into $db, whatever version is installed there (the
# 7 unfinished jobs, the 3 finished, and the schedule).
write_rows() {
	local table
	for table in job_live job_done attempt_log job_dep periodic; do
		q -v rows="$rows" >/dev/null <<<"INSERT INTO pqrun.$table SELECT * FROM
			jsonb_populate_recordset(NULL::pqrun.$table, (:'rows')::jsonb -> '$table')" || return 1
	done
	q -c "SELECT setval('pqrun.job_id_seq', 10)" -c "UPDATE pqrun.periodic SET next_run = now()" >/dev/null || return 1
	check "the jobs written as rows" "7 3 1" \
		"SELECT (SELECT count(*) FROM pqrun.job_live) || ' ' || (SELECT count(*) FROM pqrun.job_done)
		        || ' ' || (SELECT count(*) FROM pqrun.periodic)"
}
# install_version V: pqrun at version V in $db, from the base script.
install_version() {
	q -c "SET client_min_messages = warning; CREATE EXTENSION pqrun VERSION '$base'" || return 1
	[ "$1" = "$base" ] || q -c "SET client_min_messages = warning; ALTER EXTENSION pqrun UPDATE TO '$1'"
}

# upgrade_from V: the update from V, in a database of its own; exits with its
# number of violations.
upgrade_from() {
	local from=$1
	db=pqrun_upgrade_${from//./_}_$$
	echo "== $from -> $current in $db"
	createdb "$db" || exit 1
	install_version "$from" || exit 1
	check "installed version" "$from" "SELECT extversion FROM pg_extension WHERE extname = 'pqrun'"
	q -c "SELECT pqrun.grant_worker('$role')" -c "SELECT pqrun.grant_monitor('$role')" >/dev/null || exit 1
	if [ "$from" = "$previous" ]; then
		q -f "$repo/test/lib/jobs_in_every_state.sql" >/dev/null || exit 1
		# Job 6 is picked up by a session that stays alive through the
		# update, so orphan rescue leaves it RUNNING.
		psql -X -qtA -d "$db" -c "SELECT id FROM pqrun.pickup('holder', job_types => ARRAY['held'])" \
			-c "SELECT pg_sleep(60)" >/dev/null 2>&1 &
		holder_pid=$!
		wait_for 10 RUNNING "SELECT status FROM pqrun.jobs WHERE id = 6" || violations=$((violations + 1))
		wait_for 10 t "SELECT count(*) >= 2 FROM pqrun.jobs WHERE job_type = 'tick'" || violations=$((violations + 1))
	else
		refused=$(q -v VERBOSITY=verbose -c "SELECT pqrun.enqueue('refused')" 2>&1)
		assert "the library refuses $from's API with 55000 and the hint to update [$(head -n 1 <<<"$refused")]" \
			grep -qzE "ERROR:  55000: pqrun's SQL objects in database \"$db\" are at version $from; this library \($current\) serves $previous and $current.*HINT:  Run ALTER EXTENSION pqrun UPDATE in this database" <<<"$refused"
		write_rows || exit 1
		# Job 6 is held by a session that stays alive through the update,
		# so orphan rescue leaves it RUNNING.
		psql -X -qtA -d "$db" -c "SELECT pg_sleep(60) /* holder */" >/dev/null 2>&1 &
		holder_pid=$!
		wait_for 10 1 "SELECT count(*) FROM pg_stat_activity WHERE query LIKE '%/* holder */' AND datname = current_database()" ||
			violations=$((violations + 1))
		q -c "UPDATE pqrun.job_live SET status = 'RUNNING', attempts = attempts + 1, locked_at = now(), heartbeat_at = now(),
		             locked_by = 'holder', lease_token = gen_random_uuid(),
		             holder_pid = (SELECT pid FROM pg_stat_activity WHERE query LIKE '%/* holder */' AND datname = current_database())
		       WHERE id = 6" >/dev/null || violations=$((violations + 1))
		assert "the maintenance worker waits for the update, with a WARNING" \
			wait_for 10 t "SELECT pg_read_file('$log') LIKE '%pqrun maintenance waits: pqrun''s SQL objects in database \"$db\" are at version $from;%'"
		sleep 2
		check "and fires no schedule meanwhile" 0 "SELECT count(*) FROM pqrun.jobs WHERE job_type = 'tick'"
	fi
	check "the maintenance worker is connected" 1 \
		"SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'pqrun maintenance' AND datname = current_database()"
	before=$(contents)
	assert "the fingerprints before the update [$(paste -sd' ' <<<"$before")]" fingerprinted "$before"

	q -c "ALTER EXTENSION pqrun UPDATE" || violations=$((violations + 1))
	upgraded_at=$(q -c "SELECT clock_timestamp()")
	check "updated version" "$current" "SELECT extversion FROM pg_extension WHERE extname = 'pqrun'"
	assert "jobs, attempts, schedules and edges are unchanged" [ "$(contents)" = "$before" ]
	catalog >"/tmp/pqrun-upgrade-$from-$$.txt"
	if diff -u "/tmp/pqrun-upgrade-fresh-$$.txt" "/tmp/pqrun-upgrade-$from-$$.txt" >"/tmp/pqrun-upgrade-diff-$$.txt"; then
		echo "ok   the catalog equals a fresh CREATE EXTENSION of $current"
	else
		echo "FAIL the catalog differs from a fresh CREATE EXTENSION of $current:"
		head -n 40 "/tmp/pqrun-upgrade-diff-$$.txt"
		violations=$((violations + 1))
	fi
	rm -f "/tmp/pqrun-upgrade-$from-$$.txt" "/tmp/pqrun-upgrade-diff-$$.txt"

	check "job 6 is still RUNNING for its holder" "RUNNING holder" "SELECT status || ' ' || locked_by FROM pqrun.jobs WHERE id = 6"
	assert "the schedule keeps firing after the update" \
		wait_for 10 t "SELECT count(*) >= 2 FROM pqrun.jobs WHERE job_type = 'tick' AND created_at > '$upgraded_at'"
	check "the worker role finishes job 6 with a function added by the update" 1 \
		"SET ROLE $role; SELECT pqrun.mark_done_batch(ARRAY[6::bigint])"
	check "the dependent is released" READY "SELECT status FROM pqrun.jobs WHERE id = 7"
	check "the worker role drains the rest" "4,7,8" \
		"SET ROLE $role; SELECT string_agg(id::text, ',' ORDER BY id) FROM pqrun.pickup('new', job_types => ARRAY['ready', 'dependent', 'fifo'], batch_size => 10)"
	assert "mark_done still fences by lease (55000)" \
		grep -q '^ERROR:  55000' <(q -v VERBOSITY=sqlstate -c "SELECT pqrun.mark_done(8, lease_token => gen_random_uuid())" 2>&1)
	check "mark_done_batch finishes a FIFO head" 3 "SELECT pqrun.mark_done_batch(ARRAY[4, 7, 8]::bigint[])"
	check "and releases its successor" READY "SELECT status FROM pqrun.jobs WHERE id = 9"
	check "the worker role reports progress, snoozes and releases (0.8.0's heartbeat, snooze, release)" \
		'READY 0 1 {"p": 1}' \
		"SET ROLE $role; DO \$\$BEGIN
		   PERFORM pqrun.pickup('new', job_types => ARRAY['fifo']); PERFORM pqrun.heartbeat(9, NULL, '{\"p\": 1}');
		   PERFORM pqrun.snooze(9, '0'); PERFORM pqrun.pickup('new', job_types => ARRAY['fifo']); PERFORM pqrun.release(9);
		 END\$\$; SELECT concat_ws(' ', status, attempts, snoozes, progress) FROM pqrun.jobs WHERE id = 9"
	check "the worker role enqueues with a key and a weight (0.10.0's and 0.11.0's enqueue)" "k 2" \
		"SET ROLE $role; DO \$\$BEGIN PERFORM pqrun.enqueue('keyed', queue => 'new', concurrency_key => 'k', rate_weight => 2); END\$\$;
		 SELECT concat_ws(' ', concurrency_key, rate_weight) FROM pqrun.jobs WHERE job_type = 'keyed'"
	kill "$holder_pid" 2>/dev/null
	holder_pid=
	psql -X -q -d postgres -c "DROP DATABASE $db WITH (FORCE)" >/dev/null
	exit $((violations > 255 ? 255 : violations))
}

# The updates run four at a time (each mostly waits for its schedule to
# fire), each database with its background worker; their reports in order.
pending=()
for from in $released; do
	(violations=0; upgrade_from "$from") >"/tmp/pqrun-upgrade-log-$from-$$.txt" 2>&1 &
	pending+=("$from:$!")
	[ ${#pending[@]} -lt 4 ] && [ "$from" != "$(tail -n 1 <<<"$released")" ] && continue
	for entry in "${pending[@]}"; do
		wait "${entry##*:}"
		violations=$((violations + $?))
		cat "/tmp/pqrun-upgrade-log-${entry%:*}-$$.txt"
		rm -f "/tmp/pqrun-upgrade-log-${entry%:*}-$$.txt"
	done
	pending=()
done

# A session that prepared its statements before the update uses the new
# version's right after it, in the same connection: its heartbeat then
# records the session's start next to its process id (0.5.0), for a claim
# held by the session (pqrun.claim_hold).
newest=$(tail -n 1 <<<"$released")
db=pqrun_upgrade_session_$$
echo "== $newest -> $current in one session ($db)"
createdb "$db" || exit 1
install_version "$newest" >/dev/null && q -c "SELECT pqrun.enqueue('s')" >/dev/null || exit 1
answer=$(q -c "SET pqrun.claim_hold = session" -c "DO \$\$BEGIN PERFORM pqrun.pickup('w'); PERFORM pqrun.heartbeat(1); END\$\$" \
	-c "ALTER EXTENSION pqrun UPDATE" \
	-c "DO \$\$BEGIN PERFORM pqrun.heartbeat(1); END\$\$" \
	-c "SELECT holder_started = pqrun._backend_started() FROM pqrun.job_live WHERE id = 1" 2>&1)
assert "a session's heartbeat after its ALTER EXTENSION UPDATE records its start ($answer)" [ "$answer" = t ]

# A session that has read the installed version reads it again once another
# session has changed it (here to the base version, which the library does
# not serve), and refuses at its next call.
db=pqrun_upgrade_reread_$$
echo "== $current -> $base in another session ($db)"
createdb "$db" || exit 1
q -c "SET client_min_messages = warning; CREATE EXTENSION pqrun" >/dev/null || exit 1
answer=$(q -v VERBOSITY=sqlstate -c "SELECT pqrun.enqueue('a')" \
	-c "\\! psql -X -q -d $db -c 'DROP EXTENSION pqrun' -c 'SET client_min_messages = warning' -c \"CREATE EXTENSION pqrun VERSION '$base'\"" \
	-c "SELECT pqrun.enqueue('b')" 2>&1)
assert "a session refuses once another has installed $base [$(paste -sd' ' <<<"$answer")]" [ "$answer" = "1"$'\n'"ERROR:  55000" ]

# 0.12.0 partitions job_done by finish time: an install of 0.11.0 with a
# million finished jobs keeps every one of them, as the partition of what
# finished before the update, which retention then drops as a whole;
# finishes after the update go to the new partitions.
db=pqrun_upgrade_million_$$
echo "== 0.11.0 -> $current with 1,000,000 finished jobs ($db)"
createdb "$db" || exit 1
install_version 0.11.0 >/dev/null || exit 1
q -c "INSERT INTO pqrun.job_done (id, status, priority, attempts, max_attempts, run_after, finished_at, created_at,
                                  updated_at, queue, job_type, payload, outcome)
      SELECT g, CASE WHEN g % 10 = 0 THEN 'FAILED' ELSE 'DONE' END::pqrun.job_status, 0, 1, 5, now(),
             now() - g * interval '1 ms', now() - interval '1 day', now(), 'q', 'million', jsonb_build_object('n', g), 'done'
        FROM generate_series(1, 1000000) AS g" \
	-c "SELECT setval('pqrun.job_id_seq', 1000000)" >/dev/null || exit 1
fingerprint="SELECT count(*) || ' ' || sum(hashtext(to_jsonb(t)::text)) FROM pqrun.job_done t"
before=$(q -c "$fingerprint")
# (An empty table, or a query that failed, gives an empty fingerprint, which
# an empty one after the update would equal.)
assert "the fingerprint before the update counts 1,000,000 jobs [$before]" grep -qxE '1000000 -?[0-9]+' <<<"$before"
started=$(date +%s%N)
q -c "ALTER EXTENSION pqrun UPDATE" || violations=$((violations + 1))
echo "     (the update took $((($(date +%s%N) - started) / 1000000)) ms)"
check "every finished job is there, unchanged" "$before" "$fingerprint"
check "in the partition of what finished before the update" 1000000 "SELECT count(*) FROM pqrun.job_done_before_0_12"
check "found by id" FAILED "SELECT status FROM pqrun.jobs WHERE id = 999990"
q -c "SELECT pqrun.enqueue('after')" -c "SELECT pqrun.mark_done((SELECT id FROM pqrun.pickup('w')))" >/dev/null ||
	violations=$((violations + 1))
check "a finish after the update goes to a new partition" t \
	"SELECT tableoid <> 'pqrun.job_done_before_0_12'::regclass FROM pqrun.job_done WHERE job_type = 'after'"
# (Called again when a worker's round held job_done past the drop's lock_timeout.)
assert "retention drops the old partition as a whole" wait_for 20 "1000000 true" \
	"SELECT sum(jobs) || ' ' || (to_regclass('pqrun.job_done_before_0_12') IS NULL)
	   FROM pqrun._history_round(now(), '1 day', 0, now(), NULL)"
check "and only it" "1 after" "SELECT count(*) || ' ' || min(job_type) FROM pqrun.job_done"

echo "$violations violation(s)"
rm -f "/tmp/pqrun-upgrade-fresh-$$.txt"
[ $violations = 0 ]

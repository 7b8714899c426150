#!/usr/bin/env bash
# test/shell/search_path.sh — no statement pqrun runs with more rights than
# its caller can be hijacked through search_path (docs/permissions.md; the
# rule: every statement run with more rights than the caller — SECURITY
# DEFINER bodies, deferred writes, the maintenance worker, schedules — runs
# with search_path pinned to pg_catalog, pg_temp or with every operator and
# function schema-qualified, and never trusts the caller's or the database's
# settings).
#
# Runs against the cluster in PGHOST/PGPORT/PGUSER (it must preload pqrun, so
# that a maintenance worker runs in every database with the extension), as a
# superuser, in two databases and five roles of its own (pqrun_sp_*), dropped
# at the end. Takes about 10 s (about 20 s when shadows do run: the
# maintenance worker's rounds then call them thousands of times).
#
# 1. The two known attacks, as unprivileged roles, in database
#    pqrun_search_path_attack (owned by role pqrun_sp_dbo):
#    - a worker (grant_worker) that owns schema w plants w.+(int, int) and
#      w.=(bigint, bigint), sets search_path = w, pg_catalog and picks a job up
#      in SERIALIZABLE, and once more in READ COMMITTED with a trigger on
#      pqrun.job_live (put there by the superuser): the deferred claim is then
#      written by SQL as the extension's owner at commit / by the next read;
#    - the database's owner plants evil.+(bigint, int) and runs ALTER
#      DATABASE ... SET search_path = evil, pg_catalog; the maintenance worker
#      (the bootstrap superuser) takes the setting when it reconnects (the test
#      terminates it, as a restart would) and is given work.
#    Each planted function records current_user/session_user/backend type; it
#    must never have run as anyone but the role that planted it.
#
# 2. The class test, in database pqrun_search_path (owned by pqrun_sp_dbo):
#    the database owner plants, in schema sp_shadow, a shadow with the same
#    signature for every binary and prefix operator pg_catalog defines over the
#    types pqrun's tables and statements use (generated from pg_operator), and
#    for every pg_catalog function (not aggregate) whose name appears in
#    sql/pqrun.sql or in an SQL string of src/*.cpp. Each shadow logs
#    (what, current_user, session_user, backend type, application_name, the
#    PG_CONTEXT call stack; one row per distinct combination) into
#    sp_shadow.log and returns the real pg_catalog result, so pqrun behaves as
#    before. Aggregates (count, min, max, sum, avg, string_agg) and functions
#    plpgsql cannot wrap (VARIADIC "any", OUT parameters) are not shadowed;
#    the test prints which were skipped. sp_shadow comes first on the
#    database's search_path (ALTER DATABASE, before CREATE EXTENSION, so the
#    maintenance worker starts with it) and on the other roles' (ALTER ROLE
#    ... IN DATABASE); the extension owner's sessions get the database's. Then every API path runs as
#    a worker, a producer, a monitor, an operator role (grant_operator, and
#    the other operating functions) and the extension owner: enqueue (plain, dedupe, fifo,
#    depends_on, delayed), enqueue_batch, pickup (single, batch, waiting with
#    and without a job, with mark_done_batch in the same statement, claims
#    written at commit, by a read of pqrun.jobs, by a utility command, by
#    PREPARE TRANSACTION, in a rolled-back savepoint), mark_done,
#    mark_done_batch, mark_done_and_pickup, mark_error (retry and terminal), heartbeat (with
#    progress, waiting), release, snooze, fifo and
#    dependency release, CALL await_jobs, cancel, retry, purge, reap_stale,
#    run_maintenance, _fire_due_schedules, schedule/unschedule, cron_next,
#    pause_queue, resume_queue, set_concurrency_limit, set_rate_limit,
#    set_key_limit, set_key_rate_limit, CALL retry_jobs and cancel_jobs, keyed and weighted jobs picked from
#    their lanes under limits and rate limits per key,
#    and pickups under a full concurrency limit (every pickup of the default
#    queue goes through a generous limit and rate limit), metrics() and
#    every view — in READ COMMITTED, REPEATABLE READ and
#    SERIALIZABLE, with pqrun.deferred_claims on and off, without and with
#    triggers on job_live and job_done (which send everything through SQL).
#    Finally the maintenance worker gets work: a stale job, an orphaned job, a
#    delayed job falling due, a schedule firing every second, a stranded
#    BLOCKED job, a stranded dependency edge and a finished job past
#    retention; the test waits until all of it is done, so it cannot pass
#    because the worker did nothing.
#
# Fails when a shadow ran as a role other than the session's (client backend:
# current_user <> session_user) or in a background worker at all, or when an
# attack's function ran as a superuser. Shadows that ran inside pqrun's
# statements as the calling role itself (CALL await_jobs, which is not
# SECURITY DEFINER; the extension owner's own sessions) are listed as notes;
# PQRUN_SP_STRICT=1 makes them fail too. The caller sessions' own statements
# use no unqualified operator or function, so the log only shows pqrun's
# internals — except one deliberate "canary" per role kind, which proves the
# shadows and the log work and that the search_path settings took effect.
set -uo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
: "${PGHOST:?PGHOST must point at a running cluster that preloads pqrun}"
: "${PGPORT:?}" "${PGUSER:=postgres}"
export PGHOST PGPORT PGUSER
unset PGDATABASE PGOPTIONS PGAPPNAME

db=pqrun_search_path
adb=pqrun_search_path_attack
dbo=pqrun_sp_dbo
worker=pqrun_sp_worker
producer=pqrun_sp_producer
monitor=pqrun_sp_monitor
ops=pqrun_sp_ops
owner=$PGUSER
strict=${PQRUN_SP_STRICT:-0}
tmp=$(mktemp -d /tmp/pqrun-search-path.XXXXXX)
chmod 755 "$tmp"
pids=()
started=$SECONDS

# qc DB ...: a clean superuser session (sp_shadow is not on its path).
qc() {
	local d=$1
	shift
	PGOPTIONS="-c search_path=pg_catalog,public" psql -X -qtA -v ON_ERROR_STOP=1 -d "$d" "$@"
}

cleanup() {
	local p
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null
	local d g
	qc postgres -F ' ' -c "SELECT database, gid FROM pg_prepared_xacts WHERE gid LIKE 'pqrun_sp%'" 2>/dev/null |
		while read -r d g; do qc "$d" -c "ROLLBACK PREPARED '$g'" >/dev/null 2>&1; done
	{
		echo "DROP DATABASE IF EXISTS $db WITH (FORCE);"
		echo "DROP DATABASE IF EXISTS $adb WITH (FORCE);"
		for r in $worker $producer $monitor $ops $dbo; do echo "DROP ROLE IF EXISTS $r;"; done
	} | qc postgres >/dev/null 2>&1
	rm -rf "$tmp"
}
trap cleanup EXIT
cleanup
mkdir -p "$tmp" && chmod 755 "$tmp"

violations=0
fail() {
	echo "FAIL $*"
	violations=$((violations + 1))
}
ok() { echo "ok   $*"; }

# wait_for DB SECONDS EXPECTED SQL: poll (in a clean session) until SQL answers EXPECTED.
wait_for() {
	local d=$1 deadline=$((SECONDS + $2)) expected=$3 got=
	while [ $SECONDS -le $deadline ]; do
		got=$(qc "$d" -c "$4" 2>/dev/null)
		[ "$got" = "$expected" ] && return 0
		sleep 0.2
	done
	echo "     waited $2 s for [$4] = [$expected], last answer [$got]"
	return 1
}

# run_as ROLE DB NAME: run stdin as ROLE with the search_path ROLE gets from
# the database and its role settings; every error (of any kind) is a failure.
run_as() {
	local role=$1 d=$2 name=$3
	psql -X -qtA -U "$role" -d "$d" -v VERBOSITY=verbose >/dev/null 2>"$tmp/$name.err"
	local errors
	errors=$(grep -E "ERROR:|FATAL:|no rows returned|more than one row" "$tmp/$name.err")
	if [ -n "$errors" ]; then
		fail "session $name ($role) had errors:"
		head -n 8 <<<"$errors" | sed 's/^/       /'
	fi
}

worker_of() { echo "SELECT pid FROM pg_stat_activity WHERE backend_type = 'pqrun maintenance' AND datname = '$1'"; }

fingerprint=$(md5sum "$(pg_config --pkglibdir)/pqrun.so" 2>/dev/null | cut -c1-12)
echo "-- pqrun.so on disk: $fingerprint (a running server keeps the one it started with)"

##############################################################################
echo "-- roles and databases"
qc postgres >/dev/null <<SQL || exit 1
CREATE ROLE $dbo LOGIN;
CREATE ROLE $worker LOGIN;
CREATE ROLE $producer LOGIN;
CREATE ROLE $monitor LOGIN;
CREATE ROLE $ops LOGIN;
CREATE DATABASE $adb OWNER $dbo;
CREATE DATABASE $db OWNER $dbo;
SQL

##############################################################################
echo "-- attack 2 set up first (its maintenance worker needs seconds to come back): the database owner"
qc $adb >/dev/null <<SQL || exit 1
CREATE EXTENSION pqrun;
SELECT pqrun.grant_worker('$worker');
SQL
wait_for $adb 10 1 "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'pqrun maintenance' AND datname = '$adb'" ||
	fail "no maintenance worker in $adb"
# the database owner's side: a logging operator, and the database's search_path
psql -X -qtA -v ON_ERROR_STOP=1 -U $dbo -d $adb >/dev/null <<'SQL' || exit 1
CREATE SCHEMA evil;
GRANT USAGE ON SCHEMA evil TO PUBLIC;
CREATE TABLE evil.log (at timestamptz DEFAULT pg_catalog.clock_timestamp(), what text, cu name, su name,
                       cu_super boolean, btype text, ctx text);
GRANT INSERT ON evil.log TO PUBLIC;
CREATE FUNCTION evil.plus(a bigint, b int) RETURNS bigint LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE ctx text;
BEGIN
	GET DIAGNOSTICS ctx = PG_CONTEXT;
	INSERT INTO evil.log (what, cu, su, cu_super, btype, ctx)
	SELECT 'evil.+(bigint, integer)', current_user, session_user, r.rolsuper, a.backend_type, ctx
	  FROM pg_roles r LEFT JOIN pg_stat_activity a ON a.pid = pg_backend_pid() WHERE r.rolname = current_user;
	-- a real attacker: IF current_user is a superuser THEN ALTER ROLE <me> SUPERUSER
	RETURN a OPERATOR(pg_catalog.+) b;
END $$;
CREATE OPERATOR evil.+ (LEFTARG = bigint, RIGHTARG = int, FUNCTION = evil.plus);
SELECT pg_catalog.set_config('application_name', 'attack', false);
DO $$ BEGIN EXECUTE pg_catalog.format('ALTER DATABASE %I SET search_path = evil, pg_catalog', pg_catalog.current_database()); END $$;
SQL
attack2_set=$(qc postgres -c "SELECT clock_timestamp()")
# Work for its rounds: ids exist (the id check adds 1 to the sequence's
# last value), a delayed job that falls due, a schedule that fires every
# second, an orphaned job.
qc $adb >/dev/null <<'SQL' || exit 1
SELECT pqrun.enqueue('attack2-plain');
SELECT pqrun.enqueue('attack2-delayed', run_after => now() + interval '3 s');
SELECT pqrun.schedule('attack2-tick', 'attack2-tick', run_every => '1 second');
SQL
qc $adb -c "SET pqrun.claim_hold = session" -c "SELECT id FROM pqrun.pickup('attack2-orphan', job_types => '{attack2-plain}')" >/dev/null
# a restart of the server, or a crash of any backend, reconnects the worker too
qc postgres -c "SELECT pg_terminate_backend(pid) FROM ($(worker_of $adb)) w" >/dev/null

##############################################################################
echo "-- attack 1: a worker role that owns schema w"
qc $adb >/dev/null <<SQL || exit 1
CREATE SCHEMA w AUTHORIZATION $worker;
SELECT pqrun.enqueue('attack1') FROM generate_series(1, 3);
SQL
cat >"$tmp/attack1.sql" <<'SQL'
CREATE TABLE w.log (at timestamptz DEFAULT pg_catalog.clock_timestamp(), what text, cu name, su name,
                    cu_super boolean, btype text, ctx text);
GRANT INSERT ON w.log TO PUBLIC;
CREATE FUNCTION w.note(what text) RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE ctx text;
BEGIN
	GET DIAGNOSTICS ctx = PG_CONTEXT;
	INSERT INTO w.log (what, cu, su, cu_super, btype, ctx)
	SELECT what, current_user, session_user, r.rolsuper, a.backend_type, ctx
	  FROM pg_roles r LEFT JOIN pg_stat_activity a ON a.pid = pg_backend_pid() WHERE r.rolname = current_user;
	-- a real attacker: IF current_user is a superuser THEN ALTER ROLE <me> SUPERUSER
END $$;
CREATE FUNCTION w.plus(a int, b int) RETURNS int LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN PERFORM w.note('w.+(integer, integer)'); RETURN a OPERATOR(pg_catalog.+) b; END $$;
CREATE OPERATOR w.+ (LEFTARG = int, RIGHTARG = int, FUNCTION = w.plus);
CREATE FUNCTION w.eq(a bigint, b bigint) RETURNS boolean LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN PERFORM w.note('w.=(bigint, bigint)'); RETURN a OPERATOR(pg_catalog.=) b; END $$;
CREATE OPERATOR w.= (LEFTARG = bigint, RIGHTARG = bigint, FUNCTION = w.eq);
SET search_path = w, pg_catalog;
SET application_name = 'attack1 serializable';
BEGIN ISOLATION LEVEL SERIALIZABLE;
SELECT id FROM pqrun.pickup('w1', job_types => '{attack1}');
COMMIT;
SQL
run_as $worker $adb attack1 <"$tmp/attack1.sql"
qc $adb >/dev/null <<'SQL' || exit 1
CREATE FUNCTION public.sp_noop_trigger() RETURNS trigger LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp
AS $$ BEGIN RETURN NULL; END $$;
CREATE TRIGGER sp_noop AFTER INSERT OR UPDATE OR DELETE ON pqrun.job_live
	FOR EACH ROW EXECUTE FUNCTION public.sp_noop_trigger();
SQL
run_as $worker $adb attack1-trigger <<'SQL'
SET search_path = w, pg_catalog;
SET application_name = 'attack1 read committed, trigger on job_live';
BEGIN;
SELECT id FROM pqrun.pickup('w1', job_types => '{attack1}');
SELECT count(*) FROM pqrun.jobs;
COMMIT;
SQL
qc $adb -c "DROP TRIGGER sp_noop ON pqrun.job_live" >/dev/null
got=$(qc $adb -c "SELECT count(*) FROM pqrun.job_attempts WHERE worker_id = 'w1'")
[ "$got" = 2 ] && ok "attack 1: both pickups claimed a job" || fail "attack 1: $got attempts by w1, not 2: the attack did not run"

##############################################################################
echo "-- class test: shadows of pg_catalog's operators and functions, planted by the database owner"
# Function names pqrun's SQL calls: identifiers before "(" in the install
# script and in the string literals of the C++ sources; only those that name a
# pg_catalog function are used.
names=$({
	cat "$repo/sql/pqrun.sql" "$repo"/sql/pqrun/*/*.sql
	grep -rohE --include='*.[ch]pp' '"([^"\\]|\\.)*"' "$repo/src"
} | grep -oE '[A-Za-z_][A-Za-z0-9_]*[[:space:]]*\(' | sed -E 's/[[:space:]]*\($//' | tr 'A-Z' 'a-z' | sort -u | paste -sd, -)
# The C++ sources were read: clock_timestamp is called only there (the
# heartbeat).
case ",$names," in *,clock_timestamp,*) ;; *) fail "no function name read from the C++ sources under $repo/src"; exit 1 ;; esac

psql -X -qtA -v ON_ERROR_STOP=1 -U $dbo -d $db -v names="{$names}" >"$tmp/plant.out" 2>&1 <<'SQL' || { cat "$tmp/plant.out"; exit 1; }
SET search_path = pg_catalog, pg_temp;
CREATE SCHEMA sp_shadow;
GRANT USAGE ON SCHEMA sp_shadow TO PUBLIC;
CREATE TABLE sp_shadow.log (
	at      timestamptz DEFAULT pg_catalog.clock_timestamp(),
	what    text,    -- the shadow that ran
	cu      name,    -- current_user: whose rights it ran with
	su      name,    -- session_user: who is connected
	cu_super boolean,
	btype   text,    -- backend type (client backend, pqrun maintenance, ...)
	app     text,    -- application_name: the call path of the session
	ctx     text);   -- PG_CONTEXT: the statement it ran in
-- one row per shadow, roles, session kind, call path and call stack
CREATE UNIQUE INDEX ON sp_shadow.log (what, cu, su, btype, app, md5(ctx)) NULLS NOT DISTINCT;
GRANT INSERT ON sp_shadow.log TO PUBLIC;
CREATE FUNCTION sp_shadow.note(what text) RETURNS void LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
	ctx text;
	btype text := current_setting('sp_shadow.btype', true);
BEGIN
	GET DIAGNOSTICS ctx = PG_CONTEXT;
	IF btype IS NULL OR btype = '' THEN
		btype := (SELECT backend_type FROM pg_stat_activity WHERE pid = pg_backend_pid());
		PERFORM set_config('sp_shadow.btype', btype, false);
	END IF;
	INSERT INTO sp_shadow.log (what, cu, su, cu_super, btype, app, ctx)
	SELECT what, current_user, session_user, r.rolsuper, btype, current_setting('application_name'), ctx
	  FROM pg_roles r WHERE r.rolname = current_user
	ON CONFLICT DO NOTHING;
END $$;

CREATE TEMP TABLE skipped (what text, why text);
SELECT pg_catalog.set_config('sp.names', :'names', false) \g /dev/null
DO $do$
DECLARE
	-- the types of pqrun's columns, parameters and expressions, and the
	-- polymorphic ones that stand for its enum and arrays
	types regtype[] := '{int2,int4,int8,numeric,float4,float8,text,bool,timestamptz,timestamp,interval,date,
	                     jsonb,json,jsonpath,uuid,oid,name,char,tid,xid,record,
	                     anyenum,anyarray,anycompatiblearray,anycompatible,anyelement,anynonarray,anycompatiblenonarray,
	                     _int2,_int4,_int8,_text,_uuid,_jsonb,_timestamptz,_bool,_name,_oid,_float8,_numeric}';
	o record;
	f record;
	args text;
	call text;
	sig text;
	n_ops int := 0;
	n_funcs int := 0;
BEGIN
	FOR o IN SELECT oid, oprname, oprleft, oprright, oprresult FROM pg_operator
	          WHERE oprnamespace = 'pg_catalog'::regnamespace AND oprkind IN ('b', 'l') AND oprcode <> 0
	            AND (oprleft = 0 OR oprleft = ANY (types)) AND oprright = ANY (types)
	          ORDER BY oid
	LOOP
		sig := format('%s(%s%s)', o.oprname,
		              CASE WHEN o.oprleft = 0 THEN '' ELSE format_type(o.oprleft, NULL) || ', ' END,
		              format_type(o.oprright, NULL));
		BEGIN
			EXECUTE format($f$CREATE FUNCTION sp_shadow.op_%s(%s r %s) RETURNS %s LANGUAGE plpgsql VOLATILE
			                  SET search_path = pg_catalog, pg_temp
			                  AS $b$ BEGIN PERFORM sp_shadow.note(%L); RETURN %s OPERATOR(pg_catalog.%s) r; END $b$ $f$,
			               o.oid, CASE WHEN o.oprleft = 0 THEN '' ELSE 'l ' || format_type(o.oprleft, NULL) || ',' END,
			               format_type(o.oprright, NULL), format_type(o.oprresult, NULL),
			               'operator ' || sig, CASE WHEN o.oprleft = 0 THEN '' ELSE 'l' END, o.oprname);
			EXECUTE format('CREATE OPERATOR sp_shadow.%s (%s RIGHTARG = %s, FUNCTION = sp_shadow.op_%s)',
			               o.oprname,
			               CASE WHEN o.oprleft = 0 THEN '' ELSE 'LEFTARG = ' || format_type(o.oprleft, NULL) || ',' END,
			               format_type(o.oprright, NULL), o.oid);
			n_ops := n_ops + 1;
		EXCEPTION WHEN others THEN
			INSERT INTO skipped VALUES ('operator ' || sig, SQLERRM);
		END;
	END LOOP;

	FOR f IN SELECT p.oid, p.proname, p.proargtypes::oid[] AS argtypes, p.provariadic, p.proretset,
	                p.prorettype, p.proargmodes::text[] AS argmodes, pg_get_function_result(p.oid) AS result
	           FROM pg_proc p
	          WHERE p.pronamespace = 'pg_catalog'::regnamespace AND p.prokind = 'f'
	            AND p.proname = ANY (current_setting('sp.names')::text[])
	          ORDER BY p.oid
	LOOP
		sig := format('%s(%s)', f.proname,
		              (SELECT string_agg(format_type(t, NULL), ', ' ORDER BY i) FROM unnest(f.argtypes) WITH ORDINALITY AS a(t, i)));
		IF 'o' = ANY (f.argmodes) OR 't' = ANY (f.argmodes) THEN
			INSERT INTO skipped VALUES ('function ' || sig, 'has OUT parameters');
			CONTINUE;
		END IF;
		SELECT coalesce(string_agg(CASE WHEN f.provariadic <> 0 AND i = cardinality(f.argtypes) THEN 'VARIADIC ' ELSE '' END
		                           || 'a' || i || ' ' || format_type(t, NULL), ', ' ORDER BY i), ''),
		       coalesce(string_agg(CASE WHEN f.provariadic <> 0 AND i = cardinality(f.argtypes) THEN 'VARIADIC ' ELSE '' END
		                           || 'a' || i, ', ' ORDER BY i), '')
		  INTO args, call
		  FROM unnest(f.argtypes) WITH ORDINALITY AS a(t, i);
		BEGIN
			EXECUTE format($f$CREATE FUNCTION sp_shadow.%I(%s) RETURNS %s LANGUAGE plpgsql VOLATILE
			                  SET search_path = pg_catalog, pg_temp
			                  AS $b$ BEGIN PERFORM sp_shadow.note(%L); %s END $b$ $f$,
			               f.proname, args, f.result, 'function ' || sig,
			               CASE WHEN f.proretset THEN format('RETURN QUERY SELECT pg_catalog.%I(%s);', f.proname, call)
			                    WHEN f.prorettype = 'void'::regtype THEN format('PERFORM pg_catalog.%I(%s); RETURN;', f.proname, call)
			                    ELSE format('RETURN pg_catalog.%I(%s);', f.proname, call) END);
			n_funcs := n_funcs + 1;
		EXCEPTION WHEN others THEN
			INSERT INTO skipped VALUES ('function ' || sig, SQLERRM);
		END;
	END LOOP;
	RAISE NOTICE 'planted % operator and % function shadows', n_ops, n_funcs;
END $do$;
SELECT 'skipped ' || what || ': ' || why FROM skipped ORDER BY 1;
SQL
planted=$(grep -o 'planted .* shadows' "$tmp/plant.out")
echo "     $planted; skipped (plpgsql cannot take these argument types; pqrun calls them qualified):"
grep '^skipped ' "$tmp/plant.out" | sed 's/^skipped /       /'

# The search paths: the database's (set by its owner; the maintenance worker
# and the extension owner's sessions get it) and the roles'.
psql -X -qtA -v ON_ERROR_STOP=1 -U $dbo -d $db -c "ALTER DATABASE $db SET search_path = sp_shadow, pg_catalog, public" || exit 1
set_at=$(qc postgres -c "SELECT clock_timestamp()")
for r in $worker $producer $monitor $ops; do
	qc postgres -c "ALTER ROLE $r IN DATABASE $db SET search_path = sp_shadow, pg_catalog, public" || exit 1
done
qc $db >/dev/null <<SQL || exit 1
CREATE EXTENSION pqrun;
SELECT pqrun.grant_worker('$worker');
SELECT pqrun.grant_producer('$producer');
SELECT pqrun.grant_monitor('$monitor');
SELECT pqrun.grant_operator('$ops');
GRANT EXECUTE ON FUNCTION pqrun.reap_stale(interval), pqrun.run_maintenance(), pqrun.purge(interval, pqrun.job_status[]),
	pqrun.retry(bigint, text), pqrun.cancel(bigint, text, text),
	pqrun.enqueue(text, jsonb, int, timestamptz, int, int, text, text, bigint[], text, text, int),
	pqrun.schedule(text, text, text, interval, jsonb, int, text, text, boolean), pqrun.unschedule(text, text),
	pqrun.cron_next(text, timestamptz), pqrun.pause_queue(text), pqrun.resume_queue(text),
	pqrun.set_concurrency_limit(text, int, text), pqrun.set_rate_limit(text, double precision, int, text),
	pqrun.set_key_limit(text, int, text), pqrun.set_key_rate_limit(text, double precision, int, text) TO $ops;
-- Every pickup of the default queue goes through the flow controls.
SELECT pqrun.set_concurrency_limit('default', 1000);
SELECT pqrun.set_rate_limit('default', 1000000, 1000000);
SELECT pqrun.set_concurrency_limit('sp-lim', 1);
SELECT pqrun.set_key_limit('sp-keys', 1);
SELECT pqrun.set_key_limit('sp-keys', 2, 'b');
SELECT pqrun.set_key_rate_limit('sp-keys', 1000000, 1000000);
SELECT pqrun.set_key_rate_limit('sp-keys', 1000000, 1000000, 'c');
CREATE FUNCTION public.sp_noop_trigger() RETURNS trigger LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp
AS \$\$ BEGIN RETURN NULL; END \$\$;
SQL
# The maintenance worker must have connected after ALTER DATABASE (a probe of
# the database from before it would still have the old settings).
wait_for $db 10 1 "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'pqrun maintenance' AND datname = '$db'" ||
	fail "no maintenance worker in $db"
if [ "$(qc $db -c "SELECT bool_and(backend_start > '$set_at') FROM pg_stat_activity WHERE backend_type = 'pqrun maintenance' AND datname = '$db'")" != t ]; then
	qc postgres -c "SELECT pg_terminate_backend(pid) FROM ($(worker_of $db)) w" >/dev/null
	wait_for $db 15 t "SELECT bool_and(backend_start > '$set_at') FROM pg_stat_activity WHERE backend_type = 'pqrun maintenance' AND datname = '$db'" ||
		fail "the maintenance worker of $db did not reconnect"
fi

echo "-- canaries: a shadow runs for the sessions' own unqualified operators"
run_as $worker $db canary-worker <<'SQL'
SET application_name = 'canary';
SELECT 1 + 1;
SQL
run_as $owner $db canary-owner <<'SQL'
SET application_name = 'canary';
SELECT 1 + 1;
SQL
check_canary() {
	local got
	got=$(qc $db -c "SELECT count(*) FROM sp_shadow.log WHERE app = 'canary' AND su = '$1' AND cu = '$1' AND what = 'operator +(integer, integer)'")
	if [ "$got" = 1 ]; then ok "canary of $1 ($2)"; else fail "canary of $1 ($2): $got log rows, not 1"; fi
}
check_canary $worker "ALTER ROLE ... IN DATABASE ... SET search_path"
check_canary $owner "ALTER DATABASE ... SET search_path"

# pass TAG DC ISO: a worker's (and enqueuer's) whole round of calls, every
# statement free of unqualified operators and functions; application_name
# names the step, so the log tells which call path a shadow ran in.
pass() {
	local tag=$1 dc=$2 iso=$3 t=${1//[\/=]/_}
	cat <<SQL
SET pqrun.deferred_claims = $dc;
SET application_name = '$tag: enqueue';
BEGIN ISOLATION LEVEL $iso;
SELECT pqrun.enqueue('$t', '{"k": 1}') FROM pg_catalog.generate_series(1, 18);
SELECT pqrun.enqueue('$t', dedupe_key => '$t-dedupe');
SELECT pqrun.enqueue('$t', dedupe_key => '$t-dedupe');
SELECT pqrun.enqueue('$t-fifo', fifo_key => '$t-group') FROM pg_catalog.generate_series(1, 2);
SELECT pqrun.enqueue('$t-delayed', run_after => pg_catalog.now() OPERATOR(pg_catalog.+) interval '1 hour');
SELECT pqrun.enqueue('$t-parent') AS parent \gset
SELECT pqrun.enqueue('$t-child', depends_on => ARRAY[:parent]::bigint[], timeout_seconds => 60);
\\set batch '[{"job_type": "$t-b"}, {"job_type": "$t-b", "priority": 5}, {"job_type": "$t-b", "dedupe_key": "$t-bd"}, {"job_type": "$t-b", "fifo_key": "$t-bf"}, {"job_type": "$t-b", "depends_on": [' :parent ']}]'
SELECT count(*) FROM pqrun.enqueue_batch(:'batch');
COMMIT;
SET application_name = '$tag: pickup; write at commit';
BEGIN ISOLATION LEVEL $iso;
SELECT id AS j, lease_token AS l FROM pqrun.pickup('$t', job_types => '{$t}') \gset
COMMIT;
SET application_name = '$tag: heartbeat, mark_done';
BEGIN ISOLATION LEVEL $iso;
SELECT pqrun.heartbeat(:j, :'l');
SELECT pqrun.mark_done(:j, '{"ok": true}', :'l');
COMMIT;
SET application_name = '$tag: progress, release, snooze';
BEGIN ISOLATION LEVEL $iso;
SELECT id AS j, lease_token AS l FROM pqrun.pickup('$t', job_types => '{$t}') \gset
SELECT pqrun.heartbeat(:j, :'l', '{"step": 1}');
SELECT pqrun.release(:j, :'l');
SELECT id AS j, lease_token AS l FROM pqrun.pickup('$t', job_types => '{$t}') \gset
SELECT pqrun.snooze(:j, '0', :'l');
COMMIT;
SET application_name = '$tag: waiting heartbeat';
SELECT id AS j, lease_token AS l FROM pqrun.pickup('$t', job_types => '{$t}') \gset
SELECT pqrun.heartbeat(:j, :'l', NULL, '10 ms');
SELECT pqrun.release(:j, :'l');
SET application_name = '$tag: pickup; write by a read; mark_error';
BEGIN ISOLATION LEVEL $iso;
SELECT id AS j, lease_token AS l FROM pqrun.pickup('$t', job_types => '{$t}') \gset
SELECT count(*) FROM pqrun.jobs;
SELECT pqrun.mark_error(:j, 'boom', lease_token => :'l', retry_after => '0');
COMMIT;
SET application_name = '$tag: pickup; write by a utility; terminal';
BEGIN ISOLATION LEVEL $iso;
SELECT id AS j, lease_token AS l FROM pqrun.pickup('$t', job_types => '{$t}') \gset
SHOW application_name;
SELECT pqrun.mark_error(:j, 'fatal', terminal => true, lease_token => :'l');
COMMIT;
SET application_name = '$tag: pickup+mark_done_batch, 1 statement';
BEGIN ISOLATION LEVEL $iso;
SELECT pqrun.mark_done_batch(array_agg(id), array_agg(lease_token)) FROM pqrun.pickup('$t', job_types => '{$t}', batch_size => 3);
COMMIT;
SET application_name = '$tag: savepoint pickups; write at commit';
BEGIN ISOLATION LEVEL $iso;
SAVEPOINT s;
SELECT count(*) FROM pqrun.pickup('$t', job_types => '{$t}', batch_size => 2);
ROLLBACK TO SAVEPOINT s;
SELECT array_agg(id) AS ids, array_agg(lease_token) AS ls FROM pqrun.pickup('$t', job_types => '{$t}', batch_size => 2) \gset
SAVEPOINT s2;
SELECT count(*) FROM pqrun.jobs;
ROLLBACK TO SAVEPOINT s2;
COMMIT;
SET application_name = '$tag: mark_done_batch with leases';
BEGIN ISOLATION LEVEL $iso;
SELECT pqrun.mark_done_batch(:'ids', :'ls');
COMMIT;
SET application_name = '$tag: mark_done_and_pickup';
BEGIN ISOLATION LEVEL $iso;
SELECT coalesce(array_agg(id), '{}') AS ids, coalesce(array_agg(lease_token), '{}') AS ls
  FROM pqrun.pickup('$t', job_types => '{$t}', batch_size => 2) \gset
SELECT coalesce(array_agg(id), '{}') AS ids, coalesce(array_agg(lease_token), '{}') AS ls
  FROM pqrun.mark_done_and_pickup('$t', :'ids', :'ls', ARRAY(SELECT '{}'::jsonb FROM pg_catalog.unnest(:'ids'::bigint[])),
                                  job_types => '{$t}', batch_size => 2) \gset
SELECT pqrun.mark_done_batch(:'ids', :'ls');
COMMIT;
SET application_name = '$tag: pickup; mark_done_batch in the txn';
BEGIN ISOLATION LEVEL $iso;
SELECT array_agg(id) AS ids, array_agg(lease_token) AS ls FROM pqrun.pickup('$t', job_types => '{$t-b}', batch_size => 3) \gset
SELECT pqrun.mark_done_batch(:'ids', :'ls');
COMMIT;
SQL
	# a waiting pickup needs READ COMMITTED
	[ "$iso" = "READ COMMITTED" ] && cat <<SQL
SET application_name = '$tag: waiting pickup, none';
BEGIN ISOLATION LEVEL $iso;
SELECT count(*) FROM pqrun.pickup('$t', job_types => '{$t-none}', wait => '30 ms');
COMMIT;
SET application_name = '$tag: waiting pickup, a job';
BEGIN ISOLATION LEVEL $iso;
SELECT id AS j, lease_token AS l FROM pqrun.pickup('$t', job_types => '{$t}', wait => '2 s') \gset
COMMIT;
SELECT pqrun.mark_done(:j, lease_token => :'l');
SET application_name = '$tag: waiting pickup+mark_done_batch';
SELECT pqrun.mark_done_batch(array_agg(id), array_agg(lease_token)) FROM pqrun.pickup('$t', job_types => '{$t}', batch_size => 2, wait => '2 s');
SQL
	cat <<SQL
SET application_name = '$tag: pickup; PREPARE TRANSACTION';
BEGIN ISOLATION LEVEL $iso;
SELECT id AS j, lease_token AS l FROM pqrun.pickup('$t', job_types => '{$t}') \gset
PREPARE TRANSACTION 'pqrun_sp_$t';
COMMIT PREPARED 'pqrun_sp_$t';
SELECT pqrun.mark_done(:j, lease_token => :'l');
SET application_name = '$tag: fifo: done releases the next';
BEGIN ISOLATION LEVEL $iso;
SELECT id AS j, lease_token AS l FROM pqrun.pickup('$t', job_types => '{$t-fifo}') \gset
SELECT pqrun.mark_done(:j, lease_token => :'l');
COMMIT;
BEGIN ISOLATION LEVEL $iso;
SELECT id AS j, lease_token AS l FROM pqrun.pickup('$t', job_types => '{$t-fifo}') \gset
SELECT pqrun.mark_error(:j, 'fifo fails', terminal => true, lease_token => :'l');
COMMIT;
SET application_name = '$tag: parent done releases the child';
BEGIN ISOLATION LEVEL $iso;
SELECT id AS j, lease_token AS l FROM pqrun.pickup('$t', job_types => '{$t-parent}') \gset
SELECT pqrun.mark_done(:j, lease_token => :'l');
COMMIT;
BEGIN ISOLATION LEVEL $iso;
SELECT id AS j, lease_token AS l FROM pqrun.pickup('$t', job_types => '{$t-child}', queues => '{default}') \gset
SELECT pqrun.mark_done(:j, lease_token => :'l');
COMMIT;
SQL
}

# worker_extras TAG: CALL await_jobs (outside a transaction block), and
# pickups under a full concurrency limit (which recount its places).
worker_extras() {
	local t=${1//[\/=]/_}
	cat <<SQL
SET application_name = '$1: CALL await_jobs, none';
CALL pqrun.await_jobs(job_types => '{$t-none}', wait => '30 ms');
SET application_name = '$1: CALL await_jobs, a job';
CALL pqrun.await_jobs(job_types => '{$t}', queues => '{default}', wait => '1 s');
SET application_name = '$1: pickups under a full limit';
SELECT pqrun.enqueue('$t-lim', queue => 'sp-lim');
SELECT pqrun.enqueue('$t-lim', queue => 'sp-lim');
SELECT id AS j, lease_token AS l FROM pqrun.pickup('$t', queues => '{sp-lim}') \gset
SELECT count(*) FROM pqrun.pickup('$t', queues => '{sp-lim}');
CALL pqrun.await_jobs(queues => '{sp-lim}', wait => '30 ms');
SELECT pqrun.mark_done(:j, lease_token => :'l');
SELECT id AS j, lease_token AS l FROM pqrun.pickup('$t', queues => '{sp-lim}') \gset
SELECT pqrun.mark_done(:j, lease_token => :'l');
SET application_name = '$1: keyed jobs in their lanes, under limits per key';
SELECT pqrun.enqueue('$t-key', queue => 'sp-keys', concurrency_key => 'a');
SELECT pqrun.enqueue('$t-key', queue => 'sp-keys', concurrency_key => 'a');
SELECT pqrun.enqueue('$t-key', queue => 'sp-keys', concurrency_key => 'b');
SELECT pqrun.enqueue('$t-key', queue => 'sp-keys', concurrency_key => 'b');
SELECT pqrun.enqueue('$t-key', queue => 'sp-keys', concurrency_key => 'b');
SELECT count(*) FROM pqrun.enqueue_batch('[{"job_type": "$t-key", "queue": "sp-keys", "concurrency_key": "c", "rate_weight": 2}]');
SELECT pqrun.enqueue('$t-key', queue => 'sp-keys', concurrency_key => 'c', rate_weight => 3);
SELECT count(*) FROM pqrun.pickup('$t', queues => '{sp-keys}', batch_size => 10);
CALL pqrun.await_jobs(queues => '{sp-keys}', wait => '30 ms');
SELECT pqrun.mark_done(id) FROM pqrun.jobs WHERE queue OPERATOR(pg_catalog.=) 'sp-keys'
   AND locked_by OPERATOR(pg_catalog.=) '$t' AND status OPERATOR(pg_catalog.=) 'RUNNING';
SELECT count(*) FROM pqrun.pickup('$t', queues => '{sp-keys}', batch_size => 10);
SELECT pqrun.mark_done(id) FROM pqrun.jobs WHERE queue OPERATOR(pg_catalog.=) 'sp-keys'
   AND locked_by OPERATOR(pg_catalog.=) '$t' AND status OPERATOR(pg_catalog.=) 'RUNNING';
SQL
}

# operate TAG: the operating functions (owner, and a role granted them).
operate() {
	local tag=$1 t=${1//[\/= ]/_} iso
	for iso in "READ COMMITTED" "REPEATABLE READ" SERIALIZABLE; do
		cat <<SQL
SET application_name = '$tag $iso: cancel, retry';
BEGIN ISOLATION LEVEL $iso;
SELECT pqrun.enqueue('$t-op') AS j \gset
SELECT pqrun.cancel(:j, 'not needed');
SELECT pqrun.retry(:j);
SELECT pqrun.enqueue('$t-op-child', depends_on => ARRAY[:j]::bigint[]);
SELECT pqrun.cancel(:j);
COMMIT;
SET application_name = '$tag $iso: reap_stale, purge, run_maintenance';
BEGIN ISOLATION LEVEL $iso;
SELECT pqrun.reap_stale('20 minutes');
SELECT pqrun.purge('1 hour');
SELECT pqrun.purge('1 hour', '{FAILED}');
SELECT pqrun.run_maintenance();
COMMIT;
SQL
		[ "$tag" = owner ] && cat <<SQL
SET application_name = '$tag $iso: _fire_due_schedules';
BEGIN ISOLATION LEVEL $iso;
SELECT pqrun._fire_due_schedules();
COMMIT;
SQL
		cat <<SQL
SET application_name = '$tag $iso: flow control';
BEGIN ISOLATION LEVEL $iso;
SELECT pqrun.set_concurrency_limit('$t-q', 2);
SELECT pqrun.set_concurrency_limit('$t-q', 1, '$t-type');
SELECT pqrun.pause_queue('$t-q');
SELECT pqrun.resume_queue('$t-q');
SELECT pqrun.set_rate_limit('$t-q', 10, 2, '$t-type');
SELECT pqrun.set_rate_limit('$t-q', NULL, job_type => '$t-type');
SELECT pqrun.set_concurrency_limit('$t-q', NULL, '$t-type');
SELECT pqrun.set_concurrency_limit('$t-q', NULL);
SELECT pqrun.set_key_limit('$t-q', 2);
SELECT pqrun.set_key_limit('$t-q', 1, '$t-key');
SELECT pqrun.set_key_limit('$t-q', NULL, '$t-key');
SELECT pqrun.set_key_limit('$t-q', NULL);
SELECT pqrun.set_key_rate_limit('$t-q', 10, 2);
SELECT pqrun.set_key_rate_limit('$t-q', 5, 1, '$t-key');
SELECT pqrun.set_key_rate_limit('$t-q', NULL, 1, '$t-key');
SELECT pqrun.set_key_rate_limit('$t-q', NULL);
COMMIT;
SET application_name = '$tag $iso: schedule, unschedule, cron_next';
BEGIN ISOLATION LEVEL $iso;
SELECT pqrun.schedule('$t', '$t-cron', cron => '0 0 1 1 *');
SELECT pqrun.schedule('$t', '$t-cron', cron => '0 0 1 1 *');
SELECT pqrun.schedule('$t-every', '$t-every', run_every => '1 day', payload => '{"a": 1}', key => 'k');
SELECT pqrun.unschedule('$t');
SELECT pqrun.unschedule('$t-every', 'k');
SELECT pqrun.cron_next('*/5 * * * *');
COMMIT;
SQL
	done
	# The bulk actions commit batch by batch: at top level, as their caller.
	cat <<SQL
SET application_name = '$tag: retry_jobs, cancel_jobs';
SELECT pqrun.enqueue('$t-bulk', '{"b": 1}', queue => 'sp-bulk');
SELECT pqrun.enqueue('$t-bulk', '{"b": 2}', queue => 'sp-bulk');
CALL pqrun.cancel_jobs(queue => 'sp-bulk', job_type => '$t-bulk', payload_contains => '{"b": 1}', batch_size => 1);
CALL pqrun.cancel_jobs(queue => 'sp-bulk', job_type => '$t-bulk', created_after => '-infinity', reason => 'bulk');
CALL pqrun.retry_jobs(queue => 'sp-bulk', job_type => '$t-bulk', error_contains => 'BULK', finished_after => '-infinity');
CALL pqrun.cancel_jobs(job_type => '$t-bulk', statuses => '{READY,BLOCKED,RUNNING}');
SQL
}

# observe TAG: every view and metrics().
observe() {
	cat <<SQL
SET application_name = '$1: views and metrics()';
SELECT count(*) FROM pqrun.jobs;
SELECT count(*) FROM pqrun.job_attempts;
SELECT count(*) FROM pqrun.queue_stats;
SELECT count(*) FROM pqrun.workers;
SELECT count(*) FROM pqrun.health;
SELECT count(*) FROM pqrun.periodic;
SELECT count(*) FROM pqrun.queue_controls;
SELECT count(*) FROM pqrun.queue_overview;
SELECT count(*) FROM pqrun.flow_controls;
SELECT count(*) FROM pqrun.job_dependents(1);
SELECT pqrun.metrics();
SQL
}

# the whole matrix as ROLE (worker or owner), with or without triggers
matrix() {
	local role=$1 who=$2 trig=$3 dc iso abbr
	for dc in on off; do
		for iso in "READ COMMITTED" "REPEATABLE READ" SERIALIZABLE; do
			abbr=$(sed 's/READ COMMITTED/RC/; s/REPEATABLE READ/RR/; s/SERIALIZABLE/SER/' <<<"$iso")
			pass "$who/$trig/dc=$dc/$abbr" $dc "$iso"
			worker_extras "$who/$trig/dc=$dc/$abbr"
		done
	done
}

echo "-- every call path as worker, producer, monitor, operator and owner"
# (scripts go through files: run_as must run in this shell to count failures)
matrix $worker worker plain >"$tmp/worker-plain.sql"
run_as $worker $db worker-plain <"$tmp/worker-plain.sql"
{ matrix $owner owner plain; operate "owner"; observe "owner"; echo "SELECT pqrun._count_live_jobs();"; } >"$tmp/owner-plain.sql"
run_as $owner $db owner-plain <"$tmp/owner-plain.sql"
{
	for iso in "READ COMMITTED" "REPEATABLE READ" SERIALIZABLE; do
		cat <<SQL
SET application_name = 'producer $iso: enqueue, enqueue_batch, cancel';
BEGIN ISOLATION LEVEL $iso;
SELECT pqrun.enqueue('producer', '{"p": 1}', priority => 3, max_attempts => 2, timeout_seconds => 5, queue => 'pq') AS j \gset
SELECT pqrun.enqueue('producer', dedupe_key => 'producer-$iso');
SELECT pqrun.enqueue('producer', dedupe_key => 'producer-$iso');
SELECT pqrun.enqueue('producer', fifo_key => 'producer-$iso');
SELECT pqrun.enqueue('producer', depends_on => ARRAY[:j]::bigint[]);
SELECT pqrun.enqueue('producer', run_after => pg_catalog.now() OPERATOR(pg_catalog.+) interval '1 hour');
\\set batch '[{"job_type": "producer"}, {"job_type": "producer", "dedupe_key": "pb-$iso"}, {"job_type": "producer", "depends_on": [' :j ']}, {"job_type": "producer", "fifo_key": "pbf"}]'
SELECT count(*) FROM pqrun.enqueue_batch(:'batch');
SELECT pqrun.cancel(:j, 'producer cancels');
SELECT count(*) FROM pqrun.jobs;
COMMIT;
SQL
	done
} >"$tmp/producer.sql"
run_as $producer $db producer <"$tmp/producer.sql"
observe "monitor" >"$tmp/monitor.sql"
run_as $monitor $db monitor <"$tmp/monitor.sql"
{ operate "ops"; observe "ops"; } >"$tmp/ops.sql"
run_as $ops $db ops <"$tmp/ops.sql"

echo "-- the same with triggers on job_live and job_done (everything through SQL)"
qc $db >/dev/null <<'SQL' || exit 1
CREATE TRIGGER sp_noop AFTER INSERT OR UPDATE OR DELETE ON pqrun.job_live FOR EACH ROW EXECUTE FUNCTION public.sp_noop_trigger();
CREATE TRIGGER sp_noop AFTER INSERT OR UPDATE OR DELETE ON pqrun.job_done FOR EACH ROW EXECUTE FUNCTION public.sp_noop_trigger();
SQL
matrix $worker worker trigger >"$tmp/worker-trigger.sql"
run_as $worker $db worker-trigger <"$tmp/worker-trigger.sql"
{ matrix $owner owner trigger; operate "owner trigger"; } >"$tmp/owner-trigger.sql"
run_as $owner $db owner-trigger <"$tmp/owner-trigger.sql"
qc $db >/dev/null <<'SQL' || exit 1
DROP TRIGGER sp_noop ON pqrun.job_live;
DROP TRIGGER sp_noop ON pqrun.job_done;
SQL
echo "     call paths took $((SECONDS - started)) s so far"

##############################################################################
echo "-- the maintenance worker's rounds, with work to do"
qc $db >/dev/null <<'SQL' || exit 1
SELECT pqrun.enqueue('bgw-stale', timeout_seconds => 1) AS stale \gset
SELECT pqrun.enqueue('bgw-orphan') AS orphan \gset
SELECT pqrun.enqueue('bgw-delayed', run_after => now() + interval '1.5 s') AS delayed \gset
SELECT pqrun.enqueue('bgw-parent') AS parent \gset
SELECT pqrun.enqueue('bgw-stranded', depends_on => ARRAY[:parent]::bigint[]) AS stranded \gset
SELECT pqrun.enqueue('bgw-edge', depends_on => ARRAY[:parent]::bigint[]) AS edge \gset
SELECT pqrun.enqueue('bgw-done') AS done \gset
SELECT pqrun.enqueue('bgw-old') AS old \gset
SELECT pqrun.mark_done(id) FROM pqrun.pickup('bgw', job_types => '{bgw-done,bgw-old}', batch_size => 2);
-- a BLOCKED job without edges, a BLOCKED job whose edge names a DONE job,
-- a job finished long ago
DELETE FROM pqrun.job_dep WHERE job_id = :stranded;
UPDATE pqrun.job_dep SET dep_id = :done WHERE job_id = :edge;
UPDATE pqrun.job_done SET finished_at = now() - interval '30 days' WHERE id = :old;
SELECT pqrun.schedule('bgw-tick', 'bgw-tick', run_every => '1 second');
CREATE TABLE public.bgw_ids AS SELECT :stale AS stale, :orphan AS orphan, :delayed AS delayed, :stranded AS stranded, :edge AS edge, :old AS old;
SQL
# a worker that holds its job while it goes silent, one that exits holding its job
psql -X -qtA -U $worker -d $db >/dev/null 2>&1 <<'SQL' &
SET application_name = 'bgw work: holder of a stale job';
SELECT count(*) FROM pqrun.pickup('bgw-stale', job_types => '{bgw-stale}');
SELECT pg_catalog.pg_sleep(6);
SQL
pids+=($!)
run_as $worker $db orphan-maker <<<"SET application_name = 'bgw work: orphan maker'; SET pqrun.claim_hold = session; SELECT count(*) FROM pqrun.pickup('bgw-orphan', job_types => '{bgw-orphan}');"
ids="(SELECT * FROM public.bgw_ids) AS i"
bgw_did() {
	if wait_for $db "$2" t "$3"; then ok "maintenance worker: $1"; else fail "maintenance worker did not: $1"; fi
}
bgw_did "reap a stale job" 10 "SELECT EXISTS (SELECT FROM pqrun.job_attempts a, $ids WHERE a.job_id = i.stale AND a.outcome = 'stale')"
bgw_did "rescue an orphaned job" 5 "SELECT EXISTS (SELECT FROM pqrun.job_attempts a, $ids WHERE a.job_id = i.orphan AND a.outcome = 'orphaned')"
bgw_did "promote a due delayed job" 5 "SELECT NOT j.delayed FROM pqrun.job_live j, $ids WHERE j.id = i.delayed"
bgw_did "release a BLOCKED job with no edges left" 5 "SELECT status = 'READY' FROM pqrun.jobs j, $ids WHERE j.id = i.stranded"
bgw_did "release a BLOCKED job whose dependency is done" 5 "SELECT status = 'READY' FROM pqrun.jobs j, $ids WHERE j.id = i.edge"
bgw_did "delete a job past retention" 5 "SELECT NOT EXISTS (SELECT FROM pqrun.jobs j, $ids WHERE j.id = i.old)"
bgw_did "fire a schedule (twice)" 5 "SELECT count(*) >= 2 FROM pqrun.jobs WHERE job_type = 'bgw-tick'"
qc $db -c "SELECT pqrun.unschedule('bgw-tick')" >/dev/null

##############################################################################
echo "-- attack 2: the maintenance worker of $adb, reconnected with the database owner's search_path"
if wait_for $adb 15 t "SELECT bool_and(backend_start > '$attack2_set') FROM pg_stat_activity WHERE backend_type = 'pqrun maintenance' AND datname = '$adb'"; then
	bgw_did2() {
		if wait_for $adb "$2" t "$3"; then ok "maintenance worker of $adb: $1"; else fail "maintenance worker of $adb did not: $1"; fi
	}
	bgw_did2 "promote a due delayed job" 8 "SELECT NOT delayed FROM pqrun.job_live WHERE job_type = 'attack2-delayed'"
	bgw_did2 "rescue an orphaned job" 5 "SELECT EXISTS (SELECT FROM pqrun.job_attempts WHERE outcome = 'orphaned')"
	bgw_did2 "fire a schedule after reconnecting" 5 \
		"SELECT count(*) >= 2 FROM pqrun.jobs WHERE job_type = 'attack2-tick' AND created_at > (SELECT max(backend_start) FROM ($(worker_of $adb)) w JOIN pg_stat_activity USING (pid))"
else
	fail "the maintenance worker of $adb did not come back"
fi
qc $adb -c "SELECT pqrun.unschedule('attack2-tick')" >/dev/null

##############################################################################
echo "-- verdict"
# stmt(ctx): the innermost SQL statement of pqrun's that the shadow ran in
stmt="COALESCE((SELECT pg_catalog.left(pg_catalog.substr(l, 16), 110) FROM pg_catalog.regexp_split_to_table(ctx, E'\n') WITH ORDINALITY AS c(l, n)
	WHERE l LIKE 'SQL statement %' AND l NOT LIKE '%sp_shadow.note%' AND l NOT LIKE '%w.note%' ORDER BY n LIMIT 1), '(no SQL statement: ' || pg_catalog.left(pg_catalog.split_part(ctx, E'\n', 2), 60) || ')')"
for a in "1 w" "2 evil"; do
	set -- $a
	got=$(qc $adb -c "SELECT string_agg(DISTINCT format('%s ran as %s%s for session %s [%s] in: %s', what, cu,
	        CASE WHEN cu_super THEN ' (SUPERUSER)' ELSE '' END, su, btype, $stmt), E'\n')
	        FROM $2.log WHERE cu_super OR cu <> su OR btype <> 'client backend'")
	if [ -z "$got" ]; then
		ok "attack $1: the planted operator never ran with another role's rights"
	else
		fail "attack $1: the planted operator ran with another role's rights:"
		sed 's/^/       /' <<<"$got"
	fi
done

# report CONDITION: one block per (statement, roles, backend type) of the
# log rows matching CONDITION: the shadows that ran and the call paths
# (application_name) of the sessions they ran in.
report() {
	qc $db -c "SELECT format(E'%s as %s%s, session %s\\n         in: %s\\n         shadows: %s\\n         call paths: %s',
	                btype, cu,
	                CASE WHEN bool_or(cu_super) THEN ' (SUPERUSER)' ELSE '' END, su, s,
	                string_agg(DISTINCT what, ', '), COALESCE(NULLIF(string_agg(DISTINCT app, '; '), ''), '-'))
	             FROM (SELECT *, $stmt AS s FROM sp_shadow.log WHERE app IS DISTINCT FROM 'canary') l
	            WHERE $1
	            GROUP BY btype, cu, su, s
	            ORDER BY btype, s"
}
elevated=$(report "(cu <> su OR btype IS DISTINCT FROM 'client backend')")
if [ -z "$elevated" ]; then
	ok "no shadow ran with rights other than its session's, nor in a background worker"
else
	fail "shadows ran with rights other than the calling session's:"
	sed 's/^/       /' <<<"$elevated"
fi
own=$(report "cu = su AND btype = 'client backend' AND ctx NOT LIKE '%SQL statement \"%pqrun.%'")
if [ -z "$own" ]; then
	ok "the sessions' own statements used no shadow (the log shows pqrun's statements only)"
else
	fail "the test's own statements ran shadows (fix the test):"
	sed 's/^/       /' <<<"$own"
fi
same=$(report "cu = su AND btype = 'client backend' AND ctx LIKE '%SQL statement \"%pqrun.%'")
if [ -n "$same" ]; then
	if [ "$strict" = 1 ]; then
		fail "shadows ran inside pqrun's statements as the calling role itself:"
	else
		echo "note shadows ran inside pqrun's statements as the calling role itself (no escalation; PQRUN_SP_STRICT=1 fails on these):"
	fi
	sed 's/^/       /' <<<"$same"
fi

echo "took $((SECONDS - started)) s"
if [ $violations -gt 0 ]; then
	echo "$violations failure(s)"
	exit 1
fi
echo "search_path: all checks passed"

#!/usr/bin/env bash
# test/shell/fuzz.sh — a standing fuzz test of every public function of pqrun.
#
# The rule it proves (docs/api.md "Errors", API.md "Bad input"): bad input gets a
# documented SQLSTATE and changes nothing; never class XX, never a crash.
#
# Every function and procedure of schema pqrun whose name does not start with
# "_" is listed from pg_proc at run time and called with hostile values in
# each of its argument positions (NULL, empty, 10 kB and 1 MB strings, odd
# unicode, extreme ints, bigints, intervals and timestamps, odd arrays, odd
# JSON, random lease tokens, ...), so a new function is fuzzed without editing
# this file. On top of that come hand-written hostile sets for each known
# function (unknown, negative and finished job ids, RUNNING jobs with wrong
# tokens, mismatched mark_done_batch arrays, bad enqueue_batch shapes,
# malformed cron expressions, settings that feed the functions, ...).
#
# Phase A (one psql session, one DO block): jobs in every state are seeded
# and committed by that session (so it holds the RUNNING ones and orphan
# rescue leaves them alone; nothing is due, stale or scheduled for a day, so
# the maintenance worker has nothing to change). Each case then runs in a
# subtransaction of its own that is always rolled back, so every case sees
# the same seed. A case passes when
#   - its call succeeds, after which every pqrun view and table still reads
#     (rows are converted to text, which catches out-of-range timestamps) and
#     its own post-condition, if any, holds; or it raises a SQLSTATE allowed
#     for that function: the documented 22023, P0002, 55000, 54000 (54000
#     only where a payload is involved, and only with a message about the
#     payload), 2D000 for await_jobs called in a transaction block, 42501;
#     22008 / 22003 / 23xxx / 42601 / 53xxx and anything else are findings;
#   - a case with an expected outcome ("ok" or one SQLSTATE) got it, and no
#     message matched its forbidden pattern ("negative" for intervals that
#     are not negative);
#   - a fingerprint of pqrun's data (the rows of job_live, job_done,
#     attempt_log, job_dep and periodic, and the ACLs of pqrun's relations
#     and functions) taken after the subtransaction rolled back equals the one
#     taken before the first case: a failed call (and a rolled-back call, which
#     checks that the paths below the executor honour subtransactions) left
#     nothing behind. The id sequence is not part of it: nextval is not
#     transactional, so a failed enqueue may consume ids; that is allowed.
# A hostile value that PostgreSQL itself rejects when it is cast (an interval
# 'infinity', a text with chr(0), JSON with \u0000) never reaches pqrun; such
# values are dropped before the cases are generated (and counted).
# queue_stats must read the same before and after phase A (rolled-back work
# leaves no trace in its shared-memory counters), apart from its time-based
# columns.
#
# Phase B (one psql session, autocommit): cases that must run at top level and
# commit: CALL await_jobs (it commits, so it cannot run in phase A's block),
# SET of pqrun's settings (a bad value must be rejected at SET with 22023),
# and pickups and finishes committed as their own transactions (claims are
# written at commit). A failed top-level statement is rolled back whole by
# PostgreSQL, and the maintenance worker runs concurrently on committed jobs,
# so phase B checks SQLSTATEs, not fingerprints.
#
# Finally: no crash in the server log since the test started
# ($PQRUN_WORK/server.log; skipped with a note when PQRUN_WORK is unset), the
# server answers, every pqrun view and metrics() read. A crash or a hang in
# phase A names the case that was running; the database is recreated and
# phase A resumes with the case after it (at most 3 times).
#
# Runs against the cluster in PGHOST/PGPORT/PGUSER (it must preload pqrun and
# be reached as a superuser), in a database of its own that it drops at the
# end; creates and drops the role pqrun_fuzz_role. Takes about 25 s on a
# 2-core machine (45 s while other jobs load it). Prints one ok/FAIL line per
# checked class, the failing cases and a summary; exits non-zero on any
# violation. PQRUN_FUZZ_KEEP=DIR keeps the generated scripts and raw results
# (a.all: one line per violation) in DIR.
#
# Defects it found (reproductions; each must give a documented SQLSTATE, or
# succeed, once fixed). Against the builds installed at 22:03 and 22:09 on 2026-11-25:
#   BEGIN; SAVEPOINT a; SELECT pqrun.enqueue('x', queue => 'q'); ROLLBACK TO a; COMMIT;
#   SELECT * FROM pqrun.queue_stats;
#     -- ('q', 'x') shows enqueued_last_5min 1: work rolled back in a
#     -- subtransaction counts (src/shmem/stats.cpp registers no subtransaction
#     -- callback); phase A's queue_stats check
#   SELECT pqrun.enqueue('x', run_after => '-infinity'); SELECT * FROM pqrun.queue_stats;
#     -- 22008 cannot subtract infinite timestamps (oldest_ready_age); metrics() too
#   SELECT pqrun.enqueue_batch('[{"job_type": "x", "priority": 2147483648}]');   -- 22003
#   SELECT pqrun.enqueue_batch('[{"job_type": "x", "run_after": "not a date"}]'); -- 22007
#   SELECT pqrun.enqueue_batch('[{"job_type": "x", "run_after": "294277-01-01"}]'); -- 22008
#     -- docs/api.md: 22023 naming the element (src/api/batch_input.cpp calls
#     -- numeric_int4 / timestamptz_in directly)
#   SELECT pqrun.enqueue('x', dedupe_key => (SELECT string_agg(md5(g::text), '') FROM generate_series(1, 320) g));
#     -- 54000 index row requires 10256 bytes, maximum size is 8191; the same
#     -- for fifo_key, and for schedule()'s name and key (periodic's primary
#     -- key): an undocumented limit, reported as if it were the payload's
#   SELECT pqrun.schedule('s', 'x', run_every => '170000000 years');  -- 22008 (also '2147483647 days')
#   SELECT pqrun.cron_next('* * * * *', 'infinity');   -- 22008, also '-infinity' and after 294276-06-01
#   SELECT pqrun.grant_worker(NULL);  -- 42601 syntax error at end of input
#   SELECT pqrun.grant_worker(0);     -- 42601 syntax error at or near "-"
#     -- (format('... TO %s', role) in the install script, no check of role)
# Against the build installed before it (21:53), fixed since:
#   SELECT count(*) FROM pqrun.pickup('w', batch_size => 2147483647);
#     -- XX000 invalid memory alloc request size 18446744056529682432
#     -- (batch_size => 1000000000: XX000 ... 8000000008)
#   SELECT id FROM pqrun.pickup('w', wait => '170000000 years');  -- with a job READY
#     -- 22023 wait must not be negative (IntervalMs in src/api/sql_api.cpp
#     -- overflowed int64; also retry_after, older_than, default_stale_after
#     -- and CALL await_jobs(wait => ...)); '-170000000 years' was accepted
#     -- as a wait or gave 22008 (purge, reap_stale, mark_error), and
#     -- '-1 microsecond' was accepted everywhere (truncated to 0 ms)
#   SELECT pqrun.mark_error(<running id>, 'e', retry_after => '2147483647 days');  -- 22008
#   SET pqrun.backoff = '999999999d'; SELECT pqrun.mark_error(<running id>, 'e');
#     -- succeeded and wrote a run_after out of range: SELECT * FROM
#     -- pqrun.jobs then failed with 22008 timestamp out of range
#   SET pqrun.cron_timezone = 'Not/AZone';  -- accepted (also ''); cron calls failed later
set -euo pipefail
: "${PGHOST:?PGHOST must point at a running cluster that preloads pqrun}"
: "${PGPORT:?}" "${PGUSER:=postgres}"
export PGUSER

db=pqrun_fuzz
role=pqrun_fuzz_role
tmp=$(mktemp -d /tmp/pqrun-fuzz.XXXXXX)
chmod 755 "$tmp"
log=${PQRUN_WORK:+$PQRUN_WORK/server.log}
log_start=0
[ -n "$log" ] && [ -f "$log" ] && log_start=$(stat -c %s "$log")
t_start=$SECONDS

cleanup() {
	psql -X -q -d postgres -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null 2>&1 || true
	psql -X -q -d postgres -c "DROP ROLE IF EXISTS $role" >/dev/null 2>&1 || true
	if [ -n "${PQRUN_FUZZ_KEEP:-}" ]; then rm -rf "$PQRUN_FUZZ_KEEP"; cp -r "$tmp" "$PQRUN_FUZZ_KEEP"; fi
	rm -rf "$tmp"
}
trap cleanup EXIT

violations=0
ok() { echo "ok   $*"; }
bad() { echo "FAIL $*"; violations=$((violations + 1)); }

wait_for_server() { # after a crash the postmaster restarts everything
	local _
	for _ in $(seq 1 150); do
		psql -X -qtA -d postgres -c "SELECT 1" >/dev/null 2>&1 && return 0
		sleep 0.2
	done
	return 1
}

new_database() {
	psql -X -q -d postgres -c "SET client_min_messages = warning" -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null
	psql -X -q -d postgres -c "CREATE DATABASE $db" >/dev/null
	psql -X -q -d "$db" -c "CREATE EXTENSION pqrun" >/dev/null
}

psql -X -q -d postgres -c "SET client_min_messages = warning" -c "DROP ROLE IF EXISTS $role" -c "CREATE ROLE $role NOLOGIN" >/dev/null

##############################################################################
# The harness: seed, hostile values, case generator, runner (SQL, schema fuzz)
##############################################################################
cat >"$tmp/harness.sql" <<'SQL'
\set ON_ERROR_STOP 1
SET client_min_messages = warning;
CREATE SCHEMA fuzz;

/* Seed: jobs in every state, committed by this session, which then runs the
 * cases (it holds the RUNNING jobs). ids are looked up by name. */
CREATE TABLE fuzz.ids (name text PRIMARY KEY, id bigint, token uuid);
INSERT INTO fuzz.ids (name, id) VALUES
	('done', pqrun.enqueue('fz-done', '{"k": 1}')),
	('failed', pqrun.enqueue('fz-failed', max_attempts => 1)),
	('cancelled', pqrun.enqueue('fz-cancelled')),
	('ready', pqrun.enqueue('fz-ready', '{"k": 4}', dedupe_key => 'dk')),
	('ready2', pqrun.enqueue('fz-ready', priority => 5)),
	('ready3', pqrun.enqueue('fz-ready', queue => 'q2')),
	('delayed', pqrun.enqueue('fz-delayed', run_after => now() + interval '1 day')),
	('retried', pqrun.enqueue('fz-retried', max_attempts => 3)),
	('fifo1', pqrun.enqueue('fz-fifo', fifo_key => 'g')),
	('fifo2', pqrun.enqueue('fz-fifo', fifo_key => 'g'));
INSERT INTO fuzz.ids (name, id) SELECT 'run' || g, pqrun.enqueue('fz-run', timeout_seconds => 86400) FROM generate_series(1, 3) g;
INSERT INTO fuzz.ids (name, id) VALUES
	('blocked', pqrun.enqueue('fz-blocked', depends_on => ARRAY[(SELECT id FROM fuzz.ids WHERE name = 'run1')]));
SELECT count(*) FROM pqrun.pickup('seed', job_types => '{fz-done,fz-failed,fz-retried}', batch_size => 3);
SELECT pqrun.mark_done((SELECT id FROM fuzz.ids WHERE name = 'done'), '{"r": 1}');
SELECT pqrun.mark_error((SELECT id FROM fuzz.ids WHERE name = 'failed'), 'boom');
SELECT pqrun.mark_error((SELECT id FROM fuzz.ids WHERE name = 'retried'), 'again', retry_after => '1 day');
SELECT pqrun.cancel((SELECT id FROM fuzz.ids WHERE name = 'cancelled'), 'not needed');
INSERT INTO fuzz.ids (name, id) VALUES
	('deadep', pqrun.enqueue('fz-deadep', depends_on => ARRAY[(SELECT id FROM fuzz.ids WHERE name = 'failed')]));
UPDATE fuzz.ids i SET token = p.lease_token
  FROM pqrun.pickup('fuzzer', job_types => '{fz-run,fz-fifo}', batch_size => 4) p WHERE p.id = i.id;
SELECT pqrun.schedule('fz-every', 'fz', run_every => '1 day');
SELECT pqrun.schedule('fz-cron', 'fz', cron => '0 0 1 1 *', key => 'k', active => false);

/* The expected seed, so that a wrong seed fails loudly rather than making
 * every case meaningless. */
DO $$
DECLARE got text;
BEGIN
	SELECT string_agg(i.name || ':' || j.status, ' ' ORDER BY i.name COLLATE "C") INTO got
	  FROM fuzz.ids i JOIN pqrun.jobs j USING (id);
	IF got IS DISTINCT FROM 'blocked:BLOCKED cancelled:CANCELLED deadep:CANCELLED delayed:READY done:DONE failed:FAILED '
	   'fifo1:RUNNING fifo2:BLOCKED ready:READY ready2:READY ready3:READY retried:READY run1:RUNNING run2:RUNNING run3:RUNNING' THEN
		RAISE EXCEPTION 'unexpected seed: %', got;
	END IF;
END $$;

/* Fingerprint of pqrun's data; see the header for what it leaves out. */
CREATE FUNCTION fuzz.fp() RETURNS text LANGUAGE sql AS $$
	SELECT md5(concat_ws('|',
		(SELECT string_agg(t::text, ',' ORDER BY t.id) FROM pqrun.job_live t),
		(SELECT string_agg(t::text, ',' ORDER BY t.id) FROM pqrun.job_done t),
		(SELECT string_agg(t::text, ',' ORDER BY t.job_id, t.attempt) FROM pqrun.attempt_log t),
		(SELECT string_agg(t::text, ',' ORDER BY t.dep_id, t.job_id) FROM pqrun.job_dep t),
		(SELECT string_agg(t::text, ',' ORDER BY t.name, t.key) FROM pqrun.periodic t),
		(SELECT string_agg(t::text, ',' ORDER BY t.id) FROM pqrun.queue_control t),
		(SELECT string_agg(c.relname || '=' || coalesce(c.relacl::text, ''), ',' ORDER BY c.relname)
		   FROM pg_class c WHERE c.relnamespace = 'pqrun'::regnamespace),
		(SELECT string_agg(p.oid::regprocedure::text || '=' || coalesce(p.proacl::text, ''), ',' ORDER BY p.oid)
		   FROM pg_proc p WHERE p.pronamespace = 'pqrun'::regnamespace)))
$$;

/* Every pqrun view (found in pg_class, so new ones count) and metrics() must
 * read, rows converted to text. */
CREATE FUNCTION fuzz.read_views() RETURNS void LANGUAGE plpgsql AS $$
DECLARE v regclass;
BEGIN
	FOR v IN SELECT c.oid FROM pg_class c WHERE c.relnamespace = 'pqrun'::regnamespace AND c.relkind IN ('v', 'm') ORDER BY c.relname LOOP
		BEGIN
			EXECUTE format('SELECT md5(string_agg(v::text, '','')) FROM %s v', v);
		EXCEPTION WHEN OTHERS THEN
			RAISE EXCEPTION USING ERRCODE = SQLSTATE, MESSAGE = format('%s: %s', v, SQLERRM);
		END;
	END LOOP;
	BEGIN
		PERFORM md5(pqrun.metrics());
	EXCEPTION WHEN OTHERS THEN
		RAISE EXCEPTION USING ERRCODE = SQLSTATE, MESSAGE = format('pqrun.metrics(): %s', SQLERRM);
	END;
END $$;

/* queue_stats without its time-based columns, one row per pair. */
CREATE FUNCTION fuzz.stats() RETURNS SETOF text LANGUAGE sql AS $$
	SELECT format('queue %s, job_type %s: %s', left(quote_literal(queue), 40), left(quote_literal(job_type), 40),
	              concat_ws(' ', 'blocked', blocked, 'ready', ready, 'running', running, 'done', done, 'failed', failed,
	                        'cancelled', cancelled, 'done_last_5min', done_last_5min, 'enqueued_last_5min', enqueued_last_5min,
	                        'picked_last_5min', picked_last_5min, 'errors_last_5min', errors_last_5min))
	  FROM pqrun.queue_stats
$$;

/* Big incompressible values, computed once. */
CREATE TABLE fuzz.big (k text PRIMARY KEY, v text, j jsonb);
INSERT INTO fuzz.big (k, v) SELECT '10k', string_agg(md5(g::text), '') FROM generate_series(1, 320) g;     -- 10 kB
INSERT INTO fuzz.big (k, v) SELECT '1M', string_agg(md5(g::text), '') FROM generate_series(1, 32768) g;    -- 1 MB
INSERT INTO fuzz.big (k, j)                                                                                -- 1.25 MB
SELECT 'json', jsonb_build_object('big', string_agg(md5(g::text), '')) FROM generate_series(1, 40000) g;

/* Hostile values by type. The first of each type's list with sane = true is
 * what required arguments get when another position is fuzzed. */
CREATE TABLE fuzz.vals (typ regtype, expr text, ord serial, cast_state text);
INSERT INTO fuzz.vals (typ, expr) VALUES
	('text', 'NULL'), ('text', $v$''$v$), ('text', $v$' '$v$),
	('text', $v$(SELECT v FROM fuzz.big WHERE k = '10k')$v$),   -- 10 kB, incompressible
	('text', $v$repeat('x', 1048576)$v$),                                                 -- 1 MB
	('text', $v$(SELECT v FROM fuzz.big WHERE k = '1M')$v$), -- 1 MB, incompressible
	('text', $v$repeat(U&'\00E9\D83D\DE00', 3000)$v$), ('text', $v$U&'\0001\001F\007F\200B\202E\FEFF\FFFF'$v$),
	('text', $v$'%s%n%d%x%%'$v$), ('text', $v$E'a\nb\tc\\d''e"f'$v$), ('text', 'chr(0)'),
	('integer', 'NULL'), ('integer', '0'), ('integer', '-1'), ('integer', '-2147483648'), ('integer', '2147483647'),
	('bigint', 'NULL'), ('bigint', '0'), ('bigint', '-1'), ('bigint', '999999999999'),
	('bigint', '(-9223372036854775807 - 1)'), ('bigint', '9223372036854775807'),
	('interval', 'NULL'), ('interval', $v$'0'$v$), ('interval', $v$'1 microsecond'$v$), ('interval', $v$'-1 microsecond'$v$),
	('interval', $v$'170000000 years'$v$), ('interval', $v$'-170000000 years'$v$),
	('interval', $v$'2147483647 days'$v$), ('interval', $v$'-2147483648 days'$v$),
	('interval', $v$'2562047788 hours'$v$), ('interval', $v$'-2562047788 hours'$v$),
	('interval', $v$'1 mon -30 days'$v$), ('interval', $v$'1 year -366 days'$v$), ('interval', $v$'infinity'$v$),
	('timestamp with time zone', 'NULL'), ('timestamp with time zone', $v$'infinity'$v$),
	('timestamp with time zone', $v$'-infinity'$v$), ('timestamp with time zone', $v$'4713-01-01 00:00:00+00 BC'$v$),
	('timestamp with time zone', $v$'294276-12-31 23:59:59+00'$v$), ('timestamp with time zone', $v$'epoch'$v$),
	('jsonb', 'NULL'), ('jsonb', $v$'null'$v$), ('jsonb', $v$'1'$v$), ('jsonb', $v$'"s"'$v$), ('jsonb', $v$'true'$v$),
	('jsonb', $v$'[]'$v$), ('jsonb', $v$'[[[]], {}]'$v$), ('jsonb', $v$'{}'$v$), ('jsonb', $v$'{"a": {"b": [1, null, "x"]}}'$v$),
	('jsonb', $v$(repeat('[', 2000) || repeat(']', 2000))$v$), ('jsonb', $v$'1e1000'$v$), ('jsonb', $v$'"\u0000"'$v$),
	('jsonb', $v$(SELECT j FROM fuzz.big WHERE k = 'json')$v$),
	('uuid', 'NULL'), ('uuid', 'gen_random_uuid()'), ('uuid', $v$'00000000-0000-0000-0000-000000000000'$v$),
	('uuid', $v$'ffffffff-ffff-ffff-ffff-ffffffffffff'$v$),
	('boolean', 'NULL'), ('boolean', 'true'), ('boolean', 'false'),
	('text[]', 'NULL'), ('text[]', $v$'{}'$v$), ('text[]', $v$'{NULL}'$v$), ('text[]', $v$'{""}'$v$),
	('text[]', $v$'{fz-ready,NULL}'$v$), ('text[]', $v$'{{fz-ready,x},{y,z}}'$v$), ('text[]', $v$'[5:6]={fz-ready,x}'$v$),
	('text[]', $v$(SELECT array_agg(md5(g::text)) FROM generate_series(1, 10000) g)$v$),
	('text[]', $v$ARRAY[repeat('x', 1048576)]$v$),
	('bigint[]', 'NULL'), ('bigint[]', $v$'{}'$v$), ('bigint[]', $v$'{NULL}'$v$), ('bigint[]', $v$'{-1}'$v$),
	('bigint[]', $v$'{0,9223372036854775807}'$v$), ('bigint[]', $v$'{{1,2},{3,4}}'$v$),
	('bigint[]', $v$'[0:1]={1,2}'$v$), ('bigint[]', $v$(SELECT array_agg(g) FROM generate_series(1, 10000) g)$v$),
	('uuid[]', 'NULL'), ('uuid[]', $v$'{}'$v$), ('uuid[]', $v$'{NULL}'$v$), ('uuid[]', 'ARRAY[gen_random_uuid()]'),
	('uuid[]', 'ARRAY[[gen_random_uuid()], [gen_random_uuid()]]'),
	('pqrun.job_status[]', 'NULL'), ('pqrun.job_status[]', $v$'{}'$v$), ('pqrun.job_status[]', $v$'{NULL}'$v$),
	('pqrun.job_status[]', $v$'{RUNNING,READY,BLOCKED}'$v$), ('pqrun.job_status[]', $v$'{DONE,DONE,FAILED}'$v$),
	('pqrun.job_status[]', $v$'{{DONE},{FAILED}}'$v$),
	('regrole', 'NULL'), ('regrole', '0'), ('regrole', $v$'pqrun_fuzz_role'$v$), ('regrole', $v$'pg_monitor'$v$),
	('regrole', $v$'no_such_role_fz'$v$);

/* Values PostgreSQL rejects when casting them never reach pqrun: dropped. */
DO $$
DECLARE v record; st text;
BEGIN
	FOR v IN SELECT * FROM fuzz.vals LOOP
		BEGIN
			EXECUTE format('SELECT (%s)::%s', v.expr, v.typ);
		EXCEPTION WHEN OTHERS THEN
			GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE;
			UPDATE fuzz.vals SET cast_state = st WHERE ord = v.ord;
		END;
	END LOOP;
END $$;

/* SQLSTATEs each function may raise (docs/api.md / API.md); others get 'other'. */
CREATE TABLE fuzz.allowed (fn text PRIMARY KEY, states text[]);
INSERT INTO fuzz.allowed VALUES
	('enqueue', '{22023,54000}'), ('enqueue_batch', '{22023,54000}'),
	('pickup', '{22023}'), ('pickup_from', '{22023}'), ('await_jobs', '{22023,2D000}'),
	('retry_jobs', '{22023,2D000}'), ('cancel_jobs', '{22023,2D000}'), ('grant_operator', '{22023}'),
	('mark_done', '{22023,P0002,55000}'), ('mark_done_batch', '{22023,P0002,55000}'),
	('mark_done_and_pickup', '{22023,P0002,55000}'),
	('mark_error', '{22023,P0002,55000}'), ('heartbeat', '{22023,P0002,55000}'),
	('release', '{22023,P0002,55000}'), ('snooze', '{22023,P0002,55000}'),
	('cancel', '{22023,P0002}'), ('retry', '{22023,P0002}'),
	('purge', '{22023}'), ('reap_stale', '{22023}'), ('run_maintenance', '{}'),
	('schedule', '{22023,54000}'), ('unschedule', '{22023}'), ('cron_next', '{22023,22008}'),
	('grant_producer', '{22023}'), ('grant_worker', '{22023}'), ('grant_monitor', '{22023}'),
	('metrics', '{}'), ('pause_queue', '{22023}'), ('resume_queue', '{22023}'),
	('set_concurrency_limit', '{22023}'), ('set_rate_limit', '{22023}'), ('set_key_limit', '{22023}'),
	('set_key_rate_limit', '{22023}'), ('set', '{22023,55P02}'),
	('distribute', '{22023,0A000,55000}'), ('queue_node', '{22023,0A000}'), ('other', '{22023,P0002,55000,54000}');

/* A case: statements run in order in one subtransaction (placeholders
 * {name} and {name.tok} are the seed's ids and lease tokens); expect 'ok' or
 * one SQLSTATE; forbid: a regex the error message must not match; post: a
 * boolean SQL expression that must hold after a successful call. */
CREATE TABLE fuzz.cases (n serial PRIMARY KEY, fn text, stmts text[], expect text, forbid text, post text);
CREATE FUNCTION fuzz.subst(s text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE i record;
BEGIN
	FOR i IN SELECT * FROM fuzz.ids ORDER BY length(name) DESC LOOP
		s := replace(s, '{' || i.name || '.tok}', coalesce(quote_literal(i.token) || '::uuid', 'NULL::uuid'));
		s := replace(s, '{' || i.name || '}', i.id::text);
	END LOOP;
	RETURN s;
END $$;
CREATE FUNCTION fuzz.add(fn text, stmt text, expect text DEFAULT NULL, forbid text DEFAULT NULL, post text DEFAULT NULL)
RETURNS void LANGUAGE sql AS $$
	INSERT INTO fuzz.cases (fn, stmts, expect, forbid, post)
	SELECT fn, array_agg(btrim(fuzz.subst(s), E' \n\t')), expect, forbid, fuzz.subst(post)
	  FROM unnest(string_to_array(stmt, ';;')) s
$$;

/* Generated cases: every public function, every input position, every
 * hostile value of its type; the required arguments elsewhere get sane
 * values, the optional ones their defaults. A heartbeat's wait is fuzzed on
 * a finished job: on a running one it would sleep up to half the job's
 * stale window, and the wait is checked before the job is looked at. */
CREATE FUNCTION fuzz.sane(fn text, arg text, typ regtype, fuzzed text) RETURNS text LANGUAGE sql AS $$
	SELECT fuzz.subst(CASE
		WHEN fn = 'heartbeat' AND arg = 'job_id' AND fuzzed = 'wait' THEN '{done}'
		WHEN arg = 'job_type' THEN $s$'fz'$s$
		WHEN arg = 'worker_id' THEN $s$'fuzzer'$s$
		WHEN fn = 'pickup_from' AND arg = 'queue' THEN $s$'default'$s$
		WHEN arg = 'job_id' THEN '{run1}'
		WHEN arg = 'job_ids' THEN 'ARRAY[{run1}, {run2}]::bigint[]'
		WHEN arg = 'error' THEN $s$'e'$s$
		WHEN arg = 'older_than' THEN $s$'1 day'::interval$s$
		WHEN arg = 'name' THEN $s$'fz-new'$s$
		WHEN arg = 'jobs' THEN $s$'[{"job_type": "fz"}, {"job_type": "fz", "priority": 1}]'::jsonb$s$
		WHEN arg = 'role' THEN $s$'pqrun_fuzz_role'::regrole$s$
		WHEN arg = 'expr' THEN $s$'*/5 * * * *'$s$
		WHEN typ = 'text'::regtype THEN $s$'fz'$s$
		WHEN typ IN ('integer'::regtype, 'bigint'::regtype) THEN '1'
		WHEN typ = 'interval'::regtype THEN $s$'1 minute'::interval$s$
		WHEN typ = 'jsonb'::regtype THEN $s$'{}'::jsonb$s$
		WHEN typ = 'timestamp with time zone'::regtype THEN 'now()'
		WHEN typ = 'boolean'::regtype THEN 'false'
		ELSE format('NULL::%s', typ) END)
$$;

CREATE FUNCTION fuzz.generate() RETURNS void LANGUAGE plpgsql AS $$
DECLARE
	p record; v record;
	names text[]; types oid[]; modes text[];
	inputs int[]; nreq int; i int; j int; k int;
	args text[]; call text; expect text; forbid text; neg boolean;
BEGIN
	FOR p IN SELECT * FROM pg_proc WHERE pronamespace = 'pqrun'::regnamespace AND proname !~ '^_' ORDER BY proname, oid LOOP
		names := p.proargnames;
		types := coalesce(p.proallargtypes, ARRAY(SELECT unnest(p.proargtypes::oid[])));
		modes := coalesce(p.proargmodes::text[], array_fill('i'::text, ARRAY[cardinality(types)]));
		inputs := ARRAY(SELECT g FROM generate_series(1, cardinality(types)) g WHERE modes[g] IN ('i', 'b', 'v'));
		nreq := p.pronargs - p.pronargdefaults;
		/* every input NULL, positionally */
		call := format('pqrun.%I(%s)', p.proname,
		               (SELECT string_agg(format('NULL::%s', types[g]::regtype), ', ') FROM unnest(inputs) g));
		/* await_jobs refuses a transaction block first; the bulk actions
		 * check their arguments first, and commit only what they found. */
		PERFORM fuzz.add(p.proname, CASE WHEN p.prokind = 'p' THEN 'CALL ' || call
		                                 WHEN p.proretset THEN 'SELECT count(*) FROM ' || call ELSE 'SELECT ' || call END,
		                 CASE WHEN p.proname = 'await_jobs' THEN '2D000' END);
		FOR k IN 1 .. cardinality(inputs) LOOP
			i := inputs[k];
			/* CALL takes no subqueries in its arguments */
			FOR v IN SELECT * FROM fuzz.vals WHERE typ = types[i] AND cast_state IS NULL
			                                   AND NOT (p.prokind = 'p' AND expr ~* 'select') ORDER BY ord LOOP
				args := '{}';
				FOR j IN 1 .. cardinality(inputs) LOOP
					IF j = k THEN
						args := args || format('%I => (%s)::%s', names[inputs[j]], v.expr, v.typ);
					ELSIF j <= nreq THEN
						args := args || format('%I => %s', names[inputs[j]],
						                       fuzz.sane(p.proname, names[inputs[j]], types[inputs[j]]::regtype, names[i]));
					ELSIF p.proname = 'schedule' AND names[inputs[j]] = 'cron' AND names[i] <> 'run_every' THEN
						args := args || $s$cron => '*/5 * * * *'$s$::text;
					END IF;
				END LOOP;
				call := format('pqrun.%I(%s)', p.proname, array_to_string(args, ', '));
				expect := NULL;
				forbid := NULL;
				IF v.typ = 'interval'::regtype AND v.expr <> 'NULL' THEN
					EXECUTE format('SELECT (%s)::interval < interval ''0''', v.expr) INTO neg;
					IF NOT neg THEN
						forbid := 'negative';
					ELSIF names[i] IN ('wait', 'delay', 'retry_after', 'older_than', 'default_stale_after', 'run_every') THEN
						expect := '22023';
					END IF;
				END IF;
				IF p.prokind = 'p' THEN
					expect := CASE WHEN p.proname = 'await_jobs' THEN '2D000' END;
					forbid := NULL;
				END IF;
				PERFORM fuzz.add(p.proname, CASE WHEN p.prokind = 'p' THEN 'CALL ' || call
				                                 WHEN p.proretset THEN 'SELECT count(*) FROM ' || call ELSE 'SELECT ' || call END,
				                 expect, forbid);
			END LOOP;
		END LOOP;
	END LOOP;
END $$;

/* The runner. Results go out as NOTICEs (flushed one by one, so that a crash
 * or a hang still shows which case was running):
 *   C|n                          case n starts
 *   V|n|kind|state|message|call  a violation
 *   D|                           the run got through every case */
CREATE FUNCTION fuzz.run(after int) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
	c record; s text; stage text; st text; msg text; fp0 text; fp1 text; allowed text[];
	holds boolean; kind text;
BEGIN
	fp0 := fuzz.fp();
	FOR c IN SELECT * FROM fuzz.cases WHERE n > after ORDER BY n LOOP
		RAISE NOTICE 'C|%', c.n;
		stage := 'call';
		st := NULL;
		msg := NULL;
		holds := true;
		BEGIN
			FOREACH s IN ARRAY c.stmts LOOP
				EXECUTE s;
			END LOOP;
			stage := 'post';
			PERFORM fuzz.read_views();
			PERFORM fuzz.fp();
			IF c.post IS NOT NULL THEN
				EXECUTE 'SELECT ' || c.post INTO holds;
			END IF;
			RAISE EXCEPTION USING ERRCODE = 'FZ000', MESSAGE = 'rolled back';
		EXCEPTION WHEN OTHERS THEN
			GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT;
		END;
		msg := left(regexp_replace(msg, '\s+', ' ', 'g'), 240);
		kind := NULL;
		allowed := coalesce((SELECT states FROM fuzz.allowed WHERE fn = c.fn), (SELECT states FROM fuzz.allowed WHERE fn = 'other'))
		           || '{42501}'::text[];
		IF stage = 'post' AND st <> 'FZ000' THEN
			kind := 'succeeded, then pqrun''s tables or views did not read';
		ELSIF stage = 'post' AND holds IS NOT TRUE THEN
			kind := 'succeeded, but its post-condition failed: ' || c.post;
			st := '00000';
			msg := '';
		ELSIF stage = 'post' THEN
			st := '00000';
			msg := '';
			IF c.expect IS NOT NULL AND c.expect <> 'ok' THEN
				kind := 'succeeded, expected ' || c.expect;
			END IF;
		ELSE
			IF st LIKE 'XX%' THEN
				kind := 'internal error';
			ELSIF c.expect = 'ok' THEN
				kind := 'failed, expected success';
			ELSIF c.expect IS NOT NULL AND st <> c.expect THEN
				kind := 'expected ' || c.expect;
			ELSIF c.expect IS NULL AND st <> ALL (allowed) THEN
				kind := 'SQLSTATE not documented for ' || c.fn;
			ELSIF st = '54000' AND msg !~* 'payload' THEN
				kind := '54000 about something else than the payload';
			ELSIF c.forbid IS NOT NULL AND msg ~* c.forbid THEN
				kind := 'message matches /' || c.forbid || '/';
			END IF;
		END IF;
		IF kind IS NOT NULL THEN
			RAISE NOTICE 'V|%|%|%|%|%', c.n, kind, st, msg, left(array_to_string(c.stmts, '; '), 400);
		END IF;
		fp1 := fuzz.fp();
		IF fp1 IS DISTINCT FROM fp0 THEN
			RAISE NOTICE 'V|%|%|%|%|%', c.n, 'pqrun''s data differ after the call was rolled back', st, msg,
				left(array_to_string(c.stmts, '; '), 400);
			fp0 := fp1;
		END IF;
	END LOOP;
	RAISE NOTICE 'D|';
END $$;
SQL

##############################################################################
# Hand-written hostile sets (phase A). {name} is a seed id, {name.tok} its
# lease token; ';;' separates statements of one case.
##############################################################################
cat >"$tmp/cases.sql" <<'SQL'
\set ON_ERROR_STOP 1
-- enqueue
SELECT fuzz.add('enqueue', $$SELECT pqrun.enqueue(NULL)$$, '22023');
SELECT fuzz.add('enqueue', $$SELECT pqrun.enqueue('')$$, '22023');
SELECT fuzz.add('enqueue', $$SELECT pqrun.enqueue('fz', max_attempts => 0)$$, '22023');
SELECT fuzz.add('enqueue', $$SELECT pqrun.enqueue('fz', max_attempts => -2147483648)$$, '22023');
SELECT fuzz.add('enqueue', $$SELECT pqrun.enqueue('fz', max_attempts => 2147483647)$$, 'ok');
SELECT fuzz.add('enqueue', $$SELECT pqrun.enqueue('fz', timeout_seconds => 0)$$, '22023');
SELECT fuzz.add('enqueue', $$SELECT pqrun.enqueue('fz', timeout_seconds => -2147483648)$$, '22023');
SELECT fuzz.add('enqueue', $$SELECT pqrun.enqueue('fz', timeout_seconds => 2147483647)$$, 'ok');
SELECT fuzz.add('enqueue', $$SELECT pqrun.enqueue('fz', priority => -2147483648)$$, 'ok');
SELECT fuzz.add('enqueue', $$SELECT pqrun.enqueue('fz', priority => 2147483647)$$, 'ok');
SELECT fuzz.add('enqueue', $$SELECT pqrun.enqueue('fz', queue => '')$$, '22023');
SELECT fuzz.add('enqueue', $$SELECT pqrun.enqueue('fz', depends_on => '{NULL}')$$, '22023');
SELECT fuzz.add('enqueue', $$SELECT pqrun.enqueue('fz', depends_on => ARRAY[{run1}, NULL])$$, '22023');
SELECT fuzz.add('enqueue', $$SELECT pqrun.enqueue('fz', depends_on => '{999999999999}')$$, '22023');
SELECT fuzz.add('enqueue', $$SELECT pqrun.enqueue('fz', depends_on => '{-1}')$$, '22023');
SELECT fuzz.add('enqueue', $$SELECT pqrun.enqueue('fz', depends_on => ARRAY[{run1}, {run1}, {done}])$$, 'ok');
SELECT fuzz.add('enqueue', $$SELECT pqrun.enqueue('fz', depends_on => ARRAY[[{run1}], [{run2}]])$$);
SELECT fuzz.add('enqueue', $$SELECT pqrun.enqueue('fz', depends_on => (SELECT array_agg({run1}::bigint) FROM generate_series(1, 10000)))$$, 'ok');
SELECT fuzz.add('enqueue', $$SELECT pqrun.enqueue('fz', depends_on => ARRAY[{failed}])$$, 'ok',
	post => $$(SELECT status = 'CANCELLED' FROM pqrun.jobs WHERE id = currval('pqrun.job_id_seq'))$$);
SELECT fuzz.add('enqueue', $$SELECT pqrun.enqueue('fz', dedupe_key => 'dk')$$, 'ok',
	post => $$(SELECT count(*) = 1 FROM pqrun.jobs WHERE dedupe_key = 'dk')$$);
SELECT fuzz.add('enqueue', $$SELECT pqrun.enqueue('fz', dedupe_key => (SELECT v FROM fuzz.big WHERE k = '10k'))$$);
SELECT fuzz.add('enqueue', $$SELECT pqrun.enqueue('fz', fifo_key => (SELECT v FROM fuzz.big WHERE k = '10k'))$$);
SELECT fuzz.add('enqueue', $$SELECT pqrun.enqueue('fz', fifo_key => 'g')$$, 'ok',
	post => $$(SELECT status = 'BLOCKED' FROM pqrun.jobs WHERE id = currval('pqrun.job_id_seq'))$$);
SELECT fuzz.add('enqueue', $$SELECT pqrun.enqueue('fz', run_after => 'infinity')$$, '22023');
SELECT fuzz.add('enqueue', $$SELECT pqrun.enqueue('fz', run_after => '-infinity')$$, '22023');
SELECT fuzz.add('enqueue', $$SELECT pqrun.enqueue('fz', run_after => '4713-01-01 00:00:00+00 BC')$$, 'ok');
SELECT fuzz.add('enqueue', $$SELECT pqrun.enqueue('fz', run_after => '294276-12-31 23:59:59+00')$$, 'ok');
SELECT fuzz.add('enqueue', $$SELECT pqrun.enqueue('fz', payload => (SELECT j FROM fuzz.big WHERE k = 'json'))$$, '54000');
SELECT fuzz.add('enqueue', $$SELECT set_config('pqrun.max_payload_bytes', '0', true);; SELECT pqrun.enqueue('fz')$$);
SELECT fuzz.add('enqueue', $$SELECT pqrun.enqueue('fz', 'null')$$);
SELECT fuzz.add('enqueue', $$SELECT pqrun.enqueue('fz', '[1, 2]')$$);
-- enqueue_batch
SELECT fuzz.add('enqueue_batch', $$SELECT count(*) FROM pqrun.enqueue_batch(NULL)$$, '22023');
SELECT fuzz.add('enqueue_batch', $$SELECT count(*) FROM pqrun.enqueue_batch('[]')$$, 'ok');
SELECT fuzz.add('enqueue_batch', $$SELECT count(*) FROM pqrun.enqueue_batch('{"job_type": "fz"}')$$, '22023');
SELECT fuzz.add('enqueue_batch', $$SELECT count(*) FROM pqrun.enqueue_batch('"fz"')$$, '22023');
SELECT fuzz.add('enqueue_batch', $$SELECT count(*) FROM pqrun.enqueue_batch('null')$$, '22023');
SELECT fuzz.add('enqueue_batch', $$SELECT count(*) FROM pqrun.enqueue_batch('[null]')$$, '22023');
SELECT fuzz.add('enqueue_batch', $$SELECT count(*) FROM pqrun.enqueue_batch('[1, 2]')$$, '22023');
SELECT fuzz.add('enqueue_batch', $$SELECT count(*) FROM pqrun.enqueue_batch('[[{"job_type": "fz"}]]')$$, '22023');
SELECT fuzz.add('enqueue_batch', $$SELECT count(*) FROM pqrun.enqueue_batch('[{}]')$$, '22023');
SELECT fuzz.add('enqueue_batch', $$SELECT count(*) FROM pqrun.enqueue_batch('[{"job_type": null}]')$$, '22023');
SELECT fuzz.add('enqueue_batch', $$SELECT count(*) FROM pqrun.enqueue_batch('[{"job_type": ""}]')$$, '22023');
SELECT fuzz.add('enqueue_batch', $$SELECT count(*) FROM pqrun.enqueue_batch('[{"job_type": 1}]')$$, '22023');
SELECT fuzz.add('enqueue_batch', $$SELECT count(*) FROM pqrun.enqueue_batch('[{"job_type": ["fz"]}]')$$, '22023');
SELECT fuzz.add('enqueue_batch', $$SELECT count(*) FROM pqrun.enqueue_batch('[{"job_type": "fz", "nope": 1}]')$$, '22023');
SELECT fuzz.add('enqueue_batch', $$SELECT count(*) FROM pqrun.enqueue_batch('[{"job_type": "fz", "priority": "high"}]')$$, '22023');
SELECT fuzz.add('enqueue_batch', $$SELECT count(*) FROM pqrun.enqueue_batch('[{"job_type": "fz", "priority": 1.5}]')$$, '22023');
SELECT fuzz.add('enqueue_batch', $$SELECT count(*) FROM pqrun.enqueue_batch('[{"job_type": "fz", "priority": 2147483648}]')$$, '22023');
SELECT fuzz.add('enqueue_batch', $$SELECT count(*) FROM pqrun.enqueue_batch('[{"job_type": "fz", "priority": -2147483649}]')$$, '22023');
SELECT fuzz.add('enqueue_batch', $$SELECT count(*) FROM pqrun.enqueue_batch('[{"job_type": "fz", "priority": 1e400}]')$$, '22023');
SELECT fuzz.add('enqueue_batch', $$SELECT count(*) FROM pqrun.enqueue_batch('[{"job_type": "fz", "priority": null}]')$$, 'ok');
SELECT fuzz.add('enqueue_batch', $$SELECT count(*) FROM pqrun.enqueue_batch('[{"job_type": "fz", "max_attempts": 0}]')$$, '22023');
SELECT fuzz.add('enqueue_batch', $$SELECT count(*) FROM pqrun.enqueue_batch('[{"job_type": "fz", "max_attempts": "3"}]')$$, '22023');
SELECT fuzz.add('enqueue_batch', $$SELECT count(*) FROM pqrun.enqueue_batch('[{"job_type": "fz", "timeout_seconds": 0}]')$$, '22023');
SELECT fuzz.add('enqueue_batch', $$SELECT count(*) FROM pqrun.enqueue_batch('[{"job_type": "fz", "timeout_seconds": -1}]')$$, '22023');
SELECT fuzz.add('enqueue_batch', $$SELECT count(*) FROM pqrun.enqueue_batch('[{"job_type": "fz", "run_after": "not a date"}]')$$, '22023');
SELECT fuzz.add('enqueue_batch', $$SELECT count(*) FROM pqrun.enqueue_batch('[{"job_type": "fz", "run_after": 123}]')$$, '22023');
SELECT fuzz.add('enqueue_batch', $$SELECT count(*) FROM pqrun.enqueue_batch('[{"job_type": "fz", "run_after": "infinity"}]')$$, '22023');
SELECT fuzz.add('enqueue_batch', $$SELECT count(*) FROM pqrun.enqueue_batch('[{"job_type": "fz", "run_after": "294277-01-01 00:00:00+00"}]')$$, '22023');
SELECT fuzz.add('enqueue_batch', $$SELECT count(*) FROM pqrun.enqueue_batch('[{"job_type": "fz", "depends_on": [1, null]}]')$$, '22023');
SELECT fuzz.add('enqueue_batch', $$SELECT count(*) FROM pqrun.enqueue_batch('[{"job_type": "fz", "depends_on": "1"}]')$$, '22023');
SELECT fuzz.add('enqueue_batch', $$SELECT count(*) FROM pqrun.enqueue_batch('[{"job_type": "fz", "depends_on": [[1]]}]')$$, '22023');
SELECT fuzz.add('enqueue_batch', $$SELECT count(*) FROM pqrun.enqueue_batch('[{"job_type": "fz", "depends_on": [999999999999]}]')$$, '22023');
SELECT fuzz.add('enqueue_batch', $$SELECT count(*) FROM pqrun.enqueue_batch('[{"job_type": "fz", "depends_on": [1.5]}]')$$, '22023');
SELECT fuzz.add('enqueue_batch', $$SELECT count(*) FROM pqrun.enqueue_batch('[{"job_type": "fz", "depends_on": []}]')$$);
SELECT fuzz.add('enqueue_batch', $$SELECT count(*) FROM pqrun.enqueue_batch('[{"job_type": "fz", "queue": ""}]')$$, '22023');
SELECT fuzz.add('enqueue_batch', $$SELECT count(*) FROM pqrun.enqueue_batch('[{"job_type": "fz", "queue": 7}]')$$, '22023');
SELECT fuzz.add('enqueue_batch', $$SELECT count(*) FROM pqrun.enqueue_batch('[{"job_type": "fz", "dedupe_key": {"a": 1}}]')$$, '22023');
SELECT fuzz.add('enqueue_batch', $$SELECT count(*) FROM pqrun.enqueue_batch('[{"job_type": "fz", "payload": 5}]')$$);
SELECT fuzz.add('enqueue_batch', $$SELECT count(*) FROM pqrun.enqueue_batch('[{"job_type": "fz", "dedupe_key": "d"}, {"job_type": "fz", "dedupe_key": "d"}]')$$, 'ok');
SELECT fuzz.add('enqueue_batch', $$SELECT count(*) FROM pqrun.enqueue_batch('[{"job_type": "fz"}, {"job_type": "fz", "priority": "x"}]')$$, '22023');
SELECT fuzz.add('enqueue_batch', $$SELECT count(*) FROM pqrun.enqueue_batch('[{"job_type": "fz", "job_type": "fz"}]')$$, 'ok');
SELECT fuzz.add('enqueue_batch', $$SELECT count(*) FROM pqrun.enqueue_batch((SELECT jsonb_agg(jsonb_build_object('job_type', 'fz', 'priority', g)) FROM generate_series(1, 20000) g))$$, 'ok',
	post => $$(SELECT count(*) = 20000 FROM pqrun.jobs WHERE job_type = 'fz')$$);
SELECT fuzz.add('enqueue_batch', $$SELECT count(*) FROM pqrun.enqueue_batch((SELECT jsonb_agg(CASE WHEN g = 1500 THEN jsonb_build_object('job_type', '') ELSE jsonb_build_object('job_type', 'fz') END) FROM generate_series(1, 3000) g))$$, '22023');
SELECT fuzz.add('enqueue_batch', $$SELECT count(*) FROM pqrun.enqueue_batch(jsonb_build_array(jsonb_build_object('job_type', 'fz', 'payload', (SELECT j FROM fuzz.big WHERE k = 'json'))))$$, '54000');
-- pickup
SELECT fuzz.add('pickup', $$SELECT count(*) FROM pqrun.pickup(NULL)$$, '22023');
SELECT fuzz.add('pickup', $$SELECT count(*) FROM pqrun.pickup('fuzzer', job_types => '{}')$$, '22023');
SELECT fuzz.add('pickup', $$SELECT count(*) FROM pqrun.pickup('fuzzer', queues => '{}')$$, '22023');
SELECT fuzz.add('pickup', $$SELECT count(*) FROM pqrun.pickup('fuzzer', job_types => '{NULL}')$$, '22023');
SELECT fuzz.add('pickup', $$SELECT count(*) FROM pqrun.pickup('fuzzer', batch_size => 0)$$, '22023');
SELECT fuzz.add('pickup', $$SELECT count(*) FROM pqrun.pickup('fuzzer', batch_size => -2147483648)$$, '22023');
SELECT fuzz.add('pickup', $$SELECT count(*) FROM pqrun.pickup('fuzzer', batch_size => NULL)$$, '22023');
SELECT fuzz.add('pickup', $$SELECT count(*) FROM pqrun.pickup('fuzzer', batch_size => 2147483647)$$, 'ok',
	post => $$(SELECT count(*) = 0 FROM pqrun.jobs WHERE status = 'READY' AND run_after <= now())$$);
SELECT fuzz.add('pickup', $$SELECT count(*) FROM pqrun.pickup('fuzzer', batch_size => 1000000000)$$, 'ok');
SELECT fuzz.add('pickup', $$SELECT count(*) FROM pqrun.pickup('fuzzer', batch_size => 1000000)$$, 'ok');
SELECT fuzz.add('pickup_from', $$SELECT count(*) FROM pqrun.pickup_from(NULL, 'q')$$, '22023');
SELECT fuzz.add('pickup_from', $$SELECT count(*) FROM pqrun.pickup_from('fuzzer', NULL)$$, '22023');
SELECT fuzz.add('pickup_from', $$SELECT count(*) FROM pqrun.pickup_from('fuzzer', 'q', job_types => '{NULL}')$$, '22023');
SELECT fuzz.add('pickup_from', $$SELECT count(*) FROM pqrun.pickup_from('fuzzer', 'q', batch_size => 0)$$, '22023');
SELECT fuzz.add('pickup_from', $$SELECT count(*) FROM pqrun.pickup_from('fuzzer', 'q', wait => '-1 s')$$, '22023');
SELECT fuzz.add('pickup_from', $$SELECT count(*) FROM pqrun.pickup_from('fuzzer', repeat('q', 1048576), batch_size => 1000000)$$, 'ok');
SELECT fuzz.add('mark_done', $$SELECT pqrun.mark_done({run1}, queue => 'not its queue')$$, 'P0002');
SELECT fuzz.add('pickup', $$SELECT count(*) FROM pqrun.pickup('fuzzer', wait => NULL)$$, '22023');
SELECT fuzz.add('pickup', $$SELECT count(*) FROM pqrun.pickup('fuzzer', wait => '-1 microsecond')$$, '22023');
SELECT fuzz.add('pickup', $$SELECT count(*) FROM pqrun.pickup('fuzzer', wait => '-170000000 years')$$, '22023');
SELECT fuzz.add('pickup', $$SELECT count(*) FROM pqrun.pickup('fuzzer', wait => '170000000 years')$$, 'ok');
SELECT fuzz.add('pickup', $$SELECT count(*) FROM pqrun.pickup('fuzzer', wait => '2562047788 hours')$$, 'ok');
SELECT fuzz.add('pickup', $$SELECT count(*) FROM pqrun.pickup('fuzzer', job_types => '{nothing-of-this-type}', wait => '1 microsecond')$$, 'ok');
SELECT fuzz.add('pickup', $$SELECT count(*) FROM pqrun.pickup(repeat('w', 1048576), batch_size => 3)$$, 'ok');
SELECT fuzz.add('pickup', $$SELECT count(*) FROM pqrun.pickup('fuzzer', job_types => '{{fz-ready,x},{y,z}}')$$);
SELECT fuzz.add('pickup', $$SELECT count(*) FROM pqrun.pickup('fuzzer', queues => (SELECT array_agg(md5(g::text)) || 'default'::text FROM generate_series(1, 10000) g), batch_size => 5)$$, 'ok');
-- finishing calls on real jobs: right and wrong tokens, every state, unknown ids
SELECT fuzz.add('mark_done', $$SELECT pqrun.mark_done({run1})$$, 'ok');
SELECT fuzz.add('mark_done', $$SELECT pqrun.mark_done({run1}, NULL, {run1.tok})$$, 'ok',
	post => $$(SELECT status = 'READY' FROM pqrun.jobs WHERE id = {blocked})$$);
SELECT fuzz.add('mark_done', $$SELECT pqrun.mark_done({run1}, NULL, {run2.tok})$$, '55000');
SELECT fuzz.add('mark_done', $$SELECT pqrun.mark_done({run1}, NULL, gen_random_uuid())$$, '55000');
SELECT fuzz.add('mark_done', $$SELECT pqrun.mark_done({run1}, NULL, '00000000-0000-0000-0000-000000000000')$$, '55000');
SELECT fuzz.add('mark_done', $$SELECT pqrun.mark_done({run1}, (SELECT jsonb_agg(md5(g::text)) FROM generate_series(1, 40000) g), {run1.tok})$$);
SELECT fuzz.add('mark_done', $$SELECT pqrun.mark_done({fifo1}, 'null', {fifo1.tok})$$, 'ok',
	post => $$(SELECT status = 'READY' FROM pqrun.jobs WHERE id = {fifo2})$$);
SELECT fuzz.add('mark_done', $$SELECT pqrun.mark_done({ready})$$, '55000');
SELECT fuzz.add('mark_done', $$SELECT pqrun.mark_done({ready}, NULL, gen_random_uuid())$$, '55000');
SELECT fuzz.add('mark_done', $$SELECT pqrun.mark_done({ready}, NULL, NULL)$$, '55000');
SELECT fuzz.add('mark_done', $$SELECT pqrun.mark_done({done})$$, '55000');
SELECT fuzz.add('mark_done', $$SELECT pqrun.mark_done({failed}, NULL, gen_random_uuid())$$, '55000');
SELECT fuzz.add('mark_done', $$SELECT pqrun.mark_done({cancelled})$$, '55000');
SELECT fuzz.add('mark_done', $$SELECT pqrun.mark_done({blocked})$$, '55000');
SELECT fuzz.add('mark_done', $$SELECT pqrun.mark_done({delayed})$$, '55000');
SELECT fuzz.add('mark_done', $$SELECT pqrun.mark_done({retried})$$, '55000');
SELECT fuzz.add('mark_done', $$SELECT pqrun.mark_done(999999999999)$$, 'P0002');
SELECT fuzz.add('mark_done', $$SELECT pqrun.mark_done(999999999999, NULL, gen_random_uuid())$$, 'P0002');
SELECT fuzz.add('mark_done', $$SELECT pqrun.mark_done(-1)$$, 'P0002');
SELECT fuzz.add('mark_done', $$SELECT pqrun.mark_done(0)$$, 'P0002');
SELECT fuzz.add('mark_done', $$SELECT pqrun.mark_done(9223372036854775807)$$, 'P0002');
SELECT fuzz.add('mark_done', $$SELECT pqrun.mark_done(-9223372036854775807 - 1)$$, 'P0002');
SELECT fuzz.add('mark_done', $$SELECT pqrun.mark_done(NULL)$$, '22023');
SELECT fuzz.add('mark_done', $$SELECT pqrun.mark_done({run1});; SELECT pqrun.mark_done({run1})$$, '55000');
SELECT fuzz.add('mark_done', $$SELECT pqrun.cancel({run1});; SELECT pqrun.mark_done({run1}, NULL, {run1.tok})$$, '55000');
SELECT fuzz.add('heartbeat', $$SELECT pqrun.heartbeat({run1}, {run1.tok})$$, 'ok');
SELECT fuzz.add('heartbeat', $$SELECT pqrun.heartbeat({run1}, gen_random_uuid())$$, '55000');
SELECT fuzz.add('heartbeat', $$SELECT pqrun.heartbeat({run1}, {run2.tok})$$, '55000');
SELECT fuzz.add('heartbeat', $$SELECT pqrun.heartbeat({ready})$$, '55000');
SELECT fuzz.add('heartbeat', $$SELECT pqrun.heartbeat({done}, gen_random_uuid())$$, '55000');
SELECT fuzz.add('heartbeat', $$SELECT pqrun.heartbeat({blocked})$$, '55000');
SELECT fuzz.add('heartbeat', $$SELECT pqrun.heartbeat(999999999999)$$, 'P0002');
SELECT fuzz.add('heartbeat', $$SELECT pqrun.heartbeat(-1, gen_random_uuid())$$, 'P0002');
SELECT fuzz.add('heartbeat', $$SELECT pqrun.heartbeat(NULL, {run1.tok})$$, '22023');
SELECT fuzz.add('heartbeat', $$SELECT pqrun.heartbeat({run1}, {run1.tok}, '{"step": 2}')$$, 'ok',
	post => $$(SELECT progress = '{"step": 2}' FROM pqrun.jobs WHERE id = {run1})$$);
SELECT fuzz.add('heartbeat', $$SELECT pqrun.heartbeat({run1}, {run1.tok}, (SELECT j FROM fuzz.big WHERE k = 'json'))$$, '22023');
SELECT fuzz.add('heartbeat', $$SELECT pqrun.heartbeat({run1}, {run1.tok}, NULL, '10 ms')$$, 'ok');
SELECT fuzz.add('heartbeat', $$SELECT pqrun.heartbeat({run1}, gen_random_uuid(), NULL, '1 hour')$$, '55000');
SELECT fuzz.add('heartbeat', $$SELECT pqrun.heartbeat({ready}, NULL, NULL, '1 hour')$$, '55000');
SELECT fuzz.add('set_concurrency_limit', $$SELECT pqrun.set_concurrency_limit('default', 0);; SELECT count(*) FROM pqrun.pickup('fz-flow', batch_size => 100)$$, 'ok',
	post => $$(SELECT count(*) = 0 FROM pqrun.job_live WHERE locked_by = 'fz-flow' AND queue = 'default')$$);
SELECT fuzz.add('set_concurrency_limit', $$SELECT pqrun.set_concurrency_limit('default', 10000, 'a');; SELECT pqrun.set_concurrency_limit('default', NULL, 'a')$$, 'ok',
	post => $$(SELECT count(*) = 0 FROM pqrun.queue_control)$$);
SELECT fuzz.add('set_concurrency_limit', $$SELECT pqrun.set_concurrency_limit('default', 10001)$$, '22023');
SELECT fuzz.add('set_concurrency_limit', $$SELECT pqrun.set_concurrency_limit('default', -1)$$, '22023');
SELECT fuzz.add('set_concurrency_limit', $$SELECT pqrun.set_concurrency_limit('default', 1, '')$$, '22023');
SELECT fuzz.add('set_concurrency_limit', $$SELECT pqrun.set_concurrency_limit(repeat('q', 1001), 1)$$, '22023');
SELECT fuzz.add('pause_queue', $$SELECT pqrun.pause_queue('default');; SELECT count(*) FROM pqrun.pickup('fz-flow', batch_size => 100)$$, 'ok',
	post => $$(SELECT count(*) = 0 FROM pqrun.job_live WHERE locked_by = 'fz-flow' AND queue = 'default')$$);
SELECT fuzz.add('pause_queue', $$SELECT pqrun.pause_queue(repeat('q', 1001))$$, '22023');
SELECT fuzz.add('set_rate_limit', $$SELECT pqrun.set_rate_limit('default', 0.0001, 1);; SELECT count(*) FROM pqrun.pickup('fz-flow', batch_size => 100)$$, 'ok',
	post => $$(SELECT count(*) <= 1 FROM pqrun.job_live WHERE locked_by = 'fz-flow' AND queue = 'default')$$);
SELECT fuzz.add('set_rate_limit', $$SELECT pqrun.set_rate_limit('default', 'NaN')$$, '22023');
SELECT fuzz.add('set_rate_limit', $$SELECT pqrun.set_rate_limit('default', '-Infinity')$$, '22023');
SELECT fuzz.add('set_rate_limit', $$SELECT pqrun.set_rate_limit('default', 1, -1)$$, '22023');
SELECT fuzz.add('set_rate_limit', $$SELECT pqrun.set_rate_limit('default', 1e-300, 1)$$, 'ok');
SELECT fuzz.add('resume_queue', $$SELECT pqrun.resume_queue('never paused')$$, 'ok');
SELECT fuzz.add('set_key_limit', $$SELECT pqrun.enqueue('fz', queue => 'fz-keys', concurrency_key => 'k');; SELECT pqrun.enqueue('fz', queue => 'fz-keys', concurrency_key => 'k');; SELECT pqrun.set_key_limit('fz-keys', 1);; SELECT count(*) FROM pqrun.pickup('fz-flow', queues => ARRAY['fz-keys'], batch_size => 100)$$, 'ok',
	post => $$(SELECT count(*) = 1 FROM pqrun.job_live WHERE locked_by = 'fz-flow' AND queue = 'fz-keys')$$);
SELECT fuzz.add('set_key_limit', $$SELECT pqrun.set_key_limit('default', 10000, 'k');; SELECT pqrun.set_key_limit('default', NULL, 'k')$$, 'ok',
	post => $$(SELECT count(*) = 0 FROM pqrun.queue_control)$$);
SELECT fuzz.add('set_key_limit', $$SELECT pqrun.set_key_limit('default', 10001)$$, '22023');
SELECT fuzz.add('set_key_limit', $$SELECT pqrun.set_key_limit('default', -1, 'k')$$, '22023');
SELECT fuzz.add('set_key_limit', $$SELECT pqrun.set_key_limit('default', 1, '')$$, '22023');
SELECT fuzz.add('set_key_limit', $$SELECT pqrun.set_key_limit('default', 1, repeat('k', 1001))$$, '22023');
SELECT fuzz.add('set_key_limit', $$SELECT pqrun.set_key_limit(repeat('q', 1001), 1)$$, '22023');
SELECT fuzz.add('enqueue', $$SELECT pqrun.enqueue('fz', concurrency_key => 'tenant')$$, 'ok',
	post => $$(SELECT keyed FROM pqrun.queue_control WHERE queue = 'default' AND job_type IS NULL AND concurrency_key IS NULL)$$);
SELECT fuzz.add('enqueue', $$SELECT pqrun.enqueue('fz', concurrency_key => '')$$, '22023');
SELECT fuzz.add('enqueue', $$SELECT pqrun.enqueue('fz', concurrency_key => repeat('k', 1001))$$, '22023');
SELECT fuzz.add('enqueue_batch', $$SELECT pqrun.enqueue_batch('[{"job_type": "fz", "concurrency_key": "k"}, {"job_type": "fz", "concurrency_key": ""}]')$$, '22023');
SELECT fuzz.add('enqueue_batch', $$SELECT pqrun.enqueue_batch('[{"job_type": "fz", "concurrency_key": ["k"]}]')$$, '22023');
SELECT fuzz.add('set_key_rate_limit', $$SELECT pqrun.enqueue('fz', queue => 'fz-krate', concurrency_key => 'k');; SELECT pqrun.enqueue('fz', queue => 'fz-krate', concurrency_key => 'k');; SELECT pqrun.set_key_rate_limit('fz-krate', 0.0001, 1);; SELECT count(*) FROM pqrun.pickup('fz-flow', queues => ARRAY['fz-krate'], batch_size => 10)$$, 'ok',
	post => $$(SELECT count(*) = 1 FROM pqrun.job_live WHERE locked_by = 'fz-flow' AND queue = 'fz-krate')$$);
SELECT fuzz.add('set_key_rate_limit', $$SELECT pqrun.set_key_rate_limit('default', 1e6, 1000000, 'k');; SELECT pqrun.set_key_rate_limit('default', NULL, 1, 'k')$$, 'ok',
	post => $$(SELECT count(*) = 0 FROM pqrun.queue_control)$$);
SELECT fuzz.add('set_key_rate_limit', $$SELECT pqrun.set_key_rate_limit('default', 'NaN')$$, '22023');
SELECT fuzz.add('set_key_rate_limit', $$SELECT pqrun.set_key_rate_limit('default', 1, 0)$$, '22023');
SELECT fuzz.add('set_key_rate_limit', $$SELECT pqrun.set_key_rate_limit('default', 1, NULL, 'k')$$, '22023');
SELECT fuzz.add('set_key_rate_limit', $$SELECT pqrun.set_key_rate_limit('default', 1, 1, '')$$, '22023');
SELECT fuzz.add('set_key_rate_limit', $$SELECT pqrun.set_key_rate_limit(repeat('q', 1001), 1)$$, '22023');
SELECT fuzz.add('enqueue', $$SELECT pqrun.enqueue('fz', rate_weight => 1000000)$$, 'ok',
	post => $$(SELECT count(*) = 1 FROM pqrun.jobs WHERE rate_weight = 1000000)$$);
SELECT fuzz.add('enqueue', $$SELECT pqrun.enqueue('fz', rate_weight => 0)$$, '22023');
SELECT fuzz.add('enqueue', $$SELECT pqrun.enqueue('fz', rate_weight => -2147483648)$$, '22023');
SELECT fuzz.add('enqueue_batch', $$SELECT pqrun.enqueue_batch('[{"job_type": "fz", "rate_weight": 2}, {"job_type": "fz", "rate_weight": 1000001}]')$$, '22023');
SELECT fuzz.add('enqueue_batch', $$SELECT pqrun.enqueue_batch('[{"job_type": "fz", "rate_weight": 1e400}]')$$, '22023');
SELECT fuzz.add('enqueue_batch', $$SELECT pqrun.enqueue_batch('[{"job_type": "fz", "rate_weight": [1]}]')$$, '22023');
SELECT fuzz.add('release', $$SELECT pqrun.release({run1}, {run1.tok})$$, 'ok',
	post => $$(SELECT status = 'READY' AND attempts = 0 FROM pqrun.jobs WHERE id = {run1})$$);
SELECT fuzz.add('release', $$SELECT pqrun.release({fifo1})$$, 'ok',
	post => $$(SELECT status = 'BLOCKED' FROM pqrun.jobs WHERE id = {fifo2})$$);
SELECT fuzz.add('release', $$SELECT pqrun.release({run1}, {run2.tok})$$, '55000');
SELECT fuzz.add('release', $$SELECT pqrun.release({ready})$$, '55000');
SELECT fuzz.add('release', $$SELECT pqrun.release({done}, gen_random_uuid())$$, '55000');
SELECT fuzz.add('release', $$SELECT pqrun.release({blocked})$$, '55000');
SELECT fuzz.add('release', $$SELECT pqrun.release(999999999999)$$, 'P0002');
SELECT fuzz.add('release', $$SELECT pqrun.release(NULL, {run1.tok})$$, '22023');
SELECT fuzz.add('snooze', $$SELECT pqrun.snooze({run1}, '1 hour', {run1.tok})$$, 'ok',
	post => $$(SELECT status = 'READY' AND snoozes = 1 AND attempts = 0 AND run_after > now() FROM pqrun.jobs WHERE id = {run1})$$);
SELECT fuzz.add('snooze', $$SELECT pqrun.snooze({run1}, '0')$$, 'ok');
SELECT fuzz.add('snooze', $$SELECT pqrun.snooze({run1}, '1 hour', gen_random_uuid())$$, '55000');
SELECT fuzz.add('snooze', $$SELECT pqrun.snooze({delayed}, '1 hour')$$, '55000');
SELECT fuzz.add('snooze', $$SELECT pqrun.snooze({run1}, NULL)$$, '22023');
SELECT fuzz.add('snooze', $$SELECT pqrun.snooze({run1}, '-1 microsecond')$$, '22023');
SELECT fuzz.add('snooze', $$SELECT pqrun.snooze({run1}, '170000000 years')$$, '22023');
SELECT fuzz.add('snooze', $$SELECT pqrun.snooze(-1, '1 hour')$$, 'P0002');
SELECT fuzz.add('mark_error', $$SELECT pqrun.mark_error({run1}, 'e', lease_token => {run1.tok})$$, 'ok',
	post => $$(SELECT status = 'READY' AND run_after > now() FROM pqrun.jobs WHERE id = {run1})$$);
SELECT fuzz.add('mark_error', $$SELECT pqrun.mark_error({run1}, 'e', lease_token => gen_random_uuid())$$, '55000');
SELECT fuzz.add('mark_error', $$SELECT pqrun.mark_error({run1}, 'e', lease_token => {run3.tok})$$, '55000');
SELECT fuzz.add('mark_error', $$SELECT pqrun.mark_error({run1}, 'e', true, {run1.tok})$$, 'ok',
	post => $$(SELECT status = 'CANCELLED' FROM pqrun.jobs WHERE id = {blocked})$$);
SELECT fuzz.add('mark_error', $$SELECT pqrun.mark_error({run1}, NULL)$$, 'ok');
SELECT fuzz.add('mark_error', $$SELECT pqrun.mark_error({run1}, repeat('é', 1048576))$$, 'ok',
	post => $$(SELECT length(last_error) <= 10000 FROM pqrun.jobs WHERE id = {run1})$$);
SELECT fuzz.add('mark_error', $$SELECT pqrun.mark_error({run1}, 'e', terminal => NULL)$$, '22023');
SELECT fuzz.add('mark_error', $$SELECT pqrun.mark_error({run1}, 'e', retry_after => '-1 microsecond')$$, '22023');
SELECT fuzz.add('mark_error', $$SELECT pqrun.mark_error({run1}, 'e', retry_after => '-170000000 years')$$, '22023');
SELECT fuzz.add('mark_error', $$SELECT pqrun.mark_error({run1}, 'e', retry_after => '170000000 years')$$, NULL, 'negative',
	post => $$(SELECT run_after > now() FROM pqrun.jobs WHERE id = {run1})$$);
SELECT fuzz.add('mark_error', $$SELECT pqrun.mark_error({run1}, 'e', retry_after => '2562047788 hours')$$, NULL, 'negative',
	post => $$(SELECT run_after > now() FROM pqrun.jobs WHERE id = {run1})$$);
SELECT fuzz.add('mark_error', $$SELECT pqrun.mark_error({run1}, 'e', retry_after => '1 microsecond')$$, 'ok');
SELECT fuzz.add('mark_error', $$SELECT pqrun.mark_error({ready}, 'e')$$, '55000');
SELECT fuzz.add('mark_error', $$SELECT pqrun.mark_error({failed}, 'e', true)$$, '55000');
SELECT fuzz.add('mark_error', $$SELECT pqrun.mark_error({blocked}, 'e', lease_token => gen_random_uuid())$$, '55000');
SELECT fuzz.add('mark_error', $$SELECT pqrun.mark_error(999999999999, 'e')$$, 'P0002');
SELECT fuzz.add('mark_error', $$SELECT pqrun.mark_error(-9223372036854775807 - 1, 'e', true, gen_random_uuid(), '1 s')$$, 'P0002');
SELECT fuzz.add('mark_error', $$SELECT pqrun.mark_error(NULL, 'e')$$, '22023');
-- pqrun.backoff feeding mark_error: a retry must land at a readable run_after, not in the past
SELECT fuzz.add('mark_error', $$SELECT set_config('pqrun.backoff', '999999999d', true);; SELECT pqrun.mark_error({run1}, 'e')$$, NULL, NULL,
	$$(SELECT run_after >= now() FROM pqrun.jobs WHERE id = {run1})$$);
SELECT fuzz.add('mark_error', $$SELECT set_config('pqrun.backoff', '1000000000d', true);; SELECT pqrun.mark_error({run1}, 'e')$$, NULL, NULL,
	$$(SELECT run_after >= now() FROM pqrun.jobs WHERE id = {run1})$$);
SELECT fuzz.add('mark_error', $$SELECT set_config('pqrun.backoff', '106751991d', true);; SELECT pqrun.mark_error({run1}, 'e')$$, NULL, NULL,
	$$(SELECT run_after >= now() FROM pqrun.jobs WHERE id = {run1})$$);
SELECT fuzz.add('mark_error', $$SELECT set_config('pqrun.backoff', '1000000000h', true);; SELECT pqrun.mark_error({run1}, 'e')$$, NULL, NULL,
	$$(SELECT run_after >= now() FROM pqrun.jobs WHERE id = {run1})$$);
SELECT fuzz.add('mark_error', $$SELECT set_config('pqrun.backoff', '0us', true);; SELECT pqrun.mark_error({run1}, 'e')$$, 'ok');
SELECT fuzz.add('set', $$SELECT set_config('pqrun.backoff', '', true)$$, '22023');
SELECT fuzz.add('set', $$SELECT set_config('pqrun.backoff', '-1s', true)$$, '22023');
SELECT fuzz.add('set', $$SELECT set_config('pqrun.backoff', '1s,,2s', true)$$, '22023');
SELECT fuzz.add('set', $$SELECT set_config('pqrun.backoff', '99999999999999999999d', true)$$, '22023');
SELECT fuzz.add('set', $$SELECT set_config('pqrun.backoff', (SELECT string_agg('1s', ',') FROM generate_series(1, 10000)), true)$$);
SELECT fuzz.add('set', $$SELECT set_config('pqrun.cron_timezone', 'Not/AZone', true)$$, '22023');
SELECT fuzz.add('set', $$SELECT set_config('pqrun.cron_timezone', '', true)$$, '22023');
SELECT fuzz.add('set', $$SELECT set_config('pqrun.cron_timezone', 'Europe/Berlin', true);; SELECT pqrun.cron_next('30 2 * * *', '2026-03-29 00:00:00+00')$$, 'ok');
SELECT fuzz.add('set', $$SELECT set_config('pqrun.max_payload_bytes', '-1', true)$$, '22023');
SELECT fuzz.add('set', $$SELECT set_config('pqrun.max_payload_bytes', '99999999999999', true)$$, '22023');
-- mark_done_batch
SELECT fuzz.add('mark_done_batch', $$SELECT pqrun.mark_done_batch(NULL)$$, '22023');
SELECT fuzz.add('mark_done_batch', $$SELECT pqrun.mark_done_batch('{}')$$, 'ok');
SELECT fuzz.add('mark_done_batch', $$SELECT pqrun.mark_done_batch('{}', '{}')$$, 'ok');
SELECT fuzz.add('mark_done_batch', $$SELECT pqrun.mark_done_batch('{NULL}')$$, '22023');
SELECT fuzz.add('mark_done_batch', $$SELECT pqrun.mark_done_batch(ARRAY[{run1}, NULL])$$, '22023');
SELECT fuzz.add('mark_done_batch', $$SELECT pqrun.mark_done_batch(ARRAY[{run1}, {run1}])$$, '22023');
SELECT fuzz.add('mark_done_batch', $$SELECT pqrun.mark_done_batch(ARRAY[{run1}, {run2}], ARRAY[{run1.tok}, {run2.tok}])$$, 'ok');
SELECT fuzz.add('mark_done_batch', $$SELECT pqrun.mark_done_batch(ARRAY[{run1}, {run2}], ARRAY[{run2.tok}, {run1.tok}])$$, '55000');
SELECT fuzz.add('mark_done_batch', $$SELECT pqrun.mark_done_batch(ARRAY[{run1}, {run2}], ARRAY[{run1.tok}])$$, '22023');
SELECT fuzz.add('mark_done_batch', $$SELECT pqrun.mark_done_batch(ARRAY[{run1}], ARRAY[{run1.tok}, {run2.tok}])$$, '22023');
SELECT fuzz.add('mark_done_batch', $$SELECT pqrun.mark_done_batch(ARRAY[{run1}, {run2}], ARRAY[{run1.tok}, NULL])$$, '22023');
SELECT fuzz.add('mark_done_batch', $$SELECT pqrun.mark_done_batch(ARRAY[{run1}, {run2}], '{}')$$, '22023');
SELECT fuzz.add('mark_done_batch', $$SELECT pqrun.mark_done_batch(ARRAY[{run1}], ARRAY[gen_random_uuid()])$$, '55000');
SELECT fuzz.add('mark_done_batch', $$SELECT pqrun.mark_done_batch(ARRAY[{run1}, {ready}])$$, '55000');
SELECT fuzz.add('mark_done_batch', $$SELECT pqrun.mark_done_batch(ARRAY[{run1}, {done}])$$, '55000');
SELECT fuzz.add('mark_done_batch', $$SELECT pqrun.mark_done_batch(ARRAY[{run1}, 999999999999])$$, 'P0002');
SELECT fuzz.add('mark_done_batch', $$SELECT pqrun.mark_done_batch(ARRAY[-1]::bigint[], ARRAY[gen_random_uuid()])$$, 'P0002');
-- mark_done_and_pickup: the finish is checked whole before anything is claimed
SELECT fuzz.add('mark_done_and_pickup', $$SELECT count(*) FROM pqrun.mark_done_and_pickup(NULL, NULL)$$, '22023');
SELECT fuzz.add('mark_done_and_pickup', $$SELECT count(*) FROM pqrun.mark_done_and_pickup('fuzzer', NULL)$$, 'ok');
SELECT fuzz.add('mark_done_and_pickup', $$SELECT count(*) FROM pqrun.mark_done_and_pickup('fuzzer', '{}')$$, 'ok');
SELECT fuzz.add('mark_done_and_pickup', $$SELECT count(*) FROM pqrun.mark_done_and_pickup('fuzzer', NULL, '{}')$$, '22023');
SELECT fuzz.add('mark_done_and_pickup', $$SELECT count(*) FROM pqrun.mark_done_and_pickup('fuzzer', NULL, results => '{}')$$, '22023');
SELECT fuzz.add('mark_done_and_pickup', $$SELECT count(*) FROM pqrun.mark_done_and_pickup('fuzzer', '{NULL}')$$, '22023');
SELECT fuzz.add('mark_done_and_pickup', $$SELECT count(*) FROM pqrun.mark_done_and_pickup('fuzzer', '{{1}}')$$, '22023');
SELECT fuzz.add('mark_done_and_pickup', $$SELECT count(*) FROM pqrun.mark_done_and_pickup('fuzzer', ARRAY[{run1}, {run1}])$$, '22023');
SELECT fuzz.add('mark_done_and_pickup', $$SELECT count(*) FROM pqrun.mark_done_and_pickup('fuzzer', ARRAY[{run1}], ARRAY[{run1.tok}])$$, 'ok');
SELECT fuzz.add('mark_done_and_pickup', $$SELECT count(*) FROM pqrun.mark_done_and_pickup('fuzzer', ARRAY[{run1}], ARRAY[{run1.tok}], ARRAY['{"r": 1}'::jsonb])$$, 'ok');
SELECT fuzz.add('mark_done_and_pickup', $$SELECT count(*) FROM pqrun.mark_done_and_pickup('fuzzer', ARRAY[{run1}, {run2}], ARRAY[{run1.tok}, {run2.tok}], ARRAY[NULL, '{}'::jsonb])$$, 'ok');
SELECT fuzz.add('mark_done_and_pickup', $$SELECT count(*) FROM pqrun.mark_done_and_pickup('fuzzer', ARRAY[{run1}, {run2}], ARRAY[{run2.tok}, {run1.tok}])$$, '55000');
SELECT fuzz.add('mark_done_and_pickup', $$SELECT count(*) FROM pqrun.mark_done_and_pickup('fuzzer', ARRAY[{run1}], ARRAY[{run1.tok}, {run2.tok}])$$, '22023');
SELECT fuzz.add('mark_done_and_pickup', $$SELECT count(*) FROM pqrun.mark_done_and_pickup('fuzzer', ARRAY[{run1}], ARRAY[{run1.tok}], ARRAY['{}'::jsonb, '{}'])$$, '22023');
SELECT fuzz.add('mark_done_and_pickup', $$SELECT count(*) FROM pqrun.mark_done_and_pickup('fuzzer', ARRAY[{run1}], ARRAY[gen_random_uuid()])$$, '55000');
SELECT fuzz.add('mark_done_and_pickup', $$SELECT count(*) FROM pqrun.mark_done_and_pickup('fuzzer', ARRAY[{ready}])$$, '55000');
SELECT fuzz.add('mark_done_and_pickup', $$SELECT count(*) FROM pqrun.mark_done_and_pickup('fuzzer', ARRAY[{done}])$$, '55000');
SELECT fuzz.add('mark_done_and_pickup', $$SELECT count(*) FROM pqrun.mark_done_and_pickup('fuzzer', ARRAY[999999999999])$$, 'P0002');
SELECT fuzz.add('mark_done_and_pickup', $$SELECT count(*) FROM pqrun.mark_done_and_pickup('fuzzer', NULL, job_types => '{}')$$, '22023');
SELECT fuzz.add('mark_done_and_pickup', $$SELECT count(*) FROM pqrun.mark_done_and_pickup('fuzzer', NULL, queues => '{NULL}')$$, '22023');
SELECT fuzz.add('mark_done_and_pickup', $$SELECT count(*) FROM pqrun.mark_done_and_pickup('fuzzer', NULL, batch_size => 0)$$, '22023');
SELECT fuzz.add('mark_done_and_pickup', $$SELECT count(*) FROM pqrun.mark_done_and_pickup('fuzzer', NULL, batch_size => NULL)$$, '22023');
SELECT fuzz.add('mark_done_batch', $$SELECT pqrun.mark_done_batch(ARRAY[[{run1}], [{run2}]])$$, '22023');
SELECT fuzz.add('mark_done_batch', $$SELECT pqrun.mark_done_batch(ARRAY[{run1}, {run2}], ARRAY[[{run1.tok}], [{run2.tok}]])$$, '22023');
SELECT fuzz.add('mark_done_batch', $$SELECT pqrun.mark_done_batch('[0:1]={{run1},{run2}}'::bigint[], ARRAY[{run1.tok}, {run2.tok}])$$);
SELECT fuzz.add('mark_done_batch', $$SELECT pqrun.mark_done_batch('[5:6]={{run1},{run2}}'::bigint[])$$, 'ok');
SELECT fuzz.add('mark_done_batch', $$SELECT pqrun.mark_done_batch((SELECT array_agg(g) FROM generate_series(-10000, -1) g))$$, 'P0002');
SELECT fuzz.add('mark_done_batch', $$SELECT pqrun.mark_done_batch((SELECT array_agg(g) FROM generate_series(-10000, -1) g), (SELECT array_agg(gen_random_uuid()) FROM generate_series(1, 9999)))$$, '22023');
-- claims deferred by pickup, then finished in the same statement or transaction
SELECT fuzz.add('mark_done_batch', $$SELECT pqrun.mark_done_batch(array_agg(id), array_agg(lease_token)) FROM pqrun.pickup('fuzzer', batch_size => 3)$$, 'ok');
SELECT fuzz.add('mark_done_batch', $$SELECT pqrun.mark_done_batch(array_agg(id) || 999999999999::bigint, array_agg(lease_token) || gen_random_uuid()) FROM pqrun.pickup('fuzzer', batch_size => 3)$$, 'P0002');
SELECT fuzz.add('mark_done_batch', $$SELECT pqrun.mark_done_batch(array_agg(id), array_agg(gen_random_uuid())) FROM pqrun.pickup('fuzzer', batch_size => 3)$$, '55000');
SELECT fuzz.add('mark_done_batch', $$SELECT pqrun.mark_done_batch(array_agg(id ORDER BY id), array_agg(lease_token ORDER BY id DESC)) FROM pqrun.pickup('fuzzer', batch_size => 3)$$, '55000');
SELECT fuzz.add('mark_done_batch', $$SELECT pqrun.mark_done_batch(array_agg(id) || array_agg(id)) FROM pqrun.pickup('fuzzer', batch_size => 3)$$, '22023');
SELECT fuzz.add('mark_done_batch', $$SELECT pqrun.mark_done_batch(array_agg(id), array_agg(lease_token) || gen_random_uuid()) FROM pqrun.pickup('fuzzer', batch_size => 3)$$, '22023');
SELECT fuzz.add('mark_done_batch', $$SELECT pqrun.mark_done_batch(array_agg(id) || {run1}::bigint, array_agg(lease_token) || {run2.tok}) FROM pqrun.pickup('fuzzer', batch_size => 3)$$, '55000');
SELECT fuzz.add('mark_done_batch', $$SELECT count(*) FROM pqrun.pickup('fuzzer', batch_size => 3);; SELECT pqrun.mark_done_batch(ARRAY(SELECT id FROM pqrun.jobs WHERE locked_by = 'fuzzer' AND status = 'RUNNING') || 999999999999::bigint)$$, 'P0002');
SELECT fuzz.add('mark_done_batch', $$SELECT set_config('pqrun.deferred_claims', 'off', true);; SELECT pqrun.mark_done_batch(array_agg(id), array_agg(gen_random_uuid())) FROM pqrun.pickup('fuzzer', batch_size => 3)$$, '55000');
SELECT fuzz.add('mark_done_batch', $$SELECT set_config('pqrun.deferred_claims', 'off', true);; SELECT pqrun.mark_done_batch(array_agg(id) || 999999999999::bigint) FROM pqrun.pickup('fuzzer', batch_size => 3)$$, 'P0002');
SELECT fuzz.add('mark_done', $$SELECT pqrun.mark_done(id, NULL, gen_random_uuid()) FROM pqrun.pickup('fuzzer', batch_size => 3)$$, '55000');
SELECT fuzz.add('mark_error', $$SELECT pqrun.mark_error(id, repeat('x', 20000), lease_token => gen_random_uuid()) FROM pqrun.pickup('fuzzer')$$, '55000');
SELECT fuzz.add('heartbeat', $$SELECT pqrun.heartbeat(id, gen_random_uuid()) FROM pqrun.pickup('fuzzer')$$, '55000');
SELECT fuzz.add('cancel', $$SELECT pqrun.cancel(id, repeat('x', 1048576)) FROM pqrun.pickup('fuzzer')$$, 'ok');
-- cancel, retry
SELECT fuzz.add('cancel', $$SELECT pqrun.cancel(NULL)$$, '22023');
SELECT fuzz.add('cancel', $$SELECT pqrun.cancel(999999999999)$$, 'P0002');
SELECT fuzz.add('cancel', $$SELECT pqrun.cancel(-1, 'r')$$, 'P0002');
SELECT fuzz.add('cancel', $$SELECT pqrun.cancel({done})$$, 'ok');
SELECT fuzz.add('cancel', $$SELECT pqrun.cancel({cancelled}, NULL)$$, 'ok');
SELECT fuzz.add('cancel', $$SELECT pqrun.cancel({run1}, repeat('r', 1048576))$$, 'ok',
	post => $$(SELECT status = 'CANCELLED' FROM pqrun.jobs WHERE id = {blocked})$$);
-- the reason is cut as mark_error cuts its error (it was stored whole)
SELECT fuzz.add('cancel', $$SELECT pqrun.cancel({run2}, repeat('é', 20000))$$, 'ok',
	post => $$(SELECT length(last_error) = 10000 FROM pqrun.jobs WHERE id = {run2})$$);
SELECT fuzz.add('cancel', $$SELECT pqrun.cancel({blocked}, U&'\0001\FFFF')$$, 'ok');
SELECT fuzz.add('cancel', $$SELECT pqrun.cancel({fifo2})$$, 'ok');
SELECT fuzz.add('retry', $$SELECT pqrun.retry(NULL)$$, '22023');
SELECT fuzz.add('retry', $$SELECT pqrun.retry(999999999999)$$, 'P0002');
SELECT fuzz.add('retry', $$SELECT pqrun.retry(-9223372036854775807 - 1)$$, 'P0002');
SELECT fuzz.add('retry', $$SELECT pqrun.retry({failed})$$, 'ok');
SELECT fuzz.add('retry', $$SELECT pqrun.retry({deadep})$$, 'ok');
SELECT fuzz.add('retry', $$SELECT pqrun.retry({run1})$$, 'ok');
SELECT fuzz.add('retry', $$SELECT pqrun.retry({done})$$, 'ok');
-- purge, reap_stale, run_maintenance
SELECT fuzz.add('purge', $$SELECT pqrun.purge(NULL)$$, '22023');
SELECT fuzz.add('purge', $$SELECT pqrun.purge('1 day', NULL)$$, '22023');
SELECT fuzz.add('purge', $$SELECT pqrun.purge('-1 microsecond')$$, '22023');
SELECT fuzz.add('purge', $$SELECT pqrun.purge('-170000000 years')$$, '22023');
SELECT fuzz.add('purge', $$SELECT pqrun.purge('170000000 years')$$, 'ok');
SELECT fuzz.add('purge', $$SELECT pqrun.purge('0', '{DONE,FAILED,CANCELLED}')$$, 'ok');
SELECT fuzz.add('purge', $$SELECT pqrun.purge('0', '{RUNNING,READY,BLOCKED}')$$, NULL, NULL,
	$$(SELECT count(*) = 11 FROM pqrun.job_live)$$);
SELECT fuzz.add('purge', $$SELECT pqrun.purge('0', '{}')$$);
SELECT fuzz.add('purge', $$SELECT pqrun.purge('0', '{NULL}')$$);
SELECT fuzz.add('purge', $$SELECT pqrun.purge('0', '{{DONE},{FAILED}}')$$);
SELECT fuzz.add('reap_stale', $$SELECT pqrun.reap_stale(NULL)$$, '22023');
SELECT fuzz.add('reap_stale', $$SELECT pqrun.reap_stale('-1 microsecond')$$, '22023');
SELECT fuzz.add('reap_stale', $$SELECT pqrun.reap_stale('-170000000 years')$$, '22023');
SELECT fuzz.add('reap_stale', $$SELECT pqrun.reap_stale('170000000 years')$$, 'ok');
SELECT fuzz.add('reap_stale', $$SELECT pqrun.reap_stale('0')$$, 'ok');
SELECT fuzz.add('run_maintenance', $$SELECT pqrun.run_maintenance()$$, 'ok');
-- schedule, unschedule, cron_next
SELECT fuzz.add('schedule', $$SELECT pqrun.schedule(NULL, 'fz', '* * * * *')$$, '22023');
SELECT fuzz.add('schedule', $$SELECT pqrun.schedule('', 'fz', '* * * * *')$$, '22023');
SELECT fuzz.add('schedule', $$SELECT pqrun.schedule('s', NULL, '* * * * *')$$, '22023');
SELECT fuzz.add('schedule', $$SELECT pqrun.schedule('s', '', '* * * * *')$$, '22023');
SELECT fuzz.add('schedule', $$SELECT pqrun.schedule('s', 'fz')$$, '22023');
SELECT fuzz.add('schedule', $$SELECT pqrun.schedule('s', 'fz', '* * * * *', '1 minute')$$, '22023');
SELECT fuzz.add('schedule', $$SELECT pqrun.schedule('s', 'fz', run_every => '0')$$, '22023');
SELECT fuzz.add('schedule', $$SELECT pqrun.schedule('s', 'fz', run_every => '1 mon -30 days')$$, '22023');
SELECT fuzz.add('schedule', $$SELECT pqrun.schedule('s', 'fz', run_every => '-1 microsecond')$$, '22023');
SELECT fuzz.add('schedule', $$SELECT pqrun.schedule('s', 'fz', run_every => '1 microsecond')$$);
SELECT fuzz.add('schedule', $$SELECT pqrun.schedule('s', 'fz', run_every => '170000000 years')$$);
SELECT fuzz.add('schedule', $$SELECT pqrun.schedule('s', 'fz', run_every => '2147483647 days')$$);
SELECT fuzz.add('schedule', $$SELECT pqrun.schedule('s', 'fz', '* * * * *', queue => '')$$, '22023');
SELECT fuzz.add('schedule', $$SELECT pqrun.schedule('s', 'fz', '* * * * *', queue => NULL)$$);
SELECT fuzz.add('schedule', $$SELECT pqrun.schedule('s', 'fz', '* * * * *', key => NULL)$$);
SELECT fuzz.add('schedule', $$SELECT pqrun.schedule('s', 'fz', '* * * * *', active => NULL)$$);
SELECT fuzz.add('schedule', $$SELECT pqrun.schedule('s', 'fz', '* * * * *', payload => NULL)$$);
SELECT fuzz.add('schedule', $$SELECT pqrun.schedule('s', 'fz', '* * * * *', priority => NULL)$$);
SELECT fuzz.add('schedule', $$SELECT pqrun.schedule('fz-every', 'fz', '@hourly', key => '')$$, 'ok');
SELECT fuzz.add('schedule', $$SELECT pqrun.schedule('s', 'fz', '* * * * *', payload => (SELECT j FROM fuzz.big WHERE k = 'json'))$$);
SELECT fuzz.add('schedule', $$SELECT set_config('pqrun.cron_timezone', 'Not/AZone', true);; SELECT pqrun.schedule('s', 'fz', '* * * * *')$$);
SELECT fuzz.add('schedule', $$SELECT pqrun.schedule('s', 'fz', run_every => '1 second');; SELECT pqrun.run_maintenance()$$, 'ok');
SELECT fuzz.add('unschedule', $$SELECT pqrun.unschedule(NULL)$$);
SELECT fuzz.add('unschedule', $$SELECT pqrun.unschedule('fz-cron', NULL)$$);
SELECT fuzz.add('unschedule', $$SELECT pqrun.unschedule('no such schedule')$$, 'ok');
SELECT fuzz.add('unschedule', $$SELECT pqrun.unschedule('fz-cron', 'k')$$, 'ok');
SELECT fuzz.add('unschedule', $$SELECT pqrun.unschedule(repeat('x', 1048576), repeat('y', 1048576))$$, 'ok');
SELECT fuzz.add('cron_next', $$SELECT pqrun.cron_next(NULL)$$, 'ok');
SELECT fuzz.add('cron_next', $$SELECT pqrun.cron_next('* * * * *', NULL)$$, 'ok');
SELECT fuzz.add('cron_next', $$SELECT pqrun.cron_next('* * * * *', 'infinity')$$);
SELECT fuzz.add('cron_next', $$SELECT pqrun.cron_next('* * * * *', '-infinity')$$);
SELECT fuzz.add('cron_next', $$SELECT pqrun.cron_next('* * * * *', '4713-01-01 00:00:00+00 BC')$$);
SELECT fuzz.add('cron_next', $$SELECT pqrun.cron_next('* * * * *', '294276-12-31 23:59:59+00')$$);
SELECT fuzz.add('cron_next', $$SELECT pqrun.cron_next('0 0 1 1 *', '294276-06-01 00:00:00+00')$$);
SELECT fuzz.add('cron_next', $$SELECT pqrun.cron_next('0 0 30 2 *')$$, '22023');
SELECT fuzz.add('cron_next', $$SELECT pqrun.cron_next('0 0 31 4,6,9,11 *')$$, '22023');
SELECT fuzz.add('cron_next', $$SELECT pqrun.cron_next('0 0 29 2 *')$$, 'ok');
SELECT fuzz.add('cron_next', $$SELECT pqrun.cron_next('0 0 29 2 1')$$, 'ok');
SELECT fuzz.add('cron_next', $$SELECT pqrun.cron_next('0 0 31 * 7', '2026-01-01')$$, 'ok');
SELECT fuzz.add('cron_next', $$SELECT pqrun.cron_next('0 0 29 2 *', '294270-01-01 00:00:00+00')$$);
SELECT fuzz.add('cron_next', $$SELECT set_config('pqrun.cron_timezone', 'Not/AZone', true);; SELECT pqrun.cron_next('* * * * *')$$);
INSERT INTO fuzz.cases (fn, stmts, expect)
SELECT 'cron_next', ARRAY[format('SELECT pqrun.cron_next(%L)', e)], '22023'
  FROM unnest(ARRAY['', ' ', '*', '* * * *', '* * * * * *', '60 * * * *', '* 24 * * *', '* * 0 * *', '* * 32 * *',
                    '* * * 0 *', '* * * 13 *', '* * * * 8', '*/0 * * * *', '5-1 * * * *', '1,,2 * * * *', ', * * * *',
                    'a b c d e', '@reboot', '@never', '@', '-1 * * * *', '2147483648 * * * *', '4294967296 * * * *',
                    '*/2147483648 * * * *', '1-2147483647 * * * *', '0-59/-1 * * * *', '* * * jan-foo *', '* * * * mon-',
                    U&'\FF11 * * * *', E'*\t*\t*\t*\t*\n*', repeat('* ', 10000)]) e;
INSERT INTO fuzz.cases (fn, stmts)
SELECT 'cron_next', ARRAY[format('SELECT pqrun.cron_next(%L)', e)]
  FROM unnest(ARRAY['*/2147483647 * * * *', '*/60 * * * *', repeat('1,', 100000) || '1 * * * *', '0 0 * * 7-0', '59-0 * * * *']) e;
INSERT INTO fuzz.cases (fn, stmts, expect)
SELECT 'cron_next', ARRAY[format('SELECT pqrun.cron_next(%L)', e)], 'ok'
  FROM unnest(ARRAY['59 23 31 12 *', '0 0 * * 7', '* * * JAN-dec SUN-sat', '@yearly', '@MONTHLY',
                    '  *   *  *  *  *  ', '0-59/59 * * * *', '*/1 */1 */1 */1 */1']) e;
INSERT INTO fuzz.cases (fn, stmts, expect)
SELECT 'schedule', ARRAY[format('SELECT pqrun.schedule(''s'', ''fz'', %L)', e)], '22023'
  FROM unnest(ARRAY['', '* * * *', '60 * * * *', '*/0 * * * *', '@reboot', '0 0 30 2 *', 'a b c d e']) e;
-- grant_*
SELECT fuzz.add('grant_producer', $$SELECT pqrun.grant_producer('pqrun_fuzz_role')$$, 'ok');
SELECT fuzz.add('grant_worker', $$SELECT pqrun.grant_worker('pqrun_fuzz_role')$$, 'ok');
SELECT fuzz.add('grant_monitor', $$SELECT pqrun.grant_monitor('pqrun_fuzz_role')$$, 'ok');
SELECT fuzz.add('grant_producer', $$SELECT pqrun.grant_producer(NULL)$$);
SELECT fuzz.add('grant_worker', $$SELECT pqrun.grant_worker(0)$$);
SELECT fuzz.add('grant_monitor', $$SELECT pqrun.grant_monitor('pg_monitor')$$, 'ok');
SELECT fuzz.add('grant_operator', $$SELECT pqrun.grant_operator('pqrun_fuzz_role')$$, 'ok');
SELECT fuzz.add('grant_operator', $$SELECT pqrun.grant_operator(NULL)$$, '22023');
-- bulk actions: arguments checked first; inside this block a batch found ends in 2D000
SELECT fuzz.add('retry_jobs', $$CALL pqrun.retry_jobs(queue => 'no-such-queue')$$, 'ok');
SELECT fuzz.add('retry_jobs', $$CALL pqrun.retry_jobs(statuses => '{READY}')$$, '22023');
SELECT fuzz.add('retry_jobs', $$CALL pqrun.retry_jobs(statuses => '{FAILED,NULL}')$$, '22023');
SELECT fuzz.add('retry_jobs', $$CALL pqrun.retry_jobs(batch_size => 0)$$, '22023');
SELECT fuzz.add('cancel_jobs', $$CALL pqrun.cancel_jobs(statuses => '{}')$$, '22023');
SELECT fuzz.add('cancel_jobs', $$CALL pqrun.cancel_jobs(statuses => '{DONE}')$$, '22023');
SELECT fuzz.add('cancel_jobs', $$CALL pqrun.cancel_jobs(batch_size => 10001)$$, '22023');
SELECT fuzz.add('cancel_jobs', $$CALL pqrun.cancel_jobs()$$, '2D000');
-- metrics
SELECT fuzz.add('metrics', $$SELECT pqrun.metrics()$$, 'ok');
SELECT fuzz.add('await_jobs', $$CALL pqrun.await_jobs(wait => '0')$$, '2D000');
SQL

##############################################################################
# Phase A
##############################################################################
phase_a() { # AFTER: seed, generate the cases and run them in one session
	# (the session that runs the cases must be the one holding the seed's
	# RUNNING jobs, or orphan rescue puts them back to READY meanwhile)
	psql -X -qtA -d "$db" -v ON_ERROR_STOP=1 \
		-f "$tmp/harness.sql" -f "$tmp/cases.sql" \
		-c "SELECT fuzz.generate()" \
		-c "\\echo SETUP DONE" \
		-c "SET client_min_messages = notice" \
		-c "SET statement_timeout = '60s'" \
		-c "CREATE TABLE fuzz.stats_before AS SELECT fuzz.stats() AS s" \
		-c "SELECT fuzz.run('$1')" \
		-c "CREATE TABLE fuzz.stats_after AS SELECT fuzz.stats() AS s" \
		-c "SELECT 'stats|' || count(*) FROM ((TABLE fuzz.stats_before EXCEPT TABLE fuzz.stats_after) UNION ALL (TABLE fuzz.stats_after EXCEPT TABLE fuzz.stats_before)) d" \
		-c "(SELECT 'stats before: ' || s FROM (TABLE fuzz.stats_before EXCEPT TABLE fuzz.stats_after) d ORDER BY 1 LIMIT 5) UNION ALL (SELECT 'stats after:  ' || s FROM (TABLE fuzz.stats_after EXCEPT TABLE fuzz.stats_before) d ORDER BY 1 LIMIT 8)" \
		>"$tmp/a.out" 2>"$tmp/a.err" && return 0
	grep -q "^SETUP DONE" "$tmp/a.out" || { cat "$tmp/a.err"; return 2; }
	return 1
}

echo "-- phase A: every public function with hostile arguments, each call in a rolled-back subtransaction"
t_a=$SECONDS
after=0
crashes=()
: >"$tmp/a.all"
round=0
while :; do
	new_database
	rc=0
	phase_a "$after" || rc=$?
	[ $rc = 2 ] && { bad "phase A setup failed"; exit 1; }
	sed -n 's/^\(psql:[^:]*:[0-9]*: \)\?NOTICE:  //p' "$tmp/a.err" >>"$tmp/a.all"
	[ $rc = 0 ] && break
	# a crash, a hang or a broken run: blame the case that was running
	last=$(sed -n 's/^\(psql:[^:]*:[0-9]*: \)\?NOTICE:  C|//p' "$tmp/a.err" | tail -n 1)
	why=$(grep -v NOTICE "$tmp/a.err" | tr '\n' ' ' | cut -c1-300)
	if [ -z "$last" ]; then
		bad "phase A did not run: $why"
		break
	elif grep -q "NOTICE:  D|" "$tmp/a.err"; then
		bad "phase A ran, but reading queue_stats after it failed: $why"
		break
	fi
	# The run is one statement under a 60 s statement_timeout: a case that
	# waits that long hangs, but on a loaded machine the whole run can take
	# longer. A timeout in a case that was not the first of its run goes
	# on from that case in a fresh run; one in the first case blames it.
	if [ "$last" -gt $((after + 1)) ] && grep -q "canceling statement due to statement timeout" "$tmp/a.err"; then
		after=$((last - 1))
		continue
	fi
	crashes+=("$last")
	wait_for_server || { bad "the server did not come back after case $last"; break; }
	call=$(psql -X -qtA -d "$db" -c "SELECT array_to_string(stmts, '; ') FROM fuzz.cases WHERE n = $last" 2>/dev/null | tr '\n' ' ' | cut -c1-400)
	echo "V|$last|the run broke off in this case (crash, hang or lost connection)|-|$why|$call" >>"$tmp/a.all"
	after=$last
	round=$((round + 1))
	[ $round = 4 ] && { bad "phase A broke off more than 3 times; stopped"; break; }
done
echo "   (phase A took $((SECONDS - t_a)) s)"

# the case texts, to print with their violations
psql -X -qtA -d "$db" -F '|' -c "SELECT n, fn, left(array_to_string(stmts, '; '), 300) FROM fuzz.cases ORDER BY n" >"$tmp/cases.txt" 2>/dev/null || true
ncases=$(psql -X -qtA -d "$db" -c "SELECT count(*) FROM fuzz.cases")
nfns=$(psql -X -qtA -d "$db" -c "SELECT count(DISTINCT fn) FROM fuzz.cases WHERE fn IN (SELECT proname FROM pg_proc WHERE pronamespace = 'pqrun'::regnamespace)")
nall=$(psql -X -qtA -d "$db" -c "SELECT count(DISTINCT proname) FROM pg_proc WHERE pronamespace = 'pqrun'::regnamespace AND proname !~ '^_'")
dropped=$(psql -X -qtA -d "$db" -c "SELECT count(*) || ' (' || coalesce(string_agg(typ || ' ' || left(expr, 30) || ': ' || cast_state, '; '), '') || ')' FROM fuzz.vals WHERE cast_state IS NOT NULL")
echo "   $ncases cases over $nfns of $nall public functions; hostile values PostgreSQL rejects itself, dropped: $dropped"
if [ "$nfns" = "$nall" ]; then ok "every public function is fuzzed ($nall)"; else bad "only $nfns of $nall public functions have cases"; fi
# The public functions are those the SQL reference (docs/) documents, by
# name: each one the catalog has appears there as `name(`, and each that a
# table of the reference lists (a row starting with it) is in the catalog.
docs=$(dirname "$0")/../../docs
reference=("$docs/api.md" "$docs/flow-control.md" "$docs/operations.md" "$docs/permissions.md" "$docs/citus.md")
catalog=$(psql -X -qtA -d "$db" -c "SELECT DISTINCT proname FROM pg_proc WHERE pronamespace = 'pqrun'::regnamespace AND proname !~ '^_' ORDER BY 1")
undocumented=$(for f in $catalog; do grep -q "\b$f(" "${reference[@]}" || printf '%s ' "$f"; done)
listed=$(grep -ho '^| `[a-z_]*(' "${reference[@]}" | sed 's/^| `//; s/($//' | sort -u)
missing=$(for f in $listed; do grep -qx "$f" <<<"$catalog" || printf '%s ' "$f"; done)
if [ -n "$catalog" ] && [ -z "$undocumented$missing" ]; then
	ok "the SQL reference in docs/ documents every public function ($(wc -w <<<"$catalog")), and lists none that does not exist"
else
	bad "undocumented: [$undocumented]; listed in docs/ but not in the catalog: [$missing]"
fi

# report by class
report_class() { # NAME PATTERN (awk regex on the violation kind)
	local lines
	lines=$(awk -F'|' -v pat="$2" '$1 == "V" && $3 ~ pat' "$tmp/a.all")
	if [ -z "$lines" ]; then
		ok "$1"
	else
		bad "$1: $(printf '%s\n' "$lines" | wc -l) case(s)"
		printf '%s\n' "$lines" | head -n 40 |
			awk -F'|' '{ printf "     case %s: %s: %s %s\n       call: %s\n", $2, $3, $4, $5, substr($0, index($0, $6)) }'
		[ "$(printf '%s\n' "$lines" | wc -l)" -le 40 ] || echo "     ... and $(($(printf '%s\n' "$lines" | wc -l) - 40)) more"
	fi
}
report_class "no internal error (class XX) in any call" "^internal error$"
report_class "no crash or hang in any call" "^the run broke off"
report_class "every failed call raised a SQLSTATE documented for its function" "^SQLSTATE not documented|^54000 about"
report_class "every call with an expected outcome got it" "^expected |^failed, expected success|^succeeded, expected"
report_class "no error message calls a non-negative interval negative" "^message matches"
report_class "every successful call left pqrun's tables and views readable" "^succeeded, then"
report_class "every successful call met its post-condition" "^succeeded, but its post-condition"
report_class "every failed or rolled-back call left pqrun's data unchanged" "^pqrun's data differ"
echo "   phase A: $(awk -F'|' '$1 == "C" { c[$2] } $1 == "V" { v++ } END { printf "%d calls, %d violations", length(c), v }' "$tmp/a.all")"
if [ ${#crashes[@]} = 0 ]; then
	if grep -q "^stats|0$" "$tmp/a.out"; then
		ok "queue_stats reads the same before and after phase A (rolled-back calls leave no trace)"
	else
		bad "queue_stats changed over phase A although every call was rolled back"
		echo "     $(sed -n 's/^stats|//p' "$tmp/a.out") pair(s) differ; before / after (at most 5 / 8 shown):"
		grep "^stats " "$tmp/a.out" | cut -c1-300 | sed 's/^/     /'
	fi
fi

##############################################################################
# Phase B: top-level statements that commit (or must run outside a block)
##############################################################################
echo "-- phase B: CALL await_jobs, SET of pqrun's settings, pickups and finishes committed at top level"
t_b=$SECONDS
new_database
b=0
: >"$tmp/b.sql"
: >"$tmp/b.cases"
# bcase FN EXPECT SQL: EXPECT is ok, a SQLSTATE, or '-' (any allowed for FN)
bcase() {
	b=$((b + 1))
	printf '%s|%s|%s|%s\n' "$b" "$1" "$2" "$(tr '\n' ' ' <<<"$3")" >>"$tmp/b.cases"
	printf '%s;\n\\echo R|%s|:SQLSTATE|:LAST_ERROR_MESSAGE\n' "$3" "$b" >>"$tmp/b.sql"
}
{
	echo "\\set ON_ERROR_STOP 0"
	echo "SET statement_timeout = '10s';"
	echo "SELECT pqrun.enqueue('b-ready', priority => g) FROM generate_series(1, 30) g;"
} >>"$tmp/b.sql"
bcase set 22023 "SET pqrun.cron_timezone = 'Not/AZone'"
bcase cron_next ok "SELECT pqrun.cron_next('* * * * *')"
bcase set 22023 "SET pqrun.cron_timezone = ''"
bcase set ok "RESET pqrun.cron_timezone"
bcase set 22023 "SET pqrun.backoff = 'abc'"
bcase set 22023 "SET pqrun.backoff = ''"
bcase set - "SET pqrun.backoff = '999999999d'"
bcase set ok "RESET pqrun.backoff"
bcase set 22023 "SET pqrun.max_payload_bytes = -1"
bcase set - "SET pqrun.reap_interval = '1ms'"
bcase set - "SET pqrun.retention = '-1'"
bcase set 22023 "SET pqrun.deferred_claims = 'maybe'"
bcase await_jobs ok "CALL pqrun.await_jobs(wait => '0')"
bcase await_jobs 22023 "CALL pqrun.await_jobs(wait => NULL)"
bcase await_jobs 22023 "CALL pqrun.await_jobs(wait => '-1 microsecond')"
bcase await_jobs 22023 "CALL pqrun.await_jobs(wait => '-170000000 years')"
bcase await_jobs ok "CALL pqrun.await_jobs(wait => '170000000 years')"
bcase await_jobs ok "CALL pqrun.await_jobs(wait => '2562047788 hours')"
bcase await_jobs ok "CALL pqrun.await_jobs(wait => '1 microsecond', job_types => '{nothing-of-this-type}')"
bcase await_jobs 22023 "CALL pqrun.await_jobs(job_types => '{}')"
bcase await_jobs 22023 "CALL pqrun.await_jobs(queues => '{}')"
bcase await_jobs 22023 "CALL pqrun.await_jobs(job_types => '{NULL}')"
bcase await_jobs - "CALL pqrun.await_jobs(job_types => '{{b-ready,x},{y,z}}')"
bcase await_jobs ok "CALL pqrun.await_jobs(job_types => '{$(seq -s, 1 10000),b-ready}')"
bcase await_jobs ok "CALL pqrun.await_jobs(queues => ARRAY[repeat('q', 1048576)], wait => '1 microsecond')"
bcase await_jobs ok "CALL pqrun.await_jobs(NULL, NULL, '0', NULL)"
bcase await_jobs ok "CALL pqrun.await_jobs(ready => true)"
bcase await_jobs 2D000 "BEGIN; CALL pqrun.await_jobs(wait => '0')"
bcase other ok "ROLLBACK"
bcase await_jobs ok "DO \$\$DECLARE r boolean; BEGIN CALL pqrun.await_jobs(NULL, NULL, '0', r); END\$\$"
bcase await_jobs 2D000 "SELECT 1 FROM (VALUES (1)) v WHERE EXISTS (SELECT 1); DO \$\$DECLARE r boolean; BEGIN PERFORM 1; BEGIN CALL pqrun.await_jobs(NULL, NULL, '0', r); EXCEPTION WHEN division_by_zero THEN NULL; END; END\$\$"
bcase pickup ok "SELECT count(*) FROM pqrun.pickup('b', batch_size => 2147483647)"
bcase pickup ok "SELECT count(*) FROM pqrun.pickup(repeat('w', 1048576), batch_size => 1000000)"
bcase other ok "SELECT pqrun.enqueue('b-ready', priority => g) FROM generate_series(1, 30) g"
bcase pickup 22023 "SELECT count(*) FROM pqrun.pickup('b', wait => '-170000000 years')"
bcase mark_done_batch 55000 "SELECT pqrun.mark_done_batch(array_agg(id), array_agg(gen_random_uuid())) FROM pqrun.pickup('b', batch_size => 3)"
bcase mark_done_batch P0002 "SELECT pqrun.mark_done_batch(array_agg(id) || 999999999999::bigint) FROM pqrun.pickup('b', batch_size => 3)"
bcase mark_done_batch 22023 "SELECT pqrun.mark_done_batch(array_agg(id) || array_agg(id)) FROM pqrun.pickup('b', batch_size => 3)"
bcase mark_done_batch ok "SELECT pqrun.mark_done_batch(array_agg(id), array_agg(lease_token)) FROM pqrun.pickup('b', batch_size => 3)"
bcase pickup ok "BEGIN; SELECT count(*) FROM pqrun.pickup('b', batch_size => 3)"
bcase mark_done_batch 55000 "SELECT pqrun.mark_done_batch(ARRAY(SELECT id FROM pqrun.jobs WHERE locked_by = 'b' AND status = 'RUNNING'), ARRAY(SELECT gen_random_uuid() FROM pqrun.jobs WHERE locked_by = 'b' AND status = 'RUNNING'))"
bcase other ok "ROLLBACK"
bcase pickup ok "BEGIN; SELECT count(*) FROM pqrun.pickup('b', batch_size => 3)"
bcase other ok "SAVEPOINT s1"
bcase mark_done_batch P0002 "SELECT pqrun.mark_done_batch(ARRAY[999999999999]::bigint[])"
bcase other ok "ROLLBACK TO s1"
bcase other ok "COMMIT"
bcase other ok "SELECT pqrun.enqueue('b-other') FROM generate_series(1, 5)"
bcase pickup ok "SELECT count(*) FROM pqrun.pickup('b2', job_types => '{b-other}', batch_size => 2)"
bcase mark_done 55000 "SELECT pqrun.mark_done((SELECT min(id) FROM pqrun.jobs WHERE locked_by = 'b2' AND status = 'RUNNING'), NULL, gen_random_uuid())"
bcase mark_error 55000 "SELECT pqrun.mark_error((SELECT min(id) FROM pqrun.jobs WHERE locked_by = 'b2' AND status = 'RUNNING'), 'e', lease_token => gen_random_uuid())"
bcase heartbeat 55000 "SELECT pqrun.heartbeat((SELECT min(id) FROM pqrun.jobs WHERE locked_by = 'b2' AND status = 'RUNNING'), gen_random_uuid())"
bcase mark_error ok "SELECT pqrun.mark_error((SELECT min(id) FROM pqrun.jobs WHERE locked_by = 'b2' AND status = 'RUNNING'), repeat('e', 1048576), retry_after => '1 day')"
bcase mark_done P0002 "SELECT pqrun.mark_done(999999999999, NULL, gen_random_uuid())"
bcase mark_error P0002 "SELECT pqrun.mark_error(-1, 'e')"
bcase heartbeat P0002 "SELECT pqrun.heartbeat(0)"
bcase cancel ok "SELECT pqrun.cancel((SELECT min(id) FROM pqrun.jobs WHERE locked_by = 'b2' AND status = 'RUNNING'), repeat('r', 1048576))"
bcase retry ok "SELECT pqrun.retry((SELECT max(id) FROM pqrun.jobs WHERE status = 'CANCELLED'))"
bcase enqueue ok "SELECT pqrun.enqueue('b-edge', run_after => g) FROM unnest(ARRAY['4713-01-01 00:00:00+00 BC', '294276-12-31 23:59:59+00']::timestamptz[]) g"
bcase enqueue 22023 "SELECT pqrun.enqueue('b-edge', run_after => g) FROM unnest(ARRAY['infinity', '-infinity']::timestamptz[]) g"
bcase run_maintenance ok "SELECT pqrun.run_maintenance()"
bcase pickup ok "SELECT count(*) FROM pqrun.pickup('b3', job_types => '{b-edge}', batch_size => 10)"
bcase reap_stale ok "SELECT pqrun.reap_stale('0')"
bcase purge ok "SELECT pqrun.purge('0', '{DONE,FAILED,CANCELLED}')"
bcase schedule - "SELECT pqrun.schedule('b', 'b-sched', run_every => '1 microsecond')"
bcase run_maintenance ok "SELECT pqrun.run_maintenance()"
bcase unschedule ok "SELECT pqrun.unschedule('b')"
bcase retry_jobs 22023 "CALL pqrun.retry_jobs(batch_size => -1)"
bcase retry_jobs ok "CALL pqrun.retry_jobs(error_contains => repeat('e', 1048576), payload_contains => '{}')"
bcase cancel_jobs 2D000 "BEGIN; CALL pqrun.cancel_jobs(job_type => 'b-ready', batch_size => 1)"
bcase other ok "ROLLBACK"
bcase cancel_jobs ok "CALL pqrun.cancel_jobs(job_type => 'b-ready', statuses => '{READY,BLOCKED,RUNNING}', batch_size => 7, reason => repeat('r', 1048576))"
bcase retry_jobs ok "CALL pqrun.retry_jobs(job_type => 'b-ready', batch_size => 1)"
bcase retry_jobs ok "CALL pqrun.retry_jobs(job_type => 'b-ready', finished_after => '-infinity', finished_before => 'infinity')"
bcase other ok "SELECT count(*) FROM pqrun.jobs"
psql -X -qtA -d "$db" -f "$tmp/b.sql" >"$tmp/b.out" 2>"$tmp/b.err" || true
allowed_b() { # FN -> allowed SQLSTATEs
	case $1 in
	enqueue | enqueue_batch | schedule) echo "22023 54000 42501" ;;
	pickup | purge | reap_stale | unschedule) echo "22023 42501" ;;
	cron_next) echo "22023 22008 42501" ;;
	await_jobs | retry_jobs | cancel_jobs) echo "22023 2D000 42501" ;;
	mark_* | heartbeat) echo "22023 P0002 55000 42501" ;;
	cancel | retry) echo "22023 P0002 42501" ;;
	set) echo "22023 55P02 42501" ;;
	*) echo "22023 P0002 55000 54000 42501" ;;
	esac
}
bviol=()
while IFS='|' read -r n fn expect stmt; do
	line=$(grep -m1 "^R|$n|" "$tmp/b.out" || true)
	if [ -z "$line" ]; then
		bviol+=("case B$n: no result (the session died?): $stmt")
		continue
	fi
	state=$(cut -d'|' -f3 <<<"$line")
	msg=$(cut -d'|' -f4- <<<"$line")
	[ "$state" = 00000 ] && msg=
	kind=
	if [[ $state == XX* ]]; then
		kind="internal error"
	elif [ "$expect" = ok ] && [ "$state" != 00000 ]; then
		kind="failed, expected success"
	elif [ "$expect" != ok ] && [ "$expect" != - ] && [ "$state" != "$expect" ]; then
		kind="expected $expect"
	elif [ "$expect" = - ] && [ "$state" != 00000 ] && ! grep -qw -- "$state" <<<"$(allowed_b "$fn")"; then
		kind="SQLSTATE not documented for $fn"
	elif [ "$state" != 00000 ] && grep -qi negative <<<"$msg" && grep -q "'[0-9][^-']*'" <<<"$stmt" && ! grep -q "'-" <<<"$stmt"; then
		kind="message calls a non-negative interval negative"
	fi
	[ -n "$kind" ] && bviol+=("case B$n: $kind: $state $msg"$'\n'"       call: $stmt")
done <"$tmp/b.cases"
if [ ${#bviol[@]} = 0 ]; then
	ok "phase B: $b top-level statements raised what they should"
else
	bad "phase B: ${#bviol[@]} of $b top-level statements"
	printf '     %s\n' "${bviol[@]}"
fi
echo "   (phase B took $((SECONDS - t_b)) s)"

##############################################################################
# After the run: the server is whole and everything reads
##############################################################################
echo "-- after the run"
if wait_for_server; then ok "the server answers"; else bad "the server does not answer"; fi
for rel in pqrun.jobs pqrun.queue_stats pqrun.health pqrun.workers pqrun.job_attempts pqrun.periodic; do
	if out=$(psql -X -qtA -d "$db" -c "SELECT count(*) FROM (SELECT r::text FROM $rel r) s" 2>&1); then
		ok "$rel reads after phase B ($out rows)"
	else
		bad "$rel does not read after phase B: $out"
	fi
done
if out=$(psql -X -qtA -d "$db" -c "SELECT length(pqrun.metrics()) > 0" 2>&1) && [ "$out" = t ]; then
	ok "pqrun.metrics() reads"
else
	bad "pqrun.metrics() does not read: $out"
fi
if [ -n "$log" ] && [ -f "$log" ]; then
	crash=$(tail -c +"$((log_start + 1))" "$log" | grep -E "terminated by signal|server process .* was terminated|PANIC|TRAP:" || true)
	if [ -z "$crash" ]; then
		ok "no crash in the server log since the test started"
	else
		bad "the server log shows a crash:"
		printf '%s\n' "$crash" | head -n 10 | sed 's/^/     /'
	fi
else
	echo "     (PQRUN_WORK is not set: the server log is not checked for crashes)"
fi

echo "-- fuzz: $violations failed check(s) in $((SECONDS - t_start)) s"
[ "$violations" = 0 ]

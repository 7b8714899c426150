#!/usr/bin/env bash
# test/shell/scans.sh — on a big queue, no statement of pqrun reads its job
# tables by a sequential scan: every call of the API, every maintenance
# round. A statement whose condition matches none of the partial indexes,
# or whose generic plan expects the rows it looks for to be many and early
# (LIMIT 1 without an order), reads the whole table each time, which costs
# nothing in a test with ten jobs and everything under a million.
#
# A database of its own: 60,000 READY jobs without a key, 60,000 of 60 keys
# (at most 2 of each key may run), 10,000 delayed an hour, 5,000 in 5 FIFO
# groups, 1,000 BLOCKED on a dependency, 20,000 finished; VACUUM ANALYZE
# (what autovacuum does by then). Then each step below runs in its own
# session, its statistics are flushed (pg_stat_force_next_flush) and
# seq_tup_read of job_live and job_done must not have moved (and it does
# move by the rows of a sequential scan forced on job_live). The
# maintenance worker is idle meanwhile (pqrun.enabled off, for this server
# while the test runs); three of its rounds are the last step, in which they
# promote a delayed job that falls due and reap a job that goes stale.
#
# Not here: a pickup or await_jobs of some queues reads the READY jobs
# without a key of the other queues ahead of theirs (job_live_pick is in
# pickup order, without the queue): a pickup by the index, await_jobs by
# whichever plan is cheaper, also a sequential scan. keys.sh checks
# await_jobs where no other queue has such jobs.
#
# Runs against the already running test server (test/run.sh exports PGHOST,
# PGPORT, PGUSER). Needs psycopg 3.
# Turns the server's maintenance workers off (ALTER SYSTEM) meanwhile:
# test/run.sh: alone
set -uo pipefail

export PGHOST=${PGHOST:?PGHOST must point at the running test server} PGPORT=${PGPORT:-5432} PGUSER=${PGUSER:-postgres}
repo=$(cd "$(dirname "$0")/../.." && pwd)
source "$repo/test/lib/python.sh"
find_psycopg_python || exit 1
db=pqrun_scans_$$
trap 'psql -X -q -d postgres -c "ALTER SYSTEM RESET pqrun.enabled" -c "ALTER SYSTEM RESET pqrun.count_interval" \
	-c "SELECT pg_reload_conf()" \
	-c "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null' EXIT
createdb "$db" || exit 1
psql -X -q -d "$db" -c "SET client_min_messages = warning" -c "CREATE EXTENSION pqrun" || exit 1

PGDATABASE=$db "$py" - <<'PY'
import sys, time
import psycopg

failures = 0
def check(name, ok, detail=""):
    global failures
    print(f"{'ok  ' if ok else 'FAIL'} {name}{': ' + detail if detail else ''}", flush=True)
    failures += 0 if ok else 1

c = psycopg.connect("", autocommit=True)
q = lambda sql, args=None: c.execute(sql, args).fetchall()

def fill(n, extra):
    for start in range(0, n, 10000):
        q("SELECT count(*) FROM pqrun.enqueue_batch((SELECT jsonb_agg(jsonb_build_object('job_type', 'job', "
          f"'payload', jsonb_build_object('n', i){extra}) ORDER BY i) FROM generate_series(%s::int, %s::int) i))",
          (start + 1, min(start + 10000, n)))

t = time.monotonic()
c.execute("SET synchronous_commit = off")
fill(20000, ", 'queue', 'old'")
while True:
    done = q("SELECT count(*) FROM (SELECT pqrun.mark_done(id) FROM pqrun.pickup('filler', queues => '{old}', batch_size => 1000)) s")[0][0]
    if done == 0:
        break
fill(60000, ", 'queue', 'plain'")
q("SELECT pqrun.set_key_limit('keyed', 2)")
fill(60000, ", 'queue', 'keyed', 'concurrency_key', 'k' || (i %% 60)")
fill(10000, ", 'queue', 'later', 'run_after', now() + interval '1 hour'")
fill(5000, ", 'queue', 'fifo', 'fifo_key', 'g' || (i %% 5)")
parent = q("SELECT pqrun.enqueue('parent', queue => 'parents')")[0][0]
fill(1000, f", 'queue', 'children', 'depends_on', jsonb_build_array({parent})")
c.execute("VACUUM ANALYZE")
# (Sizes as ANALYZE found them: a count(*) here would be a sequential scan,
# whose parallel workers' share reaches the statistics a step later.)
print(f"     filled in {time.monotonic() - t:.1f} s: " + ", ".join(
      f"{n} {r:.0f} rows" for n, r in q("SELECT relname, reltuples FROM pg_class WHERE relnamespace = 'pqrun'::regnamespace "
                                         "AND relname ~ '^job_(live|done)' AND relkind = 'r' ORDER BY 1")), flush=True)

# What this session read while filling reaches the statistics now, not
# whenever it next goes idle after a second (inside some step below).
c.execute("SELECT pg_stat_force_next_flush()")

# job_done's rows are in its partitions (0.12.0), which count as one.
def seq_read():
    return dict(q("SELECT CASE WHEN relid = 'pqrun.job_live'::regclass THEN 'job_live' ELSE 'job_done' END,"
                  "       sum(seq_tup_read)::bigint FROM pg_stat_user_tables"
                  " WHERE relid = 'pqrun.job_live'::regclass"
                  "    OR relid IN (SELECT relid FROM pg_partition_tree('pqrun.job_done')) GROUP BY 1"))

# reads(statements): the rows of each table read by sequential scans while
# the statements ran in a session of their own, and the first value the
# last statement that returns rows returned.
def reads(*statements):
    s = psycopg.connect("", autocommit=True)
    s.execute("SELECT pg_stat_force_next_flush()")
    before = seq_read()
    got = None
    for sql in statements:
        cur = s.execute(sql)
        if cur.description:
            got = cur.fetchone()[0]
    s.execute("SELECT pg_stat_force_next_flush()")
    after = seq_read()
    s.close()
    return {k: after[k] - before[k] for k in after}, got

def step(name, *statements):
    read, _ = reads(*statements)
    check(f"{name}: no row read by a sequential scan", not any(read.values()),
          ", ".join(f"{k} {v} rows" for k, v in read.items() if v))

# The API's steps without the maintenance worker, whose rounds would land
# in them (its own step comes last): idle while pqrun.enabled is off.
def set_enabled(on):
    c.execute(f"ALTER SYSTEM {'RESET pqrun.enabled' if on else 'SET pqrun.enabled = off'}")
    c.execute("SELECT pg_reload_conf()")
    time.sleep(1.5)   # a round's length: the worker has read the setting
set_enabled(False)

# One claimed job of each kind, for the steps that end it.
held = {}
for kind, queue in (("done", "plain"), ("error", "plain"), ("release", "plain"), ("snooze", "plain"),
                     ("heartbeat", "plain"), ("cancel", "plain"), ("keyed", "keyed"), ("fifo", "fifo")):
    held[kind] = q(f"SELECT id, lease_token FROM pqrun.pickup('w', queues => '{{{queue}}}')")[0]
lease = lambda kind: f"{held[kind][0]}, lease_token => '{held[kind][1]}'"

# The measure itself: a sequential scan forced on job_live (no index, no
# parallel worker, whose share would reach the statistics late) counts at
# least the rows it returned, or no step below could fail.
read, rows = reads("SET enable_indexscan = off", "SET enable_indexonlyscan = off", "SET enable_bitmapscan = off",
                   "SET max_parallel_workers_per_gather = 0", "SELECT count(*) FROM pqrun.job_live")
check(f"a forced sequential scan of job_live's {rows} rows counts {read.get('job_live')} rows read",
      bool(rows) and read.get("job_live", 0) >= rows)

step("enqueue", "SELECT pqrun.enqueue('x', queue => 'plain')")
step("enqueue with a dedupe key", "SELECT pqrun.enqueue('x', queue => 'plain', dedupe_key => 'd1')",
     "SELECT pqrun.enqueue('x', queue => 'plain', dedupe_key => 'd1')")
step("enqueue into a FIFO group with jobs", "SELECT pqrun.enqueue('x', queue => 'fifo', fifo_key => 'g1')")
step("enqueue into a new FIFO group", "SELECT pqrun.enqueue('x', queue => 'fifo', fifo_key => 'new group')")
step("enqueue with a dependency", f"SELECT pqrun.enqueue('x', queue => 'children', depends_on => ARRAY[{parent}]::bigint[])")
step("enqueue with a key", "SELECT pqrun.enqueue('x', queue => 'keyed', concurrency_key => 'k1')")
step("enqueue_batch", "SELECT count(*) FROM pqrun.enqueue_batch('[{\"job_type\": \"x\", \"queue\": \"plain\"}, "
     "{\"job_type\": \"x\", \"queue\": \"fifo\", \"fifo_key\": \"g2\"}]')")
step("pickup", "SELECT count(*) FROM pqrun.pickup('s')")
step("pickup of a queue", "SELECT count(*) FROM pqrun.pickup('s', queues => '{plain}', batch_size => 3)")
step("pickup of a job type", "SELECT count(*) FROM pqrun.pickup('s', job_types => '{job}')")
step("pickup of a keyed queue", "SELECT count(*) FROM pqrun.pickup('s', queues => '{keyed}', batch_size => 3)")
step("pickup of a FIFO queue", "SELECT count(*) FROM pqrun.pickup('s', queues => '{fifo}')")
step("pickup of an empty queue, waiting", "SELECT count(*) FROM pqrun.pickup('s', queues => '{none}', wait => '0.2 s')")
step("heartbeat", f"SELECT pqrun.heartbeat({lease('heartbeat')}, progress => '{{\"p\": 1}}')")
step("mark_done", f"SELECT pqrun.mark_done({lease('done')})")
step("mark_done of a keyed job", f"SELECT pqrun.mark_done({lease('keyed')})")
step("mark_done of a FIFO job", f"SELECT pqrun.mark_done({lease('fifo')})")
step("mark_done of a parent", f"SELECT count(*) FROM (SELECT pqrun.mark_done(id) FROM pqrun.pickup('s', queues => '{{parents}}')) s")
step("mark_error", f"SELECT pqrun.mark_error({lease('error')}, error => 'e')")
step("release", f"SELECT pqrun.release({lease('release')})")
step("snooze", f"SELECT pqrun.snooze({held['snooze'][0]}, '1 hour', '{held['snooze'][1]}')")
step("cancel of a running job", f"SELECT pqrun.cancel({held['cancel'][0]})")
step("mark_done_and_pickup", "SELECT count(*) FROM (SELECT pqrun.mark_done_and_pickup('s', ARRAY(SELECT id FROM pqrun.pickup('s', queues => '{plain}', batch_size => 2))::bigint[], queues => '{plain}', batch_size => 2)) s")
step("retry of a finished job", "SELECT pqrun.retry((SELECT min(id) FROM pqrun.job_done))")
# The rounds alone: the worker's count of the unfinished jobs for
# pqrun.queue_overview (0.21.0) reads all of job_live by design, every
# pqrun.count_interval and 20 times as long as it took at least, and is
# off for this step.
c.execute("ALTER SYSTEM SET pqrun.count_interval = 0")
set_enabled(True)
# The rounds get work, so that the step shows they ran: a delayed job falls
# due 1 s into it and a claimed job with a 1 s timeout goes stale, and the
# rounds promote the one and reap the other (a round that read nothing
# would pass as well).
due = q("SELECT pqrun.enqueue('x', queue => 'rounds', run_after => now() + interval '1 s')")[0][0]
stale = q("SELECT pqrun.enqueue('x', queue => 'rounds', timeout_seconds => 1)")[0][0]
picked = q("SELECT id FROM pqrun.pickup('w', queues => '{rounds}')")
check("the job to go stale claimed", picked == [(stale,)], f"{picked}")
c.execute("SELECT pg_stat_force_next_flush()")
step("three maintenance rounds", "SELECT pg_sleep(3.5)")
rounds = q("SELECT (SELECT status || ':' || delayed FROM pqrun.job_live WHERE id = %s),"
           "       (SELECT status || ':' || outcome FROM pqrun.job_live, pqrun.attempt_log"
           "         WHERE id = %s AND job_id = id)", (due, stale))[0]
check("... which promoted the delayed job and reaped the stale one", rounds == ("READY:false", "READY:stale"), f"{rounds}")
print(f"{failures} failure(s)")
sys.exit(1 if failures else 0)
PY

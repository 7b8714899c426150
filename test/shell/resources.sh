#!/usr/bin/env bash
# test/shell/resources.sh — what a call of each public function costs in
# memory and buffers does not depend on what else the database holds; a
# batch costs in proportion to its own size; a wait costs the same for 10 s
# as for 1 s.
#
# The public functions are those of schema pqrun whose name does not start
# with "_", as the catalog lists them: each is measured below or named in
# NOT_MEASURED with its reason, else the test fails (a function added
# without a resource check of its own).
#
# Two worlds in a database of its own, the second ten times the first
# (SCALE 1,000, then 10,000), written straight into pqrun's tables where
# the API would be slow, then VACUUM ANALYZE: SCALE paused queues with a
# READY job each (priority -1: behind the measured calls' own jobs); SCALE
# idle keyed queues (queue_control rows an hour old, no job;
# run_maintenance() until it has forgotten them, as its rounds would
# within a minute); a paused keyed queue with SCALE keys of a READY job
# each; SCALE places held in a concurrency limit (claimed through the API,
# a READY job waiting behind them); SCALE delayed jobs, SCALE BLOCKED jobs
# waiting for one job, SCALE schedules; 10 x SCALE finished jobs.
#
# Each call runs in a fresh session after a warm-up by a call of the same
# kind, with the same input of its own in both worlds (jobs of queues of
# its own, made just before, ahead of the world's), at least 30 ms after
# the last call (a full limit is recounted at most every 20 ms). Measured:
# the session's private peak memory (VmHWM less RssShmem of its backend in
# /proc, over warm-up and call, so that a copy of what the world holds
# shows) within 4 MB of the small world's; the buffers the call hit or read
# within 2x + 50 of the small world's (2x + 600 for a call that may recount
# the full limit's places, 256 a time, or not: MAY_RECOUNT; 2x + 100 for
# one that reads a window of the RUNNING jobs or its tail: WINDOWED): EXPLAIN
# (ANALYZE, BUFFERS) of the
# statement, and for CALL await_jobs (which commits inside, and
# pg_stat_statements is not preloaded in the test server) the blocks of
# pqrun's tables and indexes in pg_statio_all_tables, least of three
# calls. What a commit does after the statement (deferred claims,
# wake-ups) is not measured. Then in the large world: enqueue_batch of
# 1,000 and 10,000 jobs, pickup, mark_done_batch and mark_done_and_pickup
# of 100 and 1,000, peak memory within 10x plus 4 MB; and pickup,
# pickup_from, await_jobs and heartbeat waiting 1 s and 10 s all at once,
# woken meanwhile by jobs of a key held at 0 that none can take, each wait
# with the same memory within 1 MB, and having waited. Waits are measured
# with the world's limit lifted (its jobs still RUNNING): in front of it a
# look of an unfiltered waiter recounts its 10,000 places, whose peak then
# varies by up to 1.7 MB from one wait to the next (the buffers of the
# recount are checked above). memory.sh has the sizes that once blew up.
#
# Found by this test when it was written (SCALE 1,000 / 10,000); those not
# yet fixed are listed in KNOWN below: each such check prints "known" while
# its buffers grow, and fails once they are flat, within 1.2x + 50 (then
# remove it from KNOWN):
#   1. (fixed) A pickup that may take jobs of a queue whose limit is full
#      recounted all its places (flow_control.cpp, Verify: job_live by id
#      for each place) when the last recount was 20 ms old: pickup
#      unfiltered or by job type, await_jobs unfiltered read 2,054-2,301 /
#      20,507 buffers in 1.4-6 / 45-94 ms, and up to about 1.7 MB of memory
#      more. A recount now reads 256 places, from where the last stopped:
#      480-530 / 530-629 buffers.
#   2. (fixed) An unfiltered pickup that claims nothing passes every
#      held-back READY job (documented, docs/flow-control.md), and compared
#      each with every control (Blocked): 254-294 ms beside 10,000 controls
#      without the recount, 312-547 with it. The controls of a queue are now
#      found by a binary search: 2.5 / 7.7 ms.
#   3. (fixed) Each session copied all of pqrun.queue_control after any
#      change of the controls (a new keyed queue is one): the first pickup
#      after it read 35-42 / 241-244 buffers, a keyed enqueue into a new
#      queue 38-45 / 246-249. Since 0.19.0 a session reads again only the
#      queues whose controls changed (triggers on queue_control tell which):
#      40 / 41 and 41 / 42.
#   4. (fixed) reap_stale read every RUNNING job: 54-55 / 534-536 buffers.
#      Since 0.19.0 it reads the 1,000 after where the last round stopped.
#   5. (fixed) run_maintenance(): 413-609 / 1,837 buffers: the reap and the
#      orphan rescue each read every RUNNING job (539), the unblock backstop
#      every BLOCKED job (266), the look for idle keyed queues (0.18.0) all
#      of queue_control (230). The last two read 1,000 BLOCKED jobs and 256
#      queues a round, in turn, since 0.18.0 (413 / 1,477), the first two
#      1,000 RUNNING jobs since 0.19.0.
#
# Runs against the already running test server (test/run.sh exports PGHOST,
# PGPORT, PGUSER) in a database of its own; needs to read the server's
# /proc (root, or the server's OS user). Needs psycopg 3. Measures memory
# and buffers, not time:
# test/run.sh: beside the others
set -uo pipefail

export PGHOST=${PGHOST:?PGHOST must point at the running test server} PGPORT=${PGPORT:-5432} PGUSER=${PGUSER:-postgres}
repo=$(cd "$(dirname "$0")/../.." && pwd)
source "$repo/test/lib/python.sh"
find_psycopg_python || exit 1
db=pqrun_resources_$$
trap 'psql -X -q -d postgres -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null' EXIT
createdb "$db" || exit 1
psql -X -q -d "$db" -c "SET client_min_messages = warning" -c "CREATE EXTENSION pqrun" || exit 1
log=${PQRUN_WORK:+$PQRUN_WORK/server.log}
log_from=0
[ -n "$log" ] && [ -f "$log" ] && log_from=$(stat -c %s "$log")
pid=$(psql -X -qtA -d "$db" -c "SELECT pid FROM pg_stat_activity WHERE backend_type = 'checkpointer'")
[ -r "/proc/$pid/status" ] || { echo "cannot read the server's /proc/<pid>/status here"; exit 77; }

PGDATABASE=$db PYTHONPATH="$repo/test/lib" "$py" - <<'PY'
import itertools, threading, time
import psycopg
import backend_memory
from backend_memory import check, hwm_kb, peak_over

started = time.monotonic()
admin = psycopg.connect("", autocommit=True)
def a(sql, args=None):
    cur = admin.execute(sql, args)
    return cur.fetchall() if cur.description else []
version = a("SELECT extversion FROM pg_extension WHERE extname = 'pqrun'")[0][0]
print(f"     pqrun {version}", flush=True)

# Buffers that still grow with the world (the defects above, by number).
KNOWN = {}

# Calls that may take a job of the world's full queue, and so recount 256 of
# its places (up to about 600 buffers) when its last recount is 20 ms old:
# whether one does depends on what the server's other sessions did
# meanwhile, in either world, so the recount's constant is allowed for.
MAY_RECOUNT = {"pickup by job type", "pickup, unfiltered", "pickup, unfiltered, finding nothing",
               "await_jobs, unfiltered"}
# Calls that go on from where the database's last maintenance round left
# its cursor over the RUNNING jobs, a window of at most 1,000 of them
# (kRunningWindow, about 56 buffers): in either world a call may read a
# whole window or the last few jobs of one, depending on the worker's
# rounds meanwhile (2 and 56 buffers seen beside 1,000 and 10,000 places
# held), so one window is allowed for.
WINDOWED = {"reap_stale"}

def check_buffers(what, small, large, detail):
    slack = 600 if what in MAY_RECOUNT else 100 if what in WINDOWED else 50
    if what not in KNOWN:
        check(f"{what}: buffers beside {LARGE:,} within 2x + {slack} of beside {SMALL:,}", large <= 2 * small + slack,
              detail)
    elif large <= small + small // 5 + 50:
        # Flat, not merely near the bound (the small world's figure moves
        # with what the rest of the server does meanwhile).
        check(f"{what}: buffers beside {LARGE:,} within 1.2x + 50 of beside {SMALL:,} now: remove it from KNOWN",
              False, detail)
    else:
        print(f"known {what}: buffers grow with the world (defect {KNOWN[what]} above): {detail}", flush=True)

# ---- the functions ------------------------------------------------------------
NOT_MEASURED = {
    "grant_producer": "GRANTs on a fixed set of pqrun's objects; reads and writes no job",
    "grant_worker": "GRANTs on a fixed set of pqrun's objects; reads and writes no job",
    "grant_operator": "GRANTs on a fixed set of pqrun's objects; reads and writes no job",
    "retry_jobs": "a bulk action: reads its filter's table (job_done) in id order, batch_size matches a transaction; "
                  "the table it filters is its input by design",
    "cancel_jobs": "a bulk action: reads its filter's table (job_live) in id order, batch_size matches a transaction; "
                   "the table it filters is its input by design",
    "grant_monitor": "GRANTs on a fixed set of pqrun's objects; reads and writes no job",
    "distribute": "needs Citus (0A000 here); citus.sh runs it",
    "queue_node": "needs Citus (0A000 here); citus.sh runs it",
    "cron_next": "computes from its arguments alone; reads no table",
    "metrics": "a monitor's report: a line per queue, job type, control and key, so the world's size by design",
}
public = {r[0] for r in a("SELECT DISTINCT proname::text FROM pg_proc"
                          " WHERE pronamespace = 'pqrun'::regnamespace AND proname NOT LIKE '\\_%'")}

# ---- the worlds ---------------------------------------------------------------
def live(status, queue, extra_cols="", extra_vals="", lo=1, hi=1, priority=0, run_after="now()"):
    a(f"INSERT INTO pqrun.job_live (status, priority, max_attempts, run_after, created_at, updated_at,"
      f" queue, job_type, payload{extra_cols})"
      f" SELECT %s::pqrun.job_status, %s, 5, {run_after}, now(), now(), {queue}, 'world', '{{}}'{extra_vals}"
      f" FROM generate_series(%s::int, %s::int) g", (status, priority, lo, hi))

def bump():
    """A change of the controls through the API: every session brings its copy up to date."""
    a("SELECT pqrun.pause_queue('bump')")
    a("SELECT pqrun.resume_queue('bump')")

a("SELECT pqrun.pause_queue('paused-root')")
root = a("SELECT pqrun.enqueue('world', queue => 'paused-root')")[0][0]
a("INSERT INTO pqrun.queue_control (queue, paused, keyed) VALUES ('lanes', true, true)")

def grow(lo, hi):
    t = time.monotonic()
    n = hi - lo + 1
    a("INSERT INTO pqrun.queue_control (queue, paused) SELECT 'paused-' || g, true FROM generate_series(%s::int, %s::int) g",
      (lo, hi))
    live("READY", "'paused-' || g", lo=lo, hi=hi, priority=-1)
    a("INSERT INTO pqrun.queue_control (queue, keyed, updated_at)"
      " SELECT 'keyed-' || g, true, now() - interval '1 hour' FROM generate_series(%s::int, %s::int) g", (lo, hi))
    live("READY", "'lanes'", ", concurrency_key", ", 'key-' || g", lo, hi)
    live("READY", "'later'", ", delayed", ", true", lo, hi, run_after="now() + interval '1 hour'")
    # With their edges in the same transaction: a maintenance round makes
    # a BLOCKED job without one READY.
    a("WITH j AS (INSERT INTO pqrun.job_live (status, priority, max_attempts, run_after, created_at, updated_at, queue,"
      " job_type, payload, depends_on) SELECT 'BLOCKED', 0, 5, now(), now(), now(), 'blocked', 'world', '{}', ARRAY[%s]::bigint[]"
      " FROM generate_series(%s::int, %s::int) RETURNING id) INSERT INTO pqrun.job_dep (job_id, dep_id) SELECT id, %s FROM j",
      (root, lo, hi, root))
    a("UPDATE pqrun.job_live SET has_dependents = true WHERE id = %s", (root,))
    a("INSERT INTO pqrun.periodic (name, job_type, run_every, next_run)"
      " SELECT 'schedule-' || g, 'world', interval '1 day', now() + interval '1 day' FROM generate_series(%s::int, %s::int) g",
      (lo, hi))
    a("INSERT INTO pqrun.job_done (id, status, priority, attempts, max_attempts, run_after, locked_at, finished_at,"
      " created_at, updated_at, lease_token, queue, job_type, locked_by, outcome, payload, duration_ms)"
      " SELECT nextval('pqrun.job_id_seq'), s::pqrun.job_status, 0, 1, 5, t, t, t, t, t, gen_random_uuid(),"
      "        'history', 'world', 'w', lower(s), '{}', 1"
      "   FROM generate_series(%s::int, %s::int) g,"
      "        LATERAL (SELECT now() - (g %% 7200) * interval '1 second',"
      "                        CASE WHEN g %% 10 = 0 THEN 'FAILED' ELSE 'DONE' END) x(t, s)", (10 * lo - 9, 10 * hi))
    # Places held, claimed through the API (as memory.sh): the limit counts them.
    a("SELECT pqrun.set_concurrency_limit('full', %s)", (hi,))
    for first in range(0, n, 5000):
        a("SELECT count(*) FROM pqrun.enqueue_batch((SELECT jsonb_agg(jsonb_build_object('job_type', 'world', 'queue', 'full'))"
          " FROM generate_series(1, %s)))", (min(5000, n - first),))
    a("SELECT count(*) FROM pqrun.pickup('holder', queues => '{full}', batch_size => %s)", (n,))
    if lo == 1:
        a("SELECT pqrun.enqueue('world', queue => 'full', priority => -1)")
    for table in ("job_live", "job_done", "job_dep", "queue_control", "periodic", "attempt_log"):
        admin.execute(f"VACUUM ANALYZE pqrun.{table}")
    bump()
    # Maintenance as its rounds would have run by then: it forgets idle
    # keyed queues (0.18.0), looking at 256 queues a round, in turn.
    for _ in range(200):
        a("SELECT pqrun.run_maintenance()")
        if a("SELECT count(*) FROM pqrun.queue_control WHERE keyed AND queue LIKE 'keyed-%%'")[0][0] == 0:
            break
    places = a("SELECT sum(places) FROM pqrun._flow_counters() f JOIN pqrun.queue_control c ON c.id = f.control_id"
               " WHERE c.queue = 'full'")[0][0]
    keyed = a("SELECT count(*) FROM pqrun.queue_control WHERE keyed")[0][0]
    counts = a("SELECT (SELECT count(*) FROM pqrun.queue_control),"
               " (SELECT count(*) FROM pqrun.job_live), (SELECT count(*) FROM pqrun.job_done)")[0]
    print(f"     world of {hi}: {counts[0]} controls ({keyed} keyed), {counts[1]} unfinished jobs, {counts[2]} finished,"
          f" {places} places held (built in {time.monotonic() - t:.1f} s)", flush=True)
    check(f"world of {hi}: {hi} places held in the limit of queue full", places == hi, str(places))

# ---- the calls ----------------------------------------------------------------
seq = itertools.count()

def ready(n=1, queue="own", job_type="t", timeout=None):
    """n READY jobs of the queue, ahead of the world's."""
    return [r[0] for r in a("SELECT pqrun.enqueue(%s, queue => %s, priority => 10, timeout_seconds => %s)"
                            " FROM generate_series(1, %s)", (job_type, queue, timeout, n))]

def running(n=1, queue="own", timeout=None):
    ready(n, queue, timeout=timeout)
    return [tuple(r) for r in a("SELECT id, lease_token FROM pqrun.pickup('prep', queues => ARRAY[%s], batch_size => %s)",
                                (queue, n))]

def cancelled():
    job = ready()[0]
    a("SELECT pqrun.cancel(%s)", (job,))
    return job

def old_history():
    """10 DONE jobs finished 10 days ago, for purge."""
    a("INSERT INTO pqrun.job_done (id, status, priority, attempts, max_attempts, run_after, finished_at, created_at,"
      " updated_at, queue, job_type, payload) SELECT nextval('pqrun.job_id_seq'), 'DONE', 0, 1, 5, t, t, t, t,"
      " 'own-old', 't', '{}' FROM generate_series(1, 10), LATERAL (SELECT now() - interval '10 days') x(t)")

def fresh_queue():
    return f"own-ctl-{next(seq)}"

def paused_queue():
    q = fresh_queue()
    a("SELECT pqrun.pause_queue(%s)", (q,))
    return q

def scheduled():
    name = f"own-schedule-{next(seq)}"
    a("SELECT pqrun.schedule(%s, 't', run_every => '1 hour', queue => 'own')", (name,))
    return name

def done_and_ready():
    job = running()[0]
    ready()
    return job

def after_bump():
    ready()
    bump()

def cleanup():
    a("SELECT count(pqrun.cancel(id)) FROM pqrun.job_live WHERE queue LIKE 'own%'")
    if a("DELETE FROM pqrun.queue_control WHERE queue LIKE 'own-ctl-%' RETURNING 1"):
        bump()

SELECT = "select"
# (what, function, prepare() -> ctx, statement(ctx) -> (sql, args), kind): the
# warm-up and the measured call each get a ctx of their own.
CASES = [
    ("enqueue", "enqueue", None, lambda _: ("SELECT pqrun.enqueue('t', queue => 'own')", None)),
    ("enqueue with a dedupe key", "enqueue", lambda: f"d{next(seq)}",
     lambda k: ("SELECT pqrun.enqueue('t', queue => 'own', dedupe_key => %s)", (k,))),
    ("enqueue with a dependency and a FIFO key", "enqueue", lambda: ready()[0],
     lambda d: ("SELECT pqrun.enqueue('t', queue => 'own', depends_on => ARRAY[%s]::bigint[], fifo_key => 'f')", (d,))),
    ("enqueue of a keyed job into a new queue", "enqueue", fresh_queue,
     lambda q: ("SELECT pqrun.enqueue('t', queue => %s, concurrency_key => 'k')", (q,))),
    ("enqueue_batch of 100", "enqueue_batch", None,
     lambda _: ("SELECT * FROM pqrun.enqueue_batch((SELECT jsonb_agg(jsonb_build_object('job_type', 't', 'queue', 'own'))"
                " FROM generate_series(1, 100)))", None)),
    ("enqueue_batch of 100 keyed jobs", "enqueue_batch", None,
     lambda _: ("SELECT * FROM pqrun.enqueue_batch((SELECT jsonb_agg(jsonb_build_object('job_type', 't',"
                " 'queue', 'own-keyed', 'concurrency_key', 'k' || g)) FROM generate_series(1, 100) g))", None)),
    ("pickup by queue", "pickup", ready, lambda _: ("SELECT * FROM pqrun.pickup('w', queues => '{own}')", None)),
    ("pickup by job type", "pickup", lambda: ready(job_type="own-t"),
     lambda _: ("SELECT * FROM pqrun.pickup('w', job_types => '{own-t}')", None)),
    ("pickup, unfiltered", "pickup", ready, lambda _: ("SELECT * FROM pqrun.pickup('w')", None)),
    ("pickup, unfiltered, finding nothing", "pickup", None, lambda _: ("SELECT * FROM pqrun.pickup('w')", None)),
    ("pickup by queue, the first after a change of the controls", "pickup", after_bump,
     lambda _: ("SELECT * FROM pqrun.pickup('w', queues => '{own}')", None)),
    ("pickup of a keyed job by queue", "pickup", lambda: ready(queue="own-keyed"),
     lambda _: ("SELECT * FROM pqrun.pickup('w', queues => '{own-keyed}')", None)),
    ("pickup_from", "pickup_from", ready, lambda _: ("SELECT * FROM pqrun.pickup_from('w', 'own')", None)),
    ("mark_done", "mark_done", lambda: running()[0], lambda j: ("SELECT pqrun.mark_done(%s, '{}', %s)", j)),
    ("mark_done_batch of 10", "mark_done_batch", lambda: running(10),
     lambda js: ("SELECT pqrun.mark_done_batch(%s::bigint[], %s::uuid[])", ([j[0] for j in js], [j[1] for j in js]))),
    ("mark_done_and_pickup", "mark_done_and_pickup", done_and_ready,
     lambda j: ("SELECT * FROM pqrun.mark_done_and_pickup('w', ARRAY[%s]::bigint[], ARRAY[%s]::uuid[],"
                " queues => '{own}')", j)),
    ("mark_error", "mark_error", lambda: running()[0],
     lambda j: ("SELECT pqrun.mark_error(%s, 'e', lease_token => %s)", j)),
    ("mark_error, terminal", "mark_error", lambda: running()[0],
     lambda j: ("SELECT pqrun.mark_error(%s, 'e', true, %s)", j)),
    ("heartbeat", "heartbeat", lambda: running()[0],
     lambda j: ("SELECT pqrun.heartbeat(%s, %s, '{\"step\": 1}')", j)),
    ("release", "release", lambda: running()[0], lambda j: ("SELECT pqrun.release(%s, %s)", j)),
    ("snooze", "snooze", lambda: running()[0], lambda j: ("SELECT pqrun.snooze(%s, '1 hour', %s)", j)),
    ("reap_stale", "reap_stale", None, lambda _: ("SELECT pqrun.reap_stale()", None)),
    ("cancel", "cancel", lambda: ready()[0], lambda j: ("SELECT pqrun.cancel(%s)", (j,))),
    ("retry", "retry", cancelled, lambda j: ("SELECT pqrun.retry(%s)", (j,))),
    ("purge of 10 jobs", "purge", old_history, lambda _: ("SELECT pqrun.purge('5 days')", None)),
    ("purge of none", "purge", None, lambda _: ("SELECT pqrun.purge('1000 years', '{DONE,FAILED,CANCELLED}')", None)),
    ("run_maintenance", "run_maintenance", None, lambda _: ("SELECT pqrun.run_maintenance()", None)),
    ("job_dependents of the job SCALE BLOCKED jobs wait for, 100 of them", "job_dependents", None,
     lambda _: ("SELECT * FROM pqrun.job_dependents(%s, 100)", (root,))),
    ("await_jobs by queue", "await_jobs", ready,
     lambda _: ("CALL pqrun.await_jobs(queues => '{own}', wait => '1 s')", None), "call"),
    ("await_jobs, unfiltered", "await_jobs", ready, lambda _: ("CALL pqrun.await_jobs(wait => '1 s')", None), "call"),
    ("schedule", "schedule", lambda: f"own-schedule-{next(seq)}",
     lambda n: ("SELECT pqrun.schedule(%s, 't', run_every => '1 hour', queue => 'own')", (n,))),
    ("unschedule", "unschedule", scheduled, lambda n: ("SELECT pqrun.unschedule(%s)", (n,))),
    ("pause_queue", "pause_queue", fresh_queue, lambda q: ("SELECT pqrun.pause_queue(%s)", (q,))),
    ("resume_queue", "resume_queue", paused_queue, lambda q: ("SELECT pqrun.resume_queue(%s)", (q,))),
    ("set_concurrency_limit", "set_concurrency_limit", fresh_queue,
     lambda q: ("SELECT pqrun.set_concurrency_limit(%s, 5)", (q,))),
    ("set_rate_limit", "set_rate_limit", fresh_queue, lambda q: ("SELECT pqrun.set_rate_limit(%s, 10, 5)", (q,))),
    ("set_key_limit", "set_key_limit", fresh_queue, lambda q: ("SELECT pqrun.set_key_limit(%s, 2)", (q,))),
    ("set_key_rate_limit", "set_key_rate_limit", fresh_queue,
     lambda q: ("SELECT pqrun.set_key_rate_limit(%s, 5, 10)", (q,))),
]

def blocks_of_pqrun():
    """Blocks of pqrun's tables and indexes hit or read in this database."""
    a("SELECT pg_stat_force_next_flush()")
    return a("SELECT coalesce(sum(coalesce(heap_blks_hit, 0) + coalesce(heap_blks_read, 0) + coalesce(idx_blks_hit, 0)"
             " + coalesce(idx_blks_read, 0) + coalesce(toast_blks_hit, 0) + coalesce(toast_blks_read, 0)"
             " + coalesce(tidx_blks_hit, 0) + coalesce(tidx_blks_read, 0)), 0)::bigint"
             " FROM pg_statio_all_tables WHERE schemaname = 'pqrun'")[0][0]

# A full limit is recounted by a pickup that looks at it at most every 20 ms
# (flow_control.cpp, kVerifyEveryMs): each measured call comes later than
# that after the last, in both worlds alike.
RECOUNT = 0.03

def measure(prepare, statement, kind=SELECT):
    """(buffers, the session's private peak MB, MB it grew by during the
    call, ms the call took)."""
    with psycopg.connect("", autocommit=True) as s:
        pid = s.info.backend_pid
        s.execute(*statement(prepare() if prepare else None))
        before = hwm_kb(pid)
        if kind == SELECT:
            sql, args = statement(prepare() if prepare else None)
            time.sleep(RECOUNT)
            explained = s.execute("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + sql, args).fetchone()[0][0]
            buffers = explained["Plan"]["Shared Hit Blocks"] + explained["Plan"]["Shared Read Blocks"]
            ms = explained["Execution Time"]
        else:
            buffers = ms = None
            for _ in range(3):  # the least: a maintenance round may read meanwhile
                ctx = prepare() if prepare else None
                start = blocks_of_pqrun()
                time.sleep(RECOUNT)
                t = time.monotonic()
                s.execute(*statement(ctx))
                took = (time.monotonic() - t) * 1000
                s.execute("SELECT pg_stat_force_next_flush()")
                blocks = blocks_of_pqrun() - start
                buffers, ms = (blocks, took) if buffers is None or blocks < buffers else (buffers, ms)
        after = hwm_kb(pid)
    return buffers, after / 1024, (after - before) / 1024, ms

results = {}
def run_cases(world):
    t = time.monotonic()
    for case in CASES:
        what, _, prepare, statement = case[:4]
        try:
            results[(world, what)] = measure(prepare, statement, *case[4:])
        except psycopg.Error as e:
            results[(world, what)] = None
            check(f"world of {world}: {what} runs", False, str(e).strip().splitlines()[0])
        cleanup()
    print(f"     {len(CASES)} calls measured in the world of {world} ({time.monotonic() - t:.1f} s)", flush=True)

SMALL, LARGE = 1000, 10000
grow(1, SMALL)
run_cases(SMALL)
grow(SMALL + 1, LARGE)
run_cases(LARGE)

for case in CASES:
    what = case[0]
    small, large = results[(SMALL, what)], results[(LARGE, what)]
    if small is None or large is None:
        continue
    check_buffers(what, small[0], large[0], f"{small[0]}, {large[0]} (in {small[3]:.1f} ms, {large[3]:.1f} ms)")
    check(f"{what}: peak memory beside {LARGE:,} within 4 MB of beside {SMALL:,}", large[1] <= small[1] + 4,
          f"{small[1]:.1f} MB (+{small[2]:.1f} in the call), {large[1]:.1f} MB (+{large[2]:.1f})")

# ---- batches: n and 10 n of the call's own input, in the large world -----------
def batch_of(make, statement):
    """(MB the call grew a warmed-up session by, buffers) for make(n) -> ctx."""
    def run(n):
        ctx_warm, ctx = make(10), make(n)
        with psycopg.connect("", autocommit=True) as s:
            pid = s.info.backend_pid
            s.execute(*statement(10, ctx_warm))
            before = hwm_kb(pid)
            sql, args = statement(n, ctx)
            plan = s.execute("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + sql, args).fetchone()[0][0]["Plan"]
            grew = (hwm_kb(pid) - before) / 1024
        cleanup()
        return grew, plan["Shared Hit Blocks"] + plan["Shared Read Blocks"]
    return run

BATCHES = [
    ("enqueue_batch", (1000, 10000), lambda n: None,
     lambda n, _: ("SELECT * FROM pqrun.enqueue_batch((SELECT jsonb_agg(jsonb_build_object('job_type', 't',"
                   " 'queue', 'own', 'payload', jsonb_build_object('n', g))) FROM generate_series(1, %s) g))", (n,))),
    ("pickup batch_size", (100, 1000), lambda n: ready(n),
     lambda n, _: ("SELECT * FROM pqrun.pickup('w', queues => '{own}', batch_size => %s)", (n,))),
    ("mark_done_batch", (100, 1000), running,
     lambda n, js: ("SELECT pqrun.mark_done_batch(%s::bigint[], %s::uuid[])", ([j[0] for j in js], [j[1] for j in js]))),
    ("mark_done_and_pickup", (100, 1000), lambda n: (running(n), ready(n)),
     lambda n, c: ("SELECT * FROM pqrun.mark_done_and_pickup('w', %s::bigint[], %s::uuid[], queues => '{own}',"
                   " batch_size => %s)", ([j[0] for j in c[0]], [j[1] for j in c[0]], n))),
]
batched = set()
for name, (n, big), make, statement in BATCHES:
    run = batch_of(make, statement)
    try:
        (grew_n, buf_n), (grew_big, buf_big) = run(n), run(big)
    except psycopg.Error as e:
        check(f"{name} of {n} and {big} runs", False, str(e).strip().splitlines()[0])
        continue
    batched.add(name.split()[0])
    # A peak below the session's last (a negative growth: the kernel gave
    # pages back meanwhile) counts as none.
    check(f"{name} of {big:,}: peak memory within 10x of {n:,}'s plus 4 MB", grew_big <= 10 * max(grew_n, 0) + 4,
          f"+{grew_n:.1f} MB, +{grew_big:.1f} MB (buffers {buf_n}, {buf_big})")

# ---- waits of 1 s and 10 s, in the large world, all at once ---------------------
# Without the limit of queue full, whose recounts the checks above measure
# (see the header); its jobs still RUNNING.
a("SELECT count(pqrun.cancel(id)) FROM pqrun.job_live WHERE queue = 'full' AND status = 'READY'")
a("SELECT pqrun.set_concurrency_limit('full', NULL)")
a("SELECT pqrun.set_key_limit('noise', 0, 'stuck')")
beats = running(4, "own-beat", timeout=60)
WAITS = [
    ("pickup, unfiltered", "pickup",
     lambda w, _: ("SELECT string_agg(queue || ' ' || id, ', ') FROM pqrun.pickup('w', wait => %s)", (w,))),
    ("pickup_from", "pickup_from",
     lambda w, _: ("SELECT string_agg(queue || ' ' || id, ', ') FROM pqrun.pickup_from('w', 'noise', wait => %s)", (w,))),
    ("await_jobs, unfiltered", "await_jobs", lambda w, _: ("CALL pqrun.await_jobs(wait => %s)", (w,))),
    ("heartbeat", "heartbeat", lambda w, j: ("SELECT NULL FROM pqrun.heartbeat(%s, %s, wait => %s)", (*j, w))),
]
waited = {}
def waiter(what, statement, seconds):
    job = (beats[2 * (seconds == 10)], beats[2 * (seconds == 10) + 1]) if what == "heartbeat" else (None, None)
    answers = []
    def call(s):
        t = time.monotonic()
        answers.append((s.execute(*statement(f"{seconds} s", job[1])).fetchone()[0], time.monotonic() - t))
    try:
        grew = peak_over(lambda s: s.execute(*statement("0.2 s", job[0])).fetchall(), call)
        waited[(what, seconds)] = (grew, *answers[0])
    except psycopg.Error as e:
        waited[(what, seconds)] = str(e).strip().splitlines()[0]
stop = threading.Event()
def noise():
    """Jobs of a key held at 0: they wake the waiters, none can take them."""
    with psycopg.connect("", autocommit=True) as s:
        while not stop.wait(0.1):
            s.execute("SELECT pqrun.enqueue('t', queue => 'noise', concurrency_key => 'stuck')")
threads = [threading.Thread(target=waiter, args=(what, statement, seconds))
           for what, _, statement in WAITS for seconds in (1, 10)]
noiser = threading.Thread(target=noise)
noiser.start()
t = time.monotonic()
for th in threads:
    th.start()
for th in threads:
    th.join()
stop.set()
noiser.join()
woken = a("SELECT count(*) FROM pqrun.job_live WHERE queue = 'noise'")[0][0]
print(f"     waits of 1 s and 10 s at once, {woken} jobs of the held key meanwhile ({time.monotonic() - t:.1f} s)", flush=True)
for what, _, _ in WAITS:
    short, long = waited.get((what, 1)), waited.get((what, 10))
    if isinstance(short, str) or isinstance(long, str) or short is None or long is None:
        check(f"{what} waiting 1 s and 10 s runs", False, f"{short}; {long}")
        continue
    check(f"{what} waiting 10 s: peak memory within 1 MB of waiting 1 s's, having waited",
          long[0] <= short[0] + 1 and short[2] >= 0.9 and long[2] >= 9 and not short[1] and not long[1],
          f"+{short[0]:.1f} MB in {short[2]:.1f} s, +{long[0]:.1f} MB in {long[2]:.1f} s (answers {short[1]}, {long[1]})")
a("SELECT pqrun.set_key_limit('noise', NULL, 'stuck')")

# ---- every public function measured or named ------------------------------------
measured = {case[1] for case in CASES} | batched | {w[1] for w in WAITS}
for name in sorted(public):
    if name in NOT_MEASURED:
        print(f"     {name}: not measured, {NOT_MEASURED[name]}", flush=True)
    ok = name in measured or name in NOT_MEASURED
    check(f"{name}: measured, or named with the reason it is not", ok,
          "" if ok else "a public function without a resource check: add a case, or name it in NOT_MEASURED")
for name in sorted((measured | set(NOT_MEASURED)) - public):
    check(f"{name}, measured or named here, is a public function", False, "no longer in the catalog")
backend_memory.summary(f"resources ({time.monotonic() - started:.0f} s)")
raise SystemExit(1 if backend_memory.failures else 0)
PY
status=$?
if [ -n "$log" ] && [ -f "$log" ] && tail -c +$((log_from + 1)) "$log" | grep -q "terminated by signal"; then
	echo "FAIL the server log shows a process terminated by a signal"
	status=1
fi
exit $status

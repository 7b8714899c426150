#!/usr/bin/env bash
# test/shell/filters.sh — a backlog in one queue and job type costs the
# pickups of other queues and job types nothing.
#
# Reproduction on 0.15.0 (job_live_pick is in pickup order, without queue
# or job type): beside 200,000 READY jobs of job type iso_a (half of them in
# queue qa), EXPLAIN (ANALYZE, BUFFERS) of pickup('w', job_types =>
# '{iso_b}') read 4,819 buffers (33 ms), of pickup('w', queues => '{qb}')
# 4,819 (47 ms), where pickup('w', job_types => '{iso_a}') read 317: every
# filtered pickup walked the other queues' and job types' READY jobs ahead
# of its own.
#
# Here, in a database of its own: 20 READY jobs of queue qb, job type tb,
# beside 100,000 and then 1,000,000 READY jobs of queue qa, job type ta, of
# a higher priority (so ahead of them in pickup order; written straight
# into job_live, then VACUUM ANALYZE). At both sizes each
# filtered form of the API (by job type, by queue, by both, batch, waiting,
# mark_done_and_pickup, and a look of await_jobs) reads fewer than 100
# buffers (EXPLAIN (ANALYZE, BUFFERS) of the call; the blocks of job_live
# and its indexes for await_jobs, which commits inside), about as many at
# both sizes, and none reads job_live by a sequential scan. Each runs in a
# transaction rolled back after it, so each finds the same jobs. Positive
# control: with job_live_pick_type dropped (in a rolled-back transaction),
# the pickup by job type falls back to job_live_pick and reads thousands.
# Last, a worker's filtered pickups under a transaction that holds back
# vacuum read about as many buffers after 1,000 as after 10,000 claims of
# their own (each starts at its filter's own hint, 0.19.0). The maintenance
# worker is idle meanwhile (pqrun.enabled off, for this server while the
# test runs).
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
db=pqrun_filters_$$
trap 'psql -X -q -d postgres -c "ALTER SYSTEM RESET pqrun.enabled" -c "SELECT pg_reload_conf()" \
	-c "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null' EXIT
createdb "$db" || exit 1
psql -X -q -d "$db" -c "SET client_min_messages = warning" -c "CREATE EXTENSION pqrun" || exit 1
psql -X -q -d postgres -c "ALTER SYSTEM SET pqrun.enabled = off" -c "SELECT pg_reload_conf()" >/dev/null

PGDATABASE=$db "$py" - <<'PY'
import json, time
import psycopg

failures = 0
def check(name, ok, detail=""):
    global failures
    print(f"{'ok  ' if ok else 'FAIL'} {name}{': ' + detail if detail else ''}", flush=True)
    failures += 0 if ok else 1

c = psycopg.connect("", autocommit=True)
q = lambda sql, args=None: c.execute(sql, args).fetchall()

def fill(n, queue, job_type):
    c.execute("INSERT INTO pqrun.job_live (status, priority, max_attempts, run_after, created_at, updated_at, queue, job_type, payload)"
      " SELECT 'READY', 1, 5, now(), now(), now(), %s, %s, '{}' FROM generate_series(1, %s)", (queue, job_type, n))

def explained(sql):
    """Buffers the statement read (hit or read), in a transaction rolled back
    after it; its second run, after one that prepared its plans and filled
    the caches."""
    for _ in range(2):
        with c.transaction(force_rollback=True):
            plan = q("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + sql)[0][0][0]["Plan"]
    return plan["Shared Hit Blocks"] + plan["Shared Read Blocks"], plan["Actual Rows"]

def statio():
    q("SELECT pg_stat_force_next_flush()")
    return q("SELECT coalesce(sum(heap_blks_hit + heap_blks_read + idx_blks_hit + idx_blks_read), 0)::bigint,"
             " (SELECT seq_scan FROM pg_stat_user_tables WHERE relid = 'pqrun.job_live'::regclass)"
             " FROM pg_statio_user_tables WHERE relid = 'pqrun.job_live'::regclass")[0]

def await_look():
    """Blocks of job_live and its indexes one await_jobs look read, from
    another session (its second look, as explained())."""
    with psycopg.connect("", autocommit=True) as s:
        for _ in range(2):
            before = statio()
            ready = s.execute("CALL pqrun.await_jobs(job_types => '{tb}', queues => '{qb}', wait => '1 s')").fetchone()[0]
            s.execute("SELECT pg_stat_force_next_flush()")
            after = statio()
    return after[0] - before[0], ready, after[1] - before[1]

first = q("SELECT pqrun.enqueue('tb', queue => 'qb')")[0][0]
q("SELECT count(pqrun.enqueue('tb', queue => 'qb')) FROM generate_series(2, 20)")
forms = {
    "by job type": "SELECT * FROM pqrun.pickup('w', job_types => '{tb}')",
    "by queue": "SELECT * FROM pqrun.pickup('w', queues => '{qb}')",
    "by queue and job type": "SELECT * FROM pqrun.pickup('w', job_types => '{tb}', queues => '{qb}')",
    "by two job types, batch of 5": "SELECT * FROM pqrun.pickup('w', job_types => '{tb,nope}', batch_size => 5)",
    "by queue, waiting": "SELECT * FROM pqrun.pickup('w', queues => '{qb}', wait => '1 s')",
    "pickup_from": "SELECT * FROM pqrun.pickup_from('w', 'qb', job_types => '{tb}')",
    "mark_done_and_pickup by job type": f"SELECT * FROM pqrun.mark_done_and_pickup('w', '{{}}', job_types => '{{tb}}')",
    "by a job type with nothing READY": "SELECT * FROM pqrun.pickup('w', job_types => '{none}')",
}
seen = {}
for size, more in ((100000, 100000), (1000000, 900000)):
    t = time.monotonic()
    fill(more, "qa", "ta")
    c.execute("VACUUM ANALYZE pqrun.job_live")
    print(f"     {size} jobs of queue qa, job type ta, beside 20 of qb, tb (filled in {time.monotonic() - t:.1f} s)", flush=True)
    seq_before = statio()[1]
    for name, sql in forms.items():
        buffers, rows = explained(sql)
        want = 0 if "nothing" in name else 5 if "batch" in name else 1
        check(f"{size}: {name} claims {want} reading {buffers} buffers", rows == want and buffers < 100)
        seen.setdefault(name, []).append(buffers)
    blocks, ready, seq = await_look()
    check(f"{size}: an await_jobs look by queue and job type answers ready reading {blocks} blocks", ready and blocks < 100)
    seen.setdefault("await_jobs", []).append(blocks)
    check(f"{size}: no sequential scan of job_live", statio()[1] == seq_before)
for name, (small, big) in seen.items():
    check(f"{name}: as many buffers beside 1,000,000 as beside 100,000 ({small}, {big})", big <= small + 10)

# Positive control: without its lanes the pickup by job type walks
# job_live_pick; in a session of its own, which has no hint of that filter
# yet (one would start it at tb's first job, 0.19.0).
with psycopg.connect("", autocommit=True) as fresh, fresh.transaction(force_rollback=True):
    fresh.execute("DROP INDEX pqrun.job_live_pick_type")
    plan = fresh.execute("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + forms["by job type"]).fetchall()[0][0][0]["Plan"]
    buffers = plan["Shared Hit Blocks"] + plan["Shared Read Blocks"]
check(f"positive control: without job_live_pick_type the pickup by job type reads {buffers} buffers", buffers > 1000)
# The longest names enqueue accepts (docs/api.md, 1,000 bytes each) fit both lanes' indexes.
long_type, long_queue = "t" * 1000, "q" * 1000
q("SELECT pqrun.enqueue(%s, queue => %s)", (long_type, long_queue))
by_type = q("SELECT count(*) FROM pqrun.pickup('w', job_types => ARRAY[%s])", (long_type,))[0][0]
q("SELECT pqrun.release(id) FROM pqrun.jobs WHERE job_type = %s", (long_type,))
by_queue = q("SELECT count(*) FROM pqrun.pickup('w', queues => ARRAY[%s])", (long_queue,))[0][0]
check(f"a job of 1,000-byte job_type and queue is picked up by both ({by_type}, {by_queue})", by_type == by_queue == 1)
check("the jobs of qb are all still READY", q("SELECT count(*) FROM pqrun.job_live WHERE queue = 'qb' AND status = 'READY'")[0][0] == 20)

# A pickup by queue alone takes the queue's job types as an earlier pickup
# of the backend found them while no job became READY since: one descent
# (its lane's head) instead of one per job type and one more. A job of a
# type new to the queue is found however it becomes READY: enqueued by
# another session, by the pickup's own transaction, or retried.
def numscans():
    return q("SELECT pg_stat_get_xact_numscans('pqrun.job_live_pick_queue'::regclass)")[0][0]
q("SELECT pqrun.enqueue('m1', queue => 'qm') FROM generate_series(1, 3)")
with c.transaction(force_rollback=True):
    q("SELECT id FROM pqrun.pickup('w', queues => '{qm}')")
    before = numscans()
    got = q("SELECT job_type FROM pqrun.pickup('w', queues => '{qm}')")
    check(f"a pickup by queue whose job types are known descends once ({numscans() - before})",
          numscans() - before == 1 and got == [("m1",)])
def pick_qm():
    return q("SELECT job_type FROM pqrun.pickup('w', queues => '{qm}')")
other = psycopg.connect("", autocommit=True)
with c.transaction(force_rollback=True):
    pick_qm()
    other.execute("SELECT pqrun.enqueue('m2', queue => 'qm', priority => 5)")
    check("a job of a new type enqueued by another session is found next", pick_qm() == [("m2",)])
with c.transaction(force_rollback=True):
    pick_qm()
    q("SELECT pqrun.enqueue('m3', queue => 'qm', priority => 9)")
    check("a job of a new type enqueued by the same transaction is found next", pick_qm() == [("m3",)])
dead = other.execute("SELECT pqrun.enqueue('m4', queue => 'qm', priority => 9, max_attempts => 1)").fetchone()[0]
other.execute("SELECT pqrun.pickup('w', job_types => '{m4}')")
other.execute("SELECT pqrun.mark_error(%s, 'no', terminal => true)", (dead,))
with c.transaction(force_rollback=True):
    check("without m4 READY the queue's best is m2", pick_qm() == [("m2",)])
    other.execute("SELECT pqrun.retry(%s)", (dead,))
    check("a job of a type retried by another session is found next", pick_qm() == [("m4",)])
other.close()

# A worker's filtered pickups under a transaction that holds back vacuum
# (#45; 0.18.0 and before: each filtered pickup walked the dead entries of
# every claim since the horizon, 336 buffers after 3,000 claims, as only
# unfiltered pickups raise the database's pickup hint): one session claims
# and finishes 1,000, then 10,000 jobs of job type h by filtered pickups,
# while another holds a transaction id; the next filtered pickup of that
# session reads about as many buffers at both sizes. A job enqueued by
# another session with a higher priority meanwhile is still its next.
holder = psycopg.connect("")
holder.execute("SELECT txid_current()")
worker = psycopg.connect("", autocommit=True)
def buffers_of_next():
    plan = worker.execute("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) SELECT * FROM pqrun.pickup('w', job_types => '{h}')"
                          ).fetchall()[0][0][0]["Plan"]
    worker.execute("SELECT count(pqrun.mark_done(id)) FROM pqrun.job_live WHERE job_type = 'h' AND status = 'RUNNING'")
    return plan["Shared Hit Blocks"] + plan["Shared Read Blocks"]
seen = []
for n in (1000, 10000):
    worker.execute("SELECT count(*) FROM pqrun.enqueue_batch((SELECT jsonb_agg(jsonb_build_object('job_type', 'h'))"
                   " FROM generate_series(1, %s)))", (n + 10,))
    for _ in range(n // 50):
        worker.execute("SELECT count(pqrun.mark_done(id)) FROM pqrun.pickup('w', job_types => '{h}', batch_size => 50)")
    seen.append(buffers_of_next())
check(f"under a held transaction id, a filtered pickup after 1,000 / 10,000 filtered claims reads {seen[0]} / {seen[1]}"
      " buffers (within 2x + 20)", seen[1] <= 2 * seen[0] + 20)
urgent = psycopg.connect("", autocommit=True).execute(
    "SELECT pqrun.enqueue('h', priority => 10)").fetchone()[0]
got = worker.execute("SELECT id FROM pqrun.pickup('w', job_types => '{h}')").fetchall()
check("a job of higher priority enqueued meanwhile by another session is the next", got == [(urgent,)])
holder.close()
worker.close()
print(f"filters: {failures} failure(s)")
raise SystemExit(1 if failures else 0)
PY

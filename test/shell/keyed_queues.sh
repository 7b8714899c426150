#!/usr/bin/env bash
# test/shell/keyed_queues.sh — what producers key is forgotten, and what is
# paused or blocked costs a pickup nothing per key.
#
# Reproductions on 0.17.0:
#   1. A producer enqueues keyed jobs into 5,000 new queues and cancels
#      them: pqrun.queue_control keeps 5,000 keyed rows for good, and every
#      unfiltered pickup looks at each queue's lanes (157 ms, 55,362 buffers
#      on 0.15.0). Here 300 and 3,000 queues: once their marks are a minute
#      old (backdated here), a maintenance round clears them and drops the
#      rows, and an unfiltered pickup reads as many buffers beside 3,000 as
#      beside 300 (on 0.17.0, 10x more). A queue that still holds a keyed
#      job in any status, or whose mark is younger, keeps it; a job of a
#      forgotten queue, enqueued or retried, is claimed (its queue is
#      marked again).
#   2. The enqueue of a keyed job and maintenance clearing its queue's mark
#      meet under the queue's lock (src/jobs/keyed_queues.hpp): an enqueue
#      not yet committed keeps the mark; an enqueue while a clearing is not
#      yet committed waits for it and marks the queue again, also under
#      REPEATABLE READ (or fails with 40001); the job is claimed in every
#      case. On 0.17.0 nothing clears a mark, so nothing could race; with
#      the clearing but without the lock (shown while writing this), the
#      clearing took the mark of a queue whose keyed enqueue was not yet
#      committed, and no pickup of the queue ever claimed that job.
#   3. A paused keyed queue of 5,000 and 50,000 keys: a pickup of it and
#      another queue, and an unfiltered one, read the same few buffers
#      (303,534 buffers, 330 ms at 100,000 on 0.15.0: each key's lane was
#      looked at); a pickup waiting on it sleeps instead of looking every
#      250 ms (58 % of a core on 0.15.0) and a resume wakes it at once.
#   4. Queues whose 200 and 2,000 keys are each at their limit of 1: every
#      pickup that may claim from one visited each key (5,000 keys made
#      every other unfiltered pickup take 176 ms on 0.15.0), and a pickup
#      waiting on it looked again every 250 ms. Once a look found them all
#      blocked, the next pass the queue over (as many buffers beside 2,000
#      as beside 200) until a job of the queue becomes READY or a place is
#      freed: a new key's job, and the next job of a key whose running job
#      is done, are claimed by the next pickup; a waiter walks the keys
#      again once a second, or ten times as long as a walk takes.
#
# Runs against the already running test server (test/run.sh exports PGHOST,
# PGPORT, PGUSER) in a database of its own; needs to read the server's
# /proc (root, or the server's OS user). Needs psycopg 3.
set -uo pipefail

export PGHOST=${PGHOST:?PGHOST must point at the running test server} PGPORT=${PGPORT:-5432} PGUSER=${PGUSER:-postgres}
repo=$(cd "$(dirname "$0")/../.." && pwd)
source "$repo/test/lib/python.sh"
find_psycopg_python || exit 1
db=pqrun_keyed_$$
trap 'psql -X -q -d postgres -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null' EXIT
createdb "$db" || exit 1
psql -X -q -d "$db" -c "SET client_min_messages = warning" -c "CREATE EXTENSION pqrun" || exit 1
pid=$(psql -X -qtA -d "$db" -c "SELECT pid FROM pg_stat_activity WHERE backend_type = 'checkpointer'")
[ -r "/proc/$pid/stat" ] || { echo "cannot read the server's /proc/<pid>/stat here"; exit 77; }

PGDATABASE=$db PYTHONPATH="$repo/test/lib" "$py" - <<'PY'
import os, threading, time
import psycopg
import backend_memory
from backend_memory import check

admin = psycopg.connect("", autocommit=True)
def a(sql, args=None):
    cur = admin.execute(sql, args)
    return cur.fetchall() if cur.description else None

def buffers(session, sql, args=None):
    """Shared buffers (hit + read) of one statement, from its plan's top node."""
    plan = session.execute("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + sql, args).fetchone()[0][0]["Plan"]
    return plan.get("Shared Hit Blocks", 0) + plan.get("Shared Read Blocks", 0)

def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

def forget():
    """Maintenance as a minute later: the marks are backdated, then a round."""
    a("UPDATE pqrun.queue_control SET updated_at = now() - interval '2 minutes' WHERE keyed")
    return a("SELECT pqrun.run_maintenance()")

def marked(queue):
    return a("SELECT keyed FROM pqrun.queue_control WHERE queue = %s AND job_type IS NULL"
             " AND concurrency_key IS NULL", (queue,))

def unfiltered_pickup_buffers():
    """The fewest buffers of three unfiltered pickups (rolled back) of a
    session warmed up by one."""
    with psycopg.connect("") as s:
        s.execute("SELECT count(*) FROM pqrun.pickup('warm')")
        s.rollback()
        least = None
        for _ in range(3):
            n = buffers(s, "SELECT * FROM pqrun.pickup('w')")
            s.rollback()
            least = n if least is None else min(least, n)
        return least

# ---- 1. Idle keyed queues are forgotten. No job is READY but, beside them, a paused keyed queue
# whose 20,000 keys fill the index of lanes: a look at a lane is then a
# descent of a few pages, not of an empty index.
a("SELECT pqrun.enqueue('k', queue => 'zz', concurrency_key => 'k0')")
a("SELECT pqrun.pause_queue('zz')")
admin.execute("INSERT INTO pqrun.job_live (status, priority, max_attempts, run_after, created_at, updated_at,"
              " queue, job_type, payload, concurrency_key)"
              " SELECT 'READY', 0, 5, now(), now(), now(), 'zz', 'k', '{}', 'k' || g FROM generate_series(1, 20000) g")
cost = {}
for n in (300, 3000):
    for chunk in range(0, n, 300):
        a("SELECT count(*) FROM pqrun.enqueue_batch((SELECT jsonb_agg(jsonb_build_object('job_type', 't',"
          " 'queue', 'tenant' || %s || '-' || g, 'concurrency_key', 'k')) FROM generate_series(%s::int, %s::int) g))",
          (n, chunk + 1, chunk + 300))
    a("SELECT count(pqrun.cancel(id)) FROM pqrun.job_live WHERE queue LIKE 'tenant%%'")
    admin.execute("VACUUM ANALYZE pqrun.job_live")
    before = unfiltered_pickup_buffers()
    keyed = a("SELECT count(*) FROM pqrun.queue_control WHERE keyed AND queue <> 'zz'")[0][0]
    rounds = 0
    while a("SELECT count(*) FROM pqrun.queue_control WHERE keyed AND queue <> 'zz'")[0][0] > 0 and rounds < 40:
        forget()
        rounds += 1
    left = a("SELECT count(*) FROM pqrun.queue_control WHERE queue <> 'zz'")[0][0]
    cost[n] = unfiltered_pickup_buffers()
    print(f"     {n} idle keyed queues: {keyed} marks, an unfiltered pickup read {before} buffers;"
          f" after {rounds} rounds {left} rows left, {cost[n]} buffers", flush=True)
    check(f"the marks of {n} idle keyed queues cleared and their rows dropped", left == 0, f"{left} rows left")
check("an unfiltered pickup beside 3,000 forgotten keyed queues reads as many buffers as beside 300 (within 5)",
      cost[3000] <= cost[300] + 5, f"{cost[300]}, {cost[3000]}")

# What still holds keyed jobs, in any status, or was marked less than a minute ago, stays.
a("SELECT pqrun.enqueue('k', queue => 'q-ready', concurrency_key => 'a')")
a("SELECT pqrun.enqueue('k', queue => 'q-delayed', concurrency_key => 'a', run_after => now() + interval '1 hour')")
a("SELECT pqrun.enqueue('k', queue => 'q-running', concurrency_key => 'a')")
a("SELECT count(*) FROM pqrun.pickup('holder', queues => '{q-running}')")
dep = a("SELECT pqrun.enqueue('blocker', queue => 'work')")[0][0]
a("SELECT pqrun.enqueue('k', queue => 'q-blocked', concurrency_key => 'a', depends_on => ARRAY[%s]::bigint[])", (dep,))
young = a("SELECT pqrun.enqueue('k', queue => 'q-young', concurrency_key => 'a')")[0][0]
a("SELECT pqrun.cancel(%s)", (young,))
statuses = dict(a("SELECT queue, status || CASE WHEN delayed THEN ' delayed' ELSE '' END FROM pqrun.job_live"
                  " WHERE queue LIKE 'q-%%' AND queue <> 'q-young'"))
a("UPDATE pqrun.queue_control SET updated_at = now() - interval '2 minutes' WHERE queue <> 'q-young'")
a("SELECT pqrun.run_maintenance()")
kept = {q: marked(q) for q in ("q-ready", "q-delayed", "q-running", "q-blocked", "q-young", "zz")}
check("queues holding a keyed job READY (zz paused too), delayed, RUNNING or BLOCKED, and one marked a moment ago, stay keyed",
      all(v == [(True,)] for v in kept.values()), f"{kept} ({statuses})")
a("SELECT count(pqrun.cancel(id)) FROM pqrun.job_live")

# A forgotten queue's job, enqueued again or retried, is claimed.
gone = a("SELECT pqrun.enqueue('k', queue => 'again', concurrency_key => 'a')")[0][0]
a("SELECT pqrun.cancel(%s)", (gone,))
forget()
check("queue again forgotten", marked("again") == [], f"{marked('again')}")
a("SELECT pqrun.retry(%s)", (gone,))
check("the retry of its keyed job marked it again", marked("again") == [(True,)], f"{marked('again')}")
got = a("SELECT id FROM pqrun.pickup('w', queues => '{again}')")
check("... and a pickup claims that job", got == [(gone,)], f"{got}")
a("SELECT pqrun.mark_done(%s)", (gone,))
forget()
fresh = a("SELECT pqrun.enqueue('k', queue => 'again', concurrency_key => 'b')")[0][0]
got = a("SELECT id FROM pqrun.pickup('w')")
check("a new keyed job of a forgotten queue is claimed by an unfiltered pickup", got == [(fresh,)], f"{got}")
a("SELECT pqrun.mark_done(%s)", (fresh,))

# ---- 2. An enqueue and a clearing of the same queue at once.
def race(name, isolation, producer_first):
    queue = f"race-{name}"
    old = a("SELECT pqrun.enqueue('k', queue => %s, concurrency_key => 'a')", (queue,))[0][0]
    a("SELECT pqrun.cancel(%s)", (old,))
    producer = psycopg.connect("")
    sweeper = psycopg.connect("")
    # The mark backdated in the sweeper's transaction, with its clearing: the
    # database's worker, whose rounds clear idle marks too, sees it fresh
    # and its row locked, and leaves it. (Backdated before, a round of the
    # worker's between the two cleared it first: "enqueue first" then found
    # the mark gone before its enqueue could hold it.)
    backdate = lambda: sweeper.execute("UPDATE pqrun.queue_control SET updated_at = now() - interval '2 minutes'"
                                       " WHERE queue = %s", (queue,))
    producer.execute(f"SET TRANSACTION ISOLATION LEVEL {isolation}")
    producer.execute("SELECT 1")  # the snapshot of a REPEATABLE READ transaction
    job, error = None, None
    if producer_first:
        job = producer.execute("SELECT pqrun.enqueue('k', queue => %s, concurrency_key => 'b')", (queue,)).fetchone()[0]
        backdate()
        sweeper.execute("SELECT pqrun.run_maintenance()")
        sweeper.commit()
        cleared = marked(queue) != [(True,)]
        producer.commit()
        check(f"{name}: a clearing while a keyed enqueue is not committed leaves the mark", not cleared)
    else:
        backdate()
        sweeper.execute("SELECT pqrun.run_maintenance()")
        result = {}
        def enqueue():
            try:
                result["job"] = producer.execute("SELECT pqrun.enqueue('k', queue => %s, concurrency_key => 'b')",
                                                 (queue,)).fetchone()[0]
                producer.commit()
            except psycopg.Error as e:
                result["error"] = e.sqlstate
                producer.rollback()
        t = threading.Thread(target=enqueue)
        t.start()
        time.sleep(0.5)
        waiting = a("SELECT count(*) FROM pg_locks WHERE NOT granted AND locktype = 'advisory'"
                    " AND classid = 1886483051")[0][0]
        sweeper.commit()
        t.join()
        job, error = result.get("job"), result.get("error")
        check(f"{name}: an enqueue during a clearing waits for it", waiting == 1, f"{waiting} waiting")
        check(f"{name}: ... then commits (or fails with 40001 under REPEATABLE READ)",
              job is not None or (error == "40001" and isolation != "READ COMMITTED"), f"{result}")
    producer.close()
    sweeper.close()
    if job is not None:
        got = a("SELECT id FROM pqrun.pickup('w', queues => %s)", ([queue],))
        check(f"{name}: its job is claimed", got == [(job,)], f"{got}, mark {marked(queue)}")
        a("SELECT pqrun.mark_done(%s)", (job,))

race("enqueue first", "READ COMMITTED", True)
race("clearing first", "READ COMMITTED", False)
race("clearing first, REPEATABLE READ", "REPEATABLE READ", False)

# ---- 3. A paused keyed queue costs nothing per key.
a("SELECT pqrun.enqueue('k', queue => 'pk', concurrency_key => 'k0')")
a("SELECT pqrun.pause_queue('pk')")
cost = {}
for keys in (5000, 50000):
    have = a("SELECT count(*) FROM pqrun.job_live WHERE queue = 'pk'")[0][0]
    admin.execute("INSERT INTO pqrun.job_live (status, priority, max_attempts, run_after, created_at, updated_at,"
                  " queue, job_type, payload, concurrency_key)"
                  " SELECT 'READY', 0, 5, now(), now(), now(), 'pk', 'k', '{}', 'k' || g FROM generate_series(%s::int, %s::int) g",
                  (have, keys - 1))
    admin.execute("VACUUM ANALYZE pqrun.job_live")
    with psycopg.connect("") as s:
        s.execute("SELECT count(*) FROM pqrun.pickup('warm', queues => '{b,pk}')")
        s.rollback()
        both = buffers(s, "SELECT * FROM pqrun.pickup('w', queues => '{b,pk}')")
        s.rollback()
        every = buffers(s, "SELECT * FROM pqrun.pickup('w')")
        s.rollback()
    cost[keys] = (both, every)
    print(f"     paused queue of {keys} keys: a pickup of it and b read {both} buffers, an unfiltered one {every}",
          flush=True)
check("a paused queue of 50,000 keys costs a pickup as many buffers as one of 5,000 (within 5), under 100",
      all(cost[50000][i] <= cost[5000][i] + 5 and cost[50000][i] < 100 for i in (0, 1)), f"{cost}")

with psycopg.connect("", autocommit=True) as waiter:
    wpid = waiter.info.backend_pid
    result = {}
    def wait():
        t = time.monotonic()
        result["rows"] = waiter.execute("SELECT count(*) FROM pqrun.pickup('w', queues => '{pk}', wait => '20 s')"
                                        ).fetchone()[0]
        result["seconds"] = time.monotonic() - t
    t = threading.Thread(target=wait)
    t.start()
    time.sleep(0.5)
    used = cpu_seconds(wpid)
    time.sleep(3)
    used = cpu_seconds(wpid) - used
    resumed = time.monotonic()
    a("SELECT pqrun.resume_queue('pk')")
    t.join()
    woke = time.monotonic() - resumed
check(f"a pickup waiting on the paused queue used {used:.2f} s of CPU in 3 s", used < 0.15)
check(f"a resume woke it with a job in {woke:.2f} s", result.get("rows") == 1 and woke < 2, f"{result}")
a("SELECT count(pqrun.cancel(id)) FROM pqrun.job_live WHERE queue = 'pk'")

# ---- 4. Keys each at their limit: once a look found them all blocked, the
# next ones pass the queue over until one of its jobs becomes READY or a
# place in its limits is freed.
walk = {}
for keys in (200, 2000):
    queue = f"kl{keys}"
    a("SELECT pqrun.set_key_limit(%s::text, 1)", (queue,))
    a("SELECT count(*) FROM pqrun.enqueue_batch((SELECT jsonb_agg(jsonb_build_object('job_type', 'k', 'queue', %s::text,"
      " 'concurrency_key', 'k' || (g %% %s::int))) FROM generate_series(1, 2 * %s::int) g))", (queue, keys, keys))
    held = sum(a("SELECT count(*) FROM pqrun.pickup('holder', queues => %s, batch_size => 1000)", ([queue],))[0][0]
               for _ in range(keys // 1000 + 1))
    check(f"{keys} keys each at their limit of 1", held == keys, f"{held}")
    admin.execute("VACUUM ANALYZE pqrun.job_live")
    with psycopg.connect("") as s:
        first = buffers(s, "SELECT * FROM pqrun.pickup('w')")
        s.rollback()
        then = buffers(s, "SELECT * FROM pqrun.pickup('w')")
        s.rollback()
    walk[keys] = (first, then)
    print(f"     {keys} keys at their limit: an unfiltered pickup read {first} buffers, the next one {then}", flush=True)
    a("SELECT pqrun.set_key_limit(%s::text, NULL)", (queue,))
    a("SELECT count(pqrun.cancel(id)) FROM pqrun.job_live WHERE queue = %s", (queue,))
check("beside 2,000 keys at their limit, a pickup after the first reads as many buffers as beside 200 (within 5)",
      walk[2000][1] <= walk[200][1] + 5, f"{walk}")

a("SELECT pqrun.set_key_limit('kl', 1)")
a("SELECT count(*) FROM pqrun.enqueue_batch((SELECT jsonb_agg(jsonb_build_object('job_type', 'k', 'queue', 'kl',"
  " 'concurrency_key', 'k' || (g % 2000))) FROM generate_series(1, 4000) g))")
held = a("SELECT id, concurrency_key FROM pqrun.pickup('holder', queues => '{kl}', batch_size => 1000)")
held += a("SELECT id, concurrency_key FROM pqrun.pickup('holder', queues => '{kl}', batch_size => 1000)")
admin.execute("VACUUM ANALYZE pqrun.job_live")
with psycopg.connect("", autocommit=True) as s:
    none = s.execute("SELECT count(*) FROM pqrun.pickup('w', queues => '{kl}')").fetchone()[0]
    fresh = a("SELECT pqrun.enqueue('k', queue => 'kl', concurrency_key => 'fresh')")[0][0]
    got = s.execute("SELECT id FROM pqrun.pickup('w', queues => '{kl}')").fetchall()
    check("after a look found every key blocked, a job of a new key is claimed by the next one",
          none == 0 and got == [(fresh,)], f"{none}, {got}")
    none = s.execute("SELECT count(*) FROM pqrun.pickup('w', queues => '{kl}')").fetchone()[0]
    done_id, done_key = held[0]
    a("SELECT pqrun.mark_done(%s)", (done_id,))
    got = s.execute("SELECT concurrency_key FROM pqrun.pickup('w', queues => '{kl}')").fetchall()
    check("... and once a running job is done, its key's next job by the next one",
          none == 0 and got == [(done_key,)], f"{none}, {got}")
with psycopg.connect("", autocommit=True) as waiter:
    wpid = waiter.info.backend_pid
    t = threading.Thread(target=lambda: waiter.execute(
        "SELECT count(*) FROM pqrun.pickup('w', queues => '{kl}', wait => '4 s')").fetchall())
    t.start()
    time.sleep(0.5)
    used = cpu_seconds(wpid)
    time.sleep(3)
    used = cpu_seconds(wpid) - used
    t.join()
check(f"a pickup waiting in front of 2,000 full keys used {used:.2f} s of CPU in 3 s (a tenth at most)", used < 0.3)
backend_memory.summary("keyed_queues")
raise SystemExit(1 if backend_memory.failures else 0)
PY

#!/usr/bin/env bash
# test/shell/memory.sh — a call's memory is bounded by its own input, and
# constant while it waits.
#
# Each measure is the backend's peak resident memory (VmHWM in
# /proc/<pid>/status) over the call, above its peak before it (a fresh
# session, warmed up by a small call of the same kind), less the shared
# buffers it touched meanwhile (RssShmem, which stay mapped): its private
# peak, at sizes 10x apart.
# Reproductions on 0.15.0:
#   1. enqueue_batch of keyed jobs into N new queues re-read all of
#      queue_control for each new queue and kept every result: 1,000 -> 129
#      MB, 3,000 -> 791 MB, 20,000 -> the kernel's OOM kill and a restart
#      of the cluster. Here 1,000 and 10,000.
#   2. A pickup waiting in front of a full concurrency limit (3,000 places
#      held) kept the result of each 250 ms recount: ~1.9 MB/s for the whole
#      wait. Here waits of 0.5 s and 5 s.
#   3. await_jobs looking at a paused queue with 100,000 keys (lanes walked
#      through SQL, a result kept per key and look): 1,563 MB. Here 5,000
#      and 50,000 keys, a wait of 1 s (several looks).
# The server log shows no backend terminated by a signal.
#
# Runs against the already running test server (test/run.sh exports PGHOST,
# PGPORT, PGUSER) in a database of its own; needs to read the server's
# /proc (root, or the server's OS user). Needs psycopg 3.
set -uo pipefail

export PGHOST=${PGHOST:?PGHOST must point at the running test server} PGPORT=${PGPORT:-5432} PGUSER=${PGUSER:-postgres}
repo=$(cd "$(dirname "$0")/../.." && pwd)
source "$repo/test/lib/python.sh"
find_psycopg_python || exit 1
db=pqrun_memory_$$
trap 'psql -X -q -d postgres -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null' EXIT
createdb "$db" || exit 1
psql -X -q -d "$db" -c "SET client_min_messages = warning" -c "CREATE EXTENSION pqrun" || exit 1
log=${PQRUN_WORK:+$PQRUN_WORK/server.log}
log_from=0
[ -n "$log" ] && [ -f "$log" ] && log_from=$(stat -c %s "$log")
pid=$(psql -X -qtA -d "$db" -c "SELECT pid FROM pg_stat_activity WHERE backend_type = 'checkpointer'")
[ -r "/proc/$pid/status" ] || { echo "cannot read the server's /proc/<pid>/status here"; exit 77; }

PGDATABASE=$db PYTHONPATH="$repo/test/lib" "$py" - <<'PY'
import time
import psycopg
import backend_memory
from backend_memory import check, peak_over

admin = psycopg.connect("", autocommit=True)
a = lambda sql, args=None: admin.execute(sql, args).fetchall()

# 1. enqueue_batch of keyed jobs into N new queues.
def batch(prefix, n):
    return lambda s: s.execute(
        "SELECT count(*) FROM pqrun.enqueue_batch((SELECT jsonb_agg(jsonb_build_object('job_type', 't',"
        " 'queue', %s || g, 'concurrency_key', 'k')) FROM generate_series(1, %s) g))", (prefix, n)).fetchall()
grown = {}
for n in (1000, 10000):
    t = time.monotonic()
    grown[n] = peak_over(batch(f"warm{n}-", 10), batch(f"tenant{n}-", n))
    print(f"     enqueue_batch of {n} keyed jobs into {n} new queues: +{grown[n]:.1f} MB in {time.monotonic() - t:.1f} s", flush=True)
check("enqueue_batch into 10,000 new keyed queues: peak memory within 10x of 1,000's plus 8 MB (no longer quadratic)",
      grown[10000] <= 10 * grown[1000] + 8, f"{grown[1000]:.1f} MB, {grown[10000]:.1f} MB")
a("SELECT count(pqrun.cancel(id)) FROM pqrun.job_live")

# 2. A pickup waiting in front of a full concurrency limit of 3,000.
a("SELECT pqrun.set_concurrency_limit('full', 3000)")
a("SELECT count(*) FROM pqrun.enqueue_batch((SELECT jsonb_agg(jsonb_build_object('job_type', 'f', 'queue', 'full'))"
  " FROM generate_series(1, 3001)))")
held = a("SELECT count(*) FROM pqrun.pickup('holder', queues => '{full}', batch_size => 3000)")[0][0]
check("3,000 places held", held == 3000, str(held))
wait = lambda seconds: lambda s: s.execute(
    f"SELECT count(*) FROM pqrun.pickup('w', queues => '{{full}}', wait => '{seconds} s')").fetchall()
waits = {w: peak_over(wait("0.3"), wait(w)) for w in (0.5, 5)}
print(f"     waiting 0.5 s: +{waits[0.5]:.1f} MB, 5 s: +{waits[5]:.1f} MB", flush=True)
check("a wait in front of a full limit uses as much memory for 5 s as for 0.5 s (within 1 MB)",
      waits[5] <= waits[0.5] + 1, f"{waits[0.5]:.1f} MB, {waits[5]:.1f} MB")
a("SELECT pqrun.set_concurrency_limit('full', NULL)")
a("SELECT count(pqrun.cancel(id)) FROM pqrun.job_live")

# 3. await_jobs over a paused queue of 10,000 and 100,000 keys (one READY
# job each, written straight into job_live).
looks = {}
for keys in (5000, 50000):
    queue = f"pk{keys}"
    a("SELECT pqrun.enqueue('seed', queue => %s, concurrency_key => 'k0')", (queue,))
    a("SELECT pqrun.pause_queue(%s)", (queue,))
    admin.execute("INSERT INTO pqrun.job_live (status, priority, max_attempts, run_after, created_at, updated_at,"
                  " queue, job_type, payload, concurrency_key)"
                  " SELECT 'READY', 0, 5, now(), now(), now(), %s, 'k', '{}', 'k' || g FROM generate_series(1, %s) g",
                  (queue, keys))
    admin.execute("VACUUM ANALYZE pqrun.job_live")
    look = lambda wait: lambda s: s.execute(
        f"CALL pqrun.await_jobs(job_types => '{{nomatch}}', queues => '{{{queue}}}', wait => '{wait}')").fetchall()
    t = time.monotonic()
    looks[keys] = peak_over(look("10 ms"), look("1 s"))
    print(f"     await_jobs over a paused queue of {keys} keys for 1 s: +{looks[keys]:.1f} MB ({time.monotonic() - t:.1f} s)",
          flush=True)
check("await_jobs over 50,000 keys: peak memory within 10x of 5,000 keys' plus 8 MB, under 100 MB",
      looks[50000] <= 10 * looks[5000] + 8 and looks[50000] < 100, f"{looks[5000]:.1f} MB, {looks[50000]:.1f} MB")
backend_memory.summary("memory")
raise SystemExit(1 if backend_memory.failures else 0)
PY
status=$?
if [ -n "$log" ] && [ -f "$log" ] && tail -c +$((log_from + 1)) "$log" | grep -q "terminated by signal"; then
	echo "FAIL the server log shows a process terminated by a signal"
	status=1
fi
exit $status

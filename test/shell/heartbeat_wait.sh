#!/usr/bin/env bash
# test/shell/heartbeat_wait.sh — many waiting heartbeats at once: a cancel
# reaches each of its jobs' heartbeats at its commit, and only those.
#
# Runs against the test server (PGHOST, PGPORT, PGUSER exported) in a
# database of its own. Each of 3 rounds: one holder session picks up 16 jobs
# (timeout_seconds 60) and stays connected; 16 sessions each wait in
# `heartbeat(id, lease, progress, wait => ...)`, one per job. Then:
#   - a cancel of 4 jobs that rolls back wakes nobody for good: those
#     heartbeats are still waiting a second later;
#   - one transaction cancels 6 jobs: each of their heartbeats raises 55000
#     within 0.5 s of the commit (the wake-up, not the 1 s look);
#   - the holder finishes 2 jobs with mark_done and retries 2 with
#     mark_error: a waiting heartbeat holds no row lock, so each call returns
#     at once; within 1.5 s (they look once a second) the heartbeats of the
#     jobs finished under their lease return without error, those of the
#     retried ones raise 55000;
#   - the other 2 (wait 3 s) return after their wait, having renewed their
#     lease and stored their progress; the 4 whose cancel rolled back too.
# Afterwards no session is left in a transaction. Needs psycopg 3.
# Bounds wake-ups at 0.5 s:
# test/run.sh: alone
set -uo pipefail
: "${PGHOST:?PGHOST must point at the test server}" "${PGPORT:?}" "${PGUSER:?}"
source "$(dirname "$0")/../lib/python.sh"
find_psycopg_python || exit 1

db=pqrun_heartbeat_wait_$$
trap 'dropdb --if-exists --force "$db" 2>/dev/null' EXIT
createdb "$db" || exit 1
psql -X -q -d "$db" -c "SET client_min_messages = warning" -c "CREATE EXTENSION pqrun" || exit 1

PQRUN_DB=$db "$py" - <<'PY'
import os, sys, threading, time
import psycopg

dsn = f"dbname={os.environ['PQRUN_DB']}"
failures = 0

def check(name, ok, detail=""):
    global failures
    print(f"{'ok  ' if ok else 'FAIL'} {name}{': ' + detail if detail and not ok else ''}", flush=True)
    failures += 0 if ok else 1

def connect():
    return psycopg.connect(dsn, autocommit=True)

for round_ in range(1, 4):
    print(f"-- round {round_}", flush=True)
    setup = connect()
    setup.execute("SELECT pqrun.enqueue('hb', pg_catalog.jsonb_build_object('n', g), timeout_seconds => 60)"
                  " FROM pg_catalog.generate_series(1, 16) g")
    holder = connect()
    jobs = holder.execute("SELECT id, lease_token FROM pqrun.pickup('holder', job_types => '{hb}', batch_size => 16)"
                          " ORDER BY id").fetchall()
    check("the holder runs 16 jobs", len(jobs) == 16, str(len(jobs)))
    rolled_back, cancelled, finished, plain = jobs[:4], jobs[4:10], jobs[10:14], jobs[14:]
    outcome = {}

    # A heartbeat makes its session the job's holder: the sessions stay
    # connected until the end of the round, or orphan rescue would take
    # their jobs back.
    beaters = [connect() for _ in jobs]

    def beat(conn, job_id, lease, wait):
        try:
            conn.execute("SELECT pqrun.heartbeat(%s, %s, pg_catalog.jsonb_build_object('beat', %s), %s::interval)",
                         (job_id, lease, job_id, wait))
            outcome[job_id] = ("ok", time.monotonic())
        except psycopg.Error as exc:
            outcome[job_id] = (exc.sqlstate, time.monotonic())

    threads = []
    for conn, (job_id, lease) in zip(beaters, jobs):
        wait = "3 s" if (job_id, lease) in plain + rolled_back else "20 s"
        t = threading.Thread(target=beat, args=(conn, job_id, lease, wait))
        t.start()
        threads.append(t)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        waiting = setup.execute("SELECT count(*) FROM pg_catalog.pg_stat_activity WHERE datname = current_database()"
                                " AND query LIKE 'SELECT pqrun.heartbeat(%'").fetchone()[0]
        if waiting == 16:
            break
        time.sleep(0.05)
    check("16 heartbeats are waiting", waiting == 16, str(waiting))

    with setup.transaction(force_rollback=True):
        for job_id, _ in rolled_back:
            setup.execute("SELECT pqrun.cancel(%s)", (job_id,))
    time.sleep(1.0)
    check("a rolled-back cancel ends no wait", all(j not in outcome for j, _ in rolled_back))

    with setup.transaction():
        for job_id, _ in cancelled:
            setup.execute("SELECT pqrun.cancel(%s, 'stop')", (job_id,))
    committed = time.monotonic()
    time.sleep(0.5)
    late = [(j, outcome.get(j)) for j, _ in cancelled
            if j not in outcome or outcome[j][0] != "55000" or outcome[j][1] - committed > 0.5]
    check("each cancelled job's heartbeat raised 55000 within 0.5 s of the commit", not late, str(late))

    slow = []
    for k, (job_id, lease) in enumerate(finished):
        started = time.monotonic()
        if k < 2:
            holder.execute("SELECT pqrun.mark_done(%s, NULL, %s)", (job_id, lease))
        else:
            holder.execute("SELECT pqrun.mark_error(%s, 'again', lease_token => %s, retry_after => '1 hour')",
                           (job_id, lease))
        if time.monotonic() - started > 0.2:
            slow.append(job_id)
    done_at = time.monotonic()
    check("mark_done and mark_error are not held up by the job's waiting heartbeat", not slow, str(slow))
    time.sleep(1.6)
    late = [(j, outcome.get(j)) for k, (j, _) in enumerate(finished)
            if j not in outcome or outcome[j][0] != ("ok" if k < 2 else "55000") or outcome[j][1] - done_at > 1.5]
    check("within 1.5 s the finished jobs' heartbeats returned, the retried ones' raised 55000", not late, str(late))

    for t in threads:
        t.join(timeout=25)
    check("every heartbeat returned", not any(t.is_alive() for t in threads))
    ids = [j for j, _ in plain + rolled_back]
    wrong = [(j, outcome.get(j)) for j in ids if outcome.get(j, ("missing",))[0] != "ok"]
    check("the others returned after their wait", not wrong, str(wrong))
    rows = setup.execute("SELECT count(*) FROM pqrun.job_live WHERE id = ANY(%s) AND status = 'RUNNING'"
                         " AND heartbeat_at IS NOT NULL AND progress = pg_catalog.jsonb_build_object('beat', id)",
                         (ids,)).fetchone()[0]
    check("and renewed their lease with their progress", rows == len(ids), f"{rows} of {len(ids)}")
    states = setup.execute("SELECT string_agg(status::text || ':' || n, ' ' ORDER BY status) FROM"
                           " (SELECT status, count(*) n FROM pqrun.jobs WHERE job_type = 'hb' GROUP BY 1) s").fetchone()[0]
    check("jobs: READY 2, RUNNING 6, DONE 2, CANCELLED 6", states == "READY:2 RUNNING:6 DONE:2 CANCELLED:6", states)
    holder.execute("DELETE FROM pqrun.job_live WHERE job_type = 'hb' AND status = 'READY'")
    holder.execute("SELECT pqrun.mark_done_batch(array_agg(id)) FROM pqrun.job_live WHERE job_type = 'hb'")
    holder.close()
    for conn in beaters:
        conn.close()
    stuck = setup.execute("SELECT count(*) FROM pg_catalog.pg_stat_activity WHERE datname = current_database()"
                          " AND state LIKE 'idle in transaction%'").fetchone()[0]
    check("no session is left in a transaction", stuck == 0, str(stuck))
    setup.execute("DELETE FROM pqrun.job_done")
    setup.close()

print(f"heartbeat_wait: {failures} failed check(s)")
sys.exit(1 if failures else 0)
PY

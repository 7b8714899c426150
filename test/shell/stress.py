#!/usr/bin/python3
"""test/shell/stress.py — the concurrency stress test run by test/shell/stress.sh.

Usage: stress.py DATABASE  (PGHOST, PGPORT, PGUSER from the environment; the
database must have pqrun installed and nothing else in it).

Phases (see stress.sh for what it proves):
  1. chaos (PQRUN_STRESS_SECONDS, default 40 s): 3 producers, 10 consumers
     over every claim path, a chaos thread cancelling and terminating
     backends, a "waker" committing delayed jobs (each wakes every waiter),
     and a victim session repeating the known 25P02 case;
  2. wind down: consumers finish (or learn the loss of) what they hold;
  3. drain: 4 well-behaved workers empty the queue;
  4. the 25P02 case on its own: 4 sessions x 4 tries of
     SET statement_timeout = '1s'; pickup('x', ARRAY['never'], wait => '10 s');
     SELECT 'ALIVE', with the waker running;
  5. checks against pqrun.jobs and pqrun.job_attempts.

Exit status 0 when no violation was seen, 1 otherwise. Every violation class
is printed with its count and up to PQRUN_STRESS_EXAMPLES (6) examples.
"""
import collections
import datetime
import json
import os
import random
import sys
import threading
import time
import traceback

import psycopg
from psycopg import pq

DB = sys.argv[1]
CHAOS_SECONDS = float(os.environ.get("PQRUN_STRESS_SECONDS", "40"))
SEED = int(os.environ.get("PQRUN_STRESS_SEED", str(int(time.time()))))
EXAMPLES = int(os.environ.get("PQRUN_STRESS_EXAMPLES", "6"))
FIFO_SHARE = float(os.environ.get("PQRUN_STRESS_FIFO_SHARE", "0.2"))
# Concurrency limits held throughout (pqrun.set_concurrency_limit): on queue
# q2, and on job type c in the default queue.
Q2_LIMIT = 3
C_LIMIT = 4
# A share of the jobs go to queue kq with a concurrency key (its lanes,
# pick_lanes.hpp): at most KEY_LIMIT of each key RUNNING, key k1 at most
# K1_LIMIT (pqrun.set_key_limit); each key may be claimed KEY_RATE times per
# second (burst KEY_BURST), key k2 twice as often (pqrun.set_key_rate_limit),
# and a share of the keyed jobs weigh 2 (rate_weight): generous enough not to
# hold the drain back, tight enough that bursts empty the buckets.
KEY_SHARE = float(os.environ.get("PQRUN_STRESS_KEY_SHARE", "0.2"))
KEYS = ["k1", "k2", "k3", "k4"]
KEY_LIMIT = 2
K1_LIMIT = 1
KEY_RATE = 200
KEY_BURST = 20
N_PRODUCERS = 3
N_CONSUMERS = 10
N_DRAINERS = 4
TYPES = ["a", "b", "c"]
QUEUES = ["default", "q2", "kq"]
T0 = time.monotonic()

IDLE = pq.TransactionStatus.IDLE
INERROR = pq.TransactionStatus.INERROR


def now():
    return time.monotonic() - T0


# ---- shared state (appends and dict writes are atomic under the GIL) -------

lock = threading.Lock()
counts = collections.Counter()
violations = collections.defaultdict(list)


def violation(cls, detail):
    with lock:
        violations[cls].append(f"[{now():6.2f}s] {detail}")


def count(key, n=1):
    with lock:
        counts[key] += n


stop_chaos = threading.Event()       # chaos thread, waker, victim
stop_producers = threading.Event()
stop_consumers = threading.Event()

enq_committed = {}    # job id -> (producer, seq)
enq_rolled_back = set()
enq_uncertain = set()  # COMMIT lost with the connection: may or may not exist

handouts = []          # committed claims: dicts, see Client.handout()
uncertain_claims = []  # claims whose COMMIT was lost with the connection
marks = []             # (kind, id, attempt, lease, result, worker)
killed_pids = {}       # pid -> time chaos asked for its termination
uncertain_workers = set()  # worker ids (generations) killed with a claim's commit in flight
lost_workers = set()       # worker ids (generations) whose connection was killed
session_workers = set()    # worker ids (generations) whose claims are held by their session too
chaos_targets = set()      # producer and consumer names
client_pids = {}       # client name -> current backend pid (targets for chaos)
clients = {}           # client name -> Client: their journals explain a violation
consumer_names = set()


def connect(app):
    last = None
    for _ in range(100):
        try:
            return psycopg.connect(dbname=DB, autocommit=True, application_name=app, connect_timeout=10)
        except psycopg.OperationalError as e:  # too many clients while killed ones exit
            last = e
            time.sleep(0.05)
    raise last


class Client(threading.Thread):
    """A thread with one connection at a time. Worker ids name the
    connection's generation: c3.g2 is client c3's second connection."""

    def __init__(self, name, seed):
        super().__init__(name=name, daemon=True)
        self.cname = name
        self.rnd = random.Random(seed)
        self.gen = 0
        self.conn = None
        self.pid = None
        self.last_sql = ""
        self.timeout_ms = None   # session statement_timeout as far as we know
        self.deferred = None     # session pqrun.deferred_claims as far as we know
        self.crashed = None
        # (wall clock, worker, what): the last statements and their answers,
        # printed with a violation that names this client's worker
        self.journal = collections.deque(maxlen=2000)
        clients[name] = self

    @property
    def worker(self):
        return f"{self.cname}.g{self.gen}"

    def reconnect(self):
        if self.conn is not None:
            # the old backend exits: the jobs it holds become orphans, which
            # orphan rescue gives back as new attempts
            lost_workers.add(self.worker)
            try:
                self.conn.close()
            except Exception:
                pass
        self.conn = connect("stress_" + self.cname)
        self.gen += 1
        # Half the connections hold their claims by session as well: a
        # killed one's jobs come back through orphan rescue, the others'
        # only when their stale window passes (the drain reaps them).
        if self.rnd.random() < 0.5:
            self.conn.execute("SET pqrun.claim_hold = session")
            session_workers.add(self.worker)
        self.pid = self.conn.info.backend_pid
        self.timeout_ms = 0
        self.deferred = None   # whatever the server's default is: SET it before relying on it
        client_pids[self.cname] = self.pid
        count("connections")

    def run(self):
        try:
            self.reconnect()
            self.main()
        except Exception as e:  # a bug of the test itself, or the server is gone
            self.crashed = e
            violation("client thread died", f"{self.cname}: {type(e).__name__}: {e}\n{traceback.format_exc()}")
        finally:
            client_pids.pop(self.cname, None)
            try:
                self.conn.close()
            except Exception:
                pass

    # -- statements ----------------------------------------------------------

    def q(self, sql, params=None):
        self.last_sql = sql if params is None else f"{sql} -- {params}"
        worker, began = self.worker, time.time()
        said = " ".join(sql.split())[:100] + ("" if params is None else f" -- {params}")
        try:
            cur = self.conn.execute(sql, params)
            rows = cur.fetchall() if cur.description is not None else None
        except psycopg.Error as e:
            self.journal.append((began, worker, f"{said} -> {e.sqlstate} {' '.join(str(e).split())[:80]} "
                                                f"({time.time() - began:.3f} s)"))
            raise
        self.journal.append((began, worker, f"{said} -> {rows if rows is not None and len(rows) <= 8 else 'ok'} "
                                            f"({time.time() - began:.3f} s)"))
        return rows

    def lost(self, e):
        c = self.conn
        return (e.sqlstate is None or e.sqlstate in ("57P01", "57P02", "57P03")) and (
            c.closed or c.broken or c.info.status != pq.ConnStatus.OK or e.sqlstate is not None)

    def handle_error(self, op, e, allowed=(), in_tx=False, inflight=0):
        """Classifies error `e` of operation `op`: answers 'lost' (the
        connection was replaced), 'cancel' (57014), or the SQLSTATE when it
        is in `allowed`; anything else is a violation. Afterwards the session
        must be idle and answer SELECT 1."""
        state = e.sqlstate
        if self.lost(e):
            self.on_lost(op, e, inflight)
            return "lost"
        if state == "57014":
            count("57014 " + ("timeouts" if "statement timeout" in str(e) else "cancels") + " seen")
            kind = "cancel"
        elif state in allowed:
            count(f"{state} seen")
            kind = state
        elif state == "40P01":
            count("40P01 seen")
            violation("deadlock (40P01)", f"{self.worker} {op}: {e} -- in: {self.last_sql}")
            kind = state
        elif state == "25P02":
            kind = state   # reported by check_idle below, with its cause
        else:
            violation(f"unexpected error {state}", f"{self.worker} {op}: {e} -- in: {self.last_sql}")
            kind = state
        self.check_idle(op, e, in_tx)
        return kind

    def on_lost(self, op, e, inflight):
        pid = self.pid
        if pid not in killed_pids:
            violation("connection lost without pg_terminate_backend",
                      f"{self.worker} (pid {pid}) {op}: {e.sqlstate} {e} -- in: {self.last_sql}")
        else:
            count("connections lost to kills")
        lost_workers.add(self.worker)
        if inflight:
            uncertain_workers.add(self.worker)
        # Jobs held by this generation are now orphans: a later mark may
        # succeed (before the rescue) or get 55000 (after it).
        self.reconnect()

    def check_idle(self, op, cause, in_tx):
        """After an error: ROLLBACK if we opened a transaction block, then the
        session must be idle and SELECT 1 must work (no 25P02)."""
        failing_sql = self.last_sql
        status = self.conn.info.transaction_status
        if in_tx and status != IDLE:
            for _ in range(5):
                try:
                    self.q("ROLLBACK")
                    break
                except psycopg.Error as e:
                    if self.lost(e):
                        self.on_lost("ROLLBACK", e, 0)
                        return
            status = self.conn.info.transaction_status
        if self.timeout_ms is None or 0 < self.timeout_ms < 100:
            try:   # so that SELECT 1 below does not time out itself
                self.q("SET statement_timeout = 0")
                self.timeout_ms = 0
            except psycopg.Error as e:
                if self.lost(e):
                    self.on_lost("SET", e, 0)
                    return
                self.timeout_ms = None
        aborted = status != IDLE
        problem = None
        for _ in range(5):
            try:
                self.q("SELECT 1")
                break
            except psycopg.Error as e:
                if self.lost(e):
                    self.on_lost("SELECT 1", e, 0)
                    return
                if e.sqlstate == "57014":   # chaos cancelled the check itself
                    continue
                problem = f"{e.sqlstate} {e}".strip()
                break
        if aborted or problem:
            count("aborted sessions")
            worker = self.worker
            recovered = self.recover()
            cause_text = str(cause).strip().split("\n")[0]
            violation("session left in an aborted transaction (25P02)",
                      f"{worker} {op}{' (in a transaction block, after ROLLBACK)' if in_tx else ' (autocommit)'}: "
                      f"after {cause.sqlstate} [{cause_text}] from [{failing_sql}] the session's transaction "
                      f"status is {status.name}; SELECT 1 -> {problem or 'ok'}; {recovered}")

    def recover(self):
        """Gets an aborted session going again: ROLLBACK, else a new connection."""
        try:
            self.q("ROLLBACK")
            self.q("SELECT 1")
            if self.conn.info.transaction_status == IDLE:
                count("aborted sessions recovered by ROLLBACK")
                return "ROLLBACK recovered the session"
            problem = f"status {self.conn.info.transaction_status.name}"
        except psycopg.Error as e:
            problem = f"{e.sqlstate} {' '.join(str(e).split())}"
        self.reconnect()
        return f"ROLLBACK did not recover it ({problem}): reconnected"

    def set_timeout(self, ms):
        if self.timeout_ms != ms:
            self.timeout_ms = None
            self.q(f"SET statement_timeout = {int(ms)}")
            self.timeout_ms = ms

    def set_deferred(self, on):
        if self.deferred != on:
            self.deferred = None
            self.q(f"SET pqrun.deferred_claims = {'on' if on else 'off'}")
            self.deferred = on


# ---- producers --------------------------------------------------------------

class Producer(Client):
    def __init__(self, i, seed):
        super().__init__(f"p{i}", seed)
        self.i = i
        self.seq = 0
        chaos_targets.add(self.cname)

    def job(self):
        self.seq += 1
        r = self.rnd
        delay = r.uniform(0.05, 0.5) if r.random() < 0.1 else 0
        run_after = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=delay)
        keyed = r.random() < KEY_SHARE
        queue = "kq" if keyed else "q2" if r.random() < 0.2 else "default"
        return {"job_type": r.choice(TYPES), "payload": {"p": self.cname, "n": self.seq},
                "priority": r.choice([0, 0, 1, 2]), "queue": queue,
                "max_attempts": 1000, "timeout_seconds": 1 if r.random() < 0.1 else None,
                "run_after": run_after.isoformat() if delay else None,
                "fifo_key": f"f{r.randint(1, 3)}" if r.random() < FIFO_SHARE else None,
                "concurrency_key": r.choice(KEYS) if keyed else None,
                "rate_weight": 2 if keyed and r.random() < 0.3 else None}

    def main(self):
        r = self.rnd
        while not stop_producers.is_set():
            if self.i == 0:
                # a trickle: long pauses, then one or two jobs, so that the
                # waiters outnumber the jobs
                time.sleep(r.uniform(0.3, 1.0))
                self.produce(r.choice([1, 1, 2]), "single")
            else:
                time.sleep(r.uniform(0.0, 0.12))
                if r.random() < 0.03:
                    time.sleep(0.8)      # a quiet spell
                self.produce(r.randint(1, 12), r.choice(["single", "batch", "autobatch"]))

    def produce(self, k, mode):
        jobs = [self.job() for _ in range(k)]
        if mode == "single":
            # Separate enqueue calls in one transaction take their locks in
            # call order, as row locks: FIFO groups' locks and the keyed
            # mark of a queue not yet keyed (docs/api.md, under fifo_key and
            # concurrency_key); two such transactions may deadlock. One call
            # takes its marks first and its groups in one order, so these
            # use one group and enqueue keyed jobs first. (Without the
            # second rule a CI run had 40P01: one transaction held kq's new
            # mark and waited for group f1's lock, which another held while
            # it waited to insert kq's mark.)
            keys = [j["fifo_key"] for j in jobs if j["fifo_key"]]
            for j in jobs:
                if j["fifo_key"]:
                    j["fifo_key"] = keys[0]
            jobs.sort(key=lambda j: j["concurrency_key"] is None)
        rollback = mode != "autobatch" and self.rnd.random() < 0.2
        ids, phase = [], "begin"
        try:
            if mode == "autobatch":
                phase = "commit"   # one statement in autocommit: its end is its commit
                ids = [row[0] for row in self.q("SELECT pqrun.enqueue_batch(%s::jsonb)", (json.dumps(jobs),))]
            else:
                self.q("BEGIN")
                phase = "work"
                if mode == "single":
                    for j in jobs:
                        ids += [self.q("SELECT pqrun.enqueue(%s, %s::jsonb, priority => %s, queue => %s, "
                                       "max_attempts => %s, timeout_seconds => %s, "
                                       "run_after => coalesce(%s::timestamptz, now()), fifo_key => %s, "
                                       "concurrency_key => %s, rate_weight => %s)",
                                       (j["job_type"], json.dumps(j["payload"]), j["priority"], j["queue"],
                                        j["max_attempts"], j["timeout_seconds"], j["run_after"],
                                        j["fifo_key"], j["concurrency_key"], j["rate_weight"]))[0][0]]
                else:
                    ids = [row[0] for row in self.q("SELECT pqrun.enqueue_batch(%s::jsonb)", (json.dumps(jobs),))]
                if rollback:
                    self.q("ROLLBACK")
                    enq_rolled_back.update(ids)
                    count("enqueue transactions rolled back")
                    return
                phase = "commit"
                self.q("COMMIT")
            for i, j in zip(ids, jobs):
                enq_committed[i] = (self.cname, j["payload"]["n"])
            count("enqueue transactions committed")
        except psycopg.Error as e:
            lost = self.lost(e)
            if phase == "commit" and lost:
                enq_uncertain.update(ids)
            else:
                enq_rolled_back.update(ids)
            self.handle_error(f"enqueue({mode})", e, in_tx=(mode != "autobatch"))


# ---- consumers ----------------------------------------------------------------

PICK = ("SELECT id, attempts, lease_token::text, timeout_seconds FROM pqrun.pickup(%s, job_types => %s::text[], "
        "queues => %s::text[], batch_size => %s, wait => %s::interval)")
DONE_PICK = ("SELECT id, attempts, lease_token::text, timeout_seconds FROM pqrun.mark_done_and_pickup(%s, %s::bigint[], "
             "%s::uuid[], %s::jsonb[], job_types => %s::text[], queues => %s::text[], batch_size => %s)")


class Consumer(Client):
    MODES = [  # (mode, weight)
        ("nowait", 10), ("nowait_batch", 8), ("wait", 14), ("wait_timeout", 6), ("wait_tx", 6),
        ("await", 8), ("tx_done", 8), ("one_statement", 6), ("repeatable_read", 7), ("savepoint", 5),
        ("done_pick", 10),
    ]

    def __init__(self, i, seed):
        super().__init__(f"c{i}", seed)
        self.held = []   # committed handouts not finished yet
        consumer_names.add(self.cname)
        chaos_targets.add(self.cname)

    def filters(self):
        r = self.rnd
        types = r.choice([None, ["a"], ["a", "b"], ["b", "c"], ["c"], TYPES])
        queues = r.choice([None, None, None, ["q2"], ["default"], ["kq"], ["default", "kq"]])
        return types, queues

    def handout(self, row, path, state):
        return {"id": row[0], "att": row[1], "lease": row[2], "timeout": row[3], "worker": self.worker,
                "client": self.cname, "path": path, "t": now(), "state": state, "uncertain_mark": None,
                "hold_until": now() + (2.5 if self.rnd.random() < 0.04 else self.rnd.uniform(0, 0.05))}

    def commit_claims(self, rows, path, finished):
        for row in rows:
            h = self.handout(row, path, "done-in-claim" if finished else "held")
            handouts.append(h)
            if not finished:
                self.held.append(h)
        count("claims committed", len(rows))

    def main(self):
        r = self.rnd
        modes, weights = zip(*self.MODES)
        while not stop_consumers.is_set():
            try:
                self.set_timeout(0)
                self.set_deferred(r.random() < 0.5)
                if r.random() < 0.1:
                    # cancels inside pqrun's own code: the direct pick and
                    # finish, the claims written at COMMIT
                    self.set_timeout(r.randint(1, 8))
                    count("operations under a 1-8 ms statement_timeout")
            except psycopg.Error as e:
                self.handle_error("SET", e)
                continue
            ready = [h for h in self.held if h["hold_until"] <= now()]
            if ready and (r.random() < 0.6 or len(self.held) > 6):
                self.finish(ready)
                continue
            getattr(self, "op_" + r.choices(modes, weights)[0])()
        # wind down: finish what we hold; a job that is no longer ours answers 55000
        deadline = time.monotonic() + 15
        while self.held and time.monotonic() < deadline:
            try:
                self.set_timeout(0)
            except psycopg.Error as e:
                self.handle_error("SET", e)
                continue
            self.mark_one(self.held[0], "done", False)

    def path(self, mode, sql_path=None):
        if sql_path is None:
            sql_path = not self.deferred
        return f"{mode}/{'sql' if sql_path else 'direct'}"

    # Autocommit pickups: the statement's implicit transaction commits before
    # the client sees its result, so the rows it returns are committed claims.
    def autocommit_pick(self, mode, batch, wait, timeout_ms=0):
        types, queues = self.filters()
        try:
            if timeout_ms:
                self.set_timeout(timeout_ms)
            rows = self.q(PICK, (self.worker, types, queues, batch, wait))
            self.commit_claims(rows, self.path(mode), False)
            if not rows:
                count("empty pickups" if wait == "0" else "waiting pickups that got nothing")
        except psycopg.Error as e:
            self.handle_error(f"pickup({mode}, batch {batch}, wait {wait})", e, inflight=batch)

    def op_nowait(self):
        self.autocommit_pick("nowait", 1, "0")

    def op_nowait_batch(self):
        self.autocommit_pick("nowait_batch", 100 if self.rnd.random() < 0.1 else self.rnd.randint(2, 8), "0")

    def op_wait(self):
        self.autocommit_pick("wait", self.rnd.choice([1, 1, 2, 4]), f"{self.rnd.randint(50, 1500)} ms")

    def op_wait_timeout(self):
        # statement_timeout lands during the wait (or during a look)
        self.autocommit_pick("wait_timeout", self.rnd.choice([1, 3]), "3 s", timeout_ms=self.rnd.randint(30, 700))

    def op_done_pick(self):
        """mark_done_and_pickup in autocommit: the jobs held ready are finished
        and the next ones claimed by one statement; a stale lease (55000)
        finishes nothing and claims nothing."""
        r = self.rnd
        ready = [h for h in self.held if h["hold_until"] <= now()]
        group, seen = [], set()
        for h in ready:
            if h["id"] not in seen and len(group) < r.randint(0, 3):
                seen.add(h["id"])
                group.append(h)
        ids = [h["id"] for h in group]
        leases = [h["lease"] for h in group]
        batch = r.choice([1, 1, 1, 2, 5])
        types, queues = self.filters()
        try:
            rows = self.q(DONE_PICK, (self.worker, ids, leases, [json.dumps({"by": self.worker})] * len(ids),
                                      types, queues, batch))
        except psycopg.Error as e:
            res = self.handle_error("mark_done_and_pickup", e, allowed=("55000",), inflight=batch)
            if res == "lost":
                for h in group:
                    h["uncertain_mark"] = "done"
            elif res == "55000":
                count("mark_done_and_pickup 55000 (nothing claimed; then one by one)")
                for h in group:
                    if self.conn is not None:
                        self.mark_one(h, "done", False)
            return
        count("mark_done_and_pickup ok")
        for h in group:
            marks.append(("done", h["id"], h["att"], h["lease"], "ok", self.worker))
            self.resolve(h, "marked-done")
        self.commit_claims(rows, self.path("done_pick"), False)
        if not rows:
            count("mark_done_and_pickup calls that claimed nothing")

    def in_tx(self, mode, body, iso="", finish_in_tx=False, allowed=()):
        """BEGIN [iso]; rows = body(); COMMIT or ROLLBACK. Claims count only
        once COMMIT returned."""
        r = self.rnd
        rollback = r.random() < 0.2
        rows, phase, sql_path = [], "begin", None
        try:
            self.q("BEGIN" + iso)
            phase = "work"
            if r.random() < 0.3:   # SET LOCAL: the non-deferred SQL path for this transaction only
                self.q("SET LOCAL pqrun.deferred_claims = off")
                sql_path = True
            elif iso:
                sql_path = True    # REPEATABLE READ: the locking pick goes through SQL
            rows = body()
            if rollback:
                self.q("ROLLBACK")
                count("claim transactions rolled back")
                count("claims rolled back", len(rows))
                return
            phase = "commit"
            self.q("COMMIT")
            self.commit_claims(rows, self.path(mode, sql_path), finish_in_tx)
        except psycopg.Error as e:
            if phase == "commit" and self.lost(e) and rows:
                for row in rows:
                    uncertain_claims.append(self.handout(row, self.path(mode, sql_path), "uncertain"))
            self.handle_error(f"{mode} transaction ({phase})", e, allowed=allowed, in_tx=True,
                              inflight=len(rows) if phase == "commit" else 0)

    def op_wait_tx(self):
        r = self.rnd
        types, queues = self.filters()
        batch = r.choice([1, 2, 3])
        done = r.random() < 0.5

        def body():
            if r.random() < 0.4:
                self.q(f"SET LOCAL statement_timeout = {r.randint(50, 600)}")
            rows = self.q(PICK, (self.worker, types, queues, batch, f"{r.randint(50, 1500)} ms"))
            if done and rows:
                self.q("SELECT pqrun.mark_done_batch(%s::bigint[], %s::uuid[])",
                       ([x[0] for x in rows], [x[2] for x in rows]))
            return rows
        self.in_tx("wait_tx" + ("+done" if done else ""), body, finish_in_tx=done)

    def op_await(self):
        """CALL await_jobs (the procedure form), then a non-waiting pickup."""
        r = self.rnd
        types, queues = self.filters()
        try:
            if r.random() < 0.25:
                self.set_timeout(r.randint(50, 500))
            ready = self.q("CALL pqrun.await_jobs(%s::text[], %s::text[], %s::interval)",
                           (types, queues, f"{r.randint(50, 1500)} ms"))[0][0]
            count("await_jobs ready" if ready else "await_jobs not ready")
            self.set_timeout(0)
        except psycopg.Error as e:
            self.handle_error("CALL await_jobs", e)
            return
        batch = r.choice([1, 2, 5])
        try:
            rows = self.q(PICK, (self.worker, types, queues, batch, "0"))
            self.commit_claims(rows, self.path("await+pickup"), False)
        except psycopg.Error as e:
            self.handle_error("pickup after await_jobs", e, inflight=batch)

    def op_tx_done(self):
        r = self.rnd
        types, queues = self.filters()
        batch = r.randint(1, 6)
        how = r.choice(["mark_done", "mark_done_batch"])

        def body():
            rows = self.q(PICK, (self.worker, types, queues, batch, "0"))
            if r.random() < 0.3:   # look at the queue in between: the claims are written first
                self.q("SELECT count(*) FROM pqrun.jobs WHERE id = ANY(%s::bigint[]) AND status = 'RUNNING'",
                       ([x[0] for x in rows],))
            if how == "mark_done":
                for x in rows:
                    self.q("SELECT pqrun.mark_done(%s, '{\"tx\": true}', lease_token => %s::uuid)", (x[0], x[2]))
            elif rows:
                self.q("SELECT pqrun.mark_done_batch(%s::bigint[], %s::uuid[])",
                       ([x[0] for x in rows], [x[2] for x in rows]))
            return rows
        self.in_tx("tx_done", body, finish_in_tx=True)

    def op_one_statement(self):
        """pickup and mark_done_batch in one autocommit statement."""
        types, queues = self.filters()
        batch = self.rnd.randint(1, 8)
        try:
            ids, atts, leases, timeouts, n = self.q(
                "SELECT array_agg(id), array_agg(attempts), array_agg(lease_token::text), array_agg(timeout_seconds), "
                "       pqrun.mark_done_batch(coalesce(array_agg(id), '{}'), coalesce(array_agg(lease_token), '{}')) "
                "  FROM pqrun.pickup(%s, job_types => %s::text[], queues => %s::text[], batch_size => %s)",
                (self.worker, types, queues, batch))[0]
            rows = list(zip(ids or [], atts or [], leases or [], timeouts or []))
            if n != len(rows):
                violation("mark_done_batch count", f"{self.worker}: finished {n} of {len(rows)} jobs picked: {rows}")
            self.commit_claims(rows, self.path("one_statement"), True)
        except psycopg.Error as e:
            self.handle_error("pickup+mark_done_batch statement", e, inflight=batch)

    def op_repeatable_read(self):
        r = self.rnd
        types, queues = self.filters()
        batch = r.randint(1, 4)
        done = r.random() < 0.4

        def body():
            rows = self.q(PICK, (self.worker, types, queues, batch, "0"))
            if done and rows:
                self.q("SELECT pqrun.mark_done_batch(%s::bigint[], %s::uuid[])",
                       ([x[0] for x in rows], [x[2] for x in rows]))
            return rows
        # 40001: a row claimed by a transaction that committed after our snapshot
        self.in_tx("repeatable_read" + ("+done" if done else ""), body, iso=" ISOLATION LEVEL REPEATABLE READ",
                   finish_in_tx=done, allowed=("40001",))

    def op_savepoint(self):
        r = self.rnd
        types, queues = self.filters()
        batch = r.randint(1, 4)
        keep = r.random() < 0.5
        wait = r.choice(["0", "0", "300 ms"])

        def body():
            self.q("SAVEPOINT s")
            rows = self.q(PICK, (self.worker, types, queues, batch, wait))
            if keep:
                self.q("RELEASE s")
                return rows
            self.q("ROLLBACK TO s")
            count("claims rolled back to a savepoint", len(rows))
            return []
        self.in_tx("savepoint", body)

    # -- finishing held jobs ---------------------------------------------------

    def finish(self, ready, batch_ok=True, probe=True):
        r = self.rnd
        kind = r.choices(["done", "batch", "error", "heartbeat", "release", "snooze"],
                         [5, 3 if batch_ok else 0, 2, 1, 0.5, 0.5])[0]
        if kind == "batch":
            group, seen = [], set()
            for h in ready:   # one attempt per job: a killed holder's job may be ours again as a new attempt
                if h["id"] not in seen and len(group) < r.randint(2, 5):
                    seen.add(h["id"])
                    group.append(h)
            self.mark_batch(group, probe)
        else:
            self.mark_one(ready[0], kind, probe)

    def resolve(self, h, state):
        h["state"] = state
        if h in self.held:
            self.held.remove(h)

    def call(self, kind, h):
        if kind == "done":
            self.q("SELECT pqrun.mark_done(%s, %s::jsonb, lease_token => %s::uuid)",
                   (h["id"], json.dumps({"by": h["worker"]}), h["lease"]))
        elif kind == "error":
            st = self.q("SELECT pqrun.mark_error(%s, 'stress', lease_token => %s::uuid, retry_after => %s::interval)",
                        (h["id"], h["lease"], self.rnd.choice(["0", "0", "20 ms", "300 ms"])))[0][0]
            if st != "READY":
                violation("mark_error with attempts left did not make the job READY",
                          f"{self.worker}: job {h['id']} attempt {h['att']} -> {st}")
        elif kind == "release":
            self.q("SELECT pqrun.release(%s, lease_token => %s::uuid)", (h["id"], h["lease"]))
        elif kind == "snooze":
            self.q("SELECT pqrun.snooze(%s, %s::interval, lease_token => %s::uuid)",
                   (h["id"], self.rnd.choice(["0", "20 ms"]), h["lease"]))
        else:
            self.q("SELECT pqrun.heartbeat(%s, lease_token => %s::uuid, progress => %s::jsonb)",
                   (h["id"], h["lease"], json.dumps({"beat": h["worker"]})))

    def mark_one(self, h, kind, probe):
        try:
            self.call(kind, h)
        except psycopg.Error as e:
            res = self.handle_error(f"mark_{kind}", e, allowed=("55000",), inflight=0)
            if res == "lost":
                if kind != "heartbeat":
                    h["uncertain_mark"] = kind
            elif res == "55000":
                marks.append((kind, h["id"], h["att"], h["lease"], "55000", self.worker))
                self.resolve(h, "stale")
            return
        marks.append((kind, h["id"], h["att"], h["lease"], "ok", self.worker))
        count(f"mark_{kind} ok")
        if kind == "heartbeat":
            h["hold_until"] = now() + self.rnd.uniform(0, 0.05)
            return
        self.resolve(h, "given-back" if kind in ("release", "snooze") else "marked-" + kind)
        if probe and self.rnd.random() < 0.3:
            # the same lease again: the attempt is over, so 55000
            self.probe(h, self.rnd.choice(["done", "error", "heartbeat", "release"]), f"after a successful mark_{kind}")

    def mark_batch(self, group, probe):
        ids = [h["id"] for h in group]
        leases = [h["lease"] for h in group]
        try:
            self.q("SELECT pqrun.mark_done_batch(%s::bigint[], %s::uuid[])", (ids, leases))
        except psycopg.Error as e:
            res = self.handle_error("mark_done_batch", e, allowed=("55000",), inflight=0)
            if res == "lost":
                for h in group:
                    h["uncertain_mark"] = "done"
            elif res == "55000":
                count("mark_done_batch 55000 (then one by one)")
                for h in group:
                    if self.conn is not None:
                        self.mark_one(h, "done", False)
            return
        count("mark_done_batch ok")
        for h in group:
            marks.append(("done", h["id"], h["att"], h["lease"], "ok", self.worker))
            self.resolve(h, "marked-done")
        if probe and self.rnd.random() < 0.3:
            try:
                self.q("SELECT pqrun.mark_done_batch(%s::bigint[], %s::uuid[])", (ids, leases))
                violation("stale lease accepted",
                          f"{self.worker}: mark_done_batch({ids}, {leases}) succeeded twice")
            except psycopg.Error as e:
                if self.handle_error("stale mark_done_batch probe", e, allowed=("55000",)) == "55000":
                    count("stale-lease probes answered 55000")

    def probe(self, h, kind, why):
        try:
            self.call(kind, h)
            violation("stale lease accepted",
                      f"{self.worker}: {kind} of job {h['id']} attempt {h['att']} lease {h['lease']} {why} succeeded")
        except psycopg.Error as e:
            if self.handle_error(f"stale {kind} probe", e, allowed=("55000",)) == "55000":
                count("stale-lease probes answered 55000")


# ---- chaos, the waker, and the victim of the known 25P02 case ----------------

class Chaos(Client):
    def main(self):
        r = self.rnd
        while not stop_chaos.is_set():
            time.sleep(r.uniform(0.02, 0.2))
            names = [n for n in list(client_pids) if n in chaos_targets]
            if not names:
                continue
            try:
                if r.random() < 0.7:
                    pid = client_pids.get(r.choice(names))
                    if pid and self.q("SELECT pg_cancel_backend(%s)", (pid,))[0][0]:
                        count("cancels sent")
                else:
                    targets = [n for n in names if n in consumer_names]
                    pid = client_pids.get(r.choice(targets)) if targets else None
                    if pid:
                        killed_pids[pid] = now()
                        if self.q("SELECT pg_terminate_backend(%s)", (pid,))[0][0]:
                            count("kills sent")
            except psycopg.Error as e:
                self.handle_error("chaos", e)


class Waker(Client):
    """Commits delayed jobs due ever earlier: each such commit wakes every
    waiting pickup to re-time its sleep (wake.cpp LowerNextDue), so waiters
    look again and again."""
    period = 0.02

    def main(self):
        n = 0
        while not stop_chaos.is_set():
            n += 1
            try:
                self.q("SELECT pqrun.enqueue('wake', run_after => now() + interval '1 day' - %s * interval '1 ms')",
                       (n,))
            except psycopg.Error as e:
                self.handle_error("waker", e)
            if self.period:
                time.sleep(self.period)


class Victim(Client):
    """SET statement_timeout = '1s'; SELECT * FROM pqrun.pickup('x', ARRAY['never'], wait => '10 s');
    SELECT 'ALIVE' -- the last must answer ALIVE."""

    def __init__(self, name, seed, tries=None, stop=None):
        super().__init__(name, seed)
        self.tries = tries
        self.stop = stop

    def main(self):
        n = 0
        while (self.tries is None or n < self.tries) and not (self.stop and self.stop.is_set()):
            n += 1
            count("25P02 case runs")
            try:
                self.q("SET statement_timeout = '1s'")
                self.timeout_ms = 1000
                self.q("SELECT * FROM pqrun.pickup('x', ARRAY['never'], wait => '10 s')")
                violation("the 25P02 case did not time out", f"{self.worker}: pickup returned")
                continue
            except psycopg.Error as e:
                if e.sqlstate != "57014":
                    violation("the 25P02 case did not time out", f"{self.worker}: {e.sqlstate} {e}")
                cause = e
            status = self.conn.info.transaction_status
            try:
                got = self.q("SELECT 'ALIVE'")[0][0]
                bad = None if status == IDLE else f"status {status.name}, SELECT 'ALIVE' -> {got}"
            except psycopg.Error as e:
                bad = f"status {status.name}, SELECT 'ALIVE' -> {e.sqlstate} {e}".strip()
            if bad:
                count("25P02 case hits")
                worker = self.worker
                recovered = self.recover()
                violation("session left in an aborted transaction (25P02)",
                          f"{worker} (known case): SET statement_timeout = '1s'; SELECT * FROM pqrun.pickup('x', "
                          f"ARRAY['never'], wait => '10 s') -> {cause.sqlstate}; then {bad}; {recovered}")


# ---- drain --------------------------------------------------------------------

class Drainer(Client):
    def main(self):
        idle_since = None
        while True:
            try:
                rows = self.q(PICK, (self.worker, None, None, 20, "300 ms"))
            except psycopg.Error as e:
                self.handle_error("drain pickup", e)
                continue
            if not rows:
                if drained.is_set():
                    return
                continue
            group = []
            for row in rows:
                h = {"id": row[0], "att": row[1], "lease": row[2], "timeout": row[3], "worker": self.worker,
                     "client": self.cname, "path": "drain", "t": now(), "state": "held", "uncertain_mark": None}
                handouts.append(h)
                group.append(h)
            count("claims committed", len(rows))
            try:
                self.q("SELECT pqrun.mark_done_batch(%s::bigint[], %s::uuid[])",
                       ([h["id"] for h in group], [h["lease"] for h in group]))
                for h in group:
                    h["state"] = "marked-done"
                    marks.append(("done", h["id"], h["att"], h["lease"], "ok", self.worker))
            except psycopg.Error as e:
                self.handle_error("drain mark_done_batch", e)


drained = threading.Event()


# ---- main -----------------------------------------------------------------------

def run_threads(threads):
    for t in threads:
        t.start()
    return threads


def main():
    print(f"stress: seed {SEED}, {CHAOS_SECONDS:.0f} s of chaos, {N_PRODUCERS} producers, {N_CONSUMERS} consumers")
    mon = connect("stress_monitor")
    assert mon.execute("SELECT current_setting('shared_preload_libraries') ~ 'pqrun'").fetchone()[0], \
        "the server does not preload pqrun"

    mon.execute("SELECT pqrun.set_concurrency_limit('q2', %s)", (Q2_LIMIT,))
    mon.execute("SELECT pqrun.set_concurrency_limit('default', %s, 'c')", (C_LIMIT,))
    mon.execute("SELECT pqrun.set_key_limit('kq', %s)", (KEY_LIMIT,))
    mon.execute("SELECT pqrun.set_key_limit('kq', %s, 'k1')", (K1_LIMIT,))
    mon.execute("SELECT pqrun.set_key_rate_limit('kq', %s, %s)", (KEY_RATE, KEY_BURST))
    mon.execute("SELECT pqrun.set_key_rate_limit('kq', %s, %s, 'k2')", (2 * KEY_RATE, KEY_BURST))

    # 1. chaos
    producers = run_threads([Producer(i, SEED * 100 + i) for i in range(N_PRODUCERS)])
    consumers = run_threads([Consumer(i, SEED * 100 + 10 + i) for i in range(N_CONSUMERS)])
    helpers = run_threads([Chaos("chaos", SEED * 100 + 50), Waker("waker", 0),
                           Victim("victim", 0, stop=stop_chaos)])
    # meanwhile, sample how many pickups sleep at once, how often they
    # outnumber the runnable jobs (those no limit holds back), and how many
    # jobs run under each limit
    end = time.monotonic() + CHAOS_SECONDS
    samples = surplus = most = 0
    at_limit = collections.Counter()
    while time.monotonic() < end:
        time.sleep(0.25)
        sleeping, ready, q2, c, k1, busiest = mon.execute(
            "SELECT (SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "          AND wait_event_type = 'Extension' AND application_name ~ '^stress_c'), "
            "       (SELECT count(*) FROM pqrun.job_live WHERE status = 'READY' AND NOT delayed "
            "           AND queue NOT IN ('q2', 'kq') AND (queue, job_type) <> ('default', 'c')), "
            "       (SELECT count(*) FROM pqrun.job_live WHERE status = 'RUNNING' AND queue = 'q2'), "
            "       (SELECT count(*) FROM pqrun.job_live WHERE status = 'RUNNING' AND queue = 'default' "
            "           AND job_type = 'c'), "
            "       (SELECT count(*) FROM pqrun.job_live WHERE status = 'RUNNING' AND queue = 'kq' "
            "           AND concurrency_key = 'k1'), "
            "       (SELECT coalesce(max(n), 0) FROM (SELECT count(*) AS n FROM pqrun.job_live "
            "           WHERE status = 'RUNNING' AND queue = 'kq' AND concurrency_key <> 'k1' "
            "           GROUP BY concurrency_key) k)").fetchone()
        samples += 1
        most = max(most, sleeping)
        surplus += sleeping > ready
        for name, running, limit in (("q2", q2, Q2_LIMIT), ("c", c, C_LIMIT), ("k1", k1, K1_LIMIT),
                                     ("each key", busiest, KEY_LIMIT)):
            at_limit[name] += running == limit
            if running > limit:
                violation("concurrency limit exceeded", f"{running} jobs of {name} RUNNING, limit {limit}")
    print(f"stress: up to {most} consumers asleep in a long poll at once; more sleepers than runnable jobs "
          f"in {surplus} of {samples} samples; at the limit of q2 in {at_limit['q2']}, of type c in "
          f"{at_limit['c']}, of key k1 in {at_limit['k1']}, of another key in {at_limit['each key']}")
    if most < 3 or surplus == 0:
        violation("too few waiters", f"up to {most} waiters at once, more than jobs in {surplus} samples")
    if at_limit["q2"] == 0:
        violation("limit never reached", f"q2 never ran {Q2_LIMIT} jobs at once in {samples} samples")
    t = now()
    stop_chaos.set()
    for h in helpers:
        h.join(15)
    stop_producers.set()
    for p in producers:
        p.join(15)
    # 2. wind down: consumers finish what they hold
    stop_consumers.set()
    for c in consumers:
        c.join(30)
        if c.is_alive():
            violation("a client did not stop", f"{c.cname} still running 30 s after the stop; last: {c.last_sql}")
    print(f"stress: chaos phase {t:.1f} s, wind down {now() - t:.1f} s")

    # 3. drain, with every orphan of a session-held claim rescued in a
    # maintenance round or two, and the lease-held claims of killed
    # connections reaped once silent for 3 s (every consumer has stopped:
    # whatever still runs is an orphan)
    t = now()
    drainers = run_threads([Drainer(f"d{i}", 0) for i in range(N_DRAINERS)])
    deadline = time.monotonic() + 30
    left = None
    while time.monotonic() < deadline:
        left = mon.execute("SELECT count(*) FROM pqrun.job_live WHERE job_type <> 'wake'").fetchone()[0]
        if left == 0:
            break
        count("reaped in the drain", mon.execute("SELECT pqrun.reap_stale('3 s')").fetchone()[0])
        time.sleep(0.2)
    drained.set()
    for d in drainers:
        d.join(15)
    if left:
        rows = mon.execute("SELECT id, status, attempts, locked_by, run_after > now() FROM pqrun.job_live "
                           "WHERE job_type <> 'wake' ORDER BY id LIMIT 10").fetchall()
        violation("not drained", f"{left} jobs still unfinished 30 s after the chaos, e.g. "
                                 "(id, status, attempts, locked_by, delayed): {rows}")
    print(f"stress: drain {now() - t:.1f} s")

    # 4. the known 25P02 case on its own, with the waker at full speed
    t = now()
    stop_chaos.clear()
    waker = Waker("waker2", 0)
    waker.period = 0
    waker.start()
    before = counts["25P02 case hits"]
    victims = run_threads([Victim(f"v{i}", 0, tries=4) for i in range(4)])
    for v in victims:
        v.join(60)
    stop_chaos.set()
    waker.join(15)
    print(f"stress: the 25P02 case: {counts['25P02 case hits'] - before} of 16 runs left the session aborted "
          f"({now() - t:.1f} s)")

    # 5. checks
    check(mon)
    mon.close()
    return report()


def wall(t):
    return time.strftime("%H:%M:%S", time.localtime(t)) + f".{int(t * 1000) % 1000:03d}" if t else "-"


def explain(job_id, worker, started, attempts):
    """What a violation about job `job_id` and `worker` needs to be
    understood without running again: the job's attempts and handouts, and
    the worker's statements from 3 s before the attempt began to 1 s after."""
    lines = [f"attempt {n}: {a[2]} {a[3]} {wall(a[4])}-{wall(a[5])}"
             for (i, n), a in sorted(attempts.items()) if i == job_id]
    lines += [f"handout {h['att']} to {h['worker']} via {h['path']} at {h['t']:.2f}s: {h['state']}"
              f"{', mark ' + h['uncertain_mark'] if h['uncertain_mark'] else ''}"
              for h in handouts + uncertain_claims if h["id"] == job_id]
    client = clients.get(worker.split(".")[0])
    if client is not None and started:
        lines += [f"{wall(t)} {w}: {what}" for t, w, what in list(client.journal)
                  if started - 3 <= t <= started + 1]
    return "".join("\n         " + line for line in lines)


def check(mon):
    jobs = {row[0]: row for row in mon.execute(
        "SELECT id, status, attempts, lease_token::text, timeout_seconds, payload, max_attempts "
        "FROM pqrun.jobs WHERE job_type IN ('a', 'b', 'c', 'never')")}
    attempts = {(row[0], row[1]): row for row in mon.execute(
        "SELECT a.job_id, a.attempt, a.worker_id, a.outcome, extract(epoch FROM a.started_at)::float8, "
        "       extract(epoch FROM a.finished_at)::float8 FROM pqrun.job_attempts a "
        "JOIN pqrun.jobs j ON j.id = a.job_id WHERE j.job_type IN ('a', 'b', 'c', 'never')")}
    wrong_type = mon.execute("SELECT count(*) FROM pqrun.jobs WHERE job_type NOT IN ('a', 'b', 'c', 'wake')").fetchone()[0]
    if wrong_type:
        violation("jobs nobody enqueued", f"{wrong_type} jobs of other types")

    # nothing lost, nothing invented
    for i, (p, n) in enq_committed.items():
        j = jobs.get(i)
        if j is None:
            violation("committed job lost", f"job {i} ({p} #{n}) was committed and is not in pqrun.jobs")
        elif j[1] != "DONE":
            violation("committed job not DONE", f"job {i} ({p} #{n}) ends {j[1]} after {j[2]} attempts")
        elif j[5] != {"p": p, "n": n}:
            violation("payload changed", f"job {i}: {j[5]}, enqueued as {p} #{n}")
    for i in enq_rolled_back:
        if i in jobs:
            violation("rolled-back job exists", f"job {i} was enqueued in a rolled-back transaction: {jobs[i][:3]}")
    for i, j in jobs.items():
        if i not in enq_committed and i not in enq_uncertain and i not in enq_rolled_back:
            violation("job nobody enqueued", f"job {i}: {j[:3]}")
        if i in enq_uncertain and j[1] != "DONE":
            violation("committed job not DONE", f"job {i} (commit seen lost) ends {j[1]}")
    expected = len(enq_committed) + len([i for i in enq_uncertain if i in jobs])
    if len(jobs) != expected:
        violation("job count", f"{len(jobs)} jobs, expected {expected}")

    # each job handed out once per attempt; an attempt given back (release,
    # snooze) was never made, so the job's next handout has its number again
    by_pair = collections.defaultdict(list)
    for h in sorted(handouts, key=lambda h: h["t"]):
        by_pair[(h["id"], h["att"])].append(h)
    by_lease = collections.Counter(h["lease"] for h in handouts)
    for pair, hs in by_pair.items():
        if any(h["state"] != "given-back" and h["uncertain_mark"] not in ("release", "snooze") for h in hs[:-1]):
            violation("job handed out twice in one attempt",
                      f"job {pair[0]} attempt {pair[1]}: " +
                      "; ".join(f"{h['worker']} via {h['path']} at {h['t']:.2f}s lease {h['lease']}" for h in hs)
                      + explain(pair[0], hs[-1]["worker"], None, attempts))
    for lease, k in by_lease.items():
        if k > 1:
            violation("lease token handed out twice", f"lease {lease} in {k} committed claims")
    uncertain_pairs = {(h["id"], h["att"]) for h in uncertain_claims}
    for pair, hs in by_pair.items():
        a = attempts.get(pair)
        h = hs[-1]
        if h["state"] == "given-back":
            if a is not None and a[2] == h["worker"]:
                violation("an attempt given back is in job_attempts",
                          f"job {pair[0]} attempt {pair[1]} given back by {h['worker']}: {a}")
            continue
        if a is None:
            violation("committed claim missing from job_attempts",
                      f"job {pair[0]} attempt {pair[1]} claimed by {h['worker']} via {h['path']} at {h['t']:.2f}s"
                      + explain(pair[0], h["worker"], None, attempts))
        elif a[2] != h["worker"]:
            violation("job_attempts names another worker",
                      f"job {pair[0]} attempt {pair[1]}: claimed by {h['worker']} via {h['path']}, "
                      f"job_attempts says {a[2]} ({a[3]})" + explain(pair[0], a[2], a[4], attempts))
    for pair, a in attempts.items():
        if pair in by_pair:
            continue
        if a[2] in uncertain_workers or pair in uncertain_pairs:
            count("attempts claimed as the claimer's connection was killed")
            continue
        violation("attempt claimed by no committed pickup",
                  f"job {pair[0]} attempt {pair[1]} by {a[2]} outcome {a[3]}: no committed claim was seen by "
                  f"the client, whose connection was not lost (a rolled-back or failed pickup's claim survived?)"
                  + explain(pair[0], a[2], a[4], attempts))

    # each job's history: attempts 1..n, the last one done, the others given back
    per_job = collections.defaultdict(dict)
    for (i, n), a in attempts.items():
        per_job[i][n] = a
    for i, j in jobs.items():
        hist = per_job.get(i, {})
        if sorted(hist) != list(range(1, j[2] + 1)):
            violation("attempt history has gaps", f"job {i}: attempts {j[2]}, history {sorted(hist)}")
            continue
        for n, a in hist.items():
            want = ("done",) if n == j[2] else ("retry", "orphaned", "stale")
            if a[3] not in want:
                violation("attempt outcome", f"job {i} attempt {n} of {j[2]} by {a[2]}: outcome {a[3]}, expected {want}")
            # only a session holds a claim beyond its lease
            if a[3] == "orphaned" and a[2] not in session_workers:
                violation("a lease-held claim rescued as an orphan",
                          f"job {i} attempt {n} by {a[2]}, whose claims were held by their leases only")
            if a[3] == "orphaned":
                count("orphaned attempts of session-held claims")
            elif a[3] == "stale" and a[2] in lost_workers and a[2] not in session_workers:
                count("stale attempts of lease-held claims of killed connections")

    # marks: done/error only with the current lease; 55000 only for a lost lease
    done_ok = collections.defaultdict(list)
    handout_of = {h["lease"]: h for h in handouts}
    for kind, i, n, lease, result, worker in marks:
        a = attempts.get((i, n))
        h = handout_of.get(lease)
        if result == "ok" and kind == "done":
            done_ok[i].append((n, lease, worker))
            j = jobs.get(i)
            if j is None or j[1] != "DONE" or j[2] != n or j[3] != lease:
                violation("mark_done succeeded for an attempt that is not the job's last",
                          f"job {i} attempt {n} lease {lease} by {worker}; the job: {j and j[1:4]}")
        elif result == "ok" and kind == "error":
            if a is None or a[3] != "retry":
                violation("mark_error succeeded but the attempt was not retried",
                          f"job {i} attempt {n} by {worker}: job_attempts {a}")
        elif result == "55000":
            allowed = {"orphaned", "stale"} if h and h["worker"] in lost_workers else set()
            if h and h["timeout"]:
                allowed.add("stale")
            if h and h["uncertain_mark"]:
                allowed.add({"done": "done", "error": "retry"}.get(h["uncertain_mark"], "given back"))
            if h and (h["state"] == "given-back" or "given back" in allowed):
                count("55000 after a give-back")
            elif a is None or a[3] not in allowed:
                violation("55000 for a lease its holder still had",
                          f"{kind} of job {i} attempt {n} by {worker} (claimed by {h and h['worker']} via "
                          f"{h and h['path']}, timeout {h and h['timeout']}) got 55000; job_attempts outcome "
                          f"{a and a[3]} by {a and a[2]}, allowed {sorted(allowed)}")
            else:
                count(f"55000 after {a[3]}")
    for i, ok in done_ok.items():
        if len(ok) > 1:
            violation("job marked done twice", f"job {i}: {ok}")
    for h in handouts:
        if h["state"] == "held" and h["path"] != "drain":
            violation("client still holds a job", f"{h['worker']} job {h['id']} attempt {h['att']}")

    # every path was taken
    paths = collections.Counter(h["path"].replace("+done", "") for h in handouts)
    for mode in [m for m, _ in Consumer.MODES]:
        if mode == "wait_timeout":
            continue   # its statement_timeout usually wins
        for p in ("direct", "sql"):
            key = f"{'await+pickup' if mode == 'await' else mode}/{p}"
            if mode == "repeatable_read" and p == "direct":
                continue
            if paths[key] == 0:
                violation("claim path never exercised", f"no committed claim through {key}")
    print("stress: committed claims by path: " + ", ".join(f"{k} {v}" for k, v in sorted(paths.items())))
    counts["jobs"] = len(jobs)
    counts["attempts"] = len(attempts)
    counts["committed handouts"] = len(handouts)
    counts["jobs retried after an orphaned/stale/error attempt"] = sum(1 for j in jobs.values() if j[2] > 1)


def report():
    keys = ["jobs", "enqueue transactions committed", "enqueue transactions rolled back", "committed handouts",
            "claims rolled back", "claims rolled back to a savepoint", "attempts",
            "jobs retried after an orphaned/stale/error attempt", "empty pickups", "await_jobs ready",
            "await_jobs not ready", "mark_done ok", "mark_done_batch ok", "mark_error ok", "mark_heartbeat ok",
            "mark_release ok", "mark_snooze ok",
            "55000 seen", "stale-lease probes answered 55000", "cancels sent", "57014 cancels seen",
            "57014 timeouts seen", "kills sent", "connections lost to kills", "connections", "40001 seen",
            "40P01 seen", "aborted sessions", "25P02 case runs", "25P02 case hits"]
    counts["uncertain enqueues"] = len(enq_uncertain)
    counts["uncertain claims"] = len(uncertain_claims)
    for k in keys + sorted(set(counts) - set(keys)):
        print(f"     {k}: {counts.get(k, 0)}")
    bad = 0
    for cls in sorted(violations):
        v = violations[cls]
        bad += len(v)
        print(f"FAIL {cls}: {len(v)}")
        for line in v[:EXAMPLES]:
            print(f"       {line}")
    if not bad:
        print("ok   each job handed out once per attempt, nothing lost, no stale lease accepted, "
              "no session left aborted, no unexpected error")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

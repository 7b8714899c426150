#!/usr/bin/env bash
# test/shell/pgbouncer.sh — pqrun's worker loop through Debian's PgBouncer.
#
# Runs against an already running server with pqrun preloaded (test/run.sh
# exports PGHOST, PGPORT and PGUSER), in a database of its own that it creates
# and drops. Starts a private pgbouncer (as the postgres OS user when root) on
# a free loopback port with default_pool_size = 2, three entries for the
# database (transaction, statement and session pooling) and stops it on exit.
# Needs the pgbouncer package, and node + npm for the drain (it runs the
# example worker from examples/node, on the client in clients/node,
# installing its locked dependencies with `npm ci` when they are missing
# or its copy of the client is not clients/node's).
#
# Transaction pooling, the mode most production setups use:
#  - 8 worker connections (the Node worker, --concurrency 8, long-poll
#    pickup with wait => '1 s', a heartbeat and mark_done with lease tokens
#    per job) share 2 server connections and drain 200 jobs: each DONE exactly
#    once, attempts 1 (the worker runs with --hold lease, as behind a
#    transaction pooler it must: a SET on a server connection stays there for
#    the next client);
#  - a waiting pickup is woken by another client's commit (it answers
#    within longpoll.sh's 400 ms of it, where polling would take about
#    0.7 s); so is CALL await_jobs, which holds no snapshot while it
#    waits; both hold a server
#    connection meanwhile, so an enqueue through a pool whose connections all
#    wait is held back until one wait ends;
#  - a healthy pooled worker whose pickup and heartbeats land on different
#    server connections is not rescued as an orphan while other clients
#    churn connections (maintenance rounds forced every 0.3 s);
#  - when pgbouncer closes the server connection of the last
#    pickup/heartbeat (RECONNECT here; server_lifetime and
#    server_idle_timeout do the same) before the next heartbeat, the job
#    stays its worker's: a claim is held by its lease (0.15.0 bound it to
#    that server connection and rescued it, and the worker's next heartbeat
#    was fenced off with 55000).
# Statement pooling: single statements work (also a chain written as one
# statement, and CALL await_jobs); BEGIN is refused. Session pooling: LISTEN
# pqrun_jobs gets notified (in transaction pooling it does not work).
#
# Exits non-zero on any violation. Bounded: about 35 s, every wait has a limit.
# Bounds a wake-up at 400 ms:
# test/run.sh: alone
set -uo pipefail

repo=$(cd "$(dirname "$0")/../.." && pwd)
source "$repo/test/lib/cluster.sh"
example=$repo/examples/node
export PGHOST=${PGHOST:?PGHOST must point at the running test server} PGPORT=${PGPORT:-5432} PGUSER=${PGUSER:-postgres}
export PGCONNECT_TIMEOUT=10
db=pqrun_pgb_$$
tmp=$(mktemp -d /tmp/pqrun-pgbouncer.XXXXXX)
chmod 755 "$tmp"
bg_pids=()

stop_pgbouncer() {
	local pid
	pid=$(cat "$tmp/pgbouncer.pid" 2>/dev/null) || return 0
	kill "$pid" 2>/dev/null
	for _ in $(seq 1 50); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	kill -KILL "$pid" 2>/dev/null
	rm -f "$tmp/pgbouncer.pid"
}
cleanup() {
	for p in "${bg_pids[@]}"; do kill -KILL "$p" 2>/dev/null; done
	stop_pgbouncer
	if ! dropdb --if-exists "$db" 2>/dev/null; then
		psql -X -q -d postgres -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null
	fi
	rm -rf "$tmp"
}
trap cleanup EXIT

source "$repo/test/lib/checks.sh"
q() { psql -X -qtA -v ON_ERROR_STOP=1 -d "$db" "$@"; }                                   # direct
pb() { psql -X -qtA -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$port" -d "$db" "$@"; }          # transaction pool
admin() { psql -X -A -F'|' -P footer=off -h 127.0.0.1 -p "$port" -d pgbouncer "$@"; }    # console

die() {
	echo "FAIL $*"
	[ -f "$tmp/pgbouncer.log" ] && tail -n 15 "$tmp/pgbouncer.log"
	exit 1
}
# server_conns: server backends of our database, but this query's own.
server_conns() {
	q -c "SELECT count(*) FROM pg_stat_activity WHERE datname = '$db' AND backend_type = 'client backend'
	        AND pid <> pg_backend_pid()"
}
# pool_clients: clients pgbouncer holds for the transaction pool (active + waiting).
pool_clients() {
	admin -c "SHOW POOLS" | awk -F'|' -v db="$db" '
		NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
		$col["database"] == db { print $col["cl_active"] + $col["cl_waiting"] }'
}

echo "== setup"
pgbouncer=$(command -v pgbouncer || echo /usr/sbin/pgbouncer)
[ -x "$pgbouncer" ] || die "pgbouncer is not installed (Debian: apt-get install pgbouncer)"
command -v node >/dev/null || die "node is not installed (Debian: apt-get install nodejs npm)"
if [ ! -d "$example/node_modules/pg" ] || ! cmp -s "$repo/clients/node/package.json" "$example/node_modules/pqrun/package.json" ||
	! diff -rq "$repo/clients/node/src" "$example/node_modules/pqrun/src" >/dev/null 2>&1; then
	command -v npm >/dev/null || die "npm is not installed (Debian: apt-get install npm)"
	(cd "$example" && npm ci --no-audit --no-fund) >"$tmp/npm.log" 2>&1 || { cat "$tmp/npm.log"; die "npm ci failed"; }
fi
port=
for p in $(seq "${PQRUN_PGBOUNCER_PORT:-64321}" $((${PQRUN_PGBOUNCER_PORT:-64321} + 20))); do
	if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
		port=$p
		break
	fi
done
[ -n "$port" ] || die "no free port for pgbouncer"

createdb "$db" || die "createdb $db"
q -c "CREATE EXTENSION pqrun" >/dev/null || die "CREATE EXTENSION in $db"

target="host=$PGHOST port=$PGPORT dbname=$db"
cat >"$tmp/pgbouncer.ini" <<EOF
[databases]
$db = $target
${db}_stmt = $target pool_mode=statement
${db}_session = $target pool_mode=session

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $port
unix_socket_dir = $tmp
auth_type = trust
auth_file = $tmp/userlist.txt
admin_users = $PGUSER
pool_mode = transaction
default_pool_size = 2
min_pool_size = 0
reserve_pool_size = 0
max_client_conn = 50
; a client queued for a server connection gets an error instead of hanging
query_wait_timeout = 20
; hand transactions to the server connections in turn, so that a worker's
; pickup and heartbeats land on different ones
server_round_robin = 1
logfile = $tmp/pgbouncer.log
pidfile = $tmp/pgbouncer.pid
EOF
echo "\"$PGUSER\" \"\"" >"$tmp/userlist.txt"
[ "$(id -u)" = 0 ] && chown -R postgres: "$tmp"
as_pg "$pgbouncer" -d -q "$tmp/pgbouncer.ini" || die "pgbouncer did not start"
for _ in $(seq 1 50); do
	pb -c "SELECT 1" >/dev/null 2>&1 && break
	sleep 0.1
done
pb -c "SELECT 1" >/dev/null || die "pgbouncer does not answer on port $port"
echo "     $("$pgbouncer" --version | head -n 1) on 127.0.0.1:$port, pool_mode = transaction, default_pool_size = 2"

echo "== transaction pooling: 8 worker connections, 2 server connections, 200 jobs"
cat >"$tmp/handlers.js" <<'EOF'
module.exports = {
  // one explicit heartbeat per job, then mark_done (by the worker) with the result
  async pooled(job, ctx) {
    await ctx.heartbeat();
    return { by: ctx.workerId };
  },
};
EOF
pb -c "SELECT count(*) FROM pqrun.enqueue_batch((SELECT jsonb_agg(jsonb_build_object('job_type', 'pooled',
	'payload', jsonb_build_object('n', i))) FROM generate_series(1, 200) AS i))" >/dev/null || die "enqueue through pgbouncer"
t0=$(now_ms)
(cd "$example" && PGHOST=127.0.0.1 PGPORT=$port PGDATABASE=$db exec node cli.js --handlers "$tmp/handlers.js" \
	--concurrency 8 --wait '1 s' --worker-id pooled --hold lease) >"$tmp/worker.log" 2>&1 &
worker=$!
bg_pids+=("$worker")
max_servers=0
max_clients=0
deadline=$(($(now_ms) + 30000))
while [ "$(now_ms)" -le $deadline ]; do
	s=$(server_conns)
	c=$(pool_clients)
	[ "${s:-0}" -gt "$max_servers" ] && max_servers=$s
	[ "${c:-0}" -gt "$max_clients" ] && max_clients=$c
	[ "$(q -c "SELECT count(*) FROM pqrun.jobs WHERE job_type = 'pooled' AND status = 'DONE'")" = 200 ] && break
	sleep 0.1
done
echo "     drained in $(($(now_ms) - t0)) ms"
kill -TERM "$worker"
rc=
for _ in $(seq 1 100); do
	kill -0 "$worker" 2>/dev/null || {
		wait "$worker"
		rc=$?
		break
	}
	sleep 0.1
done
assert "the worker exits 0 on SIGTERM (status ${rc:-none})" [ "${rc:-x}" = 0 ]
assert "8 worker connections were pgbouncer clients at once (max seen $max_clients)" [ "$max_clients" -ge 8 ]
assert "at most 2 server connections served them (max seen $max_servers)" [ "$max_servers" -ge 1 -a "$max_servers" -le 2 ]
check "every job is DONE" 200 "SELECT count(*) FROM pqrun.jobs WHERE job_type = 'pooled' AND status = 'DONE'"
check "every job was attempted once" 200 "SELECT count(*) FROM pqrun.jobs WHERE job_type = 'pooled' AND attempts = 1"
check "one attempt per job, outcome done" '200|200|200' \
	"SELECT count(*) || '|' || count(DISTINCT job_id) || '|' || count(*) FILTER (WHERE attempt = 1 AND outcome = 'done')
	   FROM pqrun.job_attempts a JOIN pqrun.jobs j ON j.id = a.job_id WHERE j.job_type = 'pooled'"
check "each job was marked done by the worker that held its lease" 0 \
	"SELECT count(*) FROM pqrun.jobs WHERE job_type = 'pooled' AND locked_by IS DISTINCT FROM result->>'by'"
assert "no lease was lost, no worker error" bash -c "! grep -qE 'lease lost|error|failed' '$tmp/worker.log'"
q -c "SELECT locked_by, count(*) FROM pqrun.jobs WHERE job_type = 'pooled' GROUP BY 1 ORDER BY 1" |
	tr '\n' ' ' | sed 's/^/     jobs per worker connection: /; s/$/\n/'

# A woken waiter answers within LATENCY_MS of the commit (longpoll.sh's
# bound for a wake-up), both ends read from the server's clock: the
# waiter's as its statement returns, the producer's just before its commit.
# The producer commits about 0.3 s after the waiter began to sleep, so a
# waiter that polled every second instead would answer about 0.7 s after the
# commit and fail. (Here: 0 to 3 ms by the server's clock, and the
# waiter's client has the answer through pgbouncer about 10 ms after the
# commit.)
LATENCY_MS=400
# server_ms: the server's clock, in epoch milliseconds, as SQL.
server_ms="(extract(epoch FROM clock_timestamp()) * 1000)::bigint"
# latency COMMITTED RETURNED: RETURNED - COMMITTED, or "none" unless both
# are times.
latency() { [[ "$1" =~ ^[0-9]+$ && "$2" =~ ^[0-9]+$ ]] && echo $(($2 - $1)) || echo none; }
# woken LATENCY: a latency of a wake-up, from 0 to LATENCY_MS.
woken() { [[ "$1" =~ ^[0-9]+$ ]] && [ "$1" -lt $LATENCY_MS ]; }

echo "== transaction pooling: a waiting pickup is woken by another client's commit"
t1=$(now_ms)
pb -c "SELECT id || ' ' || $server_ms FROM pqrun.pickup('longpoll', '{lp}', wait => '10 s')" >"$tmp/lp.out" 2>&1 &
waiter=$!
bg_pids+=("$waiter")
wait_for 5 1 "SELECT count(*) FROM pg_stat_activity WHERE datname = '$db' AND query LIKE '%pqrun.pickup(''longpoll''%'
	AND state = 'active' AND wait_event_type = 'Extension'" || die "the pickup is not waiting"
sleep 0.3
read -r lp committed <<<"$(pb -c "SELECT pqrun.enqueue('lp') || ' ' || $server_ms")"
wait "$waiter"
took=$(($(now_ms) - t1))
read -r got returned <"$tmp/lp.out"
assert "the waiting pickup returned the job committed through another client ($(cat "$tmp/lp.out") = $lp)" \
	[ -n "$lp" -a "$got" = "$lp" ]
ms=$(latency "$committed" "$returned")
assert "it waited ($took ms, the wait was 10 s)" [ "$took" -ge 300 ]
assert "... and was woken: it returned $ms ms after the commit (bound $LATENCY_MS ms)" woken "$ms"

echo "== transaction pooling: CALL await_jobs waits without a snapshot and is woken"
# (A CALL returns no clock: the statement after it, through the same pool,
# reads the server's as the CALL has returned.)
t1=$(now_ms)
pb -c "CALL pqrun.await_jobs('{aw}', wait => '10 s')" -c "SELECT $server_ms" >"$tmp/aw.out" 2>&1 &
waiter=$!
bg_pids+=("$waiter")
wait_for 5 1 "SELECT count(*) FROM pg_stat_activity WHERE datname = '$db' AND query LIKE 'CALL pqrun.await_jobs%'
	AND state = 'active' AND wait_event_type = 'Extension'" || die "await_jobs is not waiting"
check "the waiting backend holds no snapshot (backend_xmin NULL)" t \
	"SELECT bool_and(backend_xmin IS NULL) FROM pg_stat_activity WHERE datname = '$db' AND query LIKE 'CALL pqrun.await_jobs%'"
sleep 0.3
committed=$(pb -c "SELECT $server_ms FROM pqrun.enqueue('aw')")
wait "$waiter"
took=$(($(now_ms) - t1))
{ read -r ready; read -r returned; } <"$tmp/aw.out"
assert "await_jobs answered ready = true ($(tr '\n' ' ' <"$tmp/aw.out"))" [ "$ready" = t ]
ms=$(latency "$committed" "$returned")
assert "it waited ($took ms, the wait was 10 s)" [ "$took" -ge 300 ]
assert "... and was woken: it returned $ms ms after the commit (bound $LATENCY_MS ms)" woken "$ms"

echo "== transaction pooling: a healthy worker is not rescued while it heartbeats"
hold=$(pb -c "SELECT pqrun.enqueue('hold')")
{
	echo "SELECT id AS hold_id, lease_token AS hold_lease, pg_backend_pid() AS pid0 FROM pqrun.pickup('pooled-holder', '{hold}') \\gset"
	echo "\\echo pickup :hold_id :pid0"
	for _ in $(seq 1 10); do
		echo "SELECT 'heartbeat', pg_backend_pid() FROM (SELECT pqrun.heartbeat(:hold_id, :'hold_lease')) AS hb;"
		echo "\\! sleep 0.5"
	done
	echo "SELECT 'done', pg_backend_pid() FROM (SELECT pqrun.mark_done(:hold_id, '{\"held\": true}', :'hold_lease')) AS d;"
} >"$tmp/hold.sql"
pb -F ' ' -f "$tmp/hold.sql" >"$tmp/hold.out" 2>&1 &
holder=$!
bg_pids+=("$holder")
# Other clients connect, enqueue, pick up, finish and disconnect meanwhile.
churn_end=$(($(now_ms) + 5500))
for c in 1 2 3 4; do
	(while [ "$(now_ms)" -lt $churn_end ]; do
		pb -c "SELECT pqrun.enqueue('churn')" \
			-c "SELECT pqrun.mark_done(id, NULL, lease_token) FROM pqrun.pickup('churner-$c', '{churn}')" >/dev/null 2>&1
	done) &
	bg_pids+=("$!")
done
# Maintenance rounds (orphan rescue among them) every 0.3 s, besides the
# background workers' own, so the check does not hang on their timing.
for _ in $(seq 1 18); do echo "SELECT pqrun.run_maintenance(); SELECT pg_sleep(0.3);"; done |
	psql -X -q -d "$db" >/dev/null 2>&1 &
bg_pids+=("$!")
sleep 4.5
check "after 4.5 s the held job is still RUNNING, attempts 1, not rescued" 'RUNNING|1|' \
	"SELECT j.status || '|' || j.attempts || '|' || coalesce(string_agg(a.outcome, ','), '')
	   FROM pqrun.jobs j JOIN pqrun.job_attempts a ON a.job_id = j.id WHERE j.id = $hold GROUP BY j.status, j.attempts"
wait "$holder"
holder_rc=$?
wait
assert "the holder's heartbeats and fenced mark_done all succeeded" [ $holder_rc = 0 ]
check "the held job is DONE after one attempt, never orphaned" 'DONE|1|done' \
	"SELECT j.status || '|' || j.attempts || '|' || string_agg(a.outcome, ',')
	   FROM pqrun.jobs j JOIN pqrun.job_attempts a ON a.job_id = j.id WHERE j.id = $hold GROUP BY j.status, j.attempts"
pids=$(awk '$1 == "pickup" { print $3 } $1 == "heartbeat" || $1 == "done" { print $2 }' "$tmp/hold.out" | sort -u | wc -l)
beats=$(grep -c '^heartbeat ' "$tmp/hold.out")
assert "its pickup, $beats heartbeats and mark_done ran on $pids different server connections" [ "$beats" = 10 -a "$pids" -ge 2 ]
churned=$(q -c "SELECT count(*) FROM pqrun.jobs WHERE job_type = 'churn' AND status = 'DONE'")
assert "other clients churned meanwhile ($churned jobs)" [ "$churned" -ge 10 ]

echo "== transaction pooling: pgbouncer closes the holder's server connection, the lease holds"
cav=$(pb -c "SELECT pqrun.enqueue('caveat')")
cat >"$tmp/caveat.sql" <<'EOF'
\set ON_ERROR_STOP on
SELECT id AS cav_id, lease_token AS cav_lease FROM pqrun.pickup('pooled-holder-2', '{caveat}') \gset
\! sleep 2.5
SELECT pqrun.heartbeat(:cav_id, :'cav_lease');
SELECT pqrun.mark_done(:cav_id, lease_token => :'cav_lease');
EOF
psql -X -qtA -h 127.0.0.1 -p "$port" -d "$db" -f "$tmp/caveat.sql" >"$tmp/caveat.out" 2>&1 &
holder=$!
bg_pids+=("$holder")
wait_for 5 RUNNING "SELECT status FROM pqrun.jobs WHERE id = $cav" || die "job $cav was not picked up"
admin -c "RECONNECT $db" >/dev/null || die "RECONNECT"
wait_for 5 0 "SELECT count(*) FROM pg_stat_activity WHERE datname = '$db'
	AND backend_type = 'client backend' AND state = 'idle'" || die "pgbouncer kept its idle server connections"
q -c "SELECT pqrun.run_maintenance()" >/dev/null
check "the job of a live worker whose server connection closed stays RUNNING" 'RUNNING|1|' \
	"SELECT j.status || '|' || j.attempts || '|' || coalesce(string_agg(a.outcome, ','), '')
	   FROM pqrun.jobs j JOIN pqrun.job_attempts a ON a.job_id = j.id WHERE j.id = $cav GROUP BY j.status, j.attempts"
wait "$holder"
holder_rc=$?
assert "that worker's next heartbeat and its mark_done succeed on another server connection ($(tr '\n' ' ' <"$tmp/caveat.out"))" [ $holder_rc = 0 ]
check "the job is DONE after one attempt" 'DONE|1|done' \
	"SELECT j.status || '|' || j.attempts || '|' || string_agg(a.outcome, ',')
	   FROM pqrun.jobs j JOIN pqrun.job_attempts a ON a.job_id = j.id WHERE j.id = $cav GROUP BY j.status, j.attempts"

echo "== transaction pooling: waiting pickups hold server connections"
# Two waiters take both server connections of the pool for their whole wait,
# so a producer's enqueue through the same pool queues in pgbouncer until one
# of them gives up: size pools (or give producers a pool of their own).
for w in 2 6; do
	pb -c "SELECT count(*) FROM pqrun.pickup('saturating-$w', '{sat}', wait => '$w s')" >/dev/null 2>&1 &
	bg_pids+=("$!")
done
wait_for 5 2 "SELECT count(*) FROM pg_stat_activity WHERE datname = '$db' AND query LIKE '%pqrun.pickup(''saturating-%'
	AND state = 'active'" || die "the pickups are not waiting"
t1=$(now_ms)
pb -c "SELECT pqrun.enqueue('sat')" >/dev/null
took=$(($(now_ms) - t1))
wait
assert "an enqueue through the saturated pool waited for a server connection ($took ms)" [ "$took" -ge 1000 ]
check "then woke the waiter that was still waiting" saturating-6 \
	"SELECT locked_by FROM pqrun.jobs WHERE job_type = 'sat'"

echo "== statement pooling"
pst() { psql -X -qtA -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$port" -d "${db}_stmt" "$@"; }
st=$(pst -c "SELECT pqrun.enqueue('stmt')")
pst -c "SELECT id || ' ' || lease_token FROM pqrun.pickup('stmt-worker', '{stmt}', wait => '1 s')" >"$tmp/st.out"
read -r st_id st_lease <"$tmp/st.out"
pst -c "SELECT pqrun.heartbeat($st_id, '$st_lease')" \
	-c "SELECT pqrun.enqueue('stmt_next', jsonb_build_object('after', $st_id)), pqrun.mark_done($st_id, '{}', '$st_lease')" >/dev/null
check "single statements: pickup, heartbeat, and a chain written as one statement" 'DONE|1|READY' \
	"SELECT status || '|' || attempts || '|' || (SELECT min(status::text) FROM pqrun.jobs WHERE job_type = 'stmt_next'
	   AND payload->>'after' = '$st') FROM pqrun.jobs WHERE id = $st"
pst -c "BEGIN" -c "SELECT pqrun.enqueue('stmt_tx')" -c "COMMIT" >"$tmp/tx.out" 2>&1
assert "BEGIN ... COMMIT is refused" grep -q "transaction blocks not allowed in statement pooling mode" "$tmp/tx.out"
check "and nothing of it was committed" 0 "SELECT count(*) FROM pqrun.jobs WHERE job_type = 'stmt_tx'"
pst -c "CALL pqrun.await_jobs('{stmt_aw}', wait => '10 s')" >"$tmp/saw.out" 2>&1 &
waiter=$!
bg_pids+=("$waiter")
wait_for 5 1 "SELECT count(*) FROM pg_stat_activity WHERE datname = '$db' AND query LIKE 'CALL pqrun.await_jobs(''{stmt_aw}''%'
	AND state = 'active'" || die "await_jobs is not waiting"
pst -c "SELECT pqrun.enqueue('stmt_aw')" >/dev/null
wait "$waiter"
assert "CALL await_jobs works ($(tr -d '\n' <"$tmp/saw.out"))" [ "$(cat "$tmp/saw.out")" = t ]

echo "== session pooling: LISTEN pqrun_jobs"
psql -X -qtA -h 127.0.0.1 -p "$port" -d "${db}_session" -c "LISTEN pqrun_jobs" -c '\! sleep 1.5' -c "SELECT 1" \
	>"$tmp/listen.out" 2>&1 &
listener=$!
bg_pids+=("$listener")
wait_for 5 1 "SELECT count(*) FROM pg_stat_activity WHERE datname = '$db' AND query = 'LISTEN pqrun_jobs'"
pb -c "BEGIN; SET LOCAL pqrun.notify = on; SELECT pqrun.enqueue('notify_me'); COMMIT" >/dev/null
wait "$listener"
assert "the listener is notified of the commit" grep -q 'Asynchronous notification "pqrun_jobs" with payload "default"' "$tmp/listen.out"

echo "total: $(($(now_ms) - t0)) ms, $violations violation(s)"
if [ $violations != 0 ]; then
	echo "--- pgbouncer log (last 20 lines)"
	tail -n 20 "$tmp/pgbouncer.log"
	echo "--- worker log (last 20 lines)"
	tail -n 20 "$tmp/worker.log"
fi
[ $violations = 0 ]

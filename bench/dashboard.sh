#!/usr/bin/env bash
# bench/dashboard.sh — the web dashboard's pages at scale.
#
# Starts a throwaway cluster on port 54532 (test/lib/cluster.sh, the pqrun
# installed on the machine, shared_buffers 2GB), builds a database of its
# own as the extension's owner with plain INSERTs from generate_series:
# 10,000,000 finished jobs in job_done (96% DONE, 3% FAILED, 1% CANCELLED,
# over six daily partitions, 4 earlier attempts for a tenth of the failed),
# 1,000,000 READY jobs in job_live over 5 queues and 15 job types, 2,000
# delayed, 1,000 RUNNING, 500 BLOCKED on them, 5,000 schedules, a pause, a
# limit and a rate limit. Then restarts the server (queue_stats' counters
# are rebuilt from the tables at the first read: done before measuring),
# starts the dashboard (web/server.js, as a role of pqrun.grant_operator)
# and for each page:
#   - plans: one request by a dashboard whose role has auto_explain on
#     (every statement, nested ones too, JSON); every Seq Scan node on a
#     pqrun table is listed, "(empty)" for tables without rows;
#   - time: DASH_REQUESTS requests (curl, HTTP basic), p50 and p95;
#   - rows read by sequential scans of job_live, job_done (all partitions)
#     and attempt_log while those requests ran (pg_stat_user_tables'
#     seq_tup_read, as test/shell/scans.sh reads it).
# Writes bench/results/dashboard-<YYYYMMDD-HHMMSS>.md and prints it.
#
# Usage: bash bench/dashboard.sh   (as root; about 6 minutes and 8 GB of disk at full size)
#   DASH_DONE=10000000 DASH_READY=1000000 DASH_REQUESTS=20
#   DASH_QUICK=1 (200,000 and 50,000: a minute)  DASH_DIR=/tmp/pqrun-dashboard-bench  DASH_KEEP=1
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
source test/lib/cluster.sh

if [ "${DASH_QUICK:-0}" = 1 ]; then d_done=200000 d_ready=50000 d_requests=10; else d_done=10000000 d_ready=1000000 d_requests=20; fi
done_rows=${DASH_DONE:-$d_done}
ready_rows=${DASH_READY:-$d_ready}
requests=${DASH_REQUESTS:-$d_requests}
port=54532
web_port=54531
dir=${DASH_DIR:-/tmp/pqrun-dashboard-bench}
stamp=$(date -u +%Y%m%d-%H%M%S)
out=bench/results/dashboard-$stamp.md
db=dash_bench

need_kb=$(( done_rows / 1000000 * 700000 + 3000000 ))
free_kb=$(df -Pk "$(dirname "$dir")" | awk 'NR == 2 { print $4 }')
if [ "$free_kb" -lt "$need_kb" ]; then
	echo "bench/dashboard.sh: $((free_kb / 1048576)) GB free beside $dir, $((need_kb / 1048576)) GB needed" >&2
	exit 1
fi
command -v curl >/dev/null || { echo "bench/dashboard.sh: needs curl" >&2; exit 1; }

web_pid=""
cleanup() {
	[ -n "$web_pid" ] && kill "$web_pid" 2>/dev/null && wait "$web_pid" 2>/dev/null
	cluster_stop "$dir"
	[ "${DASH_KEEP:-0}" = 1 ] || rm -rf "$dir"
}
trap cleanup EXIT

echo "== cluster on port $port in $dir"
cluster_stop "$dir"
rm -rf "$dir"
conf=$(mktemp)
cat test/pqrun.conf - >"$conf" <<'EOF'
shared_buffers = 2GB
max_wal_size = 8GB
checkpoint_timeout = 30min
EOF
chmod 644 "$conf"
cluster_init "$dir" "$port" "$conf"
rm -f "$conf"
cluster_start "$dir"
export PGHOST=$dir PGPORT=$port PGUSER=postgres
psql_q() { psql -X -q -v ON_ERROR_STOP=1 "$@"; }
createdb "$db"
psql_q -d "$db" -c "SET client_min_messages = warning" -c "CREATE EXTENSION pqrun"

echo "== filling: $done_rows finished jobs, $ready_rows READY"
t0=$(date +%s)
psql_q -d "$db" -v done_rows="$done_rows" -v ready_rows="$ready_rows" >/dev/null <<'SQL'
SET synchronous_commit = off;
SET client_min_messages = warning;
-- unfinished: the READY backlog (due, over 5 queues and 3 job types each), delayed, RUNNING, BLOCKED
INSERT INTO pqrun.job_live (id, status, delayed, priority, max_attempts, run_after, created_at, updated_at, queue, job_type, payload)
SELECT :done_rows + i, 'READY', false, i % 3, 5, now() - interval '1 s' * (:ready_rows - i) / 100,
       now() - interval '1 s' * (:ready_rows - i) / 100, now(), q, q || '.' || t, jsonb_build_object('n', i, 'user', i % 1000)
  FROM (SELECT i, (ARRAY['default','email','billing','reports','webhooks'])[1 + i % 5] AS q,
               (ARRAY['send','sync','render'])[1 + (i / 5) % 3] AS t FROM generate_series(1, :ready_rows) i) s;
INSERT INTO pqrun.job_live (id, status, delayed, priority, max_attempts, run_after, created_at, updated_at, queue, job_type, payload)
SELECT :done_rows + :ready_rows + i, 'READY', true, 0, 5, now() + interval '1 hour' + interval '1 s' * i, now(), now(),
       'reports', 'reports.render', jsonb_build_object('n', i)
  FROM generate_series(1, 2000) i;
INSERT INTO pqrun.job_live (id, status, priority, attempts, max_attempts, run_after, locked_at, heartbeat_at, created_at, updated_at,
       lease_token, queue, job_type, locked_by, payload, progress, timeout_seconds, has_dependents)
SELECT :done_rows + :ready_rows + 2000 + i, 'RUNNING', 0, 1, 5, now() - interval '1 minute', now() - interval '30 s',
       now() - interval '5 s', now() - interval '1 minute', now(), gen_random_uuid(), 'email', 'email.send',
       'worker-' || (i % 16), jsonb_build_object('n', i), jsonb_build_object('pct', i % 100), 600, i <= 500
  FROM generate_series(1, 1000) i;
INSERT INTO pqrun.job_live (id, status, priority, max_attempts, run_after, created_at, updated_at, queue, job_type, payload, depends_on)
SELECT :done_rows + :ready_rows + 3000 + i, 'BLOCKED', 0, 5, now(), now(), now(), 'billing', 'billing.sync',
       jsonb_build_object('n', i), ARRAY[(:done_rows + :ready_rows + 2000 + i)::bigint]
  FROM generate_series(1, 500) i;
INSERT INTO pqrun.job_dep (job_id, dep_id)
SELECT :done_rows + :ready_rows + 3000 + i, :done_rows + :ready_rows + 2000 + i FROM generate_series(1, 500) i;
SELECT setval('pqrun.job_id_seq', :done_rows + :ready_rows + 10000);
-- the history's daily partitions: the last six days and the next two
SELECT count(*) FROM pqrun._history_round(now() - interval '6 days', interval '1 day', 8, NULL, NULL);
-- finished jobs, oldest first: ids follow creation and finish time
INSERT INTO pqrun.job_done (id, status, priority, attempts, max_attempts, duration_ms, run_after, locked_at,
       finished_at, created_at, updated_at, queue, job_type, locked_by, outcome, last_error, result, payload)
SELECT i, st, 0, CASE WHEN st = 'FAILED' THEN 5 ELSE 1 END, 5, 20 + i % 200, t - interval '2 s', t - interval '1 s',
       t, t - interval '3 s', t, q, q || '.' || jt, 'worker-' || (i % 16),
       CASE st WHEN 'DONE' THEN 'done' WHEN 'FAILED' THEN 'failed' END,
       CASE st WHEN 'FAILED' THEN 'timeout talking to upstream ' || (i % 50) WHEN 'CANCELLED' THEN 'cancelled by operator' END,
       CASE WHEN st = 'DONE' THEN '{"ok": true}'::jsonb END,
       jsonb_build_object('n', i, 'user', i % 1000, 'kind', jt)
  FROM (SELECT i, (ARRAY['default','email','billing','reports','webhooks'])[1 + i % 5] AS q,
               (ARRAY['send','sync','render'])[1 + (i / 5) % 3] AS jt,
               CASE WHEN i % 100 < 96 THEN 'DONE' WHEN i % 100 < 99 THEN 'FAILED' ELSE 'CANCELLED' END::pqrun.job_status AS st,
               now() - interval '6 days' + (interval '6 days' - interval '10 minutes') * (i::float8 / :done_rows) AS t
          FROM generate_series(1, :done_rows) i) s;
-- four earlier attempts of a tenth of the failed jobs
INSERT INTO pqrun.attempt_log (job_id, attempt, started_at, finished_at, worker_id, outcome, error)
SELECT d.id, a, d.finished_at - interval '1 minute' * (5 - a), d.finished_at - interval '1 minute' * (5 - a) + interval '1 s',
       d.locked_by, 'retry', 'timeout talking to upstream (attempt ' || a || ')'
  FROM pqrun.job_done d, generate_series(1, 4) a WHERE d.status = 'FAILED' AND d.id % 10 = 7;
INSERT INTO pqrun.periodic (name, job_type, queue, cron, run_every, next_run)
SELECT 'schedule-' || i, 'reports.render', 'reports', CASE WHEN i % 2 = 0 THEN '*/5 * * * *' END,
       CASE WHEN i % 2 = 1 THEN interval '1 hour' END, now() + interval '1 minute' * i
  FROM generate_series(1, 5000) i;
SELECT pqrun.pause_queue('email');
SELECT pqrun.set_concurrency_limit('billing', 5);
SELECT pqrun.set_rate_limit('webhooks', 10, 20);
CREATE ROLE dash_bench LOGIN;
CREATE ROLE dash_bench_explain LOGIN;
SELECT pqrun.grant_operator('dash_bench'), pqrun.grant_operator('dash_bench_explain');
ALTER ROLE dash_bench_explain SET session_preload_libraries = 'auto_explain';
ALTER ROLE dash_bench_explain SET auto_explain.log_min_duration = 0;
ALTER ROLE dash_bench_explain SET auto_explain.log_nested_statements = on;
ALTER ROLE dash_bench_explain SET auto_explain.log_format = 'json';
ALTER ROLE dash_bench_explain SET auto_explain.log_verbose = on;
ALTER ROLE dash_bench_explain SET auto_explain.log_analyze = on;
ALTER ROLE dash_bench_explain SET auto_explain.log_timing = off;
VACUUM ANALYZE;
SQL
echo "   filled in $(( $(date +%s) - t0 )) s: $(psql -X -At -d "$db" -c "SELECT pg_size_pretty(pg_database_size(current_database()))")"

# A fresh server: queue_stats' shared counters are rebuilt from the tables
# at their first read (one pass over job_done), done here, not in a page.
cluster_stop "$dir"
cluster_start "$dir"
psql -X -At -d "$db" -c "SELECT count(*) FROM pqrun.queue_stats" >/dev/null
# The count of unfinished jobs the maintenance worker takes (pqrun 0.21.0:
# pqrun.queue_overview), once, timed: the worker's next one comes
# max(pqrun.count_interval, 20 x this) later.
count_ms=$(psql -X -At -d "$db" -c "SELECT round(extract(epoch FROM pqrun._count_live_jobs()) * 1000)")
psql -X -q -d "$db" -c "ANALYZE pqrun.live_counts, pqrun.live_count_round"

[ -d web/node_modules ] || (cd web && npm ci --no-audit --no-fund --omit=dev >/dev/null)
password=bench-$RANDOM-$RANDOM
hash=$(printf '%s' "$password" | node web/server.js --hash-password)
start_web() { # ROLE: a dashboard connected as ROLE, on $web_port
	PQRUN_DASHBOARD_DATABASE_URL="postgresql://$1@/$db?host=$dir&port=$port" PQRUN_DASHBOARD_PORT=$web_port \
		PQRUN_DASHBOARD_USER=admin PQRUN_DASHBOARD_PASSWORD_HASH="$hash" PQRUN_DASHBOARD_STATEMENT_TIMEOUT_MS=120000 \
		node web/server.js >"$dir/web.log" 2>&1 &
	web_pid=$!
	for _ in $(seq 50); do curl -s -o /dev/null "http://127.0.0.1:$web_port/metrics" && return 0; sleep 0.1; done
	cat "$dir/web.log"; return 1
}
stop_web() { kill "$web_pid"; wait "$web_pid" 2>/dev/null || true; web_pid=""; }
get() { curl -s -o /dev/null -w '%{http_code} %{time_total}\n' -u "admin:$password" "http://127.0.0.1:$web_port$1"; }

# The pages, with ids and times of this data set.
q() { psql -X -At -d "$db" -c "$1"; }
failed_id=$(q "SELECT id FROM pqrun.jobs WHERE status = 'FAILED' AND id % 10 = 7 AND id > $done_rows / 2 ORDER BY id LIMIT 1")
running_id=$(q "SELECT min(id) FROM pqrun.jobs WHERE status = 'RUNNING'")
middle_id=$((done_rows / 2))
urlq() { node -e 'process.stdout.write(encodeURIComponent(process.argv[1]))' "$1"; }
day_ago=$(date -u -d '2 days ago' +%Y-%m-%dT%H:00)
hour_after=$(date -u -d "$(date -u -d '2 days ago' +%Y-%m-%d\ %H:00) + 1 hour" +%Y-%m-%dT%H:00)
pages=(
	"queues overview|/"
	"queue page|/queues/email"
	"jobs, newest|/jobs"
	"jobs, deep page (keyset)|/jobs?before=$middle_id"
	"jobs, FAILED of a queue|/jobs?status=FAILED&queue=email"
	"jobs, READY of a job type|/jobs?status=READY&job_type=billing.render"
	"jobs, RUNNING|/jobs?status=RUNNING"
	"jobs, error text|/jobs?error=$(urlq 'UPSTREAM 7')"
	"jobs, payload @> (rare: a window)|/jobs?payload=$(urlq '{"user": 17}')"
	"jobs, created last hour|/jobs?since=1h"
	"jobs, FAILED finished in an hour 2 days ago|/jobs?status=FAILED&time=finished&from=$day_ago&to=$hour_after"
	"job (FAILED, 5 attempts)|/jobs/$failed_id"
	"job (RUNNING, a dependent)|/jobs/$running_id"
	"running jobs|/running"
	"schedules|/schedules"
	"health|/health"
	"metrics|/metrics"
	"chart|/chart.svg"
)

echo "== plans (auto_explain)"
start_web dash_bench_explain
declare -A scans
for entry in "${pages[@]}"; do
	name=${entry%%|*} url=${entry#*|}
	before=$(stat -c %s "$dir/server.log")
	code=$(get "$url" | cut -d' ' -f1)
	[ "$code" = 200 ] || echo "$url: HTTP $code" >&2
	sleep 0.3
	scans[$name]=$(tail -c +"$((before + 1))" "$dir/server.log" | node -e '
		// Each auto_explain entry: "plan:" then the JSON, up to the next log line.
		const text = require("fs").readFileSync(0, "utf8");
		const found = new Set();
		for (const part of text.split(/\n(?=\d{4}-\d\d-\d\d )/)) {
			const i = part.indexOf("plan:");
			if (i < 0) continue;
			let plan;
			try { plan = JSON.parse(part.slice(i + 5)); } catch { continue; }
			(function walk(n) {
				// A node of a branch the plan never ran (a one-time filter) is marked "-".
				if (n["Node Type"] === "Seq Scan" && n.Schema === "pqrun") found.add(n["Relation Name"] + (n["Actual Loops"] === 0 ? "-" : ""));
				for (const c of n.Plans || []) walk(c);
			})(plan.Plan);
		}
		process.stdout.write([...found].sort().join(" "));')
done
stop_web

# The rows of each pqrun table (a Seq Scan of a few is the planner's best
# plan; of many, a defect).
declare -A table_rows
while read -r rel n; do table_rows[$rel]=$n; done < <(q "SELECT relname || ' ' || CASE WHEN relpages = 0 THEN 0 ELSE reltuples::bigint END
	FROM pg_class WHERE relnamespace = 'pqrun'::regnamespace AND relkind = 'r'")
seq_read() {
	q "SELECT coalesce(sum(seq_tup_read) FILTER (WHERE relid = 'pqrun.job_live'::regclass), 0) || ' ' ||
	          coalesce(sum(seq_tup_read) FILTER (WHERE relid IN (SELECT relid FROM pg_partition_tree('pqrun.job_done'))), 0) || ' ' ||
	          coalesce(sum(seq_tup_read) FILTER (WHERE relid = 'pqrun.attempt_log'::regclass), 0)
	     FROM pg_stat_user_tables WHERE schemaname = 'pqrun'"
}

echo "== timing: $requests requests a page"
{
	echo "# Dashboard pages at scale ($stamp UTC)"
	echo
	echo "$(printf "%'d" "$done_rows") finished jobs in job_done (six daily partitions), $(printf "%'d" "$ready_rows") READY," \
		"2,000 delayed, 1,000 RUNNING, 500 BLOCKED in job_live; PostgreSQL $(q 'SHOW server_version' | cut -d' ' -f1)," \
		"pqrun $(q "SELECT extversion FROM pg_extension WHERE extname = 'pqrun'"), $(nproc) cores, shared_buffers 2GB," \
		"the dashboard as a grant_operator role; $requests requests a page after one to warm up, one at a time (curl, HTTP basic);" \
		"load average at the start of the timing: $(cut -d' ' -f1-3 /proc/loadavg)."
	echo
	echo "Rows read by seq scans: of job_live / job_done (all partitions) / attempt_log while the page's requests ran" \
		"(pg_stat_user_tables.seq_tup_read). Seq Scan nodes: in the plans of the page's statements (auto_explain, nested" \
		"statements too), on pqrun's tables, with the rows of a table under 1,000 (where a Seq Scan is the planner's best plan)" \
		"and \"(never run)\" for a node of a branch the statement did not run (a one-time filter). The unfinished jobs' counts the queues pages and /metrics read" \
		"(pqrun.queue_overview) were taken by pqrun._count_live_jobs() in ${count_ms:-?} ms, as the maintenance worker takes" \
		"them every max(pqrun.count_interval, 20 times that)."
	echo
	echo "| page | request | p50 ms | p95 ms | rows read by seq scans | Seq Scan nodes on pqrun tables |"
	echo "|---|---|---:|---:|---|---|"
} >"$out"
for entry in "${pages[@]}"; do
	name=${entry%%|*} url=${entry#*|}
	# A session reports what it read when it ends (or, idle, up to 10 s
	# later): the dashboard's sessions end with it, before each reading.
	start_web dash_bench
	read -r code t < <(get "$url") # warm
	stop_web
	n=$requests
	awk -v t="$t" 'BEGIN { exit !(t > 1) }' && n=3 # a page of seconds: 3 requests tell enough
	before=$(seq_read)
	start_web dash_bench
	times=()
	fails=0
	for _ in $(seq "$n"); do
		read -r code t < <(get "$url")
		[ "$code" = 200 ] || { fails=$((fails + 1)); failed_code=$code; }
		times+=("$t")
	done
	stop_web
	sleep 0.2
	after=$(seq_read)
	read -r p50 p95 < <(printf '%s\n' "${times[@]}" | sort -n | awk '{ a[NR] = $1 } END {
		i50 = int((NR + 1) * 0.5); i95 = int(NR * 0.95 + 0.999); if (i95 > NR) i95 = NR
		printf "%.1f %.1f\n", a[i50] * 1000, a[i95] * 1000 }')
	read -r b1 b2 b3 <<<"$before"
	read -r a1 a2 a3 <<<"$after"
	nodes=""
	for rel in ${scans[$name]}; do
		table=${rel%-}
		rows=${table_rows[$table]:-0}
		if [ "$rel" != "$table" ]; then nodes+="$table (never run), "
		elif [ "$rows" = 1 ]; then nodes+="$table (1 row), "
		elif [ "$rows" -lt 1000 ]; then nodes+="$table ($rows rows), "
		else nodes+="**$table**, "; fi
	done
	nodes=${nodes%, }
	shown=${url//|/\\|}
	[ ${#shown} -gt 70 ] && shown="${shown:0:67}..."
	[ "$n" = "$requests" ] || name+=" ($n requests)"
	[ "$fails" = 0 ] || name+=" ($fails failed: HTTP $failed_code)"
	printf '| %s | `%s` | %s | %s | %s / %s / %s | %s |\n' "$name" "$shown" "$p50" "$p95" \
		"$(printf "%'d" $((a1 - b1)))" "$(printf "%'d" $((a2 - b2)))" "$(printf "%'d" $((a3 - b3)))" "${nodes:-none}" >>"$out"
done
echo >>"$out"
echo "Bold: a Seq Scan that ran, of a table of 1,000 rows or more. Sizes: $(q "SELECT string_agg(relname || ' ' || pg_size_pretty(pg_total_relation_size(oid)), ', ' ORDER BY relname) FROM pg_class WHERE relnamespace = 'pqrun'::regnamespace AND relkind IN ('r', 'p') AND relname IN ('job_live', 'attempt_log')"), job_done $(q "SELECT pg_size_pretty(sum(pg_total_relation_size(relid))) FROM pg_partition_tree('pqrun.job_done')")." >>"$out"
cat "$out"

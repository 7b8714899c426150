#!/usr/bin/env bash
# examples/quickstart.sh — from a clean Debian machine to a running pqrun.
#
# Installs the packages, builds and installs the extension, creates a local
# cluster (run by the `postgres` OS user) with pqrun preloaded, creates the
# extension in database `pqrun_demo`, runs a short demo and leaves the server
# running, with the dashboard (web/) beside it on 127.0.0.1. Rerunning it
# reuses the cluster and starts the demo over: the
# extension is created anew in `pqrun_demo`, so an earlier run's jobs (a retry
# that fell due meanwhile, say) are gone. It works from any checkout, also
# one the `postgres` user cannot read.
#
# Usage: bash examples/quickstart.sh
#   (PQRUN_DIR, PQRUN_PORT, PQRUN_DASHBOARD_PORT to override)
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
source test/lib/cluster.sh

dir=${PQRUN_DIR:-/var/lib/pqrun-demo}
port=${PQRUN_PORT:-5433}

bash test/lib/install_deps.sh
PG_BINDIR=$(pg_config --bindir)
echo "== building and installing pqrun"
make -s -j2 >/dev/null
make -s install >/dev/null

if [ ! -d "$dir/data" ]; then
	echo "== creating a cluster in $dir/data (port $port)"
	cluster_init "$dir" "$port"
fi
if ! as_pg "$PG_BINDIR/pg_ctl" -D "$dir/data" status >/dev/null 2>&1; then
	cluster_start "$dir"
fi

psql_demo() { psql -X -h "$dir" -p "$port" -U postgres "$@"; }
psql_demo -d postgres -tAc "SELECT 1 FROM pg_database WHERE datname = 'pqrun_demo'" | grep -q 1 ||
	psql_demo -d postgres -qc "CREATE DATABASE pqrun_demo"
psql_demo -d pqrun_demo -v ON_ERROR_STOP=1 <<'SQL'
\set QUIET on
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS pqrun CASCADE;
CREATE EXTENSION pqrun;
RESET client_min_messages;
\set QUIET off
\echo '-- a producer enqueues three jobs, one of them delayed and one depending on another'
SELECT pqrun.enqueue('send_email', '{"to": "ada@example.com"}', priority => 10) AS email_job \gset
SELECT pqrun.enqueue('resize_image', '{"path": "/img/1.png"}') AS image_job \gset
SELECT pqrun.enqueue('notify', '{"after": "resize"}', depends_on => ARRAY[:image_job]::bigint[]) AS notify_job;
SELECT pqrun.enqueue('report', '{}', run_after => now() + interval '1 hour');

\echo '-- a worker picks up two jobs (highest priority first) and finishes them'
SELECT id, job_type, status, attempts, locked_by FROM pqrun.pickup('demo-worker', batch_size => 2);
SELECT pqrun.mark_done(id, '{"sent": true}') FROM pqrun.jobs
 WHERE status = 'RUNNING' AND locked_by = 'demo-worker' AND job_type = 'send_email';
SELECT pqrun.mark_error(id, 'disk full') AS image_job_now FROM pqrun.jobs
 WHERE status = 'RUNNING' AND locked_by = 'demo-worker' AND job_type = 'resize_image';

\echo '-- monitoring'
SELECT id, job_type, status, attempts, run_after > now() AS delayed, last_error FROM pqrun.jobs ORDER BY id;
SELECT * FROM pqrun.jobs WHERE status = 'RUNNING';
SELECT * FROM pqrun.jobs WHERE status = 'FAILED' AND finished_at > now() - interval '1 hour';
SELECT job_type, avg(duration_ms), count(*) FROM pqrun.jobs WHERE status = 'DONE' GROUP BY job_type;
SELECT * FROM pqrun.jobs WHERE status = 'RUNNING' AND locked_at < now() - interval '20 minutes';
SELECT job_id, attempt, worker_id, outcome, error FROM pqrun.job_attempts ORDER BY job_id, attempt;
SQL

echo "== the dashboard (web/)"
# As a role of grant_operator, after the demo made the extension anew.
psql_demo -d pqrun_demo -qAt -c "SELECT 1 FROM pg_roles WHERE rolname = 'pqrun_dashboard'" | grep -q 1 ||
	psql_demo -d pqrun_demo -qc "CREATE ROLE pqrun_dashboard LOGIN"
psql_demo -d pqrun_demo -qAt -c "SELECT pqrun.grant_operator('pqrun_dashboard')" >/dev/null
(cd web && npm ci --omit=dev --no-audit --no-fund --loglevel=error)
[ -f "$dir/dashboard.pid" ] && kill "$(cat "$dir/dashboard.pid")" 2>/dev/null || true
dashboard_port=${PQRUN_DASHBOARD_PORT:-5480}
dashboard_password=$(head -c 12 /dev/urandom | base64 | tr -d '/+=')
# Not the caller's PGOPTIONS: settings its role may not set would refuse it.
env -u PGOPTIONS PQRUN_DASHBOARD_DATABASE_URL="postgresql://pqrun_dashboard@/pqrun_demo?host=$dir&port=$port" \
	PQRUN_DASHBOARD_PORT=$dashboard_port PQRUN_DASHBOARD_USER=admin \
	PQRUN_DASHBOARD_PASSWORD_HASH=$(printf '%s' "$dashboard_password" | node web/server.js --hash-password) \
	nohup node web/server.js >"$dir/dashboard.log" 2>&1 &
echo $! >"$dir/dashboard.pid"

echo
echo "The dashboard: http://127.0.0.1:$dashboard_port/ (user admin, password $dashboard_password; log $dir/dashboard.log)"
echo "pqrun is running. Connect with:"
echo "  psql -h $dir -p $port -U postgres pqrun_demo"
echo "Stop it with:"
echo "  runuser -u postgres -- $PG_BINDIR/pg_ctl -D $dir/data stop"

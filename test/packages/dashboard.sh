#!/usr/bin/env bash
# test/packages/dashboard.sh — the web dashboard (web/), installed as a user
# would (npm ci from its lockfile) and tested against the stage's server.
#
# Checks (web/test, node --test): every page answers and shows what it
# should (queues overview with its chart, queue page, job list, job page,
# running jobs, schedules, health, /metrics); markup held by a payload, an
# error, a queue or job type name is shown as text; payloads are hidden
# until asked for; the job list's keyset pages (no OFFSET) and its window
# that goes on where it ran out; every filter; every action (retry,
# cancel, pause and resume, concurrency and rate limits set and removed,
# bulk retry and cancel by filter through pqrun.retry_jobs / cancel_jobs,
# with their counts); authentication (no or wrong credentials: 401),
# CSRF (a POST without the session's token, or from another origin: 403),
# read-only mode (a grant_monitor role or --read-only: no action shown,
# every POST 403), a superuser or a role without pqrun's grants refused at
# start, metrics public or alone, security headers, host names other than
# loopback refused. Then in Debian's Chromium (playwright-core): log in,
# open every page, retry a failed job, pause a queue and set a limit by
# clicking, no console error (a CSP violation would be one); screenshots
# in $PQRUN_WORK/dashboard-screenshots.
#
# Each test file makes a database of its own (pqrun_dash_*) and the roles
# of pqrun.grant_operator and grant_monitor, and drops them. Needs PGHOST,
# PGPORT, PGUSER (a superuser) of a running server with pqrun 0.21.0 or
# later; the browser test's dashboard listens on 54531. Installs chromium
# (need_packages) and the npm packages of web/package-lock.json (npm ci).
# Budget: 3 minutes (20 s here once Chromium is installed; its install takes a minute at most).
set -uo pipefail

repo=$(cd "$(dirname "$0")/../.." && pwd)
export PGHOST=${PGHOST:?PGHOST must point at the running test server} PGPORT=${PGPORT:-5432} PGUSER=${PGUSER:-postgres}
work=${PQRUN_WORK:-$(mktemp -d)}
source "$repo/test/lib/need_packages.sh"

need_packages chromium || { echo "cannot install chromium"; exit 77; }
command -v node >/dev/null && command -v npm >/dev/null || { echo "node and npm are needed (test/lib/install_deps.sh)"; exit 77; }
node -e 'process.exit(Number(process.versions.node.split(".")[0]) >= 18 ? 0 : 1)' ||
	{ echo "node $(node --version) is older than 18"; exit 77; }
version=$(psql -X -At -d postgres -c "SELECT default_version FROM pg_available_extensions WHERE name = 'pqrun'") ||
	{ echo "cannot reach PostgreSQL at $PGHOST:$PGPORT"; exit 77; }
case "$version" in 0.20.*|0.1[0-9].*|0.[0-9].*|'') echo "pqrun $version is installed; the dashboard's tests need 0.21.0 or later"; exit 77 ;; esac

# What a test file killed midway leaves: its databases and roles (pqrun_dash_*).
cleanup() {
	local d r
	for d in $(psql -X -At -d postgres -c "SELECT datname FROM pg_database WHERE datname LIKE 'pqrun\_dash\_%'"); do
		psql -X -q -d postgres -c "DROP DATABASE IF EXISTS \"$d\" WITH (FORCE)"
	done
	for r in $(psql -X -At -d postgres -c "SELECT rolname FROM pg_roles WHERE rolname LIKE 'pqrun\_dash\_%'"); do
		psql -X -q -d postgres -c "DROP ROLE IF EXISTS \"$r\""
	done
}
trap cleanup EXIT

# A copy of web/ without node_modules: npm ci as a user would, leaving the tree alone.
app=$work/dashboard-web
rm -rf "$app"
mkdir -p "$app"
(cd "$repo/web" && tar --exclude=node_modules -cf - .) | (cd "$app" && tar -xf -)
echo "== npm ci"
(cd "$app" && timeout 120 npm ci --no-audit --no-fund --loglevel=error) || { echo "npm ci failed"; exit 1; }

echo "== node --test (pqrun $version, node $(node --version))"
export PQRUN_DASHBOARD_SCREENSHOTS=$work/dashboard-screenshots PQRUN_DASHBOARD_CHROMIUM=/usr/bin/chromium
cd "$app"
status=0
timeout 150 node --test test/*.test.js || status=$?
[ "$status" = 124 ] && echo "the tests ran out of time (150 s)"
[ "$status" = 0 ] && echo "screenshots: $(ls "$PQRUN_DASHBOARD_SCREENSHOTS" | tr '\n' ' ')"
exit "$status"

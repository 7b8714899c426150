#!/usr/bin/env bash
# test/shell/newcomer.sh — the README's two commands work for a newcomer:
# from a checkout the `postgres` OS user cannot read, and the quickstart run
# a second time after the first run's retry fell due.
#
# Once `cd /root && git clone … pqrun && cd pqrun && bash test/run.sh` ended
# with "17 passed, 2 failed": pg_regress and pg_isolation_regress run as
# `postgres` and read their inputs from the checkout, and /root is mode 700
# ("could not change directory to "/root/pqrun": Permission denied"). And
# `bash examples/quickstart.sh`, run again a minute later, failed with rc 3
# ("job 6 is not running"): the first run's resize_image job had come due
# after its one-minute backoff, the second run's pickup claimed it instead of
# the new one, and mark_error(:image_job) hit a job it did not hold.
#
# Copies this checkout (working tree and .git, built objects included, so
# nothing is compiled again) into a mode-700 directory owned by root, runs
# a test of each of that copy's suites (pg_regress, isolation) against the
# cluster in PGHOST/PGPORT, then its quickstart twice on a throwaway cluster
# of its own with a one-second backoff, waiting for the first run's retry to
# fall due.
# The second run's dashboard (web/) answers 401 without credentials and 200
# with the password the quickstart printed.
# As root only (the case it proves); about 40 s.
# Installs the library again (the quickstart's make install):
# test/run.sh: alone
set -uo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
: "${PGHOST:?PGHOST must point at a running cluster that preloads pqrun}"
: "${PGPORT:?}" "${PGUSER:=postgres}"
export PGHOST PGPORT PGUSER
if [ "$(id -u)" != 0 ]; then
	echo "needs root, to make a checkout the postgres user cannot read"
	exit 77
fi

home=$(mktemp -d /root/pqrun-newcomer.XXXXXX) # mode 700, owned by root
demo=$(mktemp -d /tmp/pqrun-newcomer-demo.XXXXXX)
checkout=$home/pqrun
cleanup() {
	[ -f "$demo/dashboard.pid" ] && kill "$(cat "$demo/dashboard.pid")" 2>/dev/null
	source "$repo/test/lib/cluster.sh"
	cluster_stop "$demo" immediate
	rm -rf "$home" "$demo"
}
trap cleanup EXIT
fail() {
	echo "FAIL: $*"
	exit 1
}

cp -a "$repo" "$checkout" || fail "could not copy the checkout"
[ "$(stat -c %a "$home")" = 700 ] || fail "$home is not mode 700"
runuser -u postgres -- test -r "$checkout/Makefile" && fail "the postgres user can read $checkout: the test proves nothing"

echo "-- pg_regress and isolation from $checkout"
(
	cd "$checkout" || exit 1
	source test/lib/cluster.sh
	source test/lib/regress.sh
	work=$(mktemp -d /tmp/pqrun-newcomer-work.XXXXXX)
	trap 'rm -rf "$work"' EXIT
	chmod 755 "$work"
	# A test of each suite: the whole suites ran from the test's own
	# checkout before.
	run_pg_regress "$checkout" "$work" pqrun_newcomer_regress "setup enqueue" >"$work/regress.log" ||
		{ cat "$work/regress.log"; head -n 60 "$work"/regress/regression.diffs; exit 1; }
	run_isolation "$checkout" "$work" pqrun_newcomer_isolation pickup_race >"$work/isolation.log" ||
		{ cat "$work/isolation.log"; head -n 60 "$work"/isolation/regression.diffs; exit 1; }
	grep -cE '\.\.\. ok|^ok [0-9]' "$work/regress.log" "$work/isolation.log" # up to 15, from 16
) || fail "the suites failed from a checkout under $home"

echo "-- examples/quickstart.sh twice, the first run's retry due in between"
rmdir "$demo"
quickstart() {
	(cd "$checkout" && env -u PGHOST -u PGPORT PQRUN_DIR="$demo" PQRUN_PORT=54347 PQRUN_DASHBOARD_PORT=54348 \
		PGOPTIONS="-c pqrun.backoff=1s" \
		bash examples/quickstart.sh) >"$home/quickstart.log" 2>&1 ||
		{ tail -n 30 "$home/quickstart.log"; fail "quickstart run $1 failed"; }
}
quickstart 1
sleep 2 # the resize_image retry (backoff 1 s) is due now
quickstart 2
grep -q "pqrun is running" "$home/quickstart.log" || fail "the second run did not finish"
! grep -q "could not change directory" "$home/quickstart.log" || fail "the quickstart complains about its directory"
# The dashboard it started beside the demo answers, and asks who is there.
# http_status [USER:PASSWORD]: the status of GET / on the dashboard (000: no answer).
http_status() {
	python3 - "$@" <<'PY'
import base64, sys, urllib.error, urllib.request
req = urllib.request.Request("http://127.0.0.1:54348/")
if len(sys.argv) > 1:
    req.add_header("Authorization", "Basic " + base64.b64encode(sys.argv[1].encode()).decode())
try:
    print(urllib.request.urlopen(req, timeout=5).status)
except urllib.error.HTTPError as e:
    print(e.code)
except Exception:
    print("000")
PY
}
for _ in $(seq 50); do
	code=$(http_status)
	[ "$code" = 401 ] && break
	sleep 0.2
done
[ "$code" = 401 ] || { tail -n 20 "$demo/dashboard.log"; fail "the dashboard on 54348 answered $code, not 401"; }
password=$(sed -n 's/.*(user admin, password \([^;]*\);.*/\1/p' "$home/quickstart.log" | tail -n 1)
code=$(http_status "admin:$password")
[ "$code" = 200 ] || fail "the dashboard refused the password the quickstart printed ($code)"
echo "newcomer: all checks passed"

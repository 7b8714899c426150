#!/usr/bin/env bash
# test/shell/multixact.sh — a claim creates no MultiXact, waiting or not.
#
# Reproduction on 0.15.0: 20 waiting pickups, each followed by mark_done,
# moved next_multixact_id by 40; 20 pickups without wait by 0. A waiting
# pickup claims in a subtransaction of its own (a look that finds nothing
# must leave no row lock behind while it sleeps) and its claims were
# written at the pickup's level: a row locked by a subtransaction and
# updated by its parent carries a MultiXact. At 1,000 jobs/s that is ~86
# million MultiXact ids a day and anti-wraparound vacuums every few days.
#
# Here, against the test server (PGHOST, PGPORT, PGUSER exported) in a
# database of its own, 1,000 claims of each form, each in a transaction of
# its own, finished in transactions of their own as the README's worker
# loop does: pickup, pickup with wait (found at the first look, and woken
# by an enqueue), a batch of 10 with wait, mark_done_and_pickup, pickup in
# an explicit transaction block with wait. next_multixact_id (of the
# checkpoint after each form) must not move. A job claimed by a waiting
# pickup and finished in the same transaction still makes one (the claim's
# row keeps the lock of the subtransaction that wrote it, which the finish
# of its parent joins): at most one per job.
# Counts the server's MultiXacts, whoever makes them:
# test/run.sh: alone
set -uo pipefail
: "${PGHOST:?PGHOST must point at the test server}" "${PGPORT:?}" "${PGUSER:?}"

db=pqrun_multixact_$$
source "$(dirname "$0")/../lib/checks.sh"
trap 'dropdb --if-exists --force "$db" 2>/dev/null' EXIT
createdb "$db" || exit 1
q -c "SET client_min_messages = warning" -c "CREATE EXTENSION pqrun" >/dev/null || exit 1

# next_multixact: the server's next MultiXact id, as of a checkpoint now.
next_multixact() {
	q -c "CHECKPOINT" -c "SELECT next_multixact_id FROM pg_control_checkpoint()"
}
fill() { q -c "SELECT count(*) FROM pqrun.enqueue_batch((SELECT jsonb_agg(jsonb_build_object('job_type', 'm')) FROM generate_series(1, $1)))" >/dev/null; }

# form NAME SQL [MAX]: SQL 1,000 times, then every job it left RUNNING
# finished; next_multixact_id must have moved by at most MAX (0).
form() {
	local name=$1 sql=$2 max=${3:-0} before after
	before=$(next_multixact)
	for i in $(seq 1000); do echo "$sql"; done | q >/dev/null 2>"$tmp.err"
	q -c "SELECT count(pqrun.mark_done(id)) FROM pqrun.job_live WHERE status = 'RUNNING'" >/dev/null
	after=$(next_multixact)
	check "$name: 1,000 claims made $((after - before)) MultiXacts (at most $max)" "t 0" \
		"SELECT ($((after - before)) <= $max)::text::char || ' ' || count(*) FROM pqrun.job_live WHERE status = 'RUNNING'"
	[ -s "$tmp.err" ] && { echo "     errors:"; head -n 3 "$tmp.err"; violations=$((violations + 1)); }
}
tmp=$(mktemp /tmp/pqrun-multixact.XXXXXX)

fill 1000
form "pickup" "SELECT count(*) FROM pqrun.pickup('w', job_types => '{m}');"
fill 1000
form "pickup with wait, found at once" "SELECT count(*) FROM pqrun.pickup('w', job_types => '{m}', wait => '1 s');"
fill 10000
form "batch of 10 with wait" "SELECT count(*) FROM pqrun.pickup('w', job_types => '{m}', batch_size => 10, wait => '1 s');"
fill 1001
q -c "SELECT count(*) FROM pqrun.pickup('w', job_types => '{m}')" >/dev/null
form "mark_done_and_pickup" \
	"SELECT count(*) FROM pqrun.mark_done_and_pickup('w', (SELECT array_agg(id) FROM pqrun.job_live WHERE status = 'RUNNING'), job_types => '{m}');"
fill 1000
form "pickup with wait in a transaction block" \
	"BEGIN; SELECT count(*) FROM pqrun.pickup('w', job_types => '{m}', wait => '1 s'); COMMIT;"
fill 1000
form "pickup with wait, finished in the same statement" \
	"SELECT pqrun.mark_done(id) FROM pqrun.pickup('w', job_types => '{m}', wait => '1 s');" 1000
# Woken: each pickup waits, an enqueue from another session wakes it.
before=$(next_multixact)
for i in $(seq 50); do
	psql -X -qtA -d "$db" -c "SELECT id FROM pqrun.pickup('w', job_types => '{woken}', wait => '5 s')" >/dev/null &
	waiter=$!
	for _ in $(seq 500); do
		[ "$(q -c "SELECT count(*) FROM pg_stat_activity WHERE datname = '$db'
			AND wait_event IN ('Extension', 'PqrunLongPoll')")" = 1 ] && break
		sleep 0.01
	done
	q -c "SELECT pqrun.enqueue('woken')" >/dev/null
	wait $waiter
done
q -c "SELECT count(pqrun.mark_done(id)) FROM pqrun.job_live WHERE status = 'RUNNING'" >/dev/null
after=$(next_multixact)
check "pickup with wait, woken by an enqueue: $((after - before)) MultiXacts, at least 40 of 50 woken claims" "0 t" \
	"SELECT $((after - before)) || ' ' || (count(*) >= 40)::text::char FROM pqrun.jobs WHERE job_type = 'woken' AND status = 'DONE'"
rm -f "$tmp" "$tmp.err"
echo "$violations violation(s)"
[ $violations = 0 ]

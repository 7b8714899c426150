#!/usr/bin/env bash
# bench/run.sh — the pqrun benchmark, in one command.
#
# Installs what is missing (as root), builds and installs pqrun, starts a
# throwaway cluster on loopback (shared_buffers 1GB, fsync and
# synchronous_commit on, pqrun preloaded) that runs a private copy of the
# build (bench/lib/pgtree.sh), and measures pgbench-driven workloads with
# pqrun, a plain-SQL baseline (the seed design, bench/lib/baseline.sql) and
# PgQ (batched workloads only), interleaved: every round runs every workload
# at every client count for every system in turn, so the noise of a shared
# machine hits all systems alike. Each measurement starts from a refilled
# queue, VACUUM ANALYZE and CHECKPOINT; jobs/s counts jobs finished in the
# database; latency is that of one worker step (one pgbench transaction);
# every drain is checked for exactly-once. Writes bench/results/<stamp>.csv
# and <stamp>.md (medians over rounds and the ratios between systems) and
# prints the markdown. See bench/README.md.
#
# Usage: bash bench/run.sh            (settings through the environment:)
#   BENCH_CLIENTS="1 2 4 8"  BENCH_SECONDS=20  BENCH_ROUNDS=2
#   BENCH_WORKLOADS="L0 W1 W1b W1c W1bc W1L W1K W2 W2c W3 W3K W3Q W3Qt W3KB W5 E1 L1"   (W4, the 5-minute soak, and W6, 20 minutes of history retention, only when listed)
#   BENCH_WORKLOADS="W7 W7h E1b": the fleet workloads (bench/lib/fleet.sh), only when listed
#   BENCH_JOBS=100000  BENCH_DEEP_JOBS=1000000  BENCH_QUICK=1 (a smoke run of a minute or two)
#   BENCH_PORT=55440  BENCH_KEEP=1 (keep the cluster's files)  and more in README.md
#   BENCH_PG_MAJOR=18: on that PostgreSQL version, in its Debian root
#   (test/lib/pg_root.sh) when the machine does not package it; the results
#   are copied back to bench/results.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
source test/lib/pg_root.sh
if [ -n "${BENCH_PG_MAJOR:-}" ] && [ "$BENCH_PG_MAJOR" != "$(pg_root_host_major)" ]; then
	[ -z "${BENCH_SOURCE:-}" ] || { echo "BENCH_SOURCE needs git; not inside a root" >&2; exit 1; }
	settings=""
	for v in ${!BENCH_@}; do [ "$v" = BENCH_PG_MAJOR ] || settings+="$v=$(printf %q "${!v}") "; done
	status=0
	pg_root_run "$BENCH_PG_MAJOR" "$repo" "$settings bash bench/run.sh" || status=$?
	mkdir -p bench/results
	cp -n "$PQRUN_PG_ROOTS/$BENCH_PG_MAJOR/src/pqrun/bench/results/"* bench/results/ 2>/dev/null
	exit $status
fi
major=${PQRUN_PG_MAJOR:-$(pg_root_host_major)}
source test/lib/cluster.sh
source bench/lib/pgtree.sh
source bench/lib/systems.sh
source bench/lib/fleet.sh

# ---- settings ------------------------------------------------------------
if [ "${BENCH_QUICK:-0}" = 1 ]; then
	d_clients="1 2" d_seconds=3 d_rounds=1 d_jobs=5000 d_deep=20000 d_soak=30 d_soak_window=10 d_w5_window=1
	d_w6=60 d_w6_retention=20s
	d_w7_clients="4 16" d_w7_seconds=4 d_w7h_clients=8 d_w7h_pre=4 d_w7h_hold=10 d_w7h_post=6 d_w7h_window=2 d_e1b_seconds=2
else
	d_clients="1 2 4 8" d_seconds=20 d_rounds=2 d_jobs=100000 d_deep=1000000 d_soak=300 d_soak_window=30 d_w5_window=5
	d_w6=1200 d_w6_retention=2min
	d_w7_clients="16 32 64" d_w7_seconds=20 d_w7h_clients=32 d_w7h_pre=20 d_w7h_hold=120 d_w7h_post=40 d_w7h_window=10 d_e1b_seconds=10
fi
clients_list=${BENCH_CLIENTS:-$d_clients}
seconds=${BENCH_SECONDS:-$d_seconds}
rounds=${BENCH_ROUNDS:-$d_rounds}
workloads=${BENCH_WORKLOADS:-"L0 W1 W1b W1c W1bc W1L W1K W2 W2c W3 W3K W3Q W3Qt W3KB W5 E1 L1"}
jobs=${BENCH_JOBS:-$d_jobs}
deep=${BENCH_DEEP_JOBS:-$d_deep}
w2_depth=${BENCH_W2_DEPTH:-1000}
soak_seconds=${BENCH_SOAK_SECONDS:-$d_soak}
soak_window=${BENCH_SOAK_WINDOW:-$d_soak_window}
soak_clients=${BENCH_SOAK_CLIENTS:-$(tr ' ' '\n' <<<"$clients_list" | sort -n | tail -n 1)}
soak_rounds=${BENCH_SOAK_ROUNDS:-1}
w5_window=${BENCH_W5_WINDOW:-$d_w5_window}
w6_seconds=${BENCH_W6_SECONDS:-$d_w6}
w6_retention=${BENCH_W6_RETENTION:-$d_w6_retention}
l1_rate=${BENCH_L1_RATE:-20}
w3kb_keys=${BENCH_W3KB_KEYS:-100000}
w3kb_idle=${BENCH_W3KB_IDLE:-5000}
fill_chunk=${BENCH_FILL_CHUNK:-10000}
# The fleet workloads (bench/lib/fleet.sh). Variants are system:batch.
w7_clients=${BENCH_W7_CLIENTS:-$d_w7_clients}
w7_seconds=${BENCH_W7_SECONDS:-$d_w7_seconds}
w7_rate=${BENCH_W7_RATE:-800}
w7_period=$(awk -v r="$w7_rate" 'BEGIN { printf "%.6f", 128 / r }') # seconds between two batches of 128
w7_producers=${BENCH_W7_PRODUCERS:-2}
w7_variants=${BENCH_W7_VARIANTS:-"pqrun:1 pgmq:1 pgmq-read:1 baseline:1 pqrun:8 pgmq:8"}
w7_wait=${BENCH_W7_WAIT:-5}       # s: pqrun's pickup wait and pgmq's max_poll_seconds
w7_poll_ms=${BENCH_W7_POLL_MS:-100} # the baseline's sleep after a claim that found nothing
w7_vt=${BENCH_W7_VT:-30}          # s: pgmq's visibility timeout
w7_tail=${BENCH_W7_TAIL:-3}       # s the workers go on after the producers stop
w7h_clients=${BENCH_W7H_CLIENTS:-$d_w7h_clients}
w7h_pre=${BENCH_W7H_PRE:-$d_w7h_pre}
w7h_hold=${BENCH_W7H_HOLD:-$d_w7h_hold}
w7h_post=${BENCH_W7H_POST:-$d_w7h_post}
w7h_window=${BENCH_W7H_WINDOW:-$d_w7h_window}
w7h_variants=${BENCH_W7H_VARIANTS:-"pqrun:1 pgmq:1 baseline:1"}
fleet_rounds=${BENCH_FLEET_ROUNDS:-1}
e1b_clients=${BENCH_E1B_CLIENTS:-"1 4"}
e1b_seconds=${BENCH_E1B_SECONDS:-$d_e1b_seconds}
port=${BENCH_PORT:-55440}
keep=${BENCH_KEEP:-0}
source_rev=${BENCH_SOURCE:-}   # empty: the working tree; else a git revision to build

# ---- installation and build ----------------------------------------------
bash test/lib/install_deps.sh
have_pgq=1
if ! dpkg-query -W -f='${Status}' postgresql-$major-pgq3 2>/dev/null | grep -q "install ok installed"; then
	if [ "$(id -u)" = 0 ]; then
		echo "== installing postgresql-$major-pgq3"
		export DEBIAN_FRONTEND=noninteractive
		apt-get install -y -qq --no-install-recommends postgresql-$major-pgq3 >/dev/null 2>&1 ||
			{ apt-get update -qq && apt-get install -y -qq --no-install-recommends postgresql-$major-pgq3 >/dev/null; } ||
			{ echo "note: postgresql-$major-pgq3 is not available; PgQ is left out" >&2 && have_pgq=0; }
	else
		echo "note: postgresql-$major-pgq3 is missing (run as root to install it); PgQ is left out" >&2
		have_pgq=0
	fi
fi
work=$(mktemp -d /tmp/pqrun-bench.XXXXXX)
chmod 755 "$work"
sock=$work/cluster
holder_pid="" sampler_pid="" hog_pid="" hold_pid=""
cleanup() {
	[ -n "$sampler_pid" ] && kill "$sampler_pid" 2>/dev/null
	[ -n "$holder_pid" ] && kill "$holder_pid" 2>/dev/null
	[ -n "$hold_pid" ] && kill "$hold_pid" 2>/dev/null
	[ -n "$hog_pid" ] && kill "$hog_pid" 2>/dev/null
	cluster_stop "$sock"
	if [ "$keep" = 1 ]; then echo "kept $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM
if [ -z "$source_rev" ]; then
	echo "== building and installing pqrun (working tree)"
	make -s -j2 >/dev/null
	make -s install >/dev/null || echo "note: could not install pqrun system-wide; the benchmark uses its private copy" >&2
	src=$repo
	tested="$(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
	git diff --quiet HEAD -- src sql pqrun.control Makefile 2>/dev/null || tested="$tested + uncommitted changes"
else
	# A committed revision, built in the temporary directory (the working
	# tree and the system-wide install are left alone).
	echo "== building pqrun $source_rev"
	mkdir -p "$work/src"
	git archive --format=tar "$source_rev" | tar -x -C "$work/src"
	make -s -j2 -C "$work/src" >/dev/null
	src=$work/src
	tested="$(git rev-parse --short "$source_rev")"
fi
PG_BINDIR=$(private_pg_tree "$work/pg" "$src")
[ "$(id -u)" = 0 ] && chown postgres: "$work"


# A free loopback port, from BENCH_PORT up.
while (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; do port=$((port + 1)); done

echo "== starting a cluster on 127.0.0.1:$port in $sock"
cluster_init "$sock" "$port" bench/lib/bench.conf
cluster_start "$sock"

# q DB [SQL...]: run the SQL (the arguments, one line each, or stdin) in DB,
# one statement at a time, and print the bare results.
q() {
	local db=$1
	shift
	if [ $# -gt 0 ]; then printf '%s\n' "$@"; else cat; fi |
		psql -X -qtA -v ON_ERROR_STOP=1 -h "$sock" -p "$port" -U postgres -d "$db" -f -
}
qf() { psql -X -q -v ON_ERROR_STOP=1 -h "$sock" -p "$port" -U postgres -d "$1" -f "$2" >/dev/null; }

setup_databases
fleet_payloads

# The build under test must work at all: enqueue, pickup, mark_done.
sanity=$(q bench_pqrun "SELECT count(*) FROM pqrun.enqueue_batch('[{\"job_type\": \"sanity\"}, {\"job_type\": \"sanity\"}]');
	SELECT count(pqrun.mark_done(id)) FROM pqrun.pickup('sanity', batch_size => 5);
	SELECT count(*) FROM pqrun.jobs WHERE status = 'DONE';" 2>&1 | tr '\n' ' ') || true
if [ "$sanity" != "2 2 2 " ]; then
	echo "the pqrun build under test does not work: enqueue 2, pick up and finish them gave [$sanity] instead of [2 2 2]" >&2
	exit 1
fi

stamp=$(date -u +%Y%m%d-%H%M%S)
mkdir -p bench/results
csv=bench/results/$stamp.csv
md=bench/results/$stamp.md
echo "system,workload,clients,round,jobs_per_s,p50_ms,p95_ms,notes" >"$csv"
logs=$work/logs
mkdir -p "$logs"

has_long_poll=$(q bench_pqrun "SELECT count(*) FROM pg_proc WHERE proname = 'pickup'
	AND pronamespace = 'pqrun'::regnamespace AND 'wait' = ANY (proargnames)")

# systems_for WORKLOAD: the systems a workload runs on, in interleaving order.
systems_for() {
	case $1 in
	L0 | L0floor) echo ceiling ;;
	W1b | E1 | E1single) echo "pqrun baseline$([ "$have_pgq" = 1 ] && echo " pgq")" ;;
	E1b) echo "pqrun pgmq baseline" ;;
	E1b128) echo baseline ;;
	L1 | W1c | W1bc | W1L | W1K | W1Kref | W3K | W3Kref | W3Q | W3Qref | W3Qt | W3Qtref | W3KB | W3KBref | W2c) echo pqrun ;;
	*) echo "pqrun baseline" ;;
	esac
}

# ---- keyed queues (W1K, W3K) -------------------------------------------------

# fill_jobs DEPTH JOB_TYPE [FIELDS]: enqueue DEPTH ready jobs of JOB_TYPE as
# refill does (enqueue_batch in chunks of BENCH_FILL_CHUNK, in id order,
# asynchronous commits), with FIELDS (", 'name', expression" pairs of
# jsonb_build_object; expressions of the job's number i, 1..DEPTH).
fill_jobs() {
	local depth=$1 job_type=$2 fields=${3:-}
	q bench_pqrun "SET synchronous_commit = off;
		DO \$\$
		BEGIN
			FOR c IN 0 .. ($depth - 1) / $fill_chunk LOOP
				PERFORM count(*) FROM pqrun.enqueue_batch((
					SELECT jsonb_agg(jsonb_build_object('job_type', '$job_type', 'payload', jsonb_build_object('n', i)
					                                    $fields) ORDER BY i)
					  FROM generate_series(c * $fill_chunk + 1, least((c + 1) * $fill_chunk, $depth)) AS i));
				COMMIT;
			END LOOP;
		END \$\$" >/dev/null
}
# fill_keyed DEPTH KEY_EXPR: DEPTH jobs into pqrun's default queue, each with
# the concurrency key KEY_EXPR.
fill_keyed() {
	fill_jobs "$1" job ", 'concurrency_key', $2"
}

# W1K's queue: refill's empty pqrun, then DEPTH jobs spread round robin over
# 100 concurrency keys (job i, and so id i, gets key k<i % 100>), then
# VACUUM ANALYZE and CHECKPOINT as refill does.
refill_w1k() {
	refill pqrun 0 1 drain
	fill_keyed "$1" "'k' || (i % 100)"
	q bench_pqrun "VACUUM ANALYZE" >/dev/null
	q bench_pqrun "CHECKPOINT" >/dev/null
}

# W3K's hog: BENCH_DEEP_JOBS ready jobs of key 'hog' (limit 2 of its own),
# two of them claimed by a live, idle session (the hog holder: its pickup
# committed, its jobs left RUNNING, so the key is at its limit; a session
# that exited would have them taken back by orphan rescue). The hog is
# filled by a W3K measurement after any other refill (W3Kref's, so every
# one), else kept; hog_round says which round's hog bench_pqrun holds (""
# after any other refill).
hog_round="" hog_note="" hog_fd=""
# hog_holder_start: the holder claims two hog jobs (the only ready jobs
# then) and stays connected, idle, outside any transaction, until
# hog_holder_stop.
hog_holder_start() {
	rm -f "$work/hog.in"
	mkfifo "$work/hog.in"
	PGAPPNAME=bench_hog psql -X -qtA -h "$sock" -p "$port" -U postgres -d bench_pqrun \
		<"$work/hog.in" >>"$logs/hog_holder.out" 2>&1 &
	hog_pid=$!
	exec {hog_fd}>"$work/hog.in"
	echo "SELECT id FROM pqrun.pickup('hog-holder', batch_size => 2);" >&"$hog_fd"
	for _ in $(seq 100); do
		[ "$(q bench_pqrun "SELECT count(*) FROM pqrun.job_live WHERE status = 'RUNNING' AND concurrency_key = 'hog'")" = 2 ] &&
			return 0
		sleep 0.1
	done
	echo "the hog holder did not claim two hog jobs: $(tail -n 3 "$logs/hog_holder.out" | tr '\n' ' ')" >&2
}
# hog_holder_stop: give the holder's jobs back (release: READY again, no
# attempt used up or recorded) and end its session.
hog_holder_stop() {
	[ -n "$hog_pid" ] || return 0
	q bench_pqrun "SELECT pqrun.release(id) FROM pqrun.job_live WHERE status = 'RUNNING' AND concurrency_key = 'hog'" >/dev/null
	exec {hog_fd}>&-
	wait "$hog_pid" || true
	hog_pid=""
}
# prepare_w3k ROUND: W3K's queue. After another refill it empties pqrun
# (refill), sets the hog's limit and fills the hog (timed); right after
# another W3K of the round it keeps the hog and removes only what the last
# drain left (its unfinished jobs cancelled, then every finished job purged). Then the holder takes
# the hog's two places, BENCH_JOBS jobs of key 'k' are filled, and VACUUM
# ANALYZE and CHECKPOINT end the preparation as in refill.
prepare_w3k() {
	local round=$1 t0 secs
	if [ "$hog_round" = "$round" ]; then
		q bench_pqrun "SET synchronous_commit = off;
			SELECT count(pqrun.cancel(id)) FROM pqrun.job_live WHERE concurrency_key IS DISTINCT FROM 'hog';
			SELECT pqrun.purge('0 s')" >/dev/null
		[ "$(q bench_pqrun "SELECT count(*) FILTER (WHERE concurrency_key IS DISTINCT FROM 'hog') = 0
			AND count(*) FILTER (WHERE concurrency_key = 'hog' AND status = 'READY') = $deep FROM pqrun.jobs")" = t ] ||
			hog_round=""
	fi
	if [ "$hog_round" != "$round" ]; then
		refill pqrun 0 1 drain
		q bench_pqrun "SELECT pqrun.set_key_limit('default', 2, 'hog')" >/dev/null
		t0=$(date +%s.%N)
		fill_keyed "$deep" "'hog'"
		secs=$(awk -v t0="$t0" -v t1="$(date +%s.%N)" 'BEGIN { printf "%.1f", t1 - t0 }')
		hog_note="hog fill=$deep jobs in ${secs}s"
		printf '(hog: %s jobs filled in %ss) ' "$deep" "$secs"
		hog_round=$round
	else
		hog_note="hog kept from this round's first W3K"
	fi
	hog_holder_start
	fill_keyed "$jobs" "'k'"
	q bench_pqrun "VACUUM ANALYZE" >/dev/null
	q bench_pqrun "CHECKPOINT" >/dev/null
}
# hog_check: the hog after a W3K drain, before the holder gives its jobs
# back: its two places held by the holder, every other hog job still READY,
# none claimed or finished by the workers.
hog_check() {
	local running holder ready other
	read -r running holder ready other <<<"$(q bench_pqrun "SELECT count(*) FILTER (WHERE status = 'RUNNING'),
		count(*) FILTER (WHERE status = 'RUNNING' AND locked_by = 'hog-holder'),
		count(*) FILTER (WHERE status = 'READY'), count(*) FILTER (WHERE status NOT IN ('RUNNING', 'READY'))
		FROM pqrun.jobs WHERE concurrency_key = 'hog'" | tr '|' ' ')"
	if [ "$running" = 2 ] && [ "$holder" = 2 ] && [ "$ready" = $((deep - 2)) ] && [ "$other" = 0 ]; then
		echo "hog at its limit: 2 running (the holder's) + $ready ready"
	elif [ "$running" -gt "$holder" ] || [ "$running" -gt 2 ] || [ "$other" != 0 ]; then
		echo "HOG KEY LIMIT VIOLATED: $running running ($holder the holder's) + $ready ready + $other finished of $deep"
	else
		echo "HOG SETUP FAILED: $running running ($holder the holder's) + $ready ready + $other finished of $deep"
	fi
}
# ready_beside_hog: READY jobs of other keys than the hog (W3K's drain is
# over when none is left).
ready_beside_hog() {
	q bench_pqrun "SELECT count(*) FROM pqrun.job_live WHERE status = 'READY' AND concurrency_key IS DISTINCT FROM 'hog'"
}

# ---- a deep backlog of another queue and job type (W3Q, W3Qt) ---------------

# prepare_w3q: refill's empty pqrun, BENCH_DEEP_JOBS ready jobs of queue
# 'deep' and job type 'deep' (timed, in w3q_note), then BENCH_JOBS of queue
# 'default' and job type 'job' as refill makes them, VACUUM ANALYZE and
# CHECKPOINT. A pickup by queue 'default' or job type 'job' drains the
# latter; before 0.16.0 it walked the deep jobs, ahead of its own in pickup
# order (ids), at each pickup.
w3q_note=""
prepare_w3q() {
	local t0 secs
	refill pqrun 0 1 drain
	t0=$(date +%s.%N)
	fill_jobs "$deep" deep ", 'queue', 'deep'"
	secs=$(awk -v t0="$t0" -v t1="$(date +%s.%N)" 'BEGIN { printf "%.1f", t1 - t0 }')
	w3q_note="deep fill=$deep jobs in ${secs}s"
	printf '(deep: %s jobs filled in %ss) ' "$deep" "$secs"
	fill_jobs "$jobs" job
	q bench_pqrun "VACUUM ANALYZE" >/dev/null
	q bench_pqrun "CHECKPOINT" >/dev/null
}
# ready_beside_deep: READY jobs of the queue W3Q, W3Qt and W3KB drain.
ready_beside_deep() {
	q bench_pqrun "SELECT count(*) FROM pqrun.job_live WHERE status = 'READY' AND queue = 'default'"
}

# ---- a paused queue of many keys and idle keyed queues (W3KB) ----------------

# W3KB's world, beside the unkeyed queue 'default' that its workers drain
# with W1's unfiltered pickup:
# - queue 'pk', paused, with one READY job (job type 'pk') under each of
#   BENCH_W3KB_KEYS (100,000) concurrency keys k1..kN: k1's is enqueued (so
#   pqrun marks the queue keyed in pqrun.queue_control, as every keyed
#   enqueue does), the others are written straight into job_live (as
#   superuser, as test/shell/memory.sh does), then pause_queue('pk');
# - BENCH_W3KB_IDLE (5,000) queues idle-1..idle-N, each given a keyed job
#   (enqueue_batch in chunks of BENCH_FILL_CHUNK) that is then cancelled
#   and purged: keyed rows in pqrun.queue_control, no keyed job left;
# - those rows backdated by an hour, then run_maintenance() until the
#   number of keyed idle rows stops falling (a round forgets at most 256;
#   one call where nothing is forgotten): the minute after which
#   maintenance (0.18.0) forgets a keyed queue without keyed jobs has
#   passed, and its rounds have caught up, so the background workers'
#   rounds change nothing during the measurement.
# Each W3KB measurement builds it (timed, in w3kb_note): the refill of the
# W1 measured right after it drops it.
w3kb_note="" w3kb_rounds=0
# w3kb_idle_keyed: keyed rows of the idle queues in pqrun.queue_control.
w3kb_idle_keyed() {
	q bench_pqrun "SELECT count(*) FROM pqrun.queue_control WHERE keyed AND queue LIKE 'idle-%'"
}
# w3kb_world: refill's empty pqrun, then the world; w3kb_rounds: the
# run_maintenance() calls made.
w3kb_world() {
	local before after
	refill pqrun 0 1 drain
	q bench_pqrun "SET synchronous_commit = off;
		SELECT pqrun.enqueue('pk', jsonb_build_object('n', 1), queue => 'pk', concurrency_key => 'k1');
		INSERT INTO pqrun.job_live (status, priority, max_attempts, run_after, created_at, updated_at,
		                            queue, job_type, payload, concurrency_key)
		SELECT 'READY', 0, 5, now(), now(), now(), 'pk', 'pk', jsonb_build_object('n', g), 'k' || g
		  FROM generate_series(2, $w3kb_keys) AS g;
		SELECT pqrun.pause_queue('pk')" >/dev/null
	fill_jobs "$w3kb_idle" idle ", 'queue', 'idle-' || i, 'concurrency_key', 'k'"
	q bench_pqrun "SET synchronous_commit = off;
		SELECT count(pqrun.cancel(id)) FROM pqrun.job_live WHERE queue LIKE 'idle-%';
		SELECT pqrun.purge('0 s');
		UPDATE pqrun.queue_control SET updated_at = now() - interval '1 hour' WHERE keyed AND queue LIKE 'idle-%'" >/dev/null
	after=$(w3kb_idle_keyed) w3kb_rounds=0
	while :; do
		before=$after
		q bench_pqrun "SELECT pqrun.run_maintenance()" >/dev/null
		w3kb_rounds=$((w3kb_rounds + 1))
		after=$(w3kb_idle_keyed)
		[ "$after" -gt 0 ] && [ "$after" -lt "$before" ] && [ "$w3kb_rounds" -lt 1000 ] || break
	done
}
# w3kb_world_intact: "t" when bench_pqrun holds W3KB's world and nothing
# else: the paused queue 'pk' with its BENCH_W3KB_KEYS READY jobs, no
# other job.
w3kb_world_intact() {
	q bench_pqrun "SELECT count(*) FILTER (WHERE queue <> 'pk') = 0
		AND count(*) FILTER (WHERE queue = 'pk' AND status = 'READY') = $w3kb_keys
		AND (SELECT paused FROM pqrun.queue_control WHERE queue = 'pk' AND job_type IS NULL AND concurrency_key IS NULL)
		FROM pqrun.jobs"
}
# prepare_w3kb: W3KB's world (timed), then BENCH_JOBS jobs of queue
# 'default' and job type 'job' as refill makes them, VACUUM ANALYZE and
# CHECKPOINT as in refill.
prepare_w3kb() {
	local t0 secs keyed
	t0=$(date +%s.%N)
	w3kb_world
	secs=$(awk -v t0="$t0" -v t1="$(date +%s.%N)" 'BEGIN { printf "%.1f", t1 - t0 }')
	w3kb_note="w3kb fill=$w3kb_keys keys + $w3kb_idle idle queues in ${secs}s; maintenance rounds=$w3kb_rounds"
	printf '(world: %s keys + %s idle queues in %ss, %s maintenance round(s)) ' "$w3kb_keys" "$w3kb_idle" "$secs" "$w3kb_rounds"
	if [ "$(w3kb_world_intact)" != t ]; then
		w3kb_note="$w3kb_note; W3KB SETUP FAILED: $(q bench_pqrun "SELECT string_agg(format('%s %s %s', queue, status, n), ' ')
			FROM (SELECT queue, status, count(*) AS n FROM pqrun.jobs GROUP BY 1, 2) s")"
	fi
	fill_jobs "$jobs" job
	q bench_pqrun "VACUUM ANALYZE" >/dev/null
	q bench_pqrun "CHECKPOINT" >/dev/null
	keyed=$(q bench_pqrun "SELECT count(*) FROM pqrun.queue_control WHERE keyed")
	w3kb_note="$w3kb_note; keyed queues=$keyed"
	printf '(%s keyed queues) ' "$keyed"
}

# ---- one measurement -------------------------------------------------------

# start_holder DB: another session opens a REPEATABLE READ transaction and
# keeps its snapshot (and so the vacuum horizon of DB) until stop_holder.
start_holder() {
	PGAPPNAME=bench_hold psql -X -q -h "$sock" -p "$port" -U postgres -d "$1" \
		-c "BEGIN ISOLATION LEVEL REPEATABLE READ" -c "SELECT count(*) FROM pg_class" \
		-c "SELECT pg_sleep(86400)" >/dev/null 2>&1 &
	holder_pid=$!
	for _ in $(seq 100); do
		[ "$(q "$1" "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'bench_hold'
			AND backend_xmin IS NOT NULL")" = 1 ] && return 0
		sleep 0.1
	done
	echo "the horizon-holding session did not start" >&2
	return 1
}
stop_holder() {
	q "$1" "SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE application_name = 'bench_hold'" >/dev/null
	wait "$holder_pid" 2>/dev/null || true
	holder_pid=""
}

# start_sampler SYSTEM WINDOW FILE: every WINDOW seconds, append
# "epoch jobs_done" to FILE, until stop_sampler.
start_sampler() {
	local system=$1 window=$2 file=$3
	(while :; do
		echo "$(date +%s.%N) $(done_count "$system")" >>"$file"
		sleep "$window"
	done) &
	sampler_pid=$!
}
stop_sampler() {
	kill "$sampler_pid" 2>/dev/null || true
	wait "$sampler_pid" 2>/dev/null || true
	sampler_pid=""
	echo "$(date +%s.%N) $(done_count "$1")" >>"$2"
}

# window_rates FILE WINDOW: "rate/rate/...; min/first=x" from sampler lines,
# counting only windows at least half as long as WINDOW.
window_rates() {
	awk -v w="$2" 'NR > 1 && $1 - t >= w / 2 { r[++n] = ($2 - d) / ($1 - t) }
		{ t = $1; d = $2 }
		END {
			if (n == 0) { print "windows=none"; exit }
			s = ""; m = r[1]
			for (i = 1; i <= n; i++) { s = s (i > 1 ? "/" : "") sprintf("%.0f", r[i]); if (r[i] < m) m = r[i] }
			printf "windows=%s; min/first=%.2f", s, (r[1] > 0 ? m / r[1] : 0)
		}' "$1"
}

# w6_settings RETENTION: pqrun.retention (and a one-minute
# pqrun.history_interval where there is one, 0.12.0) for W6; "" resets them.
w6_settings() {
	local has_interval
	has_interval=$(q bench_pqrun "SELECT count(*) FROM pg_settings WHERE name = 'pqrun.history_interval'")
	if [ -n "$1" ]; then
		q bench_pqrun "ALTER SYSTEM SET pqrun.retention = '$1'" >/dev/null
		[ "$has_interval" = 1 ] && q bench_pqrun "ALTER SYSTEM SET pqrun.history_interval = '1min'" >/dev/null
	else
		q bench_pqrun "ALTER SYSTEM RESET pqrun.retention" >/dev/null
		[ "$has_interval" = 1 ] && q bench_pqrun "ALTER SYSTEM RESET pqrun.history_interval" >/dev/null
	fi
	q bench_pqrun "SELECT pg_reload_conf()" >/dev/null
}

# start_history_sampler WINDOW FILE: every WINDOW seconds, append "epoch
# finished history_kB history_dead" to FILE until stop_history_sampler:
# jobs finished so far (rows deleted from job_live: retention removes them
# from job_done), and size (heap + indexes) and dead tuples of job_done,
# all its partitions where it has them (pg_partition_tree returns no row for
# the plain table of the versions before 0.12.0).
history_sample() {
	echo "$(date +%s.%N) $(q bench_pqrun "WITH history AS (
			SELECT relid FROM pg_partition_tree('pqrun.job_done') WHERE isleaf
			UNION SELECT oid FROM pg_class WHERE oid = 'pqrun.job_done'::regclass AND relkind = 'r')
		SELECT (SELECT n_tup_del FROM pg_stat_user_tables WHERE relid = 'pqrun.job_live'::regclass),
		(SELECT sum(pg_table_size(relid) + pg_indexes_size(relid)) / 1024 FROM history)::bigint,
		(SELECT coalesce(sum(n_dead_tup), 0) FROM pg_stat_user_tables WHERE relid IN (SELECT relid FROM history))" | tr '|' ' ')"
}
start_history_sampler() {
	local window=$1 file=$2
	(while :; do
		history_sample >>"$file"
		sleep "$window"
	done) &
	sampler_pid=$!
}
stop_history_sampler() {
	kill "$sampler_pid" 2>/dev/null || true
	wait "$sampler_pid" 2>/dev/null || true
	sampler_pid=""
	sleep 1 # the clients' last counts reach the statistics
	history_sample >>"$1"
}

# measure SYSTEM WORKLOAD CLIENTS ROUND: refill, run pgbench, count, check,
# and append one CSV row.
measure() {
	local system=$1 workload=$2 n=$3 round=$4
	local db script kind depth duration threads tag rc=0 notes=() drained=false
	local done0 ready0 total0 done1 ready1 total1 last1 sizes0="" dead="" verdict
	db=$(system_db "$system")
	duration=$seconds
	case $workload in
	L0) script=l0_update.sql kind=commit depth=0 ;;
	L0floor) script=l0_floor.sql kind=commit depth=0 ;;
	W1) script=${system}_w1.sql kind=drain depth=$jobs ;;
	W1b) script=${system}_w1b.sql kind=drain depth=$jobs ;;
	W1c) script=${system}_w1c.sql kind=drain depth=$jobs ;;
	W1bc) script=${system}_w1bc.sql kind=drain depth=$jobs ;;
	W1L) script=${system}_w1.sql kind=drain depth=$jobs ;;
	W1K | W3K | W1Kref | W3Kref | W3Qref | W3Qtref | W3KB | W3KBref) script=${system}_w1.sql kind=drain depth=$jobs ;;
	W3Q) script=${system}_w3q.sql kind=drain depth=$jobs ;;
	W3Qt) script=${system}_w3qt.sql kind=drain depth=$jobs ;;
	W2c) script=${system}_w2c.sql kind=steady depth=$w2_depth ;;
	W3) script=${system}_w1.sql kind=drain depth=$deep ;;
	W2 | W5) script=${system}_w2.sql kind=steady depth=$w2_depth ;;
	W4) script=${system}_w2.sql kind=steady depth=$w2_depth duration=$soak_seconds ;;
	W6) script=${system}_w2.sql kind=steady depth=$w2_depth duration=$w6_seconds ;;
	E1) script=${system}_e1.sql kind=enqueue depth=0 ;;
	E1single) script=${system}_e1single.sql kind=enqueue depth=0 ;;
	E1b) script=${system}_e1b.sql kind=enqueue depth=0 duration=$e1b_seconds ;;
	E1b128) script=${system}_e1b128.sql kind=enqueue depth=0 duration=$e1b_seconds ;;
	esac
	# E1b's batches, as each system's clients send them (bench/lib/fleet.sh).
	local payloads=()
	case $workload in E1b | E1b128) payloads=(-D "batch=$fleet_batch" -D "msgs=$fleet_msgs" -D "p=$fleet_one") ;; esac
	threads=$((n < 2 ? n : 2))
	tag=$workload-$system-c$n-r$round
	printf '  %-9s %-9s clients %-2s round %s: ' "$workload" "$system" "$n" "$round"

	case $workload in
	W1K) refill_w1k "$depth" ;;
	W3K) prepare_w3k "$round" ;;
	W3Q | W3Qt) prepare_w3q ;;
	W3KB) prepare_w3kb ;;
	*) refill "$system" "$depth" "$n" "$kind" ;;
	esac
	[ "$workload" = W3K ] || hog_round=""
	# W1L: W1 under generous concurrency limits (the queue's and its job
	# type's), which every claim checks and counts.
	[ "$workload" = W1L ] && q "$db" "SELECT pqrun.set_concurrency_limit('default', 1000);
		SELECT pqrun.set_concurrency_limit('default', 1000, 'job')" >/dev/null
	# W1K: W1 over 100 concurrency keys under a generous cap on the queue and
	# a generous limit for each key: every claim walks the keys' lanes and
	# checks and counts both.
	[ "$workload" = W1K ] && q "$db" "SELECT pqrun.set_concurrency_limit('default', 1000);
		SELECT pqrun.set_key_limit('default', 1000)" >/dev/null
	read -r done0 ready0 total0 _ <<<"$(counters "$system")"
	[ "$workload" = W3K ] && ready0=$(ready_beside_hog)
	case $workload in W3Q | W3Qt | W3KB) ready0=$(ready_beside_deep) ;; esac
	[ "$workload" = W4 ] && sizes0=$(table_sizes "$system")
	[ "$workload" = W5 ] && start_holder "$db"
	case $workload in
	W4) start_sampler "$system" "$soak_window" "$logs/$tag.windows" ;;
	W5) start_sampler "$system" "$w5_window" "$logs/$tag.windows" ;;
	W6)
		w6_settings "$w6_retention"
		start_history_sampler "$soak_window" "$logs/$tag.history" ;;
	esac

	rm -f "$logs/$tag".log*
	# E1b: the server's CPU per job beside the calls' latency, which at one
	# client is mostly the commit's WAL flush (bench/lib/fleet.sh).
	case $workload in E1b | E1b128) server_cpu >"$work/cpu0"; local ct0 ct1 ; ct0=$(date +%s.%N) ;; esac
	timeout --kill-after=10 $((duration + 120)) \
		pgbench -n -M prepared -c "$n" -j "$threads" -T "$duration" -D nclients="$n" -D id=0 -D ids={} "${payloads[@]}" \
		--log --log-prefix="$logs/$tag.log" -h "$sock" -p "$port" -U postgres \
		-f "bench/workloads/$script" "$db" >"$logs/$tag.out" 2>&1 || rc=$?

	case $workload in W4 | W5) stop_sampler "$system" "$logs/$tag.windows" ;; esac
	case $workload in E1b | E1b128) ct1=$(date +%s.%N); backends_gone pgbench; server_cpu >"$work/cpu1" ;; esac
	if [ "$workload" = W6 ]; then
		stop_history_sampler "$logs/$tag.history"
		w6_settings ""
	fi
	read -r done1 ready1 total1 last1 <<<"$(counters "$system")"
	[ "$workload" = W3K ] && ready1=$(ready_beside_hog)
	case $workload in
	W3Q | W3Qt) ready1=$(ready_beside_deep) notes+=("$w3q_note") ;;
	W3KB) ready1=$(ready_beside_deep) notes+=("$w3kb_note") ;;
	esac
	if [ "$workload" = W5 ]; then
		dead=$(dead_tuples "$system")
		stop_holder "$db"
	fi

	# Per-transaction log → bench_meta.lat (client, txn, latency µs, script, epoch, µs).
	cat "$logs/$tag".log.* >"$logs/$tag.all" 2>/dev/null || true
	q bench_meta "TRUNCATE lat;" "\\copy lat (client, txn, lat_us, script, epoch, us) FROM '$logs/$tag.all' WITH (DELIMITER ' ')"
	local jobs_done role_filter="true" last_us=0 stats
	case $kind in
	commit) jobs_done=-1 ;;
	drain | steady) jobs_done=$((done1 - done0)) ;;
	enqueue) jobs_done=$((total1 - total0)) ;;
	esac
	# W6: retention removes finished jobs while it runs; they are counted
	# as they leave job_live.
	[ "$workload" = W6 ] && jobs_done=$(awk 'NR == 1 { f = $2 } { l = $2 } END { print l - f }' "$logs/$tag.history")
	# Did the drain empty the queue before the time was up?
	if [ "$kind" = drain ] && [ "$ready1" = 0 ] && [ "$jobs_done" -gt 0 ]; then
		drained=true
		last_us=$(awk -v t="$last1" 'BEGIN { printf "%.0f", t * 1000000 }')
	fi
	# W2 and friends: the worker step is the consumers' transaction (odd
	# clients; a single client does both).
	[ "$kind" = steady ] && [ "$n" -gt 1 ] && role_filter="client % 2 = 1"
	# Drains that emptied the queue keep the transactions that started before
	# the last job finished (later ones found nothing) and end with them.
	stats=$(q bench_meta "WITH b AS (
			SELECT min(epoch * 1000000 + us - lat_us) AS t0, max(epoch * 1000000 + us) AS t1, count(*) AS ntx FROM lat),
		sel AS (SELECT lat_us, epoch * 1000000 + us AS t_done, client FROM lat
		         WHERE $last_us = 0 OR epoch * 1000000 + us - lat_us <= $last_us),
		e AS (SELECT max(t_done) AS t_end FROM sel)
		SELECT coalesce(round(((CASE WHEN $jobs_done < 0 THEN b.ntx ELSE $jobs_done END)
		                       / greatest((e.t_end - b.t0) / 1e6, 0.001))::numeric, 1)::text, 'NA'),
		       coalesce(round((p.p50 / 1000.0)::numeric, 3)::text, 'NA'),
		       coalesce(round((p.p95 / 1000.0)::numeric, 3)::text, 'NA'),
		       coalesce(round(((e.t_end - b.t0) / 1e6)::numeric, 2)::text, 'NA'), b.ntx
		  FROM b, e, LATERAL (
		       SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY lat_us) AS p50,
		              percentile_cont(0.95) WITHIN GROUP (ORDER BY lat_us) AS p95
		         FROM sel WHERE $role_filter) p" | tr '|' ' ')
	local rate p50 p95 elapsed
	read -r rate p50 p95 elapsed _ <<<"$stats"

	[ "$kind" = commit ] || notes+=("jobs=$jobs_done")
	case $workload in E1b | E1b128)
		notes+=("cpu_us_per_job=$(awk -v c="$(cpu_seconds "$work/cpu0" "$work/cpu1")" -v n="$jobs_done" 'BEGIN { printf "%.1f", (n > 0 ? c * 1e6 / n : 0) }')"
			"cpu_cores=$(awk -v c="$(cpu_seconds "$work/cpu0" "$work/cpu1")" -v a="$ct0" -v b="$ct1" 'BEGIN { printf "%.2f", c / (b - a) }')") ;;
	esac
	[ "$drained" = true ] && notes+=("drained after ${elapsed}s")
	[ "$kind" = steady ] && notes+=("backlog=$ready0->$ready1")
	[ "$kind" != commit ] && [ "$jobs_done" -le 0 ] && notes+=("PGBENCH FAILED: no job finished")
	if [ "$rc" != 0 ] || grep -qiE "error|aborted" "$logs/$tag.out"; then
		notes+=("PGBENCH FAILED rc=$rc: $(grep -iE "error|aborted" "$logs/$tag.out" | head -n 1 | tr -d ',"')")
	fi
	# A finish-and-claim client ends holding what its last call claimed (one
	# job, or a batch of 100), as worker 'w<client id>': finished here (after
	# the counts), unless orphan rescue took it back first, which the check
	# allows for that many jobs (one by one: rescue may take one back between
	# the read and its mark_done, 55000). A RUNNING job no client holds so,
	# or more than a client's last call claimed, is a violation.
	local held=0 batch=1 stray
	case $workload in
	W1c | W2c) held=$n ;;
	W1bc) held=$((100 * n)) batch=100 ;;
	esac
	if [ "$held" != 0 ]; then
		stray=$(q "$db" "SELECT coalesce(sum(n), 0) FROM (SELECT locked_by, count(*) AS n FROM pqrun.jobs
			WHERE status = 'RUNNING' GROUP BY locked_by
			HAVING CASE WHEN locked_by ~ '^w[0-9]+$' THEN substr(locked_by, 2)::int >= $n ELSE true END
			    OR count(*) > $batch) AS s")
		[ "$stray" = 0 ] || notes+=("EXACTLY-ONCE VIOLATED: $stray RUNNING jobs no client's last call holds")
	fi
	# W3K: the hog must still be at its limit, untouched by the workers; then
	# its holder gives its two jobs back, so the check below covers the hog
	# too (a million READY jobs, none with an attempt) without exceptions.
	if [ "$workload" = W3K ]; then
		notes+=("$hog_note" "$(hog_check)")
		hog_holder_stop
	fi
	[ "$held" = 0 ] ||
		q "$db" "DO \$\$ DECLARE j bigint;
			BEGIN
				FOR j IN SELECT id FROM pqrun.jobs WHERE status = 'RUNNING' LOOP
					BEGIN
						PERFORM pqrun.mark_done(j);
					EXCEPTION WHEN object_not_in_prerequisite_state THEN NULL;
					END;
				END LOOP;
			END \$\$" >/dev/null
	if [ "$kind" = drain ] || [ "$kind" = steady ]; then
		verdict=$(verify_once "$system" "$drained" "$held")
		if [ "$verdict" = ok ]; then notes+=("exactly-once ok"); else notes+=("EXACTLY-ONCE VIOLATED: $verdict"); fi
	fi
	case $workload in
	W4) notes+=("$(window_rates "$logs/$tag.windows" "$soak_window")" "sizes before: $sizes0"
		"sizes after: $(table_sizes "$system")") ;;
	W5) notes+=("$(window_rates "$logs/$tag.windows" "$w5_window")" "dead=$dead") ;;
	W6) notes+=("$(window_rates "$logs/$tag.history" "$soak_window")" "retention=$w6_retention"
		"history_kB=$(awk '{ printf "%s%s", (NR > 1 ? "/" : ""), $3 }' "$logs/$tag.history")"
		"history_dead=$(awk '{ printf "%s%s", (NR > 1 ? "/" : ""), $4 }' "$logs/$tag.history")") ;;
	esac
	local joined
	joined=$(printf '%s; ' "${notes[@]}" | sed 's/; $//; s/[",]/ /g')
	echo "$system,$workload,$n,$round,${rate/#NA/},${p50/#NA/},${p95/#NA/},\"$joined\"" >>"$csv"
	printf '%10s jobs/s  p50 %8s ms  p95 %8s ms  %s\n' "$rate" "$p50" "$p95" "$joined"
}

# measure_l1 ROUND: wake latency. A waiter long-polls; a producer enqueues
# BENCH_L1_RATE jobs per second carrying their enqueue clock.
measure_l1() {
	local round=$1 tag=L1-pqrun-r$1 rc=0 stats
	printf '  %-9s %-9s clients %-2s round %s: ' L1 pqrun 1 "$round"
	refill pqrun 0 1 enqueue
	timeout --kill-after=10 $((seconds + 60)) \
		pgbench -n -M prepared -c 1 -j 1 -T $((seconds + 3)) -h "$sock" -p "$port" -U postgres \
		-f bench/workloads/pqrun_l1_waiter.sql bench_pqrun >"$logs/$tag.waiter.out" 2>&1 &
	local waiter=$!
	sleep 1
	PGOPTIONS="-c synchronous_commit=off" timeout --kill-after=10 $((seconds + 60)) \
		pgbench -n -M prepared -c 1 -j 1 -R "$l1_rate" -T "$seconds" -h "$sock" -p "$port" -U postgres \
		-f bench/workloads/pqrun_l1_producer.sql bench_pqrun >"$logs/$tag.out" 2>&1 || rc=$?
	wait "$waiter" || rc=$?
	# From the enqueue's commit (its commit timestamp) and, as before, from
	# the clock the producer read before enqueueing.
	stats=$(q bench_pqrun "WITH l AS (
		SELECT l.lat_us, (extract(epoch FROM l.returned_at - pg_xact_commit_timestamp(c.xmin)) * 1000000) AS commit_us
		  FROM bench.l1 l JOIN bench.l1_commits c USING (id))
		SELECT round(count(*) / $seconds.0, 1),
		round((percentile_cont(0.5) WITHIN GROUP (ORDER BY commit_us) / 1000.0)::numeric, 3),
		round((percentile_cont(0.95) WITHIN GROUP (ORDER BY commit_us) / 1000.0)::numeric, 3),
		round((percentile_cont(0.99) WITHIN GROUP (ORDER BY commit_us) / 1000.0)::numeric, 3),
		round((percentile_cont(0.5) WITHIN GROUP (ORDER BY lat_us) / 1000.0)::numeric, 3),
		round((percentile_cont(0.95) WITHIN GROUP (ORDER BY lat_us) / 1000.0)::numeric, 3),
		count(*), (SELECT count(*) FROM pqrun.jobs WHERE job_type = 'l1') FROM l" | tr '|' ' ')
	local rate p50 p95 p99 e50 e95 n enq joined
	read -r rate p50 p95 p99 e50 e95 n enq <<<"$stats"
	joined="p99_ms=$p99; from_enqueue_ms=$e50 / $e95; samples=$n of $enq enqueued at ${l1_rate}/s"
	[ "$rc" = 0 ] || joined="$joined; PGBENCH FAILED rc=$rc"
	echo "pqrun,L1,1,$round,${rate/#NA/},${p50/#NA/},${p95/#NA/},\"$joined\"" >>"$csv"
	printf '%10s jobs/s  p50 %8s ms  p95 %8s ms  %s\n' "$rate" "$p50" "$p95" "$joined"
}

# ---- the run ---------------------------------------------------------------
started=$(date +%s)
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
echo "== workloads: $workloads; clients: $clients_list; ${seconds}s each; $rounds round(s)"
for round in $(seq "$rounds"); do
	echo "== round $round of $rounds"
	for workload in $workloads; do
		case $workload in
		L1)
			if [ "$has_long_poll" = 1 ]; then measure_l1 "$round"; else echo "  L1 skipped: pqrun.pickup has no wait argument"; fi
			continue ;;
		W4)
			[ "$round" -le "$soak_rounds" ] || continue
			for system in $(systems_for W4); do measure "$system" W4 "$soak_clients" "$round"; done
			continue ;;
		W6)
			[ "$round" -le "$soak_rounds" ] || continue
			measure pqrun W6 "$soak_clients" "$round"
			continue ;;
		W7 | W7h)
			# Minutes each (W7h holds its XID for BENCH_W7H_HOLD): in the
			# first BENCH_FLEET_ROUNDS rounds only.
			[ "$round" -le "$fleet_rounds" ] || continue
			if [ "$workload" = W7 ]; then
				for k in $w7_clients; do
					for v in $w7_variants; do measure_fleet "${v%%:*}" "${v#*:}" "$k" "$round" w7; done
				done
			else
				for k in $w7h_clients; do
					for v in $w7h_variants; do measure_fleet "${v%%:*}" "${v#*:}" "$k" "$round" w7h; done
				done
			fi
			continue ;;
		E1b)
			for n in $e1b_clients; do
				for sub in E1b E1b128; do
					for system in $(systems_for "$sub"); do measure "$system" "$sub" "$n" "$round"; done
				done
			done
			continue ;;
		L0 | W1 | W1b | W1c | W1bc | W1L | W1K | W2 | W2c | W3 | W3K | W3Q | W3Qt | W3KB | W5 | E1) ;;
		*) echo "unknown workload $workload" >&2; exit 2 ;;
		esac
		subs=$workload
		[ "$workload" = L0 ] && subs="L0 L0floor"
		[ "$workload" = E1 ] && subs="E1 E1single"
		# W1K and W3K are compared with a W1 measured right after each of
		# them (W1Kref, W3Kref: W1's refill, script and clients), not with
		# the round's W1 minutes earlier, before the hog's fill: this
		# machine's speed drifts by more than the 10% those targets allow.
		[ "$workload" = W1K ] && subs="W1K W1Kref"
		[ "$workload" = W3K ] && subs="W3K W3Kref"
		[ "$workload" = W3Q ] && subs="W3Q W3Qref"
		[ "$workload" = W3Qt ] && subs="W3Qt W3Qtref"
		[ "$workload" = W3KB ] && subs="W3KB W3KBref"
		for n in $clients_list; do
			for sub in $subs; do
				for system in $(systems_for "$sub"); do measure "$system" "$sub" "$n" "$round"; done
			done
		done
	done
done
elapsed=$(($(date +%s) - started))

# ---- report ------------------------------------------------------------------
cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)
mem=$(awk '/MemTotal/ { printf "%.0f GB", $2 / 1048576 }' /proc/meminfo)
pgver=$(q postgres "SHOW server_version")
{
	echo "# pqrun benchmark, $(date -u '+%Y-%m-%d %H:%M UTC')"
	echo
	echo "- machine: $(nproc) CPUs ($cpu), $mem RAM, $(uname -sr); load average $load_before at the start, $(cut -d' ' -f1-3 /proc/loadavg) at the end"
	echo "- PostgreSQL $pgver, loopback, shared_buffers 1GB, fsync on, synchronous_commit on; pqrun $tested"
	echo "- clients: $clients_list; ${seconds}s per measurement; $rounds round(s), systems interleaved; W1/W1b/W1K drain $jobs jobs, W3 $deep, W3K $jobs beside a hog key of $deep, W3Q/W3Qt $jobs beside $deep of another queue and job type, W3KB $jobs (unfiltered) beside a paused queue of $w3kb_keys keys and $w3kb_idle idle keyed queues, W2/W5 start at $w2_depth; total ${elapsed}s"
	echo "- pqrun.notify = ${BENCH_PQRUN_NOTIFY:-off} in bench_pqrun (nobody LISTENs; the long poll wakes consumers)"
	case " $workloads " in
	*" W7 "* | *" W7h "* | *" E1b "*)
		echo "- fleet (W7, W7h, E1b; bench/lib/fleet.sh): $w7_producers producers offering $w7_rate jobs/s in batches of 128 on a fixed schedule; W7 with $w7_clients workers, ${w7_seconds}s each, variants (system:batch) $w7_variants; W7h with $w7h_clients workers filtered by job type, variants $w7h_variants, ${w7h_pre}s + a transaction id held ${w7h_hold}s + ${w7h_post}s, ${w7h_window}s windows; workers wait ${w7_wait}s (pqrun pickup wait, pgmq read_with_poll max_poll_seconds) or sleep ${w7_poll_ms}ms after an empty claim (baseline), go on ${w7_tail}s after the producers; first $fleet_rounds round(s); E1b at $e1b_clients clients, ${e1b_seconds}s each" ;;
	esac
	echo "- command: \`${source_rev:+BENCH_SOURCE=$source_rev }${BENCH_PQRUN_NOTIFY:+BENCH_PQRUN_NOTIFY=$BENCH_PQRUN_NOTIFY }BENCH_CLIENTS=\"$clients_list\" BENCH_SECONDS=$seconds BENCH_ROUNDS=$rounds BENCH_WORKLOADS=\"$workloads\" BENCH_JOBS=$jobs BENCH_DEEP_JOBS=$deep $(for v in ${!BENCH_W7@} ${!BENCH_E1B@} ${!BENCH_FLEET@}; do printf '%s=%q ' "$v" "${!v}"; done)${BENCH_W3KB_KEYS:+BENCH_W3KB_KEYS=$BENCH_W3KB_KEYS }${BENCH_W3KB_IDLE:+BENCH_W3KB_IDLE=$BENCH_W3KB_IDLE }bash bench/run.sh\`"
	echo "- raw figures: bench/results/$stamp.csv (one row per measurement); below, medians over rounds"
	echo
	q bench_meta "\\copy results FROM '$repo/$csv' WITH (FORMAT csv, HEADER)" >/dev/null
	psql -X -qtA -v ON_ERROR_STOP=1 -h "$sock" -p "$port" -U postgres -d bench_meta -f bench/lib/report.sql
} >"$md"
echo
cat "$md"
echo
echo "results: $csv and $md"

# shellcheck shell=bash disable=SC2154  # q, sock, port, logs, csv and the settings come from bench/run.sh
# bench/lib/fleet.sh — the fleet workloads (issue #45): W7, K workers that
# wait for work as deployed workers do while producers send batches of 128
# at a fixed rate, and W7h, the same while another session holds a
# transaction id. Sourced by bench/run.sh after bench/lib/systems.sh.
#
# One measurement (measure_fleet): refill (an empty queue, VACUUM ANALYZE,
# CHECKPOINT); K worker clients connect and wait (pgbench, the
# bench/workloads/<system>_w7_worker.sql loop, application_name
# bench_fleet_worker); the producers (pgbench, <system>_w7_producer.sql)
# offer BENCH_W7_RATE jobs/s in batches of 128 on a fixed schedule for the
# measurement's length, while a sampler counts the workers' active backends
# every 100 ms; the workers go on for BENCH_W7_TAIL seconds, then end when
# their current call returns. What they still hold (claimed by their last
# call) and what is still queued is then finished by the harness, once
# each, every job is checked to be finished exactly once, and the figures
# come from the jobs' own timestamps:
#   created   pqrun created_at, baseline created_at, pgmq enqueued_at: now()
#             of the enqueueing transaction, so it counts the enqueue call;
#   committed the commit timestamp of the producer's transaction (the xmin
#             of its row in bench.w7_batches, track_commit_timestamp on),
#             when the job became visible;
#   claimed   pqrun locked_at (the claim's time, of a waiting pickup the
#             moment it claimed; kept in job_done), baseline locked_at
#             (now() of the claim), pgmq vt minus the visibility timeout
#             (read sets vt = clock_timestamp() + vt; archive keeps it);
#   finished  pqrun finished_at, baseline finished_at, pgmq archived_at.
# No column is added to any system's tables for this.

# fleet_payloads: the batch every producer sends, as each system's clients
# send it. pqrun's enqueue_batch and the baseline's INSERT take one JSON
# array of 128 jobs (job type w7, payload {"n": i, "to": "user<i>@..."}),
# pgmq's send_batch the jsonb[] of the 128 payloads (its clients send a
# text array); E1b128's inserts one payload each.
fleet_batch="" fleet_msgs="" fleet_one=""
fleet_payloads() {
	fleet_batch=$(q bench_meta "SELECT jsonb_agg(jsonb_build_object('job_type', 'w7', 'payload', p) ORDER BY i)
		FROM (SELECT i, jsonb_build_object('n', i, 'to', 'user' || i || '@example.com') AS p FROM generate_series(1, 128) AS i) s")
	fleet_msgs=$(q bench_meta "SELECT array_agg(jsonb_build_object('n', i, 'to', 'user' || i || '@example.com') ORDER BY i)
		FROM generate_series(1, 128) AS i")
	fleet_one='{"n": 1, "to": "user1@example.com"}'
}

# fleet_jobs SYSTEM: SQL of the system's finished jobs, as (id, created_at,
# claimed_at, finished_at); see the header.
fleet_jobs() {
	case $1 in
	pqrun) echo "SELECT id, created_at, locked_at AS claimed_at, finished_at FROM pqrun.job_done" ;;
	baseline) echo "SELECT id, created_at, locked_at AS claimed_at, finished_at FROM base.jobs WHERE status = 'DONE'" ;;
	pgmq) echo "SELECT msg_id AS id, enqueued_at AS created_at, vt - make_interval(secs => $w7_vt) AS claimed_at,
		archived_at AS finished_at FROM pgmq.a_jobs" ;;
	esac
}

# server_cpu: "pid ticks" for each process of the cluster (the
# postmaster's children: backends, background workers, autovacuum), ticks
# being its user + system CPU time so far, and "reaped ticks", the CPU
# time of the children that have ended (the postmaster's cutime + cstime:
# the backends of clients that came and went). A child that is reaped
# while the list is read would be in neither, so the list is read again
# until the reaped time is the same before and after it.
server_cpu() {
	local pm p r0 r1 list
	pm=$(head -n 1 "$sock/data/postmaster.pid")
	for _ in $(seq 10); do
		# Field 2 (the command) is in parentheses; fields 14 to 17 are
		# utime, stime, cutime and cstime, 12 to 15 after it.
		r0=$(awk '{ sub(/^.*\) /, ""); print $14 + $15 }' "/proc/$pm/stat")
		list=$(for p in $(pgrep -P "$pm"); do
			awk -v p="$p" '{ sub(/^.*\) /, ""); print p, $12 + $13 }' "/proc/$p/stat" 2>/dev/null || true
		done)
		r1=$(awk '{ sub(/^.*\) /, ""); print $14 + $15 }' "/proc/$pm/stat")
		[ "$r0" = "$r1" ] && break
	done
	echo "reaped $r1"
	echo "$list"
}
# cpu_seconds BEFORE AFTER: CPU seconds the cluster's processes spent
# between two server_cpu listings: what each process alive at the end
# spent since the start (all of it if it started in between), plus what
# the children that ended in between spent (reaped), less what those of
# them alive at the start had spent before it.
cpu_seconds() {
	awk -v hz="$(getconf CLK_TCK)" 'NR == FNR { a[$1] = $2; next } { b[$1] = $2 }
		END {
			for (p in b) s += b[p] - (p in a ? a[p] : 0)
			for (p in a) if (!(p in b)) s -= a[p]
			printf "%.2f", s / hz
		}' "$1" "$2"
}

# backends_gone APP...: wait (up to 5 s) until no backend of these
# applications is left, then a moment more for the postmaster to reap
# them: a client's backend ends after the client does, and server_cpu
# counts its CPU time only once it has been reaped.
backends_gone() {
	local apps
	apps=$(printf "'%s'," "$@")
	for _ in $(seq 50); do
		[ "$(q bench_meta "SELECT count(*) FROM pg_stat_activity WHERE application_name IN (${apps%,})")" = 0 ] && break
		sleep 0.1
	done
	sleep 0.2
}

# next_multixact: the next MultiXact id as of a checkpoint made now.
next_multixact() {
	q bench_meta "CHECKPOINT" >/dev/null
	q bench_meta "SELECT next_multixact_id::text::bigint FROM pg_control_checkpoint()"
}

# fleet_held SYSTEM K BATCH: "held stray": jobs claimed and not finished
# when the workers ended (each worker may hold what its last call claimed,
# at most BATCH), and how many of them no worker's last call can hold (more
# than BATCH for one worker, or not a worker's; pgmq records no reader, so
# there: more than K * BATCH, or read more than once).
fleet_held() {
	local system=$1 k=$2 batch=$3
	case $system in
	pqrun | baseline)
		local table=pqrun.job_live
		[ "$system" = baseline ] && table=base.jobs
		q "$(system_db "$system")" "SELECT coalesce(sum(n), 0), coalesce(sum(n) FILTER (WHERE stray), 0)
			FROM (SELECT count(*) AS n, CASE WHEN locked_by ~ '^w[0-9]+$' THEN substr(locked_by, 2)::int >= $k ELSE true END
			                             OR count(*) > $batch AS stray
			        FROM $table WHERE status = 'RUNNING' GROUP BY locked_by) s" ;;
	pgmq)
		q bench_pgmq "SELECT count(*), CASE WHEN count(*) > $k * $batch THEN count(*) ELSE 0 END
			+ count(*) FILTER (WHERE read_ct > 1) FROM pgmq.q_jobs WHERE read_ct > 0" ;;
	esac | tr '|' ' '
}

# fleet_finish SYSTEM: finish, once each, what the workers left: the jobs
# they held (pqrun: mark_done_batch; baseline: its done UPDATE; pgmq:
# archive), then everything still queued, claimed by the harness
# (locked_by 'drain') and finished at once. Prints how many were queued.
fleet_finish() {
	case $1 in
	pqrun) q bench_pqrun "SELECT pqrun.mark_done_batch(coalesce(array_agg(id), '{}')) FROM pqrun.job_live WHERE status = 'RUNNING'" >/dev/null
		q bench_pqrun "CREATE TEMP TABLE drained (n int);
			DO \$\$
			DECLARE
				n int;
			BEGIN
				LOOP
					SELECT pqrun.mark_done_batch(coalesce(array_agg(id), '{}')) INTO n
					  FROM pqrun.pickup('drain', batch_size => 1000);
					EXIT WHEN n = 0;
					INSERT INTO drained VALUES (n);
				END LOOP;
			END \$\$;
			SELECT coalesce(sum(n), 0) FROM drained" ;;
	baseline) q bench_baseline "UPDATE base.jobs SET status = 'DONE', finished_at = now(), updated_at = now() WHERE status = 'RUNNING'" >/dev/null
		q bench_baseline "WITH c AS (
				UPDATE base.jobs SET status = 'RUNNING', attempts = attempts + 1, locked_at = now(), locked_by = 'drain',
				       lease_token = gen_random_uuid(), updated_at = now()
				 WHERE status = 'READY' RETURNING id)
			SELECT count(*) FROM c;
			UPDATE base.jobs SET status = 'DONE', finished_at = now(), updated_at = now() WHERE status = 'RUNNING'" | head -n 1 ;;
	pgmq) q bench_pgmq "SELECT count(pgmq.archive('jobs', msg_id)) FROM pgmq.q_jobs WHERE read_ct > 0" >/dev/null
		q bench_pgmq "SELECT count(*) FROM pgmq.archive('jobs', (SELECT coalesce(array_agg(msg_id), '{}') FROM pgmq.read('jobs', $w7_vt, 100000000)))" ;;
	esac
}

# fleet_ids_check SYSTEM: "" when the jobs finished are exactly the jobs the
# producers logged, each once; else what differs.
fleet_ids_check() {
	q "$(system_db "$1")" "WITH b AS (SELECT unnest(ids) AS id FROM bench.w7_batches), x AS ($(fleet_jobs "$1"))
		SELECT concat_ws('; ',
			CASE WHEN (SELECT count(*) FROM b) <> (SELECT count(DISTINCT id) FROM b) THEN 'an id logged twice' END,
			CASE WHEN (SELECT count(*) FROM x) <> (SELECT count(DISTINCT id) FROM x) THEN 'a job finished twice' END,
			CASE WHEN (SELECT count(*) FROM b LEFT JOIN x USING (id) WHERE x.id IS NULL) > 0
			     THEN (SELECT count(*) FROM b LEFT JOIN x USING (id) WHERE x.id IS NULL) || ' enqueued jobs not finished' END,
			CASE WHEN (SELECT count(*) FROM x LEFT JOIN b USING (id) WHERE b.id IS NULL) > 0
			     THEN (SELECT count(*) FROM x LEFT JOIN b USING (id) WHERE b.id IS NULL) || ' finished jobs never enqueued' END)"
}

# fleet_stats SYSTEM T0 HOLD_START HOLD_END: figures of the run from the
# jobs' timestamps (epochs T0, the producers' schedule start, and of the
# hold, 0 without one), space-separated:
#   finished/s and enqueued/s over [T0, the last batch's commit];
#   created -> claimed p50, p95, p99 ms; committed -> claimed p50, p99 ms;
#   the backlog (jobs committed and not yet claimed) at the last commit
#   and its peak; jobs; jobs finished per BENCH_W7H_WINDOW window from T0
#   (a/b/...), the lowest window; created -> claimed p99 of the jobs
#   enqueued during the hold; seconds from the hold's end until the
#   backlog is back to at most one batch (128; "-1": never); p50 and p99
#   ms of the producers' transactions (created -> committed, per batch).
fleet_stats() {
	local system=$1 t0=$2 hs=$3 he=$4
	q "$(system_db "$system")" "WITH b AS (SELECT unnest(ids) AS id, pg_xact_commit_timestamp(xmin) AS committed FROM bench.w7_batches),
		j AS (SELECT b.committed, x.created_at, x.claimed_at, x.finished_at,
		             extract(epoch FROM x.claimed_at - x.created_at) * 1000 AS lat,
		             extract(epoch FROM x.claimed_at - b.committed) * 1000 AS vis
		        FROM b JOIN ($(fleet_jobs "$system")) x USING (id)),
		w AS (SELECT to_timestamp($t0) AS t0, (SELECT max(committed) FROM b) AS t1,
		             to_timestamp(nullif($hs, 0)) AS hs, to_timestamp(nullif($he, 0)) AS he),
		ev AS (SELECT committed AS t, 0 AS o, count(*) AS d FROM j GROUP BY committed
		       UNION ALL SELECT claimed_at, 1, -1 FROM j),
		s AS (SELECT t, sum(d) OVER (ORDER BY t, o ROWS UNBOUNDED PRECEDING) AS backlog FROM ev),
		eb AS (SELECT extract(epoch FROM committed - min(created_at)) * 1000 AS ms FROM j GROUP BY committed),
		win AS (SELECT i, coalesce(c.n, 0) / $w7h_window::numeric AS rate
		          FROM w, generate_series(0, floor(extract(epoch FROM w.t1 - w.t0) / $w7h_window)::int - 1) AS i
		          LEFT JOIN (SELECT floor(extract(epoch FROM j.finished_at - w.t0) / $w7h_window)::int AS i, count(*) AS n
		                       FROM j, w WHERE j.finished_at >= w.t0 GROUP BY 1) c USING (i))
		SELECT round(count(*) FILTER (WHERE j.finished_at BETWEEN w.t0 AND w.t1) / extract(epoch FROM w.t1 - w.t0)::numeric, 1),
		       round(count(*) FILTER (WHERE j.committed >= w.t0 AND j.committed < w.t1) / extract(epoch FROM w.t1 - w.t0)::numeric, 1),
		       round(percentile_cont(0.5) WITHIN GROUP (ORDER BY lat)::numeric, 2),
		       round(percentile_cont(0.95) WITHIN GROUP (ORDER BY lat)::numeric, 2),
		       round(percentile_cont(0.99) WITHIN GROUP (ORDER BY lat)::numeric, 2),
		       round(percentile_cont(0.5) WITHIN GROUP (ORDER BY vis)::numeric, 2),
		       round(percentile_cont(0.99) WITHIN GROUP (ORDER BY vis)::numeric, 2),
		       count(*) FILTER (WHERE j.committed < w.t1 AND j.claimed_at > w.t1),
		       (SELECT max(backlog) FROM s), count(*),
		       coalesce((SELECT string_agg(round(rate)::text, '/' ORDER BY i) FROM win), '-'),
		       coalesce((SELECT round(min(rate)) FROM win), 0),
		       coalesce(round((percentile_cont(0.99) WITHIN GROUP (ORDER BY lat) FILTER (WHERE j.created_at BETWEEN w.hs AND w.he))::numeric, 2), 0),
		       coalesce(round(extract(epoch FROM (SELECT min(s.t) FROM s WHERE s.t >= w.he AND s.backlog <= 128) - w.he)::numeric, 1), -1),
		       (SELECT round(percentile_cont(0.5) WITHIN GROUP (ORDER BY ms)::numeric, 2) FROM eb),
		       (SELECT round(percentile_cont(0.99) WITHIN GROUP (ORDER BY ms)::numeric, 2) FROM eb)
		  FROM j, w GROUP BY w.t0, w.t1, w.hs, w.he" | tr '|' ' '
}

# start_xid_hold DB SECONDS FILE: another session of DB takes a
# transaction id and keeps it for SECONDS (BEGIN; SELECT txid_current();
# SELECT pg_sleep(SECONDS); COMMIT), writing "hold_start <epoch>" and
# "hold_end <epoch>" to FILE. Sets hold_pid.
hold_pid=""
start_xid_hold() {
	PGAPPNAME=bench_xid_hold psql -X -qtA -h "$sock" -p "$port" -U postgres -d "$1" -c "BEGIN" \
		-c "SELECT 'hold_start', txid_current(), extract(epoch FROM clock_timestamp())" \
		-c "SELECT pg_sleep($2)" -c "SELECT 'hold_end', extract(epoch FROM clock_timestamp())" -c "COMMIT" >"$3" 2>&1 &
	hold_pid=$!
}

# measure_fleet VARIANT BATCH K ROUND MODE: one fleet measurement (MODE w7:
# W7, unfiltered, BENCH_W7_SECONDS; w7h: W7h, the workers filter by job
# type, BENCH_W7H_PRE + BENCH_W7H_HOLD + BENCH_W7H_POST seconds with the
# hold in the middle), appended to the CSV as VARIANT, W7 / W7b<BATCH> /
# W7h, K, round, finished/s, created -> claimed p50 and p95 ms, notes.
# VARIANT is a system (pqrun, pgmq, baseline) or a system and a worker of
# another kind (pgmq-read: its workers poll with read from the client);
# the workers' script is bench/workloads/<variant, - as _>_w7_worker.sql.
measure_fleet() {
	local variant=$1 batch=$2 k=$3 round=$4 mode=$5 system=${1%%-*}
	local db workload duration jt='*' tag threads rc=0 notes=() t0 hs=0 he=0 workers
	local mx0 mx1 c0=$work/cpu0 c1=$work/cpu1 ct0 ct1 cpu act held stray harness verdict ids joined
	db=$(system_db "$system")
	case $mode in
	w7) workload=W7 duration=$w7_seconds
		[ "$batch" = 1 ] || workload=W7b$batch ;;
	w7h) workload=W7h jt=w7 duration=$((w7h_pre + w7h_hold + w7h_post)) ;;
	esac
	threads=$((k < 2 ? k : 2))
	tag=$workload-$variant-b$batch-c$k-r$round
	printf '  %-5s %-9s batch %s, %2s workers, round %s: ' "$workload" "$variant" "$batch" "$k" "$round"
	refill "$system" 0 1 fleet
	mx0=$(next_multixact)
	q bench_meta "TRUNCATE activity" >/dev/null

	PGAPPNAME=bench_fleet_worker timeout --kill-after=10 $((duration + w7_tail + 120)) \
		pgbench -n -M prepared -c "$k" -j "$threads" -T $((duration + w7_tail)) \
		-D n=0 -D ids={} -D leases={} -D batch="$batch" -D "jt=$jt" -D wait="${w7_wait}s" \
		-D vt="$w7_vt" -D poll_s="$w7_wait" -D poll_ms="$w7_poll_ms" \
		-h "$sock" -p "$port" -U postgres -f "bench/workloads/${variant//-/_}_w7_worker.sql" "$db" >"$logs/$tag.workers.out" 2>&1 &
	workers=$!
	for _ in $(seq 100); do
		kill -0 "$workers" 2>/dev/null || break
		[ "$(q bench_meta "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'bench_fleet_worker'")" -ge "$k" ] && break
		sleep 0.1
	done
	sleep 1 # the workers in their first (waiting) call

	server_cpu >"$c0"
	ct0=$(date +%s.%N)
	t0=$(q bench_meta "SELECT extract(epoch FROM clock_timestamp()) + 0.2")
	PGAPPNAME=bench_sampler psql -X -q -h "$sock" -p "$port" -U postgres -d bench_meta \
		-c "CALL sample_activity('bench_fleet_worker', $duration)" >/dev/null 2>&1 &
	sampler_pid=$!
	if [ "$mode" = w7h ]; then
		(sleep "$w7h_pre" && start_xid_hold "$db" "$w7h_hold" "$logs/$tag.hold" && wait "$hold_pid") &
		hold_pid=$!
	fi
	PGAPPNAME=bench_fleet_producer timeout --kill-after=10 $((duration + 120)) \
		pgbench -n -M prepared -c "$w7_producers" -j 1 -T "$duration" \
		-D k=0 -D t0="$t0" -D nprod="$w7_producers" -D period="$w7_period" \
		-D "batch=$fleet_batch" -D "msgs=$fleet_msgs" \
		-h "$sock" -p "$port" -U postgres -f "bench/workloads/${system}_w7_producer.sql" "$db" >"$logs/$tag.producers.out" 2>&1 || rc=$?
	wait "$sampler_pid" 2>/dev/null || true
	sampler_pid=""
	ct1=$(date +%s.%N)
	backends_gone bench_fleet_producer bench_sampler
	server_cpu >"$c1"
	if [ -n "$hold_pid" ]; then
		wait "$hold_pid" 2>/dev/null || true
		hold_pid=""
		hs=$(awk -F'|' '$1 == "hold_start" { print $3 }' "$logs/$tag.hold")
		he=$(awk -F'|' '$1 == "hold_end" { print $2 }' "$logs/$tag.hold")
		[ -n "$hs" ] && [ -n "$he" ] || { notes+=("XID HOLD FAILED: $(tr '\n' ' ' <"$logs/$tag.hold" | tr -d ',"')"); hs=0 he=0; }
	fi
	wait "$workers" || rc=$?

	read -r held stray <<<"$(fleet_held "$system" "$k" "$batch")"
	harness=$(fleet_finish "$system")
	mx1=$(next_multixact)
	cpu=$(cpu_seconds "$c0" "$c1")
	act=$(q bench_meta "SELECT coalesce(round(avg(active), 1), 0), coalesce(round(avg(busy), 1), 0), count(*) FROM activity" | tr '|' ' ')

	local rate enq p50 p95 p99 v50 v99 backlog_end peak n windows minwin hold_p99 drain e50 e99
	read -r rate enq p50 p95 p99 v50 v99 backlog_end peak n windows minwin hold_p99 drain e50 e99 \
		<<<"$(fleet_stats "$system" "$t0" "$hs" "$he")"
	local active busy samples
	read -r active busy samples <<<"$act"

	notes+=("offered=$(awk -v p="$w7_period" 'BEGIN { printf "%.0f", 128 / p }')" "enq_rate=$enq" "claim_p99_ms=$p99"
		"vis_p50_ms=$v50" "vis_p99_ms=$v99" "enq_tx_p50_ms=$e50" "enq_tx_p99_ms=$e99"
		"backlog_end=$backlog_end" "backlog_peak=$peak"
		"mxid_per_job=$(awk -v a="$mx0" -v b="$mx1" -v n="$n" 'BEGIN { printf "%.3f", (n > 0 ? (b - a) / n : 0) }')"
		"active=$active" "busy=$busy" "samples=$samples"
		"cpu_cores=$(awk -v c="$cpu" -v a="$ct0" -v b="$ct1" 'BEGIN { printf "%.2f", c / (b - a) }')"
		"cpu_ms_per_job=$(awk -v c="$cpu" -v r="$rate" -v a="$ct0" -v b="$ct1" 'BEGIN { printf "%.3f", (r > 0 ? c * 1000 / (r * (b - a)) : 0) }')"
		"finished=$n" "held=$held" "harness_drained=$harness")
	if [ "$mode" = w7h ]; then
		notes+=("windows=$windows" "min_window=$minwin"
			"min_window_share=$(awk -v m="$minwin" -v p="$w7_period" 'BEGIN { printf "%.2f", m * p / 128 }')"
			"hold_p99_ms=$hold_p99" "drain_s=$drain"
			"hold=$(awk -v t0="$t0" -v a="$hs" -v b="$he" 'BEGIN { printf "%.1f-%.1f", a - t0, b - t0 }')s")
	fi
	[ "$n" -gt 0 ] 2>/dev/null || notes+=("PGBENCH FAILED: no job finished")
	if [ "$rc" != 0 ] || grep -qiE "error|aborted" "$logs/$tag.workers.out" "$logs/$tag.producers.out"; then
		notes+=("PGBENCH FAILED rc=$rc: $(grep -hiE "error|aborted" "$logs/$tag.workers.out" "$logs/$tag.producers.out" | head -n 1 | tr -d ',"')")
	fi
	[ "$stray" = 0 ] || notes+=("EXACTLY-ONCE VIOLATED: $stray of $held claimed jobs no worker's last call holds")
	verdict=$(verify_once "$system" true 0)
	ids=$(fleet_ids_check "$system")
	[ -z "$ids" ] || verdict=$([ "$verdict" = ok ] && echo "$ids" || echo "$verdict; $ids")
	if [ "$verdict" = ok ]; then notes+=("exactly-once ok"); else notes+=("EXACTLY-ONCE VIOLATED: $verdict"); fi

	joined=$(printf '%s; ' "${notes[@]}" | sed 's/; $//; s/[",]/ /g')
	echo "$variant,$workload,$k,$round,$rate,$p50,$p95,\"$joined\"" >>"$csv"
	printf '%8s jobs/s  claim p50 %7s  p99 %7s ms  %s\n' "$rate" "$p50" "$p99" "$joined"
}

# shellcheck shell=bash disable=SC2154  # q, qf, fill_chunk and have_pgq come from bench/run.sh
# bench/lib/systems.sh — what each system under test needs: its database,
# the refill of its queue to a workload's starting depth, counters read
# before and after a measurement, and the exactly-once check after a run.
#
# Sourced by bench/run.sh, which defines q (run SQL in a database and print
# the bare result) and the settings (fill_chunk).

# system_db SYSTEM: the database a system lives in.
system_db() {
	case $1 in
	pqrun) echo bench_pqrun ;;
	baseline) echo bench_baseline ;;
	pgq) echo bench_pgq ;;
	pgmq) echo bench_pgmq ;;
	ceiling) echo bench_l0 ;;
	esac
}

# setup_databases: create the databases and load each system's schema.
setup_databases() {
	local db
	for db in bench_pqrun bench_baseline bench_pgq bench_pgmq bench_l0 bench_meta; do
		q postgres "CREATE DATABASE $db" >/dev/null
	done
	q bench_pqrun "CREATE EXTENSION pqrun; CREATE SCHEMA bench;
		CREATE TABLE bench.l1 (id bigint PRIMARY KEY, lat_us bigint NOT NULL, returned_at timestamptz NOT NULL);
		CREATE TABLE bench.l1_commits (id bigint PRIMARY KEY);
		CREATE TABLE bench.w7_batches (ids bigint[] NOT NULL)" >/dev/null
	# Nobody LISTENs here (consumers long-poll) and the baseline sends no
	# NOTIFY either; BENCH_PQRUN_NOTIFY=on measures the default instead.
	q postgres "ALTER DATABASE bench_pqrun SET pqrun.notify = ${BENCH_PQRUN_NOTIFY:-off}" >/dev/null
	qf bench_baseline bench/lib/baseline.sql
	# W7's producers log the ids of each batch they enqueue, in the same
	# transaction (bench/lib/fleet.sh); bench_pgmq's log comes with its schema.
	q bench_baseline "CREATE SCHEMA bench; CREATE TABLE bench.w7_batches (ids bigint[] NOT NULL)" >/dev/null
	qf bench_pgmq bench/lib/pgmq_like.sql
	[ "${have_pgq:-1}" = 1 ] && qf bench_pgq bench/lib/pgq.sql
	q bench_l0 "CREATE SCHEMA l0;
		CREATE TABLE l0.counters (id int PRIMARY KEY, n bigint NOT NULL DEFAULT 0);
		INSERT INTO l0.counters (id) SELECT generate_series(1, 100000);" >/dev/null
	qf bench_meta bench/lib/meta.sql
}

# refill SYSTEM DEPTH CLIENTS KIND: empty the system's queue and give it
# DEPTH ready jobs (KIND batch: PgQ ticks every 100 events, one queue per
# client), then VACUUM ANALYZE and CHECKPOINT so each run starts alike.
# Fills commit asynchronously: they are not what is measured.
refill() {
	local system=$1 depth=$2 clients=$3 kind=$4 db
	db=$(system_db "$system")
	case $system in
	pqrun)
		# DROP/CREATE EXTENSION is the API's own way to start from nothing.
		q "$db" "DROP EXTENSION pqrun; CREATE EXTENSION pqrun; TRUNCATE bench.l1, bench.l1_commits, bench.w7_batches" >/dev/null
		[ "$depth" -gt 0 ] && q "$db" "SET synchronous_commit = off;
			DO \$\$
			BEGIN
				FOR c IN 0 .. ($depth - 1) / $fill_chunk LOOP
					PERFORM count(*) FROM pqrun.enqueue_batch((
						SELECT jsonb_agg(jsonb_build_object('job_type', 'job', 'payload', jsonb_build_object('n', i)))
						  FROM generate_series(c * $fill_chunk + 1, least((c + 1) * $fill_chunk, $depth)) AS i));
					COMMIT;
				END LOOP;
			END \$\$" >/dev/null
		;;
	baseline)
		q "$db" "TRUNCATE base.jobs, bench.w7_batches RESTART IDENTITY; SET synchronous_commit = off;
			INSERT INTO base.jobs (job_type, payload)
			SELECT 'job', jsonb_build_object('n', i) FROM generate_series(1, $depth) AS i" >/dev/null
		;;
	pgq)
		if [ "$kind" = enqueue ]; then
			q "$db" "CALL bench.pgq_reset_enqueue()" >/dev/null
		else
			q "$db" "SET synchronous_commit = off; CALL bench.pgq_refill($clients, $depth, 100)" >/dev/null
		fi
		;;
	pgmq)
		# pgmq's purge_queue empties a queue with TRUNCATE too; the archive
		# goes with it here, and message ids start again at 1.
		q "$db" "TRUNCATE pgmq.q_jobs, pgmq.a_jobs, bench.w7_batches RESTART IDENTITY" >/dev/null
		;;
	ceiling) ;;
	esac
	q "$db" "VACUUM ANALYZE" >/dev/null
	q "$db" "CHECKPOINT" >/dev/null
}

# counters SYSTEM: "done ready total last_done_epoch" (jobs finished, jobs
# still runnable, all jobs, server time of the last finish).
counters() {
	local db
	db=$(system_db "$1")
	case $1 in
	pqrun) q "$db" "SELECT count(*) FILTER (WHERE status = 'DONE'), count(*) FILTER (WHERE status = 'READY'), count(*),
		coalesce(extract(epoch FROM max(finished_at) FILTER (WHERE status = 'DONE')), 0) FROM pqrun.jobs" ;;
	baseline) q "$db" "SELECT count(*) FILTER (WHERE status = 'DONE'), count(*) FILTER (WHERE status = 'READY'), count(*),
		coalesce(extract(epoch FROM max(finished_at)), 0) FROM base.jobs" ;;
	pgq) q "$db" "SELECT coalesce(sum(n), 0),
		coalesce((SELECT sum(bench.pgq_event_count(queue_name)) FROM pgq.queue), 0) - coalesce(sum(n), 0),
		coalesce((SELECT sum(bench.pgq_event_count(queue_name)) FROM pgq.queue), 0),
		coalesce(extract(epoch FROM max(done_at)), 0) FROM bench.pgq_batches" ;;
	pgmq) q "$db" "SELECT (SELECT count(*) FROM pgmq.a_jobs), (SELECT count(*) FROM pgmq.q_jobs WHERE read_ct = 0),
		(SELECT count(*) FROM pgmq.a_jobs) + (SELECT count(*) FROM pgmq.q_jobs),
		coalesce((SELECT extract(epoch FROM max(archived_at)) FROM pgmq.a_jobs), 0)" ;;
	ceiling) echo "0 0 0 0" ;;
	esac | tr '|' ' '
}

# done_count SYSTEM: jobs finished so far (for the per-window samplers).
done_count() {
	case $1 in
	pqrun) q bench_pqrun "SELECT count(*) FROM pqrun.jobs WHERE status = 'DONE'" ;;
	baseline) q bench_baseline "SELECT count(*) FROM base.jobs WHERE status = 'DONE'" ;;
	esac
}

# verify_once SYSTEM DRAINED [HELD]: exactly-once after a run. Up to HELD
# jobs may be READY again after one attempt that ended orphaned: what
# finish-and-claim clients held when the run ended them (orphan rescue may
# take them back before the run finishes them). Prints "ok" or what is
# wrong: a job finished with more than one attempt, a job with other than
# one attempt on record, a job left RUNNING, counts that do not add up; for
# PgQ, overlapping or non-contiguous batches, or a drained queue whose
# batches do not add up to the events inserted; for pgmq-like, an archived
# message read other than once, or messages left in a drained queue.
verify_once() {
	local system=$1 drained=$2 held=${3:-0} db
	db=$(system_db "$system")
	case $system in
	pqrun) q "$db" "SELECT concat_ws('; ',
		CASE WHEN r.twice > 0 THEN r.twice || ' DONE jobs with attempts <> 1' END,
		CASE WHEN a.multi > 0 THEN a.multi || ' jobs with <> 1 attempt rows' END,
		CASE WHEN a.orphaned > $held THEN a.orphaned || ' READY jobs whose one attempt was orphaned' END,
		CASE WHEN a.other - least(a.orphaned, $held) > 0
		     THEN a.other - least(a.orphaned, $held) || ' attempts not ending done' END,
		CASE WHEN a.rows_ - least(a.orphaned, $held) <> r.done
		     THEN 'attempt rows ' || a.rows_ || ' <> DONE jobs ' || r.done END,
		CASE WHEN r.running > 0 THEN r.running || ' jobs left RUNNING' END,
		CASE WHEN r.done + r.ready <> r.total THEN 'done ' || r.done || ' + ready ' || r.ready || ' <> total ' || r.total END)
		FROM (SELECT count(*) FILTER (WHERE status = 'DONE' AND attempts <> 1) AS twice,
		             count(*) FILTER (WHERE status = 'RUNNING') AS running,
		             count(*) FILTER (WHERE status = 'DONE') AS done,
		             count(*) FILTER (WHERE status = 'READY') AS ready, count(*) AS total FROM pqrun.jobs) r,
		     (SELECT count(*) FILTER (WHERE n <> 1) AS multi, coalesce(sum(other), 0) AS other,
		             coalesce(sum(n), 0) AS rows_,
		             count(*) FILTER (WHERE n = 1 AND other = 1 AND last_outcome = 'orphaned' AND status = 'READY') AS orphaned
		        FROM (SELECT a.job_id, count(*) AS n, count(*) FILTER (WHERE a.outcome IS DISTINCT FROM 'done') AS other,
		                     max(a.outcome) AS last_outcome, max(j.status::text) AS status
		                FROM pqrun.job_attempts a JOIN pqrun.jobs j ON j.id = a.job_id GROUP BY a.job_id) g) a" ;;
	baseline) q "$db" "SELECT concat_ws('; ',
		CASE WHEN twice > 0 THEN twice || ' DONE jobs with attempts <> 1' END,
		CASE WHEN running > 0 THEN running || ' jobs left RUNNING' END,
		CASE WHEN done + ready <> total THEN 'done ' || done || ' + ready ' || ready || ' <> total ' || total END)
		FROM (SELECT count(*) FILTER (WHERE status = 'DONE' AND attempts <> 1) AS twice,
		             count(*) FILTER (WHERE status = 'RUNNING') AS running,
		             count(*) FILTER (WHERE status = 'DONE') AS done,
		             count(*) FILTER (WHERE status = 'READY') AS ready, count(*) AS total FROM base.jobs) s" ;;
	pgq) q "$db" "SELECT concat_ws('; ',
		CASE WHEN overlap > 0 THEN overlap || ' overlapping batches' END,
		CASE WHEN gaps > 0 THEN gaps || ' batches with gaps' END,
		CASE WHEN consumed > inserted OR ($drained AND consumed <> inserted)
		     THEN 'consumed ' || consumed || ' of ' || inserted || ' events' END)
		FROM (SELECT (SELECT count(*) FROM bench.pgq_batches a JOIN bench.pgq_batches b
		               ON a.queue = b.queue AND a.batch_id < b.batch_id AND a.min_id <= b.max_id AND b.min_id <= a.max_id) AS overlap,
		             (SELECT count(*) FROM bench.pgq_batches WHERE n > 0 AND n <> max_id - min_id + 1) AS gaps,
		             (SELECT coalesce(sum(n), 0) FROM bench.pgq_batches) AS consumed,
		             (SELECT coalesce(sum(bench.pgq_event_count(queue_name)), 0) FROM pgq.queue) AS inserted) s" ;;
	pgmq) q "$db" "SELECT concat_ws('; ',
		CASE WHEN twice > 0 THEN twice || ' archived messages read <> 1 times' END,
		CASE WHEN left_ > 0 AND $drained THEN left_ || ' messages left in the queue' END,
		CASE WHEN read_ > $held THEN read_ || ' messages read and not archived' END)
		FROM (SELECT (SELECT count(*) FROM pgmq.a_jobs WHERE read_ct <> 1) AS twice,
		             (SELECT count(*) FROM pgmq.q_jobs) AS left_,
		             (SELECT count(*) FROM pgmq.q_jobs WHERE read_ct > 0) AS read_) s" ;;
	*) echo "" ;;
	esac | sed 's/^$/ok/'
}

# table_sizes SYSTEM: "table=heap+indexes" for the queue's tables, in kB.
table_sizes() {
	local schema db
	db=$(system_db "$1")
	case $1 in pqrun) schema=pqrun ;; baseline) schema=base ;; *) return ;; esac
	q "$db" "SELECT string_agg(format('%s=%s+%skB', relname, pg_table_size(oid) / 1024, pg_indexes_size(oid) / 1024), ' ' ORDER BY relname)
		FROM pg_class WHERE relnamespace = '$schema'::regnamespace AND relkind = 'r'"
}

# dead_tuples SYSTEM: dead tuples of the queue's tables (cumulative stats).
dead_tuples() {
	local schema db
	db=$(system_db "$1")
	case $1 in pqrun) schema=pqrun ;; baseline) schema=base ;; *) return ;; esac
	q "$db" "SELECT coalesce(sum(n_dead_tup), 0) FROM pg_stat_user_tables WHERE schemaname = '$schema'"
}

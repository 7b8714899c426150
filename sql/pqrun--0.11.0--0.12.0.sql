/* sql/pqrun--0.11.0--0.12.0.sql — ALTER EXTENSION pqrun UPDATE from 0.11.0.
 *
 * 0.12.0 partitions pqrun.job_done by finish time (README, "History"): the
 * workers make a partition per pqrun.history_interval ahead of time and
 * apply retention by dropping whole partitions instead of deleting rows.
 *
 * The finished jobs there are stay where they are: the old table becomes
 * the partition of everything that finished before this update
 * (job_done_before_0_12, no longer a member of the extension, like every
 * partition the workers make), and goes as a whole when retention reaches
 * the update's time. Its primary key and index of FAILED jobs stay; the
 * new table has neither (each partition has its own indexes, see
 * pqrun.sql).
 */
\echo Use "ALTER EXTENSION pqrun UPDATE TO '0.12.0'" to load this file. \quit

ALTER TABLE pqrun.job_done RENAME TO job_done_before_0_12;
ALTER INDEX pqrun.job_done_pkey RENAME TO job_done_before_0_12_pkey;
ALTER INDEX pqrun.job_done_failed RENAME TO job_done_before_0_12_failed;
DROP INDEX pqrun.job_done_finished;
/* PostgreSQL 18 records NOT NULL as constraints, named after the table and
 * column unless the schema has the name already: the new table's must be
 * those of a new install. */
DO $$
DECLARE
	c name;
BEGIN
	FOR c IN SELECT conname FROM pg_catalog.pg_constraint
	          WHERE conrelid OPERATOR(pg_catalog.=) 'pqrun.job_done_before_0_12'::pg_catalog.regclass
	            AND contype OPERATOR(pg_catalog.=) 'n' LOOP
		EXECUTE pg_catalog.format('ALTER TABLE pqrun.job_done_before_0_12 RENAME CONSTRAINT %I TO %I',
		                          c, pg_catalog.replace(c, 'job_done_', 'job_done_before_0_12_'));
	END LOOP;
END $$;
ALTER EXTENSION pqrun DROP TABLE pqrun.job_done_before_0_12;

CREATE TABLE pqrun.job_done (
	id              bigint      NOT NULL,
	status          pqrun.job_status NOT NULL,
	priority        int         NOT NULL,
	attempts        int         NOT NULL,
	max_attempts    int         NOT NULL,
	timeout_seconds int,
	duration_ms     int,
	run_after       timestamptz NOT NULL,
	locked_at       timestamptz,
	finished_at     timestamptz NOT NULL,
	created_at      timestamptz NOT NULL,
	updated_at      timestamptz NOT NULL,
	lease_token     uuid,
	queue           text        NOT NULL,
	job_type        text        NOT NULL,
	locked_by       text,
	dedupe_key      text,
	fifo_key        text,
	depends_on      bigint[],
	outcome         text,
	last_error      text,
	result          jsonb,
	payload         jsonb       NOT NULL,
	progress        jsonb,
	snoozes         int         NOT NULL DEFAULT 0,
	concurrency_key text,
	rate_weight     int,
	CONSTRAINT job_done_status_check CHECK (status IN ('DONE', 'FAILED', 'CANCELLED'))
) PARTITION BY RANGE (finished_at);
CREATE TABLE pqrun.job_done_default PARTITION OF pqrun.job_done DEFAULT;
CREATE INDEX job_done_default_id ON pqrun.job_done_default (id);
CREATE INDEX job_done_default_finished ON pqrun.job_done_default (finished_at);
SELECT pg_catalog.pg_extension_config_dump('pqrun.job_done_default', '');
REVOKE ALL ON pqrun.job_done, pqrun.job_done_default FROM PUBLIC;

/* The views read the renamed table until they are made again. */
CREATE OR REPLACE VIEW pqrun.jobs AS
	SELECT id, queue, job_type, payload, status, priority, attempts, max_attempts,
	       run_after, timeout_seconds, locked_at, locked_by, lease_token, dedupe_key,
	       fifo_key, depends_on, last_error,
	       NULL::timestamptz AS finished_at, NULL::int AS duration_ms, NULL::jsonb AS result,
	       created_at, updated_at, progress, snoozes, concurrency_key, rate_weight
	  FROM pqrun.job_live
	UNION ALL
	SELECT id, queue, job_type, payload, status, priority, attempts, max_attempts,
	       run_after, timeout_seconds, locked_at, locked_by, lease_token, dedupe_key,
	       fifo_key, depends_on, last_error,
	       finished_at, duration_ms, result,
	       created_at, updated_at, progress, snoozes, concurrency_key, rate_weight
	  FROM pqrun.job_done;
CREATE OR REPLACE VIEW pqrun.job_attempts AS
	SELECT job_id, attempt, worker_id, started_at, finished_at, outcome, error
	  FROM pqrun.attempt_log
	UNION ALL
	SELECT id, attempts, locked_by, locked_at, NULL::timestamptz, NULL::text, NULL::text
	  FROM pqrun.job_live
	 WHERE status OPERATOR(pg_catalog.=) 'RUNNING'
	UNION ALL
	SELECT id, attempts, locked_by, locked_at, finished_at, outcome,
	       CASE WHEN outcome OPERATOR(pg_catalog.=) 'done' THEN NULL ELSE last_error END
	  FROM pqrun.job_done
	 WHERE outcome IS NOT NULL;
CREATE OR REPLACE VIEW pqrun.workers AS
	SELECT worker_id, pg_catalog.max(seen) AS last_seen, pg_catalog.sum(running)::int AS running_jobs
	  FROM (SELECT locked_by, GREATEST(locked_at, heartbeat_at), 1 FROM pqrun.job_live
	         WHERE status OPERATOR(pg_catalog.=) 'RUNNING'
	        UNION ALL
	        SELECT locked_by, locked_at, 0 FROM pqrun.job_done
	         WHERE finished_at OPERATOR(pg_catalog.>) (pg_catalog.now() OPERATOR(pg_catalog.-) '1 hour'::interval)
	        UNION ALL
	        SELECT worker_id, started_at, 0 FROM pqrun.attempt_log
	         WHERE finished_at OPERATOR(pg_catalog.>) (pg_catalog.now() OPERATOR(pg_catalog.-) '1 hour'::interval)
	       ) AS seen_by(worker_id, seen, running)
	 WHERE worker_id IS NOT NULL
	   AND seen OPERATOR(pg_catalog.>) (pg_catalog.now() OPERATOR(pg_catalog.-) '1 hour'::interval)
	 GROUP BY worker_id;
CREATE OR REPLACE VIEW pqrun.health AS
	SELECT h.pid AS horizon_pid, h.usename AS horizon_user, h.state AS horizon_state,
	       h.xact_age AS horizon_xact_age, h.xact_start AS horizon_xact_start,
	       h.query_start AS horizon_query_start,
	       (SELECT n_dead_tup FROM pg_catalog.pg_stat_user_tables
	         WHERE relid OPERATOR(pg_catalog.=) 'pqrun.job_live'::regclass) AS job_live_dead_tuples,
	       (SELECT n_live_tup FROM pg_catalog.pg_stat_user_tables
	         WHERE relid OPERATOR(pg_catalog.=) 'pqrun.job_live'::regclass) AS job_live_live_tuples,
	       (SELECT pg_catalog.sum(n_dead_tup)::bigint FROM pg_catalog.pg_stat_user_tables
	         WHERE relid OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT relid FROM pg_catalog.pg_partition_tree('pqrun.job_done'))))
	         AS job_done_dead_tuples,
	       (SELECT pg_catalog.sum(n_live_tup)::bigint FROM pg_catalog.pg_stat_user_tables
	         WHERE relid OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT relid FROM pg_catalog.pg_partition_tree('pqrun.job_done'))))
	         AS job_done_live_tuples
	  FROM (SELECT 1) AS one
	  LEFT JOIN LATERAL (
	        SELECT pid, usename, state, xact_start, query_start,
	               GREATEST(pg_catalog.age(backend_xmin), pg_catalog.age(backend_xid)) AS xact_age
	          FROM pg_catalog.pg_stat_activity
	         WHERE (backend_xmin IS NOT NULL OR backend_xid IS NOT NULL)
	           AND pid OPERATOR(pg_catalog.<>) pg_catalog.pg_backend_pid()
	         ORDER BY 6 DESC NULLS LAST LIMIT 1) AS h ON true;
/* The old rows, as they are: a CHECK constraint first, so that ATTACH
 * finds them inside the bound without a second scan. An empty old table
 * simply goes. */
DO $$
BEGIN
	IF EXISTS (SELECT FROM pqrun.job_done_before_0_12) THEN
		EXECUTE pg_catalog.format('ALTER TABLE pqrun.job_done_before_0_12 ADD CONSTRAINT job_done_before_0_12_bound'
		                          ' CHECK (finished_at < %L::timestamptz)', pg_catalog.now());
		EXECUTE pg_catalog.format('ALTER TABLE pqrun.job_done ATTACH PARTITION pqrun.job_done_before_0_12'
		                          ' FOR VALUES FROM (MINVALUE) TO (%L)', pg_catalog.now());
		ALTER TABLE pqrun.job_done_before_0_12 DROP CONSTRAINT job_done_before_0_12_bound;
	ELSE
		DROP TABLE pqrun.job_done_before_0_12;
	END IF;
END $$;

/* job_done's partitions by range and their bounds (MINVALUE and MAXVALUE as
 * -infinity and infinity), as pg_get_expr shows them in UTC. */
CREATE FUNCTION pqrun._history_partitions()
RETURNS TABLE (part regclass, lo timestamptz, hi timestamptz)
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp SET timezone = 'UTC' SET datestyle = 'ISO, YMD'
AS $$
	SELECT i.inhrelid::regclass,
	       CASE WHEN m[1] = 'MINVALUE' THEN '-infinity' ELSE btrim(m[1], '''') END::timestamptz,
	       CASE WHEN m[2] = 'MAXVALUE' THEN 'infinity' ELSE btrim(m[2], '''') END::timestamptz
	  FROM pg_inherits i, pg_class c,
	       regexp_match(pg_get_expr(c.relpartbound, c.oid), '^FOR VALUES FROM \((.*)\) TO \((.*)\)$') AS m
	 WHERE i.inhparent = 'pqrun.job_done'::regclass AND c.oid = i.inhrelid AND m IS NOT NULL
	 ORDER BY 2
$$;
REVOKE ALL ON FUNCTION pqrun._history_partitions() FROM PUBLIC;

/* History partitions (README, "History"): the part of a maintenance round
 * that changes job_done's partitions. Makes those that the next `ahead`
 * intervals of `step` after the one holding `round_at` need and no partition
 * covers yet, with what job_done_default holds of their time; and drops
 * those that end at or before `drop_before` (NULL: none), keeping in
 * job_done_default their FAILED jobs that finished at or after
 * `keep_failed_from` (NULL: none). Partitions start at multiples of `step`
 * since 1970 (UTC) and are named after their start; none is made while
 * job_done has none and there is no job at all. A partition that cannot be
 * made or dropped now (a name taken) is left for a later round, and so is
 * the rest of the round after a lock not granted within lock_timeout:
 * finishes wait for what the round has locked, and a session holding what
 * the round waits for would deadlock with it once the round's waits added
 * up to deadlock_timeout. Answers the jobs dropped, per queue, job type
 * and status. */
CREATE FUNCTION pqrun._history_round(round_at timestamptz, step interval, ahead int,
                                     drop_before timestamptz, keep_failed_from timestamptz)
RETURNS TABLE (queue text, job_type text, status text, jobs bigint)
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp SET timezone = 'UTC' SET lock_timeout = '100ms'
AS $$
DECLARE
	seconds float8 := extract(epoch FROM step);
	cols text;
	s timestamptz;
	e timestamptz;
	covered timestamptz;
	locked boolean;
	made text;
	dropped record;
	counted jsonb;
	waited boolean := false;
BEGIN
	SELECT string_agg(quote_ident(attname), ', ' ORDER BY attnum) INTO cols
	  FROM pg_attribute WHERE attrelid = 'pqrun.job_done'::regclass AND attnum > 0 AND NOT attisdropped;
	/* None before the first job: a restore makes job_done's partitions (as
	 * pg_dump saw them) after CREATE EXTENSION and before it copies any
	 * job, and ours would take their names and times. */
	IF NOT EXISTS (SELECT FROM pqrun._history_partitions()) THEN
		BEGIN
			/* Before reading the default partition: its lock, held to the
			 * end, would hold off another round's ATTACH that this one then
			 * waits for (see below). */
			LOCK TABLE pqrun.job_done IN SHARE ROW EXCLUSIVE MODE;
			IF NOT EXISTS (SELECT FROM pqrun.job_done_default) AND NOT EXISTS (SELECT FROM pqrun.job_live) THEN
				ahead := -1;
			END IF;
		EXCEPTION WHEN lock_not_available THEN
			RETURN;
		END;
	END IF;

	FOR k IN 0..ahead LOOP
		EXIT WHEN waited;
		BEGIN
			locked := false;
			LOOP
				s := to_timestamp(floor(extract(epoch FROM round_at) / seconds) * seconds) + k * step;
				e := s + step;
				/* Past the partitions that cover s, short of the next one. */
				LOOP
					covered := (SELECT max(p.hi) FROM pqrun._history_partitions() AS p WHERE p.lo <= s AND p.hi > s);
					EXIT WHEN covered IS NULL;
					s := covered;
				END LOOP;
				e := LEAST(e, (SELECT min(p.lo) FROM pqrun._history_partitions() AS p WHERE p.lo > s));
				EXIT WHEN s >= e OR locked;
				/* Then again under a lock that holds off other rounds (which
				 * may have made it meanwhile) and every finish: one routed
				 * before the ATTACH to the default partition would meet its
				 * new constraint after it (23514). Held until the round
				 * commits. */
				LOCK TABLE pqrun.job_done IN SHARE ROW EXCLUSIVE MODE;
				locked := true;
			END LOOP;
			CONTINUE WHEN s >= e;
			made := 'job_done_' || to_char(s, 'YYYYMMDD_HH24MISS');
			EXECUTE format('CREATE TABLE pqrun.%I (LIKE pqrun.job_done INCLUDING DEFAULTS INCLUDING CONSTRAINTS)', made);
			EXECUTE format('CREATE INDEX ON pqrun.%I (id)', made);
			EXECUTE format('CREATE INDEX ON pqrun.%I (finished_at) WHERE status = ''FAILED''', made);
			/* ATTACH refuses while the default partition holds rows of the
			 * new one: they move, out of sight of every query meanwhile
			 * (one planned without the new partition and run with a
			 * snapshot after the move would miss them). */
			IF EXISTS (SELECT FROM pqrun.job_done_default WHERE finished_at >= s AND finished_at < e) THEN
				LOCK TABLE pqrun.job_done IN ACCESS EXCLUSIVE MODE;
			END IF;
			EXECUTE format('WITH moved AS (DELETE FROM pqrun.job_done_default WHERE finished_at >= $1 AND finished_at < $2'
			               ' RETURNING %s) INSERT INTO pqrun.%I (%s) SELECT %s FROM moved', cols, made, cols, cols) USING s, e;
			EXECUTE format('ALTER TABLE pqrun.job_done ATTACH PARTITION pqrun.%I FOR VALUES FROM (%L) TO (%L)', made, s, e);
		EXCEPTION
			WHEN lock_not_available THEN waited := true;
			WHEN OTHERS THEN RAISE WARNING 'pqrun: partition pqrun.% of pqrun.job_done not made: %', made, SQLERRM;
		END;
	END LOOP;

	FOR dropped IN SELECT p.part FROM pqrun._history_partitions() AS p WHERE p.hi <= drop_before LOOP
		EXIT WHEN waited;
		BEGIN
			/* No purge or retry may change what is counted before it goes. */
			EXECUTE format('LOCK TABLE %s IN SHARE MODE', dropped.part);
			EXECUTE format('SELECT jsonb_agg(g) FROM (SELECT queue, job_type, status::text AS status, count(*) AS jobs'
			               '  FROM %s WHERE status <> ''FAILED'' OR $1 IS NULL OR finished_at < $1 GROUP BY 1, 2, 3) AS g',
			               dropped.part) INTO counted USING keep_failed_from;
			EXECUTE format('DELETE FROM pqrun.attempt_log a USING %s d WHERE a.job_id = d.id'
			               '   AND (d.status <> ''FAILED'' OR $1 IS NULL OR d.finished_at < $1)', dropped.part) USING keep_failed_from;
			/* The one moment finishes wait: from here to the round's commit,
			 * with the FAILED jobs kept being copied. */
			LOCK TABLE pqrun.job_done IN ACCESS EXCLUSIVE MODE;
			EXECUTE format('ALTER TABLE pqrun.job_done DETACH PARTITION %s', dropped.part);
			IF keep_failed_from IS NOT NULL THEN
				EXECUTE format('INSERT INTO pqrun.job_done_default (%s) SELECT %s FROM %s'
				               ' WHERE status = ''FAILED'' AND finished_at >= $1', cols, cols, dropped.part) USING keep_failed_from;
			END IF;
			EXECUTE format('DROP TABLE %s', dropped.part);
			RETURN QUERY SELECT g.queue, g.job_type, g.status, g.jobs
			               FROM jsonb_to_recordset(coalesce(counted, '[]')) AS g(queue text, job_type text, status text, jobs bigint);
		EXCEPTION
			WHEN lock_not_available THEN waited := true;
			/* Another round dropped it first. */
			WHEN undefined_table OR invalid_table_definition THEN NULL;
			WHEN OTHERS THEN RAISE WARNING 'pqrun: partition % of pqrun.job_done not dropped: %', dropped.part, SQLERRM;
		END;
	END LOOP;
END $$;
REVOKE ALL ON FUNCTION pqrun._history_round(timestamptz, interval, int, timestamptz, timestamptz) FROM PUBLIC;


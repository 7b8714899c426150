/* History partitions (docs/operations.md, "History and retention"): the part of a maintenance round
 * that changes job_done's partitions. Makes those that the next `ahead`
 * intervals of `step` after the one holding `round_at` need and no partition
 * covers yet; and drops those that end at or before `drop_before` (NULL:
 * none), keeping in job_done_default their FAILED jobs that finished at or
 * after `keep_failed_from` (NULL: none). Partitions start at multiples of
 * `step` since 1970 (UTC) and are named after their start; none is made
 * while job_done has none and there is no job at all. A partition that
 * cannot be made or dropped now (a name taken) is left for a later round,
 * and so is the rest of the round after a lock not granted.
 *
 * Rows never move between partitions (0.17.0): what job_done_default holds
 * of a new partition's time (jobs that finished while no partition covered
 * it) stays there, and the partition starts just past the last of them. A
 * move took the rows out of sight of every snapshot taken before it: a
 * query planned after the ATTACH skips the default partition for that time,
 * and their copies in the new partition are newer than the snapshot.
 *
 * Locks (0.13.0): finishes wait for what the round holds of job_done, so
 * the round never waits for a lock while it holds one of job_done: a
 * session that read job_done and then finishes would wait for the round
 * while the round waited for it, and once its wait reached
 * deadlock_timeout, its finish failed with 40P01. Each partition is made
 * or dropped in a block of its own whose lock of job_done is waited for at
 * most lock_timeout (100 ms), and only while the round holds nothing of
 * job_done yet; every other lock is taken with NOWAIT, and a block that
 * fails gives back its locks. */
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
	whole timestamptz;
	last timestamptz;
	locked boolean;
	made text;
	dropped record;
	counted jsonb;
	waited boolean := false;
	/* The round holds a lock of job_done: from then on it never waits. */
	held boolean := false;
BEGIN
	SELECT string_agg(quote_ident(attname), ', ' ORDER BY attnum) INTO cols
	  FROM pg_attribute WHERE attrelid = 'pqrun.job_done'::regclass AND attnum > 0 AND NOT attisdropped;
	/* None before the first job: a restore makes job_done's partitions (as
	 * pg_dump saw them) after CREATE EXTENSION and before it copies any
	 * job, and ours would take their names and times. Read under a lock
	 * that holds off another round's ATTACH, given back with the block:
	 * its subtransaction is rolled back on purpose. */
	IF NOT EXISTS (SELECT FROM pqrun._history_partitions()) THEN
		BEGIN
			LOCK TABLE pqrun.job_done IN SHARE ROW EXCLUSIVE MODE;
			IF NOT EXISTS (SELECT FROM pqrun.job_done_default) AND NOT EXISTS (SELECT FROM pqrun.job_live) THEN
				ahead := -1;
			END IF;
			RAISE EXCEPTION USING ERRCODE = 'PQ000';
		EXCEPTION
			WHEN lock_not_available THEN RETURN;
			WHEN SQLSTATE 'PQ000' THEN NULL;
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
				whole := e;
				e := LEAST(e, (SELECT min(p.lo) FROM pqrun._history_partitions() AS p WHERE p.lo > s));
				/* Past what job_done_default holds of it; none in a gap
				 * before a partition, which only such rows leave. */
				last := (SELECT max(d.finished_at) FROM pqrun.job_done_default AS d WHERE d.finished_at >= s AND d.finished_at < e);
				IF last IS NOT NULL THEN
					s := CASE WHEN e < whole THEN e ELSE last + interval '1 microsecond' END;
				END IF;
				EXIT WHEN s >= e OR locked;
				/* Then again under a lock that holds off other rounds (which
				 * may have made it meanwhile) and every finish: one routed
				 * before the ATTACH to the default partition would meet its
				 * new constraint after it (23514). Held until the round
				 * commits. */
				EXECUTE format('LOCK TABLE pqrun.job_done IN SHARE ROW EXCLUSIVE MODE%s',
				               CASE WHEN held THEN ' NOWAIT' ELSE '' END);
				locked := true;
			END LOOP;
			CONTINUE WHEN s >= e;
			/* A partition that begins by now takes finishes as soon as it
			 * is attached: a query planned meanwhile without it, whose
			 * snapshot is taken after its plan (SPI's, in pqrun's
			 * functions), would miss the jobs finished there (0.21.0:
			 * "job does not exist" for a job just finished). Attached
			 * under ACCESS EXCLUSIVE, it is in every plan made after the
			 * round commits; one made ahead of its time is empty until
			 * long after. */
			IF s <= round_at THEN
				LOCK TABLE pqrun.job_done IN ACCESS EXCLUSIVE MODE NOWAIT;
			END IF;
			/* ATTACH also locks the default partition, whose constraint
			 * changes. */
			LOCK TABLE pqrun.job_done_default IN ACCESS EXCLUSIVE MODE NOWAIT;
			made := 'job_done_' || to_char(s, 'YYYYMMDD_HH24MISS')
			        || CASE WHEN date_trunc('second', s) <> s THEN to_char(s, '_US') ELSE '' END;
			EXECUTE format('CREATE TABLE pqrun.%I (LIKE pqrun.job_done INCLUDING DEFAULTS INCLUDING CONSTRAINTS)', made);
			EXECUTE format('CREATE INDEX ON pqrun.%I (id)', made);
			EXECUTE format('CREATE INDEX ON pqrun.%I (finished_at) WHERE status = ''FAILED''', made);
			EXECUTE format('ALTER TABLE pqrun.job_done ATTACH PARTITION pqrun.%I FOR VALUES FROM (%L) TO (%L)', made, s, e);
			held := true;
		EXCEPTION
			WHEN lock_not_available THEN waited := true;
			WHEN OTHERS THEN RAISE WARNING 'pqrun: partition pqrun.% of pqrun.job_done not made: %', made, SQLERRM;
		END;
	END LOOP;

	FOR dropped IN SELECT p.part FROM pqrun._history_partitions() AS p WHERE p.hi <= drop_before LOOP
		EXIT WHEN waited;
		BEGIN
			/* No purge or retry may change what is counted before it goes
			 * (finishes do not write to a partition that ended). */
			EXECUTE format('LOCK TABLE %s IN SHARE MODE%s', dropped.part, CASE WHEN held THEN ' NOWAIT' ELSE '' END);
			EXECUTE format('SELECT jsonb_agg(g) FROM (SELECT queue, job_type, status::text AS status, count(*) AS jobs'
			               '  FROM %s WHERE status <> ''FAILED'' OR $1 IS NULL OR finished_at < $1 GROUP BY 1, 2, 3) AS g',
			               dropped.part) INTO counted USING keep_failed_from;
			EXECUTE format('DELETE FROM pqrun.attempt_log a USING %s d WHERE a.job_id = d.id'
			               '   AND (d.status <> ''FAILED'' OR $1 IS NULL OR d.finished_at < $1)', dropped.part) USING keep_failed_from;
			/* The one moment finishes wait: from here to the round's commit,
			 * with the FAILED jobs kept being copied. DETACH also locks the
			 * partition and the default partition. */
			EXECUTE format('LOCK TABLE pqrun.job_done IN ACCESS EXCLUSIVE MODE%s', CASE WHEN held THEN ' NOWAIT' ELSE '' END);
			EXECUTE format('LOCK TABLE %s IN ACCESS EXCLUSIVE MODE NOWAIT', dropped.part);
			LOCK TABLE pqrun.job_done_default IN ACCESS EXCLUSIVE MODE NOWAIT;
			EXECUTE format('ALTER TABLE pqrun.job_done DETACH PARTITION %s', dropped.part);
			IF keep_failed_from IS NOT NULL THEN
				EXECUTE format('INSERT INTO pqrun.job_done_default (%s) SELECT %s FROM %s'
				               ' WHERE status = ''FAILED'' AND finished_at >= $1', cols, cols, dropped.part) USING keep_failed_from;
			END IF;
			EXECUTE format('DROP TABLE %s', dropped.part);
			held := true;
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

-- bench/lib/report.sql — the markdown report of a benchmark run, from table
-- results (the run's CSV) in database bench_meta. Figures are medians over
-- the rounds of each (system, workload, clients); every ratio compares
-- medians of the same run. Run with psql -qtA; prints markdown.
\set ON_ERROR_STOP on
SET client_min_messages = warning;
DROP SCHEMA IF EXISTS rep CASCADE;
CREATE SCHEMA rep;
SET search_path = rep, public;

CREATE VIEW rep.m AS
	SELECT system, workload, clients,
	       percentile_cont(0.5) WITHIN GROUP (ORDER BY jobs_per_s)::numeric AS rate,
	       percentile_cont(0.5) WITHIN GROUP (ORDER BY p50_ms)::numeric AS p50,
	       percentile_cont(0.5) WITHIN GROUP (ORDER BY p95_ms)::numeric AS p95,
	       count(*) AS rounds,
	       string_agg(notes, ' | ' ORDER BY round) AS notes
	  FROM results GROUP BY system, workload, clients;

-- rate of SYSTEM in WORKLOAD at CLIENTS (median over rounds)
CREATE FUNCTION rep.r(s text, w text, c int) RETURNS numeric LANGUAGE sql STABLE
AS $$ SELECT rate FROM m WHERE system = s AND workload = w AND clients = c $$;
-- a rate, formatted
CREATE FUNCTION rep.fr(x numeric) RETURNS text LANGUAGE sql IMMUTABLE
AS $$ SELECT CASE WHEN x IS NULL THEN '–' WHEN x >= 100 THEN round(x)::text ELSE round(x, 1)::text END $$;
-- a ratio a/b, formatted, with a check mark when a target is given
CREATE FUNCTION rep.fq(a numeric, b numeric, target numeric DEFAULT NULL) RETURNS text LANGUAGE sql IMMUTABLE
AS $$ SELECT CASE WHEN a IS NULL OR b IS NULL OR b = 0 THEN '–'
                  ELSE to_char(a / b, 'FM9990.00') || CASE WHEN target IS NULL THEN ''
                                                          WHEN a / b >= target THEN ' ✓' ELSE ' ✗' END END $$;
-- latency p50 / p95 of SYSTEM in WORKLOAD at CLIENTS
CREATE FUNCTION rep.fl(s text, w text, c int) RETURNS text LANGUAGE sql STABLE
AS $$ SELECT coalesce((SELECT to_char(p50, 'FM9990.00') || ' / ' || to_char(p95, 'FM9990.00')
                         FROM m WHERE system = s AND workload = w AND clients = c), '–') $$;
-- WORKLOAD / its W1 measured right after it (WORKLOAD || 'ref') at CLIENTS:
-- the median over rounds of the ratio within each round; NULL without refs
CREATE FUNCTION rep.paired(w text, c int) RETURNS numeric LANGUAGE sql STABLE
AS $$ SELECT (percentile_cont(0.5) WITHIN GROUP (ORDER BY a.jobs_per_s / nullif(b.jobs_per_s, 0)))::numeric
        FROM results a JOIN results b ON b.system = a.system AND b.clients = a.clients AND b.round = a.round
       WHERE a.system = 'pqrun' AND a.workload = w AND b.workload = w || 'ref' AND a.clients = c $$;
-- a ratio, formatted, with a check mark against TARGET
CREATE FUNCTION rep.fx(x numeric, target numeric) RETURNS text LANGUAGE sql IMMUTABLE
AS $$ SELECT CASE WHEN x IS NULL THEN '–' ELSE to_char(x, 'FM9990.00') || CASE WHEN x >= target THEN ' ✓' ELSE ' ✗' END END $$;
-- the table of WORKLOAD against its W1 right after (WORKLOAD || 'ref') and
-- the round's W1, one line of markdown per row, with its explanation
CREATE FUNCTION rep.paired_table(w text) RETURNS SETOF text LANGUAGE sql STABLE
AS $$
	SELECT line FROM (
		SELECT 0 AS clients, 1 AS ord, format('W1 right after: a W1 measured right after each %1$s (%1$sref), as its reference; '
		                                      '%1$s / W1 right after is the median of the ratios within each round.', w) AS line
		UNION ALL SELECT 0, 2, ''
		UNION ALL SELECT 0, 3, format('| clients | pqrun %1$s jobs/s | W1 right after jobs/s | %1$s / W1 right after (≥ 0.90) '
		                              '| %1$s / the round''s W1 | p50 / p95 ms | W1 right after p50 / p95 ms |', w)
		UNION ALL SELECT 0, 4, '|---:|---:|---:|---:|---:|---:|---:|'
		UNION ALL
		SELECT clients, 5, format('| %s | %s | %s | %s | %s | %s | %s |', clients,
		                          fr(r('pqrun', w, clients)), fr(r('pqrun', w || 'ref', clients)), fx(paired(w, clients), 0.90),
		                          fq(r('pqrun', w, clients), r('pqrun', 'W1', clients)),
		                          fl('pqrun', w, clients), fl('pqrun', w || 'ref', clients))
		  FROM (SELECT DISTINCT clients FROM results WHERE workload = w) c) t
	 ORDER BY ord, clients
$$;
-- a figure out of the notes ("name=value")
CREATE FUNCTION rep.note(notes text, name text) RETURNS text LANGUAGE sql IMMUTABLE
AS $$ SELECT substring(notes FROM name || '=([^;|]+)') $$;
-- the median over rounds of a numeric figure of the notes of SYSTEM in
-- WORKLOAD at CLIENTS
CREATE FUNCTION rep.nm(s text, w text, c int, name text) RETURNS numeric LANGUAGE sql STABLE
AS $$ SELECT (percentile_cont(0.5) WITHIN GROUP (ORDER BY note(notes, name)::numeric))::numeric
        FROM results WHERE system = s AND workload = w AND clients = c AND note(notes, name) ~ '^-?[0-9.]+$' $$;
-- a number, formatted with DIGITS decimals ('–' for none)
CREATE FUNCTION rep.fn(x numeric, digits int DEFAULT 1) RETURNS text LANGUAGE sql IMMUTABLE
AS $$ SELECT CASE WHEN x IS NULL THEN '–' ELSE round(x, digits)::text END $$;
-- the systems' names in the report
CREATE FUNCTION rep.sysname(s text) RETURNS text LANGUAGE sql IMMUTABLE
AS $$ SELECT CASE s WHEN 'pgmq' THEN 'pgmq-like' WHEN 'pgmq-read' THEN 'pgmq-like, read + sleep' ELSE s END $$;
-- the fleet figures of W7 / W7b<N> / W7h: one row per system, workload and K
CREATE VIEW rep.fleet AS
	SELECT system, workload, clients, CASE WHEN workload ~ '^W7b[0-9]+$' THEN substr(workload, 4)::int ELSE 1 END AS batch,
	       rate, p50, p95, nm(system, workload, clients, 'claim_p99_ms') AS p99,
	       nm(system, workload, clients, 'enq_rate') AS enq, nm(system, workload, clients, 'offered') AS offered,
	       nm(system, workload, clients, 'vis_p50_ms') AS v50, nm(system, workload, clients, 'vis_p99_ms') AS v99,
	       nm(system, workload, clients, 'backlog_end') AS backlog_end, nm(system, workload, clients, 'backlog_peak') AS peak,
	       nm(system, workload, clients, 'mxid_per_job') AS mxid, nm(system, workload, clients, 'active') AS active,
	       nm(system, workload, clients, 'busy') AS busy, nm(system, workload, clients, 'cpu_cores') AS cores,
	       nm(system, workload, clients, 'cpu_ms_per_job') AS cpu_ms, nm(system, workload, clients, 'min_window') AS min_window,
	       nm(system, workload, clients, 'hold_p99_ms') AS hold_p99, nm(system, workload, clients, 'drain_s') AS drain,
	       nm(system, workload, clients, 'enq_tx_p50_ms') AS e50, nm(system, workload, clients, 'enq_tx_p99_ms') AS e99,
	       (SELECT string_agg(note(x.notes, 'windows'), ' | ' ORDER BY round) FROM results x
	         WHERE x.system = m.system AND x.workload = m.workload AND x.clients = m.clients) AS windows,
	       CASE system WHEN 'pqrun' THEN 1 WHEN 'pgmq' THEN 2 WHEN 'pgmq-read' THEN 3 ELSE 4 END AS ord
	  FROM m WHERE workload ~ '^W7(b[0-9]+|h)?$';
-- a fleet figure (a column of rep.fleet, by name) of SYSTEM
CREATE FUNCTION rep.ff(s text, w text, c int, col text) RETURNS numeric LANGUAGE plpgsql STABLE
AS $$
DECLARE
	x numeric;
BEGIN
	EXECUTE format('SELECT %I FROM rep.fleet WHERE system = $1 AND workload = $2 AND clients = $3', col) INTO x USING s, w, c;
	RETURN x;
END $$;

SELECT count(*) FILTER (WHERE workload = 'L0') > 0 AS has_l0,
       count(*) FILTER (WHERE workload = 'L0floor') > 0 AND count(*) FILTER (WHERE workload = 'W1') > 0 AS has_floor,
       count(*) FILTER (WHERE workload = 'W1') > 0 AS has_w1,
       count(*) FILTER (WHERE workload = 'W1b') > 0 AS has_w1b,
       count(*) FILTER (WHERE workload = 'W1c') > 0 AS has_w1c,
       count(*) FILTER (WHERE workload = 'W1bc') > 0 AS has_w1bc,
       count(*) FILTER (WHERE workload = 'W1L') > 0 AS has_w1l,
       count(*) FILTER (WHERE workload = 'W1K') > 0 AS has_w1k,
       count(*) FILTER (WHERE workload = 'W2c') > 0 AS has_w2c,
       count(*) FILTER (WHERE workload = 'W2') > 0 AS has_w2,
       count(*) FILTER (WHERE workload = 'W3') > 0 AS has_w3,
       count(*) FILTER (WHERE workload = 'W3K') > 0 AS has_w3k,
       count(*) FILTER (WHERE workload IN ('W3Q', 'W3Qt')) > 0 AS has_w3q,
       count(*) FILTER (WHERE workload = 'W3KB') > 0 AS has_w3kb,
       count(*) FILTER (WHERE workload = 'W4') > 0 AS has_w4,
       count(*) FILTER (WHERE workload = 'W6') > 0 AS has_w6,
       count(*) FILTER (WHERE workload = 'W5') > 0 AS has_w5,
       count(*) FILTER (WHERE workload = 'E1') > 0 AS has_e1,
       count(*) FILTER (WHERE workload = 'L1') > 0 AS has_l1,
       count(*) FILTER (WHERE workload ~ '^W7(b[0-9]+)?$') > 0 AS has_w7,
       count(*) FILTER (WHERE workload = 'W7h') > 0 AS has_w7h,
       count(*) FILTER (WHERE workload = 'E1b') > 0 AS has_e1b,
       count(*) FILTER (WHERE system = 'pgq') > 0 AS has_pgq
  FROM results \gset

-- ---- targets -----------------------------------------------------------------
\echo '## Targets (worst client count)'
\echo ''
\echo '| target | measured | verdict |'
\echo '|---|---|---|'
WITH c AS (SELECT DISTINCT clients FROM results WHERE workload NOT IN ('W4', 'W6', 'L1') AND workload !~ '^(W7|E1b)'),
t(ord, target, value, pass) AS (
	SELECT 1, 'W1 ≥ 2× baseline at every client count',
	       min(r('pqrun', 'W1', clients) / nullif(r('baseline', 'W1', clients), 0)), 2.0 FROM c
	UNION ALL
	SELECT 2, 'W1 ≥ 70% of L0/2 at every client count',
	       min(r('pqrun', 'W1', clients) / nullif(r('ceiling', 'L0', clients) / 2, 0)), 0.70 FROM c
	UNION ALL
	SELECT 3, 'W1b ≥ 3× baseline batch drain',
	       min(r('pqrun', 'W1b', clients) / nullif(r('baseline', 'W1b', clients), 0)), 3.0 FROM c
	UNION ALL
	SELECT 4, 'W3 within 10% of W1 (W3/W1 ≥ 0.90)',
	       min(r('pqrun', 'W3', clients) / nullif(r('pqrun', 'W1', clients), 0)), 0.90 FROM c
	UNION ALL
	SELECT 5, 'W1K (100 concurrency keys, limits of 1000) within 10% of W1 (W1K/W1 ≥ 0.90; W1 right after it when measured)',
	       min(coalesce(paired('W1K', clients), r('pqrun', 'W1K', clients) / nullif(r('pqrun', 'W1', clients), 0))), 0.90 FROM c
	UNION ALL
	SELECT 6, 'W3K (beside a key at its limit with a deep backlog) within 10% of W1 (W3K/W1 ≥ 0.90; W1 right after it when measured)',
	       min(coalesce(paired('W3K', clients), r('pqrun', 'W3K', clients) / nullif(r('pqrun', 'W1', clients), 0))), 0.90 FROM c
	UNION ALL
	SELECT 6, 'W3Q (by queue, beside a deep backlog of another queue) within 10% of W1 (W3Q/W1 right after it ≥ 0.90)',
	       min(paired('W3Q', clients)), 0.90 FROM c
	UNION ALL
	SELECT 6, 'W3Qt (by job type, beside a deep backlog of another job type) within 10% of W1 (W3Qt/W1 right after it ≥ 0.90)',
	       min(paired('W3Qt', clients)), 0.90 FROM c
	UNION ALL
	SELECT 6, 'W3KB (unfiltered, beside a paused queue of many keys and idle keyed queues) within 10% of W1 (W3KB/W1 right after it ≥ 0.90)',
	       min(paired('W3KB', clients)), 0.90 FROM c
	UNION ALL
	SELECT 7, 'W4 no 30 s window below 90% of the first',
	       (SELECT min(note(notes, 'min/first')::numeric) FROM results WHERE system = 'pqrun' AND workload = 'W4'), 0.90
	UNION ALL
	SELECT 7, 'W6 (short retention) no window below 90% of the first',
	       (SELECT min(note(notes, 'min/first')::numeric) FROM results WHERE system = 'pqrun' AND workload = 'W6'), 0.90
	UNION ALL
	SELECT 8, 'W5 ≥ 80% of W2 throughput',
	       min(r('pqrun', 'W5', clients) / nullif(r('pqrun', 'W2', clients), 0)), 0.80 FROM c
	UNION ALL
	SELECT 9, 'E1 ≥ 10× the per-job rate of single enqueues',
	       min(r('pqrun', 'E1', clients) / nullif(r('pqrun', 'E1single', clients), 0)), 10.0 FROM c)
SELECT format('| %s | %s | %s |', target,
              CASE WHEN value IS NULL THEN 'not measured' ELSE to_char(value, 'FM9990.00') END,
              CASE WHEN value IS NULL THEN '–' WHEN value >= pass THEN 'met' ELSE '**missed**' END)
  FROM t ORDER BY ord;
SELECT format('| L1 wake latency p95 < 2 ms | %s | %s |',
              coalesce(to_char(max(p95), 'FM9990.000') || ' ms', 'not measured'),
              CASE WHEN max(p95) IS NULL THEN '–' WHEN max(p95) < 2 THEN 'met' ELSE '**missed**' END)
  FROM m WHERE system = 'pqrun' AND workload = 'L1';
SELECT format('| exactly-once after every drain and steady run | %s of %s checked runs violated it | %s |',
              count(*) FILTER (WHERE notes ~ 'VIOLATED'), count(*) FILTER (WHERE notes ~* 'exactly-once'),
              CASE WHEN count(*) FILTER (WHERE notes ~ 'VIOLATED') = 0 THEN 'met' ELSE '**missed**' END)
  FROM results;
SELECT format('| every pgbench run without errors | %s of %s runs failed | %s |',
              count(*) FILTER (WHERE notes ~ 'PGBENCH FAILED'), count(*),
              CASE WHEN count(*) FILTER (WHERE notes ~ 'PGBENCH FAILED') = 0 THEN 'met' ELSE '**missed**' END)
  FROM results;
\echo ''
\if :has_floor
SELECT format('W1 floor / baseline (an empty round trip plus one flushed commit per job: no queue whose `mark_done` waits for its WAL flush does better): %s. %s',
              string_agg(format('%s at %s client%s', to_char(f, 'FM9990.00'), clients, CASE WHEN clients > 1 THEN 's' END), ', ' ORDER BY clients),
              CASE WHEN bool_or(f < 2) THEN format('Below 2 at these client counts: %s. The W1 target is out of reach there for any such design on this machine.',
                                                   string_agg(clients::text, ', ' ORDER BY clients) FILTER (WHERE f < 2))
                   ELSE 'At least 2 everywhere: the W1 target is within reach.' END)
  FROM (SELECT clients, r('ceiling', 'L0floor', clients) / nullif(r('baseline', 'W1', clients), 0) AS f
          FROM (SELECT DISTINCT clients FROM results WHERE workload = 'W1') c) x
 WHERE f IS NOT NULL;
\echo ''
\endif
\echo 'Jobs/s are jobs finished per second, counted in the database (for E1: jobs enqueued; for L0: commits). Latency is that of one worker step (one pgbench transaction: W1 pickup + mark_done, W1b pickup of 100 + 100 marks), p50 / p95 in ms. Ratios compare the medians of this run; ✓/✗ mark a target.'
\echo ''

-- ---- L0 ------------------------------------------------------------------------
\if :has_l0
\echo '## L0 commit ceiling (UPDATE of one random row per transaction)'
\echo ''
\echo 'W1 floor: an empty round trip (`SELECT 1`) and then the L0 update, each its own transaction: the least a W1 step can cost when its done waits for its WAL flush.'
\echo ''
\echo '| clients | commits/s | L0/2 (W1 limit) | p50 / p95 ms | W1 floor steps/s | W1 floor p50 / p95 ms |'
\echo '|---:|---:|---:|---:|---:|---:|'
SELECT format('| %s | %s | %s | %s | %s | %s |', clients, fr(rate), fr(rate / 2), fl(system, workload, clients),
              fr(r('ceiling', 'L0floor', clients)), fl('ceiling', 'L0floor', clients))
  FROM m WHERE workload = 'L0' ORDER BY clients;
\echo ''
\endif

-- ---- W1 ------------------------------------------------------------------------
\if :has_w1
\echo '## W1 drain (pickup 1, mark_done, each its own transaction)'
\echo ''
\echo '| clients | pqrun jobs/s | baseline jobs/s | L0/2 | pqrun / baseline (≥ 2) | W1 floor / baseline | pqrun / (L0/2) (≥ 0.70) | baseline / (L0/2) | pqrun p50 / p95 ms | baseline p50 / p95 ms |'
\echo '|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|'
SELECT format('| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |', clients,
              fr(r('pqrun', 'W1', clients)), fr(r('baseline', 'W1', clients)), fr(r('ceiling', 'L0', clients) / 2),
              fq(r('pqrun', 'W1', clients), r('baseline', 'W1', clients), 2.0),
              fq(r('ceiling', 'L0floor', clients), r('baseline', 'W1', clients)),
              fq(r('pqrun', 'W1', clients), r('ceiling', 'L0', clients) / 2, 0.70),
              fq(r('baseline', 'W1', clients), r('ceiling', 'L0', clients) / 2),
              fl('pqrun', 'W1', clients), fl('baseline', 'W1', clients))
  FROM (SELECT DISTINCT clients FROM results WHERE workload = 'W1') c ORDER BY clients;
\echo ''
\endif

-- ---- W1c -----------------------------------------------------------------------
\if :has_w1c
\echo '## W1c drain (mark_done_and_pickup: the last job finished and the next claimed, one transaction)'
\echo ''
\echo '| clients | pqrun W1c jobs/s | W1c / W1 | W1c / L0 | W1c / baseline W1 | p50 / p95 ms |'
\echo '|---:|---:|---:|---:|---:|---:|'
SELECT format('| %s | %s | %s | %s | %s | %s |', clients,
              fr(r('pqrun', 'W1c', clients)), fq(r('pqrun', 'W1c', clients), r('pqrun', 'W1', clients)),
              fq(r('pqrun', 'W1c', clients), r('ceiling', 'L0', clients)),
              fq(r('pqrun', 'W1c', clients), r('baseline', 'W1', clients)), fl('pqrun', 'W1c', clients))
  FROM (SELECT DISTINCT clients FROM results WHERE workload = 'W1c') c ORDER BY clients;
\echo ''
\endif

-- ---- W1L -----------------------------------------------------------------------
\if :has_w1l
\echo '## W1L drain (W1 under concurrency limits of 1000 on the queue and on its job type)'
\echo ''
\echo '| clients | pqrun W1L jobs/s | W1L / W1 (≥ 0.90) | p50 / p95 ms |'
\echo '|---:|---:|---:|---:|'
SELECT format('| %s | %s | %s | %s |', clients,
              fr(r('pqrun', 'W1L', clients)), fq(r('pqrun', 'W1L', clients), r('pqrun', 'W1', clients), 0.90),
              fl('pqrun', 'W1L', clients))
  FROM (SELECT DISTINCT clients FROM results WHERE workload = 'W1L') c ORDER BY clients;
\echo ''
\endif

-- ---- W1K -----------------------------------------------------------------------
\if :has_w1k
\echo '## W1K drain (W1 over 100 concurrency keys, round robin by id, under a cap of 1000 on the queue and a limit of 1000 per key)'
\echo ''
SELECT * FROM paired_table('W1K');
\echo ''
\endif

-- ---- W3K -----------------------------------------------------------------------
\if :has_w3k
\echo '## W3K drain beside a hog key (W1 of key k while key hog, limit 2, holds 2 RUNNING and the rest of its deep backlog READY)'
\echo ''
SELECT * FROM paired_table('W3K');
\echo ''
SELECT format('The hog is filled by each W3K measurement that follows another refill (after W3Kref''s, every one), else kept (README, W3K). Fills: %s. After every drain the hog must still hold its 2 places (the holder session) with the rest READY; %s of %s W3K runs found otherwise (CSV notes).',
              coalesce(string_agg(format('round %s at %s client(s), %s', round, clients, note(notes, 'hog fill')), '; ' ORDER BY round, clients)
                       FILTER (WHERE note(notes, 'hog fill') IS NOT NULL), 'none'),
              count(*) FILTER (WHERE notes ~ 'HOG'), count(*))
  FROM results WHERE system = 'pqrun' AND workload = 'W3K';
\echo ''
\endif

-- ---- W3Q, W3Qt ------------------------------------------------------------------
\if :has_w3q
\echo '## W3Q and W3Qt: drains filtered by queue and by job type beside a deep backlog of another queue and job type'
\echo ''
SELECT * FROM paired_table('W3Q');
\echo ''
SELECT * FROM paired_table('W3Qt');
\echo ''
SELECT format('Deep fills (every W3Q and W3Qt): %s.',
              coalesce(string_agg(format('%s round %s at %s client(s), %s', workload, round, clients, note(notes, 'deep fill')),
                                   '; ' ORDER BY workload, round, clients), 'none'))
  FROM results WHERE system = 'pqrun' AND workload IN ('W3Q', 'W3Qt');
\echo ''
\endif

-- ---- W3KB ----------------------------------------------------------------------
\if :has_w3kb
\echo '## W3KB drain beside a paused keyed queue and idle keyed queues (W1, unfiltered pickup, while queue pk is paused with one READY job under each of its keys and the idle queues once had keyed jobs)'
\echo ''
SELECT * FROM paired_table('W3KB');
\echo ''
SELECT format('The world is built by each W3KB measurement that follows another refill (after W3KBref''s, every one), else kept (README, W3KB). Fills: %s. Keyed queues in pqrun.queue_control when the drains started (the paused queue is one; the idle queues'' rows were backdated an hour and run_maintenance() called until they stopped falling): %s; %s of %s W3KB runs found the world otherwise (CSV notes).',
              coalesce(string_agg(format('round %s at %s client(s), %s with %s maintenance round(s)', round, clients,
                                         note(notes, 'w3kb fill'), note(notes, 'maintenance rounds')), '; ' ORDER BY round, clients)
                       FILTER (WHERE note(notes, 'w3kb fill') IS NOT NULL), 'none'),
              coalesce(string_agg(DISTINCT note(notes, 'keyed queues'), ', '), 'not noted'),
              count(*) FILTER (WHERE notes ~ 'W3KB SETUP FAILED'), count(*))
  FROM results WHERE system = 'pqrun' AND workload = 'W3KB';
\echo ''
\endif

-- ---- W1bc ----------------------------------------------------------------------
\if :has_w1bc
\echo '## W1bc batch drain (mark_done_and_pickup: 100 finished and 100 claimed per call, one transaction)'
\echo ''
\echo '| clients | pqrun W1bc jobs/s | W1bc / pqrun W1b | W1bc / PgQ W1b | p50 / p95 ms |'
\echo '|---:|---:|---:|---:|---:|'
SELECT format('| %s | %s | %s | %s | %s |', clients,
              fr(r('pqrun', 'W1bc', clients)), fq(r('pqrun', 'W1bc', clients), r('pqrun', 'W1b', clients)),
              fq(r('pqrun', 'W1bc', clients), r('pgq', 'W1b', clients)), fl('pqrun', 'W1bc', clients))
  FROM (SELECT DISTINCT clients FROM results WHERE workload = 'W1bc') c ORDER BY clients;
\echo ''
\endif

-- ---- W1b -----------------------------------------------------------------------
\if :has_w1b
\echo '## W1b batch drain (pickup 100, mark all done, one transaction)'
\echo ''
\echo '| clients | pqrun jobs/s | baseline jobs/s | PgQ jobs/s | pqrun / baseline (≥ 3) | pqrun / PgQ | pqrun / W1 | pqrun p50 / p95 ms | baseline p50 / p95 ms | PgQ p50 / p95 ms |'
\echo '|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|'
SELECT format('| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |', clients,
              fr(r('pqrun', 'W1b', clients)), fr(r('baseline', 'W1b', clients)), fr(r('pgq', 'W1b', clients)),
              fq(r('pqrun', 'W1b', clients), r('baseline', 'W1b', clients), 3.0),
              fq(r('pqrun', 'W1b', clients), r('pgq', 'W1b', clients)),
              fq(r('pqrun', 'W1b', clients), r('pqrun', 'W1', clients)),
              fl('pqrun', 'W1b', clients), fl('baseline', 'W1b', clients), fl('pgq', 'W1b', clients))
  FROM (SELECT DISTINCT clients FROM results WHERE workload = 'W1b') c ORDER BY clients;
\echo ''
\echo 'A drain that empties the queue before the time is up is timed to its last finished job (see "drained after" in the CSV notes).'
\echo ''
\endif

-- ---- W2 ------------------------------------------------------------------------
\if :has_w2
\echo '## W2 steady (half the clients enqueue one job per transaction, half consume)'
\echo ''
\echo '| clients | pqrun jobs/s | baseline jobs/s | pqrun / baseline | pqrun consumer p50 / p95 ms | baseline consumer p50 / p95 ms |'
\echo '|---:|---:|---:|---:|---:|---:|'
SELECT format('| %s | %s | %s | %s | %s | %s |', clients,
              fr(r('pqrun', 'W2', clients)), fr(r('baseline', 'W2', clients)),
              fq(r('pqrun', 'W2', clients), r('baseline', 'W2', clients)),
              fl('pqrun', 'W2', clients), fl('baseline', 'W2', clients))
  FROM (SELECT DISTINCT clients FROM results WHERE workload = 'W2') c ORDER BY clients;
\echo ''
\echo 'With one client, that client enqueues and consumes in each step. The CSV notes give the ready backlog before and after: consumers need two commits per job, producers one, so with equal numbers the backlog grows.'
\echo ''
\endif

-- ---- W2c -----------------------------------------------------------------------
\if :has_w2c
\echo '## W2c steady with finish-and-claim consumers (W2, consumers call mark_done_and_pickup)'
\echo ''
\echo '| clients | pqrun W2c done/s | W2c / pqrun W2 | W2c / baseline W2 | ready jobs before -> after (median round) | p50 / p95 ms |'
\echo '|---:|---:|---:|---:|---:|---:|'
SELECT format('| %s | %s | %s | %s | %s | %s |', clients,
              fr(r('pqrun', 'W2c', clients)), fq(r('pqrun', 'W2c', clients), r('pqrun', 'W2', clients)),
              fq(r('pqrun', 'W2c', clients), r('baseline', 'W2', clients)),
              (SELECT string_agg(rep.note(notes, 'backlog'), ', ' ORDER BY round) FROM results
                WHERE system = 'pqrun' AND workload = 'W2c' AND results.clients = c.clients),
              fl('pqrun', 'W2c', clients))
  FROM (SELECT DISTINCT clients FROM results WHERE workload = 'W2c') c ORDER BY clients;
\echo ''
\endif

-- ---- W3 ------------------------------------------------------------------------
\if :has_w3
\echo '## W3 deep backlog (W1 with the deep queue)'
\echo ''
\echo '| clients | pqrun jobs/s | pqrun W3 / W1 (≥ 0.90) | baseline jobs/s | baseline W3 / W1 | pqrun / baseline | pqrun p50 / p95 ms | baseline p50 / p95 ms |'
\echo '|---:|---:|---:|---:|---:|---:|---:|---:|'
SELECT format('| %s | %s | %s | %s | %s | %s | %s | %s |', clients,
              fr(r('pqrun', 'W3', clients)), fq(r('pqrun', 'W3', clients), r('pqrun', 'W1', clients), 0.90),
              fr(r('baseline', 'W3', clients)), fq(r('baseline', 'W3', clients), r('baseline', 'W1', clients)),
              fq(r('pqrun', 'W3', clients), r('baseline', 'W3', clients)),
              fl('pqrun', 'W3', clients), fl('baseline', 'W3', clients))
  FROM (SELECT DISTINCT clients FROM results WHERE workload = 'W3') c ORDER BY clients;
\echo ''
\endif

-- ---- W4 ------------------------------------------------------------------------
\if :has_w4
\echo '## W4 soak (W2 for the soak time; completions per window)'
\echo ''
\echo '| system | clients | round | jobs/s | min window / first (≥ 0.90) | jobs/s per window | ready backlog | table=heap+indexes kB before | after |'
\echo '|---|---:|---:|---:|---:|---|---|---|---|'
SELECT format('| %s | %s | %s | %s | %s | %s | %s | %s | %s |', system, clients, round, fr(jobs_per_s),
              note(notes, 'min/first'), note(notes, 'windows'), note(notes, 'backlog'),
              substring(notes FROM 'sizes before: ([^;]+)'), substring(notes FROM 'sizes after: ([^;]+)'))
  FROM results WHERE workload = 'W4' ORDER BY round, system;
\echo ''
\endif

-- ---- W6 ------------------------------------------------------------------------
\if :has_w6
\echo '## W6 history retention (W2 with a short pqrun.retention; per window: jobs finished, job_done heap + indexes, its dead tuples)'
\echo ''
\echo '| clients | jobs/s | min window / first (≥ 0.90) | retention | jobs/s per window | job_done kB per window | job_done dead tuples per window |'
\echo '|---:|---:|---:|---|---|---|---|'
SELECT format('| %s | %s | %s | %s | %s | %s | %s |', clients, fr(jobs_per_s), note(notes, 'min/first'),
              note(notes, 'retention'), note(notes, 'windows'), note(notes, 'history_kB'), note(notes, 'history_dead'))
  FROM results WHERE workload = 'W6' ORDER BY round;
\echo ''
\endif

-- ---- W5 ------------------------------------------------------------------------
\if :has_w5
\echo '## W5 held horizon (W2 while a REPEATABLE READ transaction stays open)'
\echo ''
\echo '| clients | pqrun jobs/s | pqrun W5 / W2 (≥ 0.80) | baseline jobs/s | baseline W5 / W2 | pqrun / baseline | pqrun dead tuples | baseline dead tuples | pqrun jobs/s per window | baseline jobs/s per window |'
\echo '|---:|---:|---:|---:|---:|---:|---:|---:|---|---|'
SELECT format('| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |', clients,
              fr(r('pqrun', 'W5', clients)), fq(r('pqrun', 'W5', clients), r('pqrun', 'W2', clients), 0.80),
              fr(r('baseline', 'W5', clients)), fq(r('baseline', 'W5', clients), r('baseline', 'W2', clients)),
              fq(r('pqrun', 'W5', clients), r('baseline', 'W5', clients)),
              (SELECT note(notes, 'dead') FROM results x WHERE x.system = 'pqrun' AND x.workload = 'W5' AND x.clients = c.clients ORDER BY round DESC LIMIT 1),
              (SELECT note(notes, 'dead') FROM results x WHERE x.system = 'baseline' AND x.workload = 'W5' AND x.clients = c.clients ORDER BY round DESC LIMIT 1),
              (SELECT note(notes, 'windows') FROM results x WHERE x.system = 'pqrun' AND x.workload = 'W5' AND x.clients = c.clients ORDER BY round DESC LIMIT 1),
              (SELECT note(notes, 'windows') FROM results x WHERE x.system = 'baseline' AND x.workload = 'W5' AND x.clients = c.clients ORDER BY round DESC LIMIT 1))
  FROM (SELECT DISTINCT clients FROM results WHERE workload = 'W5') c ORDER BY clients;
\echo ''
\echo 'Dead tuples and windows are those of the last round.'
\echo ''
\endif

-- ---- E1 ------------------------------------------------------------------------
\if :has_e1
\echo '## E1 batch enqueue (1,000 jobs per call) against single enqueues (one job per transaction)'
\echo ''
\echo '| clients | pqrun batch jobs/s | pqrun single jobs/s | pqrun batch / single (≥ 10) | baseline batch | baseline single | baseline batch / single | PgQ batch | PgQ single | pqrun / baseline (batch) | pqrun / PgQ (batch) | pqrun / baseline (single) |'
\echo '|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|'
SELECT format('| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |', clients,
              fr(r('pqrun', 'E1', clients)), fr(r('pqrun', 'E1single', clients)),
              fq(r('pqrun', 'E1', clients), r('pqrun', 'E1single', clients), 10.0),
              fr(r('baseline', 'E1', clients)), fr(r('baseline', 'E1single', clients)),
              fq(r('baseline', 'E1', clients), r('baseline', 'E1single', clients)),
              fr(r('pgq', 'E1', clients)), fr(r('pgq', 'E1single', clients)),
              fq(r('pqrun', 'E1', clients), r('baseline', 'E1', clients)),
              fq(r('pqrun', 'E1', clients), r('pgq', 'E1', clients)),
              fq(r('pqrun', 'E1single', clients), r('baseline', 'E1single', clients)))
  FROM (SELECT DISTINCT clients FROM results WHERE workload = 'E1') c ORDER BY clients;
\echo ''
\echo '| clients | pqrun batch call p50 / p95 ms | baseline batch p50 / p95 ms | PgQ batch p50 / p95 ms | pqrun single p50 / p95 ms | baseline single p50 / p95 ms |'
\echo '|---:|---:|---:|---:|---:|---:|'
SELECT format('| %s | %s | %s | %s | %s | %s |', clients,
              fl('pqrun', 'E1', clients), fl('baseline', 'E1', clients), fl('pgq', 'E1', clients),
              fl('pqrun', 'E1single', clients), fl('baseline', 'E1single', clients))
  FROM (SELECT DISTINCT clients FROM results WHERE workload = 'E1') c ORDER BY clients;
\echo ''
\endif

-- ---- W7 ------------------------------------------------------------------------
\if :has_w7
\echo '## W7 fleet: K workers waiting for work, producers offering a fixed rate in batches of 128'
\echo ''
\echo 'Workers: pqrun, the README''s worker loop (a waiting pickup of up to `batch` jobs, each job then finished in its own transaction, the last with `mark_done_and_pickup`, which claims the next ones); pgmq-like, `read_with_poll` of up to `batch` messages (pgmq''s long poll, polling every 100 ms inside the server), each then archived in its own transaction; pgmq-like read + sleep, `read` and a client-side sleep after a read that found nothing; baseline, its SKIP LOCKED claim, each job then marked done, a client-side sleep after a claim that found nothing. Producers: `enqueue_batch` / `send_batch` / one INSERT of 128 jobs, their transaction''s p50 / p99 in the last column. From the jobs'' own timestamps: claim latency from the enqueue transaction''s `now()` (the figure outside harnesses report) and from its commit (visible → claim); the backlog is jobs committed and not yet claimed, at the end just before the last batch''s commit. Active backends: the workers'' backends in a statement (what `pg_stat_activity` shows), of which busy: not waiting for work (pqrun''s long poll, `pg_sleep` in `read_with_poll`). Server CPU: all the cluster''s processes, the producers'' backends included. MultiXacts: `next_multixact_id` of a checkpoint before and after, per job.'
\echo ''
\echo '| K | system | batch | finished/s | enqueued/s | claim p50 / p95 / p99 ms | visible → claim p50 / p99 ms | backlog at end / peak | MultiXacts per job | active / busy backends | server CPU cores / ms per job | producer transaction p50 / p99 ms |'
\echo '|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|'
SELECT format('| %s | %s | %s | %s | %s | %s / %s / %s | %s / %s | %s / %s | %s | %s / %s | %s / %s | %s / %s |', clients, sysname(system), batch,
              fr(rate), fr(enq), fn(p50), fn(p95), fn(p99), fn(v50), fn(v99), fn(backlog_end, 0), fn(peak, 0), fn(mxid, 3),
              fn(active), fn(busy), fn(cores, 2), fn(cpu_ms, 2), fn(e50), fn(e99))
  FROM fleet WHERE workload <> 'W7h' ORDER BY clients, batch, ord;
\echo ''
\echo 'Ratios, pqrun over pgmq-like (`read_with_poll`) and over the baseline at the same K and batch (finished/s: above 1 is pqrun ahead; latency, backends and CPU: above 1 is pqrun higher).'
\echo ''
\echo '| K | batch | finished/s ÷ pgmq-like / ÷ baseline | claim p50 ÷ pgmq-like / ÷ baseline | claim p99 ÷ pgmq-like / ÷ baseline | active ÷ pgmq-like / ÷ baseline | busy ÷ pgmq-like / ÷ baseline | CPU per job ÷ pgmq-like / ÷ baseline |'
\echo '|---:|---:|---:|---:|---:|---:|---:|---:|'
SELECT format('| %s | %s | %s / %s | %s / %s | %s / %s | %s / %s | %s / %s | %s / %s |', clients, batch,
              fq(rate, ff('pgmq', workload, clients, 'rate')), fq(rate, ff('baseline', workload, clients, 'rate')),
              fq(p50, ff('pgmq', workload, clients, 'p50')), fq(p50, ff('baseline', workload, clients, 'p50')),
              fq(p99, ff('pgmq', workload, clients, 'p99')), fq(p99, ff('baseline', workload, clients, 'p99')),
              fq(active, ff('pgmq', workload, clients, 'active')), fq(active, ff('baseline', workload, clients, 'active')),
              fq(busy, ff('pgmq', workload, clients, 'busy')), fq(busy, ff('baseline', workload, clients, 'busy')),
              fq(cpu_ms, ff('pgmq', workload, clients, 'cpu_ms')), fq(cpu_ms, ff('baseline', workload, clients, 'cpu_ms')))
  FROM fleet WHERE system = 'pqrun' AND workload <> 'W7h' ORDER BY clients, batch;
\echo ''
\endif

-- ---- W7h -----------------------------------------------------------------------
\if :has_w7h
\echo '## W7h fleet while a transaction id is held (W7 filtered by job type; another session holds an XID in the middle of the run)'
\echo ''
\echo 'Windows: jobs finished per second in consecutive windows from the producers'' start (the hold''s span in the notes, `hold=`); the lowest window over the offered rate is the figure. Drain: seconds from the hold''s end until the backlog is back to one batch (128) at most (-1: not within the run).'
\echo ''
\echo '| K | system | finished/s | lowest window / offered | claim p50 / p99 ms | claim p99 of jobs enqueued during the hold, ms | backlog peak | drain after the hold, s | MultiXacts per job | active / busy backends | jobs/s per window |'
\echo '|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---|'
SELECT format('| %s | %s | %s | %s | %s / %s | %s | %s | %s | %s | %s / %s | %s |', clients, sysname(system), fr(rate),
              fq(min_window, offered), fn(p50), fn(p99), fn(hold_p99), fn(peak, 0), fn(drain), fn(mxid, 3),
              fn(active), fn(busy), windows)
  FROM fleet WHERE workload = 'W7h' ORDER BY clients, ord;
\echo ''
\echo '| K | lowest window ÷ pgmq-like / ÷ baseline | claim p99 ÷ pgmq-like / ÷ baseline | backlog peak ÷ pgmq-like / ÷ baseline | drain ÷ pgmq-like / ÷ baseline |'
\echo '|---:|---:|---:|---:|---:|'
SELECT format('| %s | %s / %s | %s / %s | %s / %s | %s / %s |', clients,
              fq(min_window, ff('pgmq', workload, clients, 'min_window')), fq(min_window, ff('baseline', workload, clients, 'min_window')),
              fq(p99, ff('pgmq', workload, clients, 'p99')), fq(p99, ff('baseline', workload, clients, 'p99')),
              fq(peak, ff('pgmq', workload, clients, 'peak')), fq(peak, ff('baseline', workload, clients, 'peak')),
              fq(drain, ff('pgmq', workload, clients, 'drain')), fq(drain, ff('baseline', workload, clients, 'drain')))
  FROM fleet WHERE system = 'pqrun' AND workload = 'W7h' ORDER BY clients;
\echo ''
\endif

-- ---- E1b -----------------------------------------------------------------------
\if :has_e1b
\echo '## E1b batch enqueue of 128 jobs per call, as clients send them'
\echo ''
\echo 'pqrun `enqueue_batch` of a JSON array of 128 jobs; pgmq-like `send_batch` of a jsonb[] of 128 messages; baseline one INSERT of the 128 jobs of the same JSON array; baseline 128 single-row INSERTs in one transaction. Time per job: the median call (or transaction) over 128, in µs; at one client it is mostly the commit''s WAL flush. Server CPU per job: all the cluster''s processes during the run over the jobs enqueued. jobs/s over the run.'
\echo ''
\echo '| clients | pqrun jobs/s | pgmq-like jobs/s | baseline INSERT of 128 jobs/s | 128 INSERTs jobs/s | pqrun µs per job | pgmq-like µs per job | baseline INSERT µs per job | 128 INSERTs µs per job | pqrun time per job ÷ pgmq-like / ÷ baseline / ÷ 128 INSERTs | server CPU µs per job: pqrun / pgmq-like / baseline INSERT / 128 INSERTs | pqrun CPU per job ÷ pgmq-like / ÷ baseline / ÷ 128 INSERTs |'
\echo '|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|'
SELECT format('| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s / %s / %s | %s / %s / %s / %s | %s / %s / %s |', clients,
              fr(r('pqrun', 'E1b', clients)), fr(r('pgmq', 'E1b', clients)), fr(r('baseline', 'E1b', clients)), fr(r('baseline', 'E1b128', clients)),
              fn(pq * 1000 / 128), fn(pm * 1000 / 128), fn(bl * 1000 / 128), fn(b128 * 1000 / 128),
              fq(pq, pm), fq(pq, bl), fq(pq, b128),
              fn(cpq), fn(cpm), fn(cbl), fn(cb128), fq(cpq, cpm), fq(cpq, cbl), fq(cpq, cb128))
  FROM (SELECT clients,
               nm('pqrun', 'E1b', clients, 'cpu_us_per_job') AS cpq, nm('pgmq', 'E1b', clients, 'cpu_us_per_job') AS cpm,
               nm('baseline', 'E1b', clients, 'cpu_us_per_job') AS cbl, nm('baseline', 'E1b128', clients, 'cpu_us_per_job') AS cb128,
               (SELECT p50 FROM m WHERE system = 'pqrun' AND workload = 'E1b' AND m.clients = c.clients) AS pq,
               (SELECT p50 FROM m WHERE system = 'pgmq' AND workload = 'E1b' AND m.clients = c.clients) AS pm,
               (SELECT p50 FROM m WHERE system = 'baseline' AND workload = 'E1b' AND m.clients = c.clients) AS bl,
               (SELECT p50 FROM m WHERE system = 'baseline' AND workload = 'E1b128' AND m.clients = c.clients) AS b128
          FROM (SELECT DISTINCT clients FROM results WHERE workload = 'E1b') c) x ORDER BY clients;
\echo ''
\endif

-- ---- L1 ------------------------------------------------------------------------
\if :has_l1
\echo '## L1 wake latency (enqueue commit → return of a waiting pickup in another session)'
\echo ''
\echo 'Measured from the commit timestamp of the enqueue (track_commit_timestamp). The last column starts at the clock the producer read before its enqueue, so it also counts the enqueue itself.'
\echo ''
\echo '| round | p50 ms | p95 ms (< 2) | p99 ms | samples | from before the enqueue: p50 / p95 ms |'
\echo '|---:|---:|---:|---:|---|---:|'
SELECT format('| %s | %s | %s | %s | %s | %s |', round, p50_ms, p95_ms, note(notes, 'p99_ms'), note(notes, 'samples'),
              note(notes, 'from_enqueue_ms'))
  FROM results WHERE workload = 'L1' ORDER BY round;
\echo ''
\endif

-- ---- anything wrong ------------------------------------------------------------
SELECT count(*) > 0 AS has_bad FROM results WHERE notes ~ 'VIOLATED|FAILED' \gset
\if :has_bad
\echo '## Failures'
\echo ''
SELECT format('- %s %s, %s clients, round %s: %s', system, workload, clients, round, notes)
  FROM results WHERE notes ~ 'VIOLATED|FAILED' ORDER BY workload, system, clients, round;
\echo ''
\endif

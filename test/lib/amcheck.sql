-- test/lib/amcheck.sql — PostgreSQL's own check of pqrun's storage in the
-- database psql is connected to: every B-tree index of the pqrun schema,
-- checked against its parent pages and its table (each table row indexed,
-- bt_index_parent_check with heapallindexed), and every table of the schema
-- with its TOAST table (verify_heapam). Prints one line, "ok: N indexes,
-- M tables", or the problems; a corrupt index raises an error.
\set ON_ERROR_STOP 1
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS amcheck;
WITH indexes AS (
	SELECT public.bt_index_parent_check(c.oid, heapallindexed => true)
	  FROM pg_catalog.pg_class c
	  JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
	  JOIN pg_catalog.pg_am a ON a.oid = c.relam
	 WHERE n.nspname = 'pqrun' AND c.relkind = 'i' AND a.amname = 'btree'
), tables AS (
	SELECT c.oid, c.relname FROM pg_catalog.pg_class c
	  JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
	 WHERE n.nspname = 'pqrun' AND c.relkind = 'r'
), problems AS (
	SELECT t.relname || ' block ' || v.blkno || ' item ' || coalesce(v.offnum::text, '-') || ': ' || v.msg AS problem
	  FROM tables t, LATERAL public.verify_heapam(t.oid, check_toast => true) v
)
SELECT CASE WHEN (SELECT count(*) FROM tables) = 0 THEN 'no pqrun tables here'
            WHEN (SELECT count(*) FROM problems) = 0
            THEN 'ok: ' || (SELECT count(*) FROM indexes) || ' indexes, ' || (SELECT count(*) FROM tables) || ' tables'
            ELSE (SELECT string_agg(problem, E'\n') FROM problems) END;

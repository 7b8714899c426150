CREATE FUNCTION pqrun.resume_queue(queue text)
RETURNS boolean
AS 'MODULE_PATHNAME', 'pqrun_resume_queue' LANGUAGE c VOLATILE
SECURITY DEFINER SET search_path = pg_catalog, pg_temp;

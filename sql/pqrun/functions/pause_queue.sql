/* pause_queue stops pickups from claiming the queue's jobs (enqueues go
 * on); resume_queue lets them again. Each answers whether it changed
 * anything. */
CREATE FUNCTION pqrun.pause_queue(queue text)
RETURNS boolean
AS 'MODULE_PATHNAME', 'pqrun_pause_queue' LANGUAGE c VOLATILE
SECURITY DEFINER SET search_path = pg_catalog, pg_temp;

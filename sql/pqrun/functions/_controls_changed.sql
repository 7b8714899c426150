/* Which queues' controls a statement changed (0.19.0), whoever wrote them:
 * each session then reads only those again, not the whole table
 * (src/api/sql_control.cpp, src/jobs/flow_control.cpp). A trigger may name
 * one event only when it has transition tables. */
CREATE FUNCTION pqrun._controls_changed() RETURNS trigger
AS 'MODULE_PATHNAME', 'pqrun_controls_changed' LANGUAGE c
SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION pqrun._controls_changed() FROM PUBLIC;
CREATE TRIGGER controls_inserted AFTER INSERT ON pqrun.queue_control REFERENCING NEW TABLE AS inserted
	FOR EACH STATEMENT EXECUTE FUNCTION pqrun._controls_changed();
CREATE TRIGGER controls_updated AFTER UPDATE ON pqrun.queue_control
	REFERENCING OLD TABLE AS before_update NEW TABLE AS after_update
	FOR EACH STATEMENT EXECUTE FUNCTION pqrun._controls_changed();
CREATE TRIGGER controls_deleted AFTER DELETE ON pqrun.queue_control REFERENCING OLD TABLE AS deleted
	FOR EACH STATEMENT EXECUTE FUNCTION pqrun._controls_changed();
CREATE TRIGGER controls_truncated AFTER TRUNCATE ON pqrun.queue_control
	FOR EACH STATEMENT EXECUTE FUNCTION pqrun._controls_changed();

/* Internal: one firing step of the maintenance round (what
 * run_maintenance() and the workers do), and the run_every slot arithmetic
 * it uses: the first due + k * run_every (k >= 1) after `after`. */
CREATE FUNCTION pqrun._fire_due_schedules()
RETURNS bigint
AS 'MODULE_PATHNAME', 'pqrun_fire_due_schedules' LANGUAGE c VOLATILE;

/* src/api/sql_control.cpp — the SQL-callable functions that set flow
 * controls: pqrun.pause_queue, pqrun.resume_queue,
 * pqrun.set_concurrency_limit, pqrun.set_key_limit, pqrun.set_rate_limit and
 * pqrun.set_key_rate_limit. Each entry point checks its arguments and calls
 * queue_control::, like sql_api.cpp. */
#include "jobs/flow_control.hpp"
#include "jobs/queue_control.hpp"
#include "pg/boundary.hpp"
#include "pg/spi_plans.hpp"
#include "shmem/shmem.hpp"

namespace {

using namespace pqrun;

/* NameArg answers argument `argno` (`name`): 22023 when NULL, empty or
 * over kMaxKeyBytes (it goes into pqrun.queue_control's key), except that
 * NULL answers nullptr when `may_be_null`. */
text *
NameArg(FunctionCallInfo fcinfo, int argno, const char *name, bool may_be_null = false)
{
	if (PG_ARGISNULL(argno)) {
		if (may_be_null)
			return nullptr;
		RaiseInvalid(psprintf("%s must not be null", name));
	}
	text *value = PG_GETARG_TEXT_PP(argno);
	if (VARSIZE_ANY_EXHDR(value) == 0)
		RaiseInvalid(psprintf("%s must not be empty", name));
	if (VARSIZE_ANY_EXHDR(value) > static_cast<Size>(kMaxKeyBytes))
		RaiseInvalid(psprintf("%s must be at most %d bytes", name, kMaxKeyBytes));
	return value;
}

/* LimitArg answers argument `argno`, max_running: -1 when NULL (remove the
 * limit), 22023 out of range. */
int32
LimitArg(FunctionCallInfo fcinfo, int argno)
{
	if (PG_ARGISNULL(argno))
		return -1;
	int32 max_running = PG_GETARG_INT32(argno);
	if (max_running < 0 || max_running > flow_control::kMaxLimit)
		RaiseInvalid(
		    psprintf("max_running must be between 0 and %d, or NULL to remove the limit", flow_control::kMaxLimit));
	return max_running;
}

/* RateArgs answers arguments `argno` (per_second: 0 when NULL, remove the
 * rate limit) and `argno` + 1 (burst), 22023 out of range. */
double
RateArgs(FunctionCallInfo fcinfo, int argno, int32 *burst)
{
	double per_second = PG_ARGISNULL(argno) ? 0 : PG_GETARG_FLOAT8(argno);
	/* NaN fails both comparisons: refused too. */
	if (!PG_ARGISNULL(argno) && !(per_second > 0 && per_second <= flow_control::kMaxRate))
		RaiseInvalid(psprintf("per_second must be above 0 and at most %.0f, or NULL to remove the rate limit",
		                      flow_control::kMaxRate));
	if (PG_ARGISNULL(argno + 1))
		RaiseInvalid("burst must not be null");
	*burst = PG_GETARG_INT32(argno + 1);
	if (*burst < 1 || *burst > flow_control::kMaxBurst)
		RaiseInvalid(psprintf("burst must be between 1 and %d", flow_control::kMaxBurst));
	return per_second;
}

/* RequireSharedMemory refuses (55000) to set controls nothing would enforce. */
void
RequireSharedMemory()
{
	if (shmem::Shared() == nullptr)
		ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
		                errmsg("flow control needs pqrun in shared_preload_libraries"),
		                errdetail("Pickups enforce pauses and limits from shared memory.")));
}

Datum
Pause(FunctionCallInfo fcinfo, bool paused)
{
	text *queue = NameArg(fcinfo, 0, "queue");
	RequireSharedMemory();
	spi::Connect();
	bool changed = queue_control::Pause(queue, paused);
	spi::Finish();
	PG_RETURN_BOOL(changed);
}

} // namespace

PQRUN_FUNCTION(pqrun_pause_queue)
{
	return Pause(fcinfo, true);
}

PQRUN_FUNCTION(pqrun_resume_queue)
{
	return Pause(fcinfo, false);
}

PQRUN_FUNCTION(pqrun_set_concurrency_limit)
{
	text *queue = NameArg(fcinfo, 0, "queue");
	int32 max_running = LimitArg(fcinfo, 1);
	text *job_type = NameArg(fcinfo, 2, "job_type", true);
	RequireSharedMemory();
	spi::Connect();
	queue_control::SetLimit(queue, job_type, max_running);
	spi::Finish();
	PG_RETURN_VOID();
}

PQRUN_FUNCTION(pqrun_set_key_limit)
{
	text *queue = NameArg(fcinfo, 0, "queue");
	int32 max_running = LimitArg(fcinfo, 1);
	text *key = NameArg(fcinfo, 2, "concurrency_key", true);
	RequireSharedMemory();
	spi::Connect();
	queue_control::SetKeyLimit(queue, key, max_running);
	spi::Finish();
	PG_RETURN_VOID();
}

PQRUN_FUNCTION(pqrun_set_rate_limit)
{
	text *queue = NameArg(fcinfo, 0, "queue");
	int32 burst;
	double per_second = RateArgs(fcinfo, 1, &burst);
	text *job_type = NameArg(fcinfo, 3, "job_type", true);
	RequireSharedMemory();
	spi::Connect();
	queue_control::SetRate(queue, job_type, per_second, burst);
	spi::Finish();
	PG_RETURN_VOID();
}

PQRUN_FUNCTION(pqrun_set_key_rate_limit)
{
	text *queue = NameArg(fcinfo, 0, "queue");
	int32 burst;
	double per_second = RateArgs(fcinfo, 1, &burst);
	text *key = NameArg(fcinfo, 3, "concurrency_key", true);
	RequireSharedMemory();
	spi::Connect();
	queue_control::SetKeyRate(queue, key, per_second, burst);
	spi::Finish();
	PG_RETURN_VOID();
}

namespace {

/* ControlsChangedIn tells flow control of the queues of the rows of a
 * transition table `rows` (`desc`), and whether any of them held a pause or
 * a limit (a change of which may let a waiter claim). */
void
ControlsChangedIn(Tuplestorestate *rows, TupleDesc desc)
{
	if (rows == nullptr)
		return;
	const int queue = SPI_fnumber(desc, "queue");
	const int paused = SPI_fnumber(desc, "paused");
	/* The columns of limits: any of them set makes the row one that holds
	 * jobs back. */
	const int limits[] = {SPI_fnumber(desc, "max_running"), SPI_fnumber(desc, "rate"),
	                      SPI_fnumber(desc, "max_running_per_key"), SPI_fnumber(desc, "rate_per_key")};
	TupleTableSlot *slot = MakeSingleTupleTableSlot(desc, &TTSOpsMinimalTuple);
	/* A read pointer of its own: another trigger may read the same table. */
	tuplestore_select_read_pointer(rows, tuplestore_alloc_read_pointer(rows, EXEC_FLAG_REWIND));
	tuplestore_rescan(rows);
	while (tuplestore_gettupleslot(rows, true, false, slot)) {
		bool isnull;
		bool holds = DatumGetBool(slot_getattr(slot, paused, &isnull)) && !isnull;
		for (int a : limits) {
			(void)slot_getattr(slot, a, &isnull);
			holds = holds || !isnull;
		}
		Datum name = slot_getattr(slot, queue, &isnull);
		const text *t = isnull ? nullptr : DatumGetTextPP(name);
		flow_control::NoteQueueChanged(t ? VARDATA_ANY(t) : nullptr, t ? VARSIZE_ANY_EXHDR(t) : 0, holds);
	}
	ExecDropSingleTupleTableSlot(slot);
}

} // namespace

/* pqrun._controls_changed(): the statement-level triggers of
 * pqrun.queue_control (0.19.0) tell flow control which queues' controls a
 * statement changed, pqrun's own writes and an owner's INSERT, UPDATE,
 * DELETE, COPY or TRUNCATE alike, so that each session reads only those
 * again (flow_control.cpp, EnsureCache). */
PQRUN_FUNCTION_ANY_VERSION(pqrun_controls_changed)
{
	if (!CALLED_AS_TRIGGER(fcinfo))
		ereport(ERROR, (errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
		                errmsg("pqrun._controls_changed() is called by the triggers of pqrun.queue_control only")));
	const TriggerData *trigger = reinterpret_cast<TriggerData *>(fcinfo->context);
	flow_control::NoteTriggerFired();
	if (TRIGGER_FIRED_BY_TRUNCATE(trigger->tg_event)) {
		flow_control::NoteQueueChanged(nullptr, 0, true);
	} else {
		TupleDesc desc = RelationGetDescr(trigger->tg_relation);
		ControlsChangedIn(trigger->tg_oldtable, desc);
		ControlsChangedIn(trigger->tg_newtable, desc);
	}
	return PointerGetDatum(nullptr);
}

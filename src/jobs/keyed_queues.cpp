/* src/jobs/keyed_queues.cpp — marking queues keyed and forgetting them
 * (keyed_queues.hpp). */
#include "jobs/keyed_queues.hpp"

#include "jobs/flow_control.hpp"
#include "jobs/queue_control.hpp"
#include "pg/citus.hpp"
#include "pg/spi_plans.hpp"
#include "pg/spi_rows.hpp"

namespace pqrun::keyed_queues {

namespace stmts {

#define MARK_IS_IDLE                                                                                                   \
	" (c.keyed AND c.job_type IS NULL AND c.concurrency_key IS NULL"                                                   \
	" AND c.updated_at < pg_catalog.now() - interval '1 minute'"                                                       \
	" AND NOT EXISTS (SELECT FROM pqrun.job_live j WHERE j.queue = c.queue AND j.concurrency_key IS NOT NULL))"

/* The queues' own rows after queue $1, 256 in order of the queue (by
 * queue_control_key), each with whether its mark looks idle now (the lock
 * decides: kClearMark). */
constexpr int kWindow = 256;
spi::Statement kIdleMarks{"idle keyed marks",
                          "SELECT c.queue, " MARK_IS_IDLE " FROM (SELECT * FROM pqrun.queue_control"
                          "   WHERE queue > $1 AND job_type IS NULL AND concurrency_key IS NULL"
                          "   ORDER BY queue LIMIT 256) c ORDER BY c.queue",
                          1,
                          {TEXTOID}};

/* Clears the mark of queue $1 if it is idle under a snapshot taken now,
 * passing over a row someone holds (a control being set). */
spi::Statement kClearMark{"clear keyed mark",
                          "UPDATE pqrun.queue_control c SET keyed = false, updated_at = pg_catalog.now()"
                          " FROM (SELECT ctid FROM pqrun.queue_control WHERE queue = $1 AND job_type IS NULL"
                          "        AND concurrency_key IS NULL FOR UPDATE SKIP LOCKED) l"
                          " WHERE c.ctid = l.ctid AND" MARK_IS_IDLE,
                          1,
                          {TEXTOID}};

#undef MARK_IS_IDLE

} // namespace stmts

namespace {

LOCKTAG
TagOf(Datum queue)
{
	text *name = DatumGetTextPP(queue);
	uint32 hash = hash_bytes(reinterpret_cast<const unsigned char *>(VARDATA_ANY(name)),
	                         static_cast<int>(VARSIZE_ANY_EXHDR(name)));
	LOCKTAG tag;
	SET_LOCKTAG_ADVISORY(tag, MyDatabaseId, kLockClass, hash % kBuckets, 2);
	return tag;
}

} // namespace

void
LockShared(Datum queue)
{
	LOCKTAG tag = TagOf(queue);
	(void)LockAcquire(&tag, ShareLock, false, false);
}

int64
ForgetIdle()
{
	if (IsolationUsesXactSnapshot() || citus::JobTablesDistributed())
		return 0;
	/* Where the last call stopped: each looks at kWindow queues, wrapping
	 * round, so that a round costs as much beside 10,000 queues as beside
	 * 256 and each queue is looked at within queues / kWindow rounds. */
	static char *after = nullptr;
	Datum window_values[1] = {CStringGetTextDatum(after ? after : "")};
	uint64 examined = spi::Exec(stmts::kIdleMarks, window_values, nullptr, SPI_OK_SELECT);
	Datum *queues = static_cast<Datum *>(palloc(sizeof(Datum) * Max(examined, 1)));
	uint64 n = 0;
	for (uint64 i = 0; i < examined; i++)
		if (spi::ColBool(i, 2))
			queues[n++] = PointerGetDatum(cstring_to_text(spi::ColText(i, 1)));
	char *last = examined == static_cast<uint64>(stmts::kWindow) ? spi::ColText(examined - 1, 1) : nullptr;
	if (after)
		pfree(after);
	after = last ? MemoryContextStrdup(TopMemoryContext, last) : nullptr;
	int64 cleared = 0;
	for (uint64 i = 0; i < n; i++) {
		LOCKTAG tag = TagOf(queues[i]);
		if (LockAcquire(&tag, ExclusiveLock, false, true) == LOCKACQUIRE_NOT_AVAIL)
			continue; /* a keyed enqueue of its bucket is under way */
		Datum values[1] = {queues[i]};
		if (spi::Exec(stmts::kClearMark, values, nullptr, SPI_OK_UPDATE) == 0)
			continue;
		queue_control::ForgetIdle(DatumGetTextPP(queues[i])); /* its row, if nothing else is in it */
		cleared++;
	}
	if (cleared > 0)
		flow_control::NoteChanged();
	return cleared;
}

} // namespace pqrun::keyed_queues

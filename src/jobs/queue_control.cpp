/* src/jobs/queue_control.cpp — setting the flow controls of queues
 * (queue_control.hpp). */
#include "jobs/queue_control.hpp"

#include "jobs/flow_control.hpp"
#include "pg/citus.hpp"
#include "pg/spi_plans.hpp"

namespace pqrun::queue_control {

namespace stmts {

spi::Statement kPause{"pause queue",
                      "INSERT INTO pqrun.queue_control AS c (queue, paused) VALUES ($1, true)"
                      " ON CONFLICT (queue, job_type" PQRUN_JOB_KEY ") DO UPDATE SET paused = true,"
                      "   updated_at = pg_catalog.now()"
                      " WHERE NOT c.paused RETURNING 1",
                      1,
                      {TEXTOID}};

spi::Statement kResume{"resume queue",
                       "UPDATE pqrun.queue_control SET paused = false, updated_at = pg_catalog.now()"
                       " WHERE queue = $1 AND job_type IS NULL" PQRUN_UNKEYED " AND paused RETURNING 1",
                       1,
                       {TEXTOID}};

spi::Statement kSetLimit{"set limit",
                         "INSERT INTO pqrun.queue_control AS c (queue, job_type, max_running) VALUES ($1, $2, $3)"
                         " ON CONFLICT (queue, job_type" PQRUN_JOB_KEY ") DO UPDATE SET max_running = $3,"
                         "   updated_at = pg_catalog.now()",
                         3,
                         {TEXTOID, TEXTOID, INT4OID}};

spi::Statement kRemoveLimit{"remove limit",
                            "UPDATE pqrun.queue_control SET max_running = NULL, updated_at = pg_catalog.now()"
                            " WHERE queue = $1 AND job_type IS NOT DISTINCT FROM $2" PQRUN_UNKEYED
                            "   AND max_running IS NOT NULL",
                            2,
                            {TEXTOID, TEXTOID}};

spi::Statement kSetRate{"set rate",
                        "INSERT INTO pqrun.queue_control AS c (queue, job_type, rate, burst) VALUES ($1, $2, $3, $4)"
                        " ON CONFLICT (queue, job_type" PQRUN_JOB_KEY ") DO UPDATE SET rate = $3, burst = $4,"
                        "   updated_at = pg_catalog.now()",
                        4,
                        {TEXTOID, TEXTOID, FLOAT8OID, INT4OID}};

spi::Statement kRemoveRate{"remove rate",
                           "UPDATE pqrun.queue_control SET rate = NULL, burst = NULL, updated_at = pg_catalog.now()"
                           " WHERE queue = $1 AND job_type IS NOT DISTINCT FROM $2" PQRUN_UNKEYED
                           "   AND rate IS NOT NULL",
                           2,
                           {TEXTOID, TEXTOID}};

/* A key's own limit (from 0.10.0, as the two below). */
spi::Statement kSetKeyLimit{"set key limit",
                            "INSERT INTO pqrun.queue_control AS c (queue, concurrency_key, max_running)"
                            " VALUES ($1, $2, $3) ON CONFLICT (queue, job_type, concurrency_key)"
                            " DO UPDATE SET max_running = $3, updated_at = pg_catalog.now()",
                            3,
                            {TEXTOID, TEXTOID, INT4OID}};

spi::Statement kRemoveKeyLimit{"remove key limit",
                               "UPDATE pqrun.queue_control SET max_running = NULL, updated_at = pg_catalog.now()"
                               " WHERE queue = $1 AND job_type IS NULL AND concurrency_key = $2"
                               "   AND max_running IS NOT NULL",
                               2,
                               {TEXTOID, TEXTOID}};

/* A queue's limit for each key without one of its own ($2 unused). */
spi::Statement kSetPerKey{"set limit per key",
                          "INSERT INTO pqrun.queue_control AS c (queue, max_running_per_key) VALUES ($1, $3)"
                          " ON CONFLICT (queue, job_type, concurrency_key)"
                          " DO UPDATE SET max_running_per_key = $3, updated_at = pg_catalog.now()",
                          3,
                          {TEXTOID, TEXTOID, INT4OID}};

spi::Statement kRemovePerKey{"remove limit per key",
                             "UPDATE pqrun.queue_control SET max_running_per_key = NULL, updated_at = pg_catalog.now()"
                             " WHERE queue = $1 AND $2::text IS NULL AND job_type IS NULL AND concurrency_key IS NULL"
                             "   AND max_running_per_key IS NOT NULL",
                             2,
                             {TEXTOID, TEXTOID}};

/* A key's own rate limit, and (the two below, $2 unused) a queue's rate
 * limit for each key without one of its own (from 0.11.0). */
spi::Statement kSetKeyRate{"set key rate",
                           "INSERT INTO pqrun.queue_control AS c (queue, concurrency_key, rate, burst)"
                           " VALUES ($1, $2, $3, $4) ON CONFLICT (queue, job_type, concurrency_key)"
                           " DO UPDATE SET rate = $3, burst = $4, updated_at = pg_catalog.now()",
                           4,
                           {TEXTOID, TEXTOID, FLOAT8OID, INT4OID}};

spi::Statement kRemoveKeyRate{"remove key rate",
                              "UPDATE pqrun.queue_control SET rate = NULL, burst = NULL, updated_at = pg_catalog.now()"
                              " WHERE queue = $1 AND job_type IS NULL AND concurrency_key = $2 AND rate IS NOT NULL",
                              2,
                              {TEXTOID, TEXTOID}};

spi::Statement kSetRatePerKey{"set rate per key",
                              "INSERT INTO pqrun.queue_control AS c (queue, rate_per_key, burst_per_key)"
                              " VALUES ($1, $3, $4) ON CONFLICT (queue, job_type, concurrency_key)"
                              " DO UPDATE SET rate_per_key = $3, burst_per_key = $4, updated_at = pg_catalog.now()",
                              4,
                              {TEXTOID, TEXTOID, FLOAT8OID, INT4OID}};

spi::Statement kRemoveRatePerKey{
    "remove rate per key",
    "UPDATE pqrun.queue_control SET rate_per_key = NULL, burst_per_key = NULL, updated_at = pg_catalog.now()"
    " WHERE queue = $1 AND $2::text IS NULL AND job_type IS NULL AND concurrency_key IS NULL"
    "   AND rate_per_key IS NOT NULL",
    2,
    {TEXTOID, TEXTOID}};

/* A row that neither pauses nor limits anything goes (unless it marks a
 * keyed queue, whose pickups must walk its lanes). */
spi::Statement kForgetIdle{"forget idle control",
                           "DELETE FROM pqrun.queue_control WHERE queue = $1 AND NOT paused AND max_running IS NULL"
                           "   AND rate IS NULL" PQRUN_IDLE_KEYS PQRUN_IDLE_KEY_RATES,
                           1,
                           {TEXTOID}};

} // namespace stmts

namespace {

/* EnterQueue: on Citus, a queue's controls are kept (pqrun.queue_control)
 * and applied (flow_control.cpp) on the node that holds it, where the call
 * is delegated (pg/citus.hpp). */
void
EnterQueue(text *queue)
{
	if (citus::JobTablesDistributed())
		citus::EnterQueue(text_to_cstring(queue));
}

/* Change runs `set` (when `setting`) or `remove` with `values` (queue,
 * job_type, then what `set` sets), then announces the change. */
void
Change(bool setting, spi::Statement &set, spi::Statement &remove, Datum *values, const char *nulls)
{
	if (setting) {
		spi::Exec(set, values, nulls, SPI_OK_INSERT);
	} else {
		spi::Exec(remove, values, nulls, SPI_OK_UPDATE);
		ForgetIdle(DatumGetTextPP(values[0]));
	}
	flow_control::NoteChanged();
}

} // namespace

bool
Pause(text *queue, bool paused)
{
	EnterQueue(queue);
	Datum values[1] = {PointerGetDatum(queue)};
	bool changed = paused ? spi::Exec(stmts::kPause, values, nullptr, SPI_OK_INSERT_RETURNING) > 0
	                      : spi::Exec(stmts::kResume, values, nullptr, SPI_OK_UPDATE_RETURNING) > 0;
	if (!paused)
		ForgetIdle(queue);
	if (changed)
		flow_control::NoteChanged();
	return changed;
}

void
SetLimit(text *queue, text *job_type, int32 max_running)
{
	EnterQueue(queue);
	Datum values[3] = {PointerGetDatum(queue), PointerGetDatum(job_type), Int32GetDatum(max_running)};
	char nulls[4] = {' ', job_type ? ' ' : 'n', ' ', '\0'};
	Change(max_running >= 0, stmts::kSetLimit, stmts::kRemoveLimit, values, nulls);
}

void
SetKeyLimit(text *queue, text *key, int32 max_running)
{
	EnterQueue(queue);
	Datum values[3] = {PointerGetDatum(queue), PointerGetDatum(key), Int32GetDatum(max_running)};
	char nulls[4] = {' ', key ? ' ' : 'n', ' ', '\0'};
	if (key)
		Change(max_running >= 0, stmts::kSetKeyLimit, stmts::kRemoveKeyLimit, values, nulls);
	else
		Change(max_running >= 0, stmts::kSetPerKey, stmts::kRemovePerKey, values, nulls);
}

void
SetRate(text *queue, text *job_type, double per_second, int32 burst)
{
	EnterQueue(queue);
	Datum values[4] = {PointerGetDatum(queue), PointerGetDatum(job_type), Float8GetDatum(per_second),
	                   Int32GetDatum(burst)};
	char nulls[5] = {' ', job_type ? ' ' : 'n', ' ', ' ', '\0'};
	Change(per_second > 0, stmts::kSetRate, stmts::kRemoveRate, values, nulls);
}

void
SetKeyRate(text *queue, text *key, double per_second, int32 burst)
{
	EnterQueue(queue);
	Datum values[4] = {PointerGetDatum(queue), PointerGetDatum(key), Float8GetDatum(per_second), Int32GetDatum(burst)};
	char nulls[5] = {' ', key ? ' ' : 'n', ' ', ' ', '\0'};
	if (key)
		Change(per_second > 0, stmts::kSetKeyRate, stmts::kRemoveKeyRate, values, nulls);
	else
		Change(per_second > 0, stmts::kSetRatePerKey, stmts::kRemoveRatePerKey, values, nulls);
}

void
ForgetIdle(text *queue)
{
	Datum values[1] = {PointerGetDatum(queue)};
	spi::Exec(stmts::kForgetIdle, values, nullptr, SPI_OK_DELETE);
}

} // namespace pqrun::queue_control

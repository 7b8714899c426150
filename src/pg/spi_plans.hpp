/* src/pg/spi_plans.hpp — the plan cache of pqrun's SQL statements.
 *
 * Each operation's file defines the statements it runs, as spi::Statement
 * objects in a namespace `stmts` beside the code that runs them. Their text
 * is schema-qualified and takes values only as parameters. A statement is
 * prepared on first use in each backend and its plan kept for the backend's
 * lifetime; PostgreSQL's plan cache re-plans it after DDL (including
 * DROP/CREATE EXTENSION). Callers must be connected to SPI.
 */
#pragma once

#include "pg/pg.hpp"

/* Pieces of statement text that several statements share. */
#define PQRUN_LEASE_TOKEN "pqrun._lease_token()"
/* The session holding a claim: this one where `held` (an SQL condition) is
 * true, none (the lease alone holds it) where it is not. `held` is one of
 * the three conditions below. */
#define PQRUN_SET_HOLDER_PID(held) "holder_pid = CASE WHEN " held " THEN pg_catalog.pg_backend_pid() END, "
#define PQRUN_SET_HOLDER_STARTED(held) "holder_started = CASE WHEN " held " THEN pqrun._backend_started() END, "
#define PQRUN_SET_HOLDER(held) PQRUN_SET_HOLDER_PID(held) PQRUN_SET_HOLDER_STARTED(held)
/* A claim made now, by this session's pqrun.claim_hold. */
#define PQRUN_HELD_BY_SETTING "pg_catalog.current_setting('pqrun.claim_hold') OPERATOR(pg_catalog.=) 'session'"
/* A claim written later, as its pickup decided ($5 of the write). */
#define PQRUN_HELD_AS_PICKED "$5"
/* A claim renewed (a heartbeat): held as it was, by the renewing session. */
#define PQRUN_HELD_AS_BEFORE "holder_pid IS NOT NULL"
#define PQRUN_CLEAR_HOLDER_STARTED "holder_started = NULL, "
#define PQRUN_SELECT_HOLDER_STARTED "holder_started AS started"
#define PQRUN_SAME_HOLDER_STARTED " AND holder_started IS NOT DISTINCT FROM $3"
#define PQRUN_JOB_PROGRESS ", progress, snoozes"
#define PQRUN_JOB_KEY ", concurrency_key"
#define PQRUN_JOB_WEIGHT ", rate_weight"
#define PQRUN_JOB_CONTROLS PQRUN_JOB_PROGRESS PQRUN_JOB_KEY PQRUN_JOB_WEIGHT
#define PQRUN_ENQUEUE_KEY ", $13::text"
#define PQRUN_ENQUEUE_WEIGHT ", $14::int"
#define PQRUN_CANCELLED_KEY ", $12::text"
#define PQRUN_CANCELLED_WEIGHT ", $13::int"
#define PQRUN_UNKEYED " AND concurrency_key IS NULL"
#define PQRUN_CONTROL_KEYS ", concurrency_key, max_running_per_key, keyed"
#define PQRUN_CONTROL_KEY_RATES ", rate_per_key, burst_per_key"
#define PQRUN_IDLE_KEYS " AND max_running_per_key IS NULL AND NOT keyed"
#define PQRUN_IDLE_KEY_RATES " AND rate_per_key IS NULL"
#define PQRUN_SET_PROGRESS "progress = COALESCE($3, progress), "

namespace pqrun::spi {

constexpr int kMaxArgs = 14;

/* Statement is one SQL statement and this backend's kept plan of it. */
struct Statement {
	const char *name;
	const char *sql;
	int nargs;
	Oid argtypes[kMaxArgs];
	SPIPlanPtr plan = nullptr; /* in CacheMemoryContext */
};

/* Connect and Finish pair SPI_connect/SPI_finish, raising on failure. */
void Connect();
void Finish();

/* ForgetLastResult frees the last result of this SPI connection. Every
 * statement below does it before it runs (spi_rows.hpp reads only the last
 * result): a call that runs statements in a loop (an element, a key, a look
 * of a wait at a time) holds one result at a time, not all of them until it
 * returns. */
void ForgetLastResult();

/* Exec runs `stmt` with `values`/`nulls` (nulls as in SPI: ' ' or 'n'),
 * raising an internal error unless SPI answers `expected_rc`. Returns
 * SPI_processed; rows are in SPI_tuptable until the next statement, which
 * frees them (every statement here does). */
uint64 Exec(Statement &stmt, Datum *values, const char *nulls, int expected_rc, long count = 0);

/* ExecLatest runs the SELECT `stmt` read-only under a snapshot taken now,
 * whatever the transaction's isolation: it sees every commit so far, also
 * in REPEATABLE READ, and this transaction's own changes only when
 * `own_changes` (else the rows as they were before it began). */
uint64 ExecLatest(Statement &stmt, Datum *values, const char *nulls, bool own_changes);

/* ExecInto runs the SELECT `stmt` like Exec but sends its rows to `dest` as
 * the executor makes them, instead of copying them into SPI_tuptable. */
uint64 ExecInto(Statement &stmt, Datum *values, const char *nulls, DestReceiver *dest);

} // namespace pqrun::spi

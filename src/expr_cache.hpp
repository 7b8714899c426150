/* src/expr_cache.hpp — constraint and index predicate states kept per backend.
 *
 * Every statement that writes a table builds, for each new row's checks,
 * the table's CHECK constraints from their stored node strings and each
 * partial index's predicate, plans and compiles them: for pqrun's tables
 * (two CHECK constraints and five partial indexes on job_live) that costs
 * more than evaluating them. This module compiles each once per backend and
 * hands the compiled states to the executor's ResultRelInfo before it would
 * build its own, for expressions that call only built-in functions (so that
 * nothing they call can change without the relation's invalidation). A
 * relcache invalidation of the table or index drops its states; they are
 * freed at the end of the transaction, after any statement that still uses
 * them.
 */
#pragma once

#include "pg.hpp"

namespace pqrun::expr_cache {

/* Fill gives `info` (a result relation with its indexes open) the kept
 * CHECK constraint and index predicate states that it has not built yet. */
void Fill(ResultRelInfo *info);

/* InstallHooks registers the relcache callback, and an executor-start hook
 * that fills the result relations in pqrun's schema of every query (the
 * executor opens their indexes at the first row, so that gives them the
 * CHECK constraints only). */
void InstallHooks();

} // namespace pqrun::expr_cache

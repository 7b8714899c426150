/* src/jobs/expr_cache.hpp — expression states kept per backend.
 *
 * Every statement that writes a table builds, for each new row's checks,
 * the table's CHECK constraints from their stored node strings and each
 * partial index's predicate (and, for an insert, the defaults of the columns
 * it leaves out), plans and compiles them: for pqrun's tables (two CHECK
 * constraints and five partial indexes on job_live) that costs more than
 * evaluating them. This module compiles each once per backend, for
 * expressions that call only built-in functions (so that nothing they call
 * can change without the relation's invalidation), and hands the compiled
 * states to the executor's ResultRelInfo before it would build its own, or
 * to the direct insert (enqueue_direct.hpp). A relcache invalidation of the
 * table or index drops its states; they are freed at the end of the
 * transaction, after any statement that still uses them.
 */
#pragma once

#include "pg/pg.hpp"

namespace pqrun::expr_cache {

/* Fill gives `info` (a result relation with its indexes open) the kept
 * CHECK constraint and index predicate states that it has not built yet. */
void Fill(ResultRelInfo *info);

/* Defaults answers the kept states of `rel`'s column defaults, by
 * attribute number from 0 (nullptr for a column without default), or
 * nullptr when one of them may not be kept. A state stays valid until the
 * end of the transaction. */
ExprState *const *Defaults(Relation rel);

/* FillQuery fills the result relations in pqrun's schema of a query the
 * executor just started (the executor-start hook, hooks.cpp; it opens their
 * indexes at the first row, so that gives them the CHECK constraints only). */
void FillQuery(QueryDesc *query_desc);

/* OnRelcacheInvalidation forgets what was kept of `relid` (every relation
 * when InvalidOid); the relcache callback, hooks.cpp. */
void OnRelcacheInvalidation(Oid relid);

} // namespace pqrun::expr_cache

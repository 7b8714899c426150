/* src/compat.hpp — every PostgreSQL version difference pqrun depends on.
 *
 * pqrun targets PostgreSQL 15; newer majors are meant to need changes here
 * only. Included by pg.hpp after the server headers.
 */
#pragma once

#if PG_VERSION_NUM < 150000
#error "pqrun needs PostgreSQL 15 or later"
#endif

/* PG17 lets extensions register their own wait events; before that the
 * closest built-in class is used. */
#if PG_VERSION_NUM >= 170000
#define PQRUN_HAVE_CUSTOM_WAIT_EVENTS 1
#else
#define PQRUN_HAVE_CUSTOM_WAIT_EVENTS 0
#endif

/* PG18 carries the module's name and version in its magic block. */
#if PG_VERSION_NUM >= 180000
#define PQRUN_MODULE_MAGIC PG_MODULE_MAGIC_EXT(.name = "pqrun", .version = PQRUN_VERSION)
#else
#define PQRUN_MODULE_MAGIC PG_MODULE_MAGIC
#endif

namespace pqrun::compat {

/* PG16 added a flag to insert into summarizing indexes only. */
inline List *
InsertIndexTuples(ResultRelInfo *result_rel, TupleTableSlot *slot, EState *estate)
{
#if PG_VERSION_NUM >= 160000
	return ExecInsertIndexTuples(result_rel, slot, estate, false, false, nullptr, NIL, false);
#else
	return ExecInsertIndexTuples(result_rel, slot, estate, false, false, nullptr, NIL);
#endif
}

} // namespace pqrun::compat

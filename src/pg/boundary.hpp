/* src/pg/boundary.hpp — the C/C++ error boundary.
 *
 * A PostgreSQL ERROR is a siglongjmp that never runs C++ destructors, and a
 * C++ exception must never unwind through PostgreSQL's C frames. Every symbol
 * PostgreSQL calls therefore goes through GuardedEntry (C++ exception → PG
 * error), and no C++ frame that owns RAII objects calls what may raise a
 * PostgreSQL ERROR. Nothing else converts errors.
 */
#pragma once

#include "pg/installed.hpp"
#include "pg/pg.hpp"

#include <cstring>
#include <exception>
#include <new>
#include <type_traits>

namespace pqrun {

enum class Caught { kNothing, kBadAlloc, kStdException, kUnknown };

/* GuardedEntry runs `body` and turns any C++ exception into a PostgreSQL
 * ERROR raised after the catch block has ended (raising inside a catch block
 * would longjmp out of the C++ runtime's exception handling). */
template <typename Body>
inline auto
GuardedEntry(Body &&body) -> decltype(body())
{
	using Result = decltype(body());
	static char what_buf[512];
	Caught caught = Caught::kNothing;
	try {
		if constexpr (std::is_void_v<Result>) {
			body();
			return;
		} else {
			return body();
		}
	} catch (const std::bad_alloc &) {
		caught = Caught::kBadAlloc;
	} catch (const std::exception &e) {
		strlcpy(what_buf, e.what(), sizeof(what_buf));
		caught = Caught::kStdException;
	} catch (...) {
		caught = Caught::kUnknown;
	}
	switch (caught) {
	case Caught::kBadAlloc:
		ereport(ERROR, (errcode(ERRCODE_OUT_OF_MEMORY), errmsg("pqrun: out of memory")));
		break;
	case Caught::kStdException:
		ereport(ERROR, (errcode(ERRCODE_INTERNAL_ERROR), errmsg("pqrun: %s", what_buf)));
		break;
	default:
		ereport(ERROR, (errcode(ERRCODE_INTERNAL_ERROR), errmsg("pqrun: unknown C++ exception")));
	}
	pg_unreachable();
}

/* Keys that go into a btree (dedupe_key, fifo_key, a schedule's name and
 * key) are at most this long, well under btree's row limit (54000 with a
 * message about index rows otherwise). */
constexpr int kMaxKeyBytes = 1000;

/* RaiseInvalid reports a bad argument value (SQLSTATE 22023); `element`,
 * when positive, is the enqueue_batch element (from 1) it is about. */
[[noreturn]] inline void
RaiseInvalid(const char *message, int element = 0)
{
	if (element > 0)
		ereport(ERROR,
		        (errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("enqueue_batch element %d: %s", element, message)));
	ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("%s", message)));
	pg_unreachable();
}

} // namespace pqrun

/* PQRUN_FUNCTION(pqrun_x) { ... } defines the SQL-callable pqrun_x with C
 * linkage, whose body (pqrun_xImpl) runs inside the entry guard once the
 * installed SQL objects are known to be a version this library serves
 * (installed.hpp: 55000 otherwise). PQRUN_FUNCTION_ANY_VERSION defines one
 * that depends on no SQL object of pqrun (a pure function, a reader of
 * shared memory, what an install script calls), which any version may
 * call. */
#define PQRUN_FUNCTION_GUARDED(name, check)                                                                            \
	static Datum name##Impl(FunctionCallInfo fcinfo);                                                                  \
	extern "C" {                                                                                                       \
	PG_FUNCTION_INFO_V1(name);                                                                                         \
	Datum name(PG_FUNCTION_ARGS)                                                                                       \
	{                                                                                                                  \
		return pqrun::GuardedEntry([fcinfo]() {                                                                        \
			check;                                                                                                     \
			return name##Impl(fcinfo);                                                                                 \
		});                                                                                                            \
	}                                                                                                                  \
	}                                                                                                                  \
	static Datum name##Impl(FunctionCallInfo fcinfo)
#define PQRUN_FUNCTION(name) PQRUN_FUNCTION_GUARDED(name, pqrun::installed::RequireServed())
#define PQRUN_FUNCTION_ANY_VERSION(name) PQRUN_FUNCTION_GUARDED(name, (void)0)

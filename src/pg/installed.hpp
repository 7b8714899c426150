/* src/pg/installed.hpp — the version of pqrun's SQL objects in this
 * database, read from pg_extension, and whether this library serves it.
 *
 * A library serves two releases' SQL: its own and the one before (the
 * `A` of sql/pqrun--A--<its version>.sql), so a server restarted on a new
 * build keeps working until ALTER EXTENSION pqrun UPDATE, and the update
 * runs while workers call. Any other version gets SQLSTATE 55000 from every
 * call that depends on the SQL objects, with what to do in its hint, and
 * the database's maintenance worker waits with a WARNING.
 *
 * The version is read once per backend and read again after CREATE, ALTER
 * or DROP EXTENSION pqrun: the backend that ran it sends a relcache
 * invalidation of pg_extension at its commit (utility.cpp), which every
 * backend's callback takes as "read it again". Inside an extension script
 * it is read each time (the script moves it on, step by step).
 */
#pragma once

#include "pg/pg.hpp"

namespace pqrun::installed {

/* Served answers whether this library serves the SQL objects installed in
 * this database (false where pqrun is not installed). In a transaction. */
bool Served();

/* RequireServed raises 55000 unless Served(), saying which version is
 * installed, which ones the library serves, and what to run. */
void RequireServed();

/* Describe answers, for a WARNING or an error, what is installed and what
 * this library serves; Hint, what to do about it. */
const char *Describe();
const char *Hint();

/* Changed: CREATE, ALTER or DROP EXTENSION pqrun ran in this transaction;
 * every backend reads the version again after its commit. */
void Changed();

/* OnRelcacheInvalidation forgets the version read when pg_extension is
 * invalidated (or everything is). */
void OnRelcacheInvalidation(Oid relid);

} // namespace pqrun::installed

/* sql/pqrun--0.21.0--0.22.0.sql — ALTER EXTENSION pqrun UPDATE from 0.21.0.
 *
 * 0.22.0 changes no SQL object. Its library reads the installed version
 * from pg_extension and serves the SQL of 0.21.0 and 0.22.0; an older
 * install gets SQLSTATE 55000 with the hint to run this update (see
 * docs/upgrading.md).
 */
\echo Use "ALTER EXTENSION pqrun UPDATE TO '0.22.0'" to load this file. \quit

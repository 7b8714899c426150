/* sql/pqrun--0.3.0--0.4.0.sql — ALTER EXTENSION pqrun UPDATE from 0.3.0.
 *
 * 0.4.0 marks the job tables and the id sequence as extension
 * configuration, so pg_dump keeps jobs (until 0.3.0 it kept only the
 * schedules in pqrun.periodic, and a dump and restore lost every job). The
 * storage is unchanged.
 */
\echo Use "ALTER EXTENSION pqrun UPDATE TO '0.4.0'" to load this file. \quit

SELECT pg_catalog.pg_extension_config_dump('pqrun.job_live', '');
SELECT pg_catalog.pg_extension_config_dump('pqrun.job_done', '');
SELECT pg_catalog.pg_extension_config_dump('pqrun.attempt_log', '');
SELECT pg_catalog.pg_extension_config_dump('pqrun.job_dep', '');
SELECT pg_catalog.pg_extension_config_dump('pqrun.job_id_seq', '');

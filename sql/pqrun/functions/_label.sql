/* A label value quoted as the Prometheus text format wants it: only
 * backslash, double quote and line feed escaped (to_json's JSON escapes,
 * \t or \u0001, are not the format's: promtool refuses the whole text). */
CREATE FUNCTION pqrun._label(value text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN '"' OPERATOR(pg_catalog.||)
       pg_catalog.replace(pg_catalog.replace(pg_catalog.replace(value, E'\\', E'\\\\'), '"', E'\\"'), E'\n', E'\\n')
       OPERATOR(pg_catalog.||) '"';

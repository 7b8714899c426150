/* The arguments every bulk action checks alike (22023). */
CREATE FUNCTION pqrun._check_bulk(statuses pqrun.job_status[], allowed pqrun.job_status[], batch_size int)
RETURNS void LANGUAGE plpgsql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
	IF statuses IS NULL OR cardinality(statuses) = 0 OR NOT statuses <@ allowed OR array_position(statuses, NULL) IS NOT NULL THEN
		RAISE EXCEPTION 'statuses must be among %', allowed USING ERRCODE = 'invalid_parameter_value';
	END IF;
	IF batch_size IS NULL OR batch_size < 1 OR batch_size > 10000 THEN
		RAISE EXCEPTION 'batch_size must be between 1 and 10000' USING ERRCODE = 'invalid_parameter_value';
	END IF;
END $$;

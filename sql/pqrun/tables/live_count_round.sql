/* When that count was taken and how long it took: one row. */
CREATE TABLE pqrun.live_count_round (
	counted_at timestamptz NOT NULL,
	took       interval    NOT NULL,
	only_row   boolean     NOT NULL DEFAULT true PRIMARY KEY CHECK (only_row)
);
REVOKE ALL ON pqrun.live_counts, pqrun.live_count_round FROM PUBLIC;

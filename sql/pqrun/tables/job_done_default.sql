CREATE TABLE pqrun.job_done_default PARTITION OF pqrun.job_done DEFAULT;
CREATE INDEX job_done_default_id ON pqrun.job_done_default (id);
/* Its retention is by DELETE, in finish order. */
CREATE INDEX job_done_default_finished ON pqrun.job_done_default (finished_at);

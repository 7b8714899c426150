CREATE SEQUENCE pqrun.job_id_seq;

-- E1 reference (PgQ): one insert_event per transaction.
SELECT pgq.insert_event('eq', 'e1', :client_id::text);

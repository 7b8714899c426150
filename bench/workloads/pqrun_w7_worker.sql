-- W7/W7h worker (pqrun), one client of a fleet: the README's worker loop.
-- A waiting pickup of up to :batch jobs (wait :wait); then each claimed job
-- is finished in its own transaction, the last of them with
-- mark_done_and_pickup, which claims up to :batch more; when that claims
-- nothing, back to the waiting pickup. The leases are passed as the README's
-- worker passes them; :jt is the job types it asks for ("*" for any, else a
-- comma-separated list). State between steps: the claimed ids and leases not
-- yet finished (pgbench starts each client at -D n=0 -D ids={} -D leases={}).
\if :n = 0
SELECT coalesce(array_agg(id)::text, '{}') AS ids, coalesce(array_agg(lease_token)::text, '{}') AS leases, count(*) AS n
  FROM pqrun.pickup('w' || :client_id::text, job_types => string_to_array(nullif(:jt, '*'), ','),
                    batch_size => :batch, wait => :wait::interval) \gset
\elif :n = 1
SELECT coalesce(array_agg(id)::text, '{}') AS ids, coalesce(array_agg(lease_token)::text, '{}') AS leases, count(*) AS n
  FROM pqrun.mark_done_and_pickup('w' || :client_id::text, :ids::bigint[], :leases::uuid[],
                                  job_types => string_to_array(nullif(:jt, '*'), ','), batch_size => :batch) \gset
\else
SELECT pqrun.mark_done((:ids::bigint[])[1], lease_token => (:leases::uuid[])[1]) AS finished,
       ((:ids::bigint[])[2:])::text AS ids, ((:leases::uuid[])[2:])::text AS leases \gset
\set n :n - 1
\endif

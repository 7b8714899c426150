-- schedule: cron_next, schedule/unschedule and the firing of due schedules.
--
-- cron_next is checked on fixed instants only. Firing is driven by moving
-- pqrun.periodic.next_run into the past and calling the firing step
-- (pqrun._fire_due_schedules(), what a maintenance round runs) in the same
-- transaction, so the background maintenance worker of a preloaded server
-- cannot fire the slot first; only booleans are printed about volatile times.
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS pqrun CASCADE;
CREATE EXTENSION pqrun;
RESET client_min_messages;
SET TimeZone = 'UTC';
SET DateStyle = 'ISO, YMD';
SET IntervalStyle = 'postgres';
\pset null '(null)'

-- 1. cron_next in UTC: every field feature. 2026-03-15 is a Sunday.
SELECT id, expr, after, pqrun.cron_next(expr, after) AS next,
       to_char(pqrun.cron_next(expr, after), 'Dy') AS dow
  FROM (VALUES
    -- every minute, strictly after, seconds and fractions ignored
    (1,  '* * * * *',            '2026-03-15 10:20:00'::timestamptz),
    (2,  '* * * * *',            '2026-03-15 10:20:59.999999'),
    (3,  '* * * * *',            '2026-03-15 23:59:30'),
    -- minute lists, ranges, steps
    (4,  '*/15 * * * *',         '2026-03-15 10:20:00'),
    (5,  '*/15 * * * *',         '2026-03-15 10:45:00'),
    (6,  '5,10,50 * * * *',      '2026-03-15 10:20:00'),
    (7,  '10-12 * * * *',        '2026-03-15 10:12:00'),
    (8,  '10-30/10 * * * *',     '2026-03-15 10:20:00'),
    (9,  '10-30/10 * * * *',     '2026-03-15 10:30:00'),
    (10, '7/20 * * * *',         '2026-03-15 10:48:00'),
    (11, '0,30 * * * *',         '2026-03-15 10:00:00'),
    (12, '59 * * * *',           '2026-03-15 23:59:00'),
    -- hours
    (13, '0 */6 * * *',          '2026-03-15 10:20:00'),
    (14, '30 9-17/4 * * *',      '2026-03-15 10:20:00'),
    (15, '30 9-17/4 * * *',      '2026-03-15 17:30:00'),
    (16, '15 0,12 * * *',        '2026-03-15 12:15:00'),
    (17, '0 0 * * *',            '2026-12-31 23:59:59'),
    -- days of month and month ends
    (18, '0 0 1 * *',            '2026-01-31 00:00:00'),
    (19, '0 0 31 * *',           '2026-04-01 00:00:00'),
    (20, '0 0 31 * *',           '2026-01-31 00:00:00'),
    (21, '59 23 30 * *',         '2026-01-31 00:00:00'),
    (22, '0 12 1,15 * *',        '2026-03-15 12:00:00'),
    (23, '0 0 28-31 2 *',        '2026-02-27 12:00:00'),
    -- months, by number and by name (case-insensitive), lists, ranges, steps
    (24, '0 0 1 jan,jul *',      '2026-03-15 00:00:00'),
    (25, '0 0 1 JUL-Sep *',      '2026-08-01 00:00:00'),
    (26, '0 0 1 jan-dec/3 *',    '2026-03-15 00:00:00'),
    (27, '0 0 1 */5 *',          '2026-03-15 00:00:00'),
    (28, '0 0 1 12 *',           '2026-12-01 00:00:00'),
    -- days of week: numbers, names, 0 and 7 are Sunday
    (29, '0 0 * * MON',          '2026-03-15 10:20:00'),
    (30, '0 0 * * 0',            '2026-03-15 10:20:00'),
    (31, '0 0 * * 7',            '2026-03-15 10:20:00'),
    (32, '0 0 * * sun',          '2026-03-15 10:20:00'),
    (33, '0 0 * * 1-5',          '2026-03-20 10:00:00'),
    (34, '0 0 * * 5-7',          '2026-03-16 10:00:00'),
    (35, '0 0 * * fri-7',        '2026-03-22 10:00:00'),
    (36, '0 0 * * 1/2',          '2026-03-20 10:00:00'),
    (37, '0 0 * * Tue,thu',      '2026-03-17 00:00:00'),
    (38, '0 0 * * 6,7',          '2026-03-16 00:00:00'),
    -- Vixie rule: both day fields restricted, a day matching either fires
    (39, '0 0 13 * fri',         '2026-03-15 00:00:00'),
    (40, '0 0 13 * fri',         '2026-04-10 12:00:00'),
    (41, '0 0 1 * mon',          '2026-03-24 00:00:00'),
    -- ... but a field starting with '*' makes it an AND
    (42, '0 0 */2 * fri',        '2026-03-15 00:00:00'),
    (43, '0 0 13 * */1',         '2026-03-15 00:00:00'),
    (44, '0 0 1-7 * */7',        '2026-03-15 00:00:00'),
    -- leap years (2100 is not one)
    (45, '0 0 29 2 *',           '2026-03-01 00:00:00'),
    (46, '0 0 29 2 *',           '2024-02-28 12:00:00'),
    (47, '0 0 29 2 *',           '2024-02-29 00:00:00'),
    (48, '0 0 29 2 *',           '2096-03-01 00:00:00'),
    (49, '0 0 29 feb thu',       '2028-02-20 00:00:00'),
    (50, '0 0 29 2 */1',         '2026-01-01 00:00:00'),
    -- macros (case-insensitive)
    (52, '@yearly',              '2026-03-15 10:20:00'),
    (53, '@annually',            '2026-12-31 23:59:59'),
    (54, '@monthly',             '2026-03-15 10:20:00'),
    (55, '@weekly',              '2026-03-15 10:20:00'),
    (56, '@weekly',              '2026-03-14 23:59:59'),
    (57, '@daily',               '2026-03-15 10:20:00'),
    (58, '@midnight',            '2026-03-15 00:00:00'),
    (59, '@hourly',              '2026-03-15 10:20:00'),
    (60, '@DAILY',               '2026-03-15 10:20:00'),
    -- whitespace, far past and far future
    (61, E'  0\t12  * *   * ',   '2026-03-15 10:20:00'),
    (62, '0 0 1 1 *',            '1960-06-01 00:00:00'),
    (63, '30 4 * * *',           '1969-12-31 23:59:59'),
    (64, '0 0 1 1 *',            '200000-06-01 00:00:00')
  ) AS t(id, expr, after)
 ORDER BY id;

-- NULL in, NULL out; the default "after" is now()
SELECT pqrun.cron_next(NULL, '2026-03-15'), pqrun.cron_next('* * * * *', NULL);
SELECT pqrun.cron_next('* * * * *') = date_trunc('minute', now()) + interval '1 minute' AS next_minute;

-- 2. cron_next in zones with DST. All instants below are shown in UTC and in
-- the zone's local time.
-- America/New_York, 2026: 03-08 02:00 EST -> 03:00 EDT, 11-01 02:00 EDT -> 01:00 EST.
SET pqrun.cron_timezone = 'America/New_York';
SHOW pqrun.cron_timezone;
SELECT id, expr, after,
       pqrun.cron_next(expr, after) AS next_utc,
       pqrun.cron_next(expr, after) AT TIME ZONE 'America/New_York' AS next_local
  FROM (VALUES
    -- spring forward: a 02:30 daily job fires once, at 03:00 EDT, then at 02:30 EDT
    (1,  '30 2 * * *',           '2026-03-07 08:00:00+00'::timestamptz),
    (2,  '30 2 * * *',           '2026-03-08 05:00:00+00'),
    (3,  '30 2 * * *',           '2026-03-08 07:00:00+00'),
    (4,  '0 2 * * *',            '2026-03-08 05:00:00+00'),
    (5,  '0 3 * * *',            '2026-03-08 05:00:00+00'),
    -- slots inside the gap and at its end make one fire
    (6,  '*/30 2-3 * * *',       '2026-03-08 06:00:00+00'),
    (7,  '*/30 2-3 * * *',       '2026-03-08 07:00:00+00'),
    (8,  '0 * * * *',            '2026-03-08 06:00:00+00'),
    (9,  '0 * * * *',            '2026-03-08 07:00:00+00'),
    (10, '59 1 * * *',           '2026-03-08 05:00:00+00'),
    -- fall back: a 01:30 daily job fires once, in the first 01:30 (EDT)
    (11, '30 1 * * *',           '2026-11-01 04:00:00+00'),
    (12, '30 1 * * *',           '2026-11-01 05:30:00+00'),
    (13, '30 1 * * *',           '2026-11-01 06:00:00+00'),
    (14, '30 1 * * *',           '2026-11-01 06:29:59+00'),
    -- the repeated hour is silent, whatever the schedule
    (15, '0 * * * *',            '2026-11-01 05:00:00+00'),
    (16, '*/15 * * * *',         '2026-11-01 05:50:00+00'),
    (17, '0 2 * * *',            '2026-11-01 04:00:00+00'),
    (18, '0 0 * * *',            '2026-11-01 03:00:00+00'),
    -- ordinary days and weekdays are local ones
    (19, '0 9 * * 1-5',          '2026-03-13 14:00:00+00'),
    (20, '0 23 * * *',           '2026-07-04 03:30:00+00'),
    (21, '0 0 1 * *',            '2026-06-30 12:00:00+00'),
    (22, '@daily',               '2026-12-31 12:00:00+00')
  ) AS t(id, expr, after)
 ORDER BY id;

-- Europe/Berlin, 2026: 03-29 02:00 CET -> 03:00 CEST, 10-25 03:00 CEST -> 02:00 CET.
SET pqrun.cron_timezone = 'Europe/Berlin';
SELECT id, expr, after,
       pqrun.cron_next(expr, after) AS next_utc,
       pqrun.cron_next(expr, after) AT TIME ZONE 'Europe/Berlin' AS next_local
  FROM (VALUES
    (1,  '30 2 * * *',           '2026-03-28 23:00:00+00'::timestamptz),
    (2,  '30 2 * * *',           '2026-03-29 01:00:00+00'),
    (3,  '0 * * * *',            '2026-03-29 00:30:00+00'),
    (4,  '30 2 * * *',           '2026-10-24 22:00:00+00'),
    (5,  '30 2 * * *',           '2026-10-25 00:30:00+00'),
    (6,  '0 * * * *',            '2026-10-25 00:00:00+00'),
    (7,  '0 9 * * 1-5',          '2026-03-27 10:00:00+00'),
    (8,  '0 0 1 1 *',            '2026-12-31 22:00:00+00'),
    (9,  '0 0 1 1 *',            '2026-12-31 23:00:00+00')
  ) AS t(id, expr, after)
 ORDER BY id;

-- zones without DST, half and three-quarter hour offsets, case-insensitive names
SET pqrun.cron_timezone = 'asia/kolkata';
SELECT pqrun.cron_next('0 0 * * *', '2026-03-15 00:00:00+00') AS kolkata_midnight;
SET pqrun.cron_timezone = 'Asia/Kathmandu';
SELECT pqrun.cron_next('0 0 * * *', '2026-03-15 00:00:00+00') AS kathmandu_midnight;
SET pqrun.cron_timezone = 'utc';
SELECT pqrun.cron_next('0 0 * * *', '2026-03-15 00:00:00+00') AS utc_midnight;
-- the session's TimeZone does not matter, only pqrun.cron_timezone does
SET TimeZone = 'Asia/Tokyo';
SELECT pqrun.cron_next('0 0 * * *', '2026-03-15 00:00:00+00') AT TIME ZONE 'UTC' AS still_utc_midnight;
SET TimeZone = 'UTC';
RESET pqrun.cron_timezone;

-- 3. Bad expressions and zones: SQLSTATE 22023 (22008 past the timestamp range).
\set VERBOSITY sqlstate
SELECT pqrun.cron_next('', '2026-03-15');
SELECT pqrun.cron_next('* * * *', '2026-03-15');
SELECT pqrun.cron_next('* * * * * *', '2026-03-15');
SELECT pqrun.cron_next('60 * * * *', '2026-03-15');
SELECT pqrun.cron_next('* 24 * * *', '2026-03-15');
SELECT pqrun.cron_next('* * 0 * *', '2026-03-15');
SELECT pqrun.cron_next('* * 32 * *', '2026-03-15');
SELECT pqrun.cron_next('* * * 0 *', '2026-03-15');
SELECT pqrun.cron_next('* * * 13 *', '2026-03-15');
SELECT pqrun.cron_next('* * * foo *', '2026-03-15');
SELECT pqrun.cron_next('* * * * 8', '2026-03-15');
SELECT pqrun.cron_next('* * * * funday', '2026-03-15');
SELECT pqrun.cron_next('*/0 * * * *', '2026-03-15');
SELECT pqrun.cron_next('*/ * * * *', '2026-03-15');
SELECT pqrun.cron_next('5-1 * * * *', '2026-03-15');
SELECT pqrun.cron_next('1,,2 * * * *', '2026-03-15');
SELECT pqrun.cron_next('-5 * * * *', '2026-03-15');
SELECT pqrun.cron_next('0 0 L 2 *', '2026-03-15');
SELECT pqrun.cron_next('@reboot', '2026-03-15');
SELECT pqrun.cron_next('@daily 0', '2026-03-15');
SELECT pqrun.cron_next('0 0 30 2 *', '2026-03-15');
SELECT pqrun.cron_next('0 0 31 4,6,9,11 *', '2026-03-15');
SELECT pqrun.cron_next('* * * * *', 'infinity');
SELECT pqrun.cron_next('* * * * *', '-infinity');
SELECT pqrun.cron_next('0 0 1 1 *', '290000-01-01');
-- an unknown zone is refused when set, as the server's TimeZone is (it used
-- to be accepted and failed every schedule later)
SET pqrun.cron_timezone = 'No/Such_Zone';
SET pqrun.cron_timezone = '';
SHOW pqrun.cron_timezone;
\set VERBOSITY default
-- the messages name the field and quote the token
SELECT pqrun.cron_next('61 * * * *', '2026-03-15');
SELECT pqrun.cron_next('0 0 * * funday', '2026-03-15');
SELECT pqrun.cron_next('0 0 * JAN-FOO *', '2026-03-15');
SELECT pqrun.cron_next('0 0 1-32 * *', '2026-03-15');
SELECT pqrun.cron_next('0 0 30 2 *', '2026-03-15');
SET pqrun.cron_timezone = 'No/Such_Zone';

-- 4. schedule() validation: 22023 (54000 for a payload over the limit), and
-- nothing is written.
\set VERBOSITY sqlstate
SELECT pqrun.schedule(NULL, 'job', run_every => '1 hour');
SELECT pqrun.schedule('', 'job', run_every => '1 hour');
SELECT pqrun.schedule('s', NULL, run_every => '1 hour');
SELECT pqrun.schedule('s', '', run_every => '1 hour');
SELECT pqrun.schedule('s', 'job');
SELECT pqrun.schedule('s', 'job', cron => '* * * * *', run_every => '1 hour');
SELECT pqrun.schedule('s', 'job', cron => 'every day');
SELECT pqrun.schedule('s', 'job', cron => '0 0 30 2 *');
SELECT pqrun.schedule('s', 'job', run_every => '0');
SELECT pqrun.schedule('s', 'job', run_every => '-1 hour');
SELECT pqrun.schedule('s', 'job', run_every => '1 day -25 hours');
SELECT pqrun.schedule('s', 'job', run_every => '1 hour', payload => NULL);
SELECT pqrun.schedule('s', 'job', run_every => '1 hour', priority => NULL);
SELECT pqrun.schedule('s', 'job', run_every => '1 hour', key => NULL);
SELECT pqrun.schedule('s', 'job', run_every => '1 hour', queue => NULL);
SELECT pqrun.schedule('s', 'job', run_every => '1 hour', queue => '');
SELECT pqrun.schedule('s', 'job', run_every => '1 hour', active => NULL);
SET pqrun.max_payload_bytes = 16;
SELECT pqrun.schedule('s', 'job', run_every => '1 hour', payload => '{"much": "too long for the limit"}');
RESET pqrun.max_payload_bytes;
SELECT pqrun.unschedule(NULL);
SELECT pqrun.unschedule('s', NULL);
\set VERBOSITY default
SELECT pqrun.schedule('s', 'job');
SELECT pqrun.schedule('s', 'job', cron => '0 0 * * *', run_every => '1 day');
SELECT pqrun.schedule('s', 'job', cron => '0 25 * * *');
SELECT pqrun.schedule('s', 'job', run_every => '-5 minutes');
SELECT count(*) AS schedules FROM pqrun.periodic;

-- 5. schedule / unschedule / replace
BEGIN;
SELECT pqrun.schedule('every5', 'sched.a', run_every => '5 minutes');
SELECT pqrun.schedule('nightly', 'sched.b', cron => '0 3 * * *', payload => '{"report": "daily"}',
                      priority => 7, queue => 'reports');
SELECT name, key, job_type, payload, priority, queue, cron, run_every, active, last_run, last_job_id,
       next_run = CASE WHEN cron IS NULL THEN now() + run_every ELSE pqrun.cron_next(cron, now()) END AS first_slot,
       created_at = now() AS created_now
  FROM pqrun.periodic ORDER BY name, key;
COMMIT;

-- same timing again (a deploy script re-run): next_run is kept, the rest replaced
UPDATE pqrun.periodic SET next_run = '2030-01-01 00:00:00+00' WHERE name IN ('every5', 'nightly');
SELECT pqrun.schedule('every5', 'sched.a2', run_every => '5 minutes', payload => '{"v": 2}');
SELECT pqrun.schedule('nightly', 'sched.b', cron => '0 3 * * *', payload => '{"report": "weekly"}');
SELECT name, job_type, payload, priority, queue, next_run, updated_at > created_at AS updated
  FROM pqrun.periodic ORDER BY name, key;

-- changed timing: next_run starts over from now()
BEGIN;
SELECT pqrun.schedule('every5', 'sched.a2', run_every => '10 minutes');
SELECT pqrun.schedule('nightly', 'sched.b', cron => '0 4 * * *');
SELECT name, cron, run_every,
       next_run = CASE WHEN cron IS NULL THEN now() + run_every ELSE pqrun.cron_next(cron, now()) END AS from_now
  FROM pqrun.periodic ORDER BY name, key;
COMMIT;

-- switching kind: cron <-> run_every
BEGIN;
SELECT pqrun.schedule('every5', 'sched.a2', cron => '*/5 * * * *');
SELECT pqrun.schedule('nightly', 'sched.b', run_every => '1 day');
SELECT name, cron, run_every,
       next_run = CASE WHEN cron IS NULL THEN now() + run_every ELSE pqrun.cron_next(cron, now()) END AS from_now
  FROM pqrun.periodic ORDER BY name, key;
COMMIT;

-- pausing keeps next_run; resuming starts from now() rather than firing the
-- slots that passed while paused
UPDATE pqrun.periodic SET next_run = '2030-01-01 00:00:00+00' WHERE name = 'nightly';
SELECT pqrun.schedule('nightly', 'sched.b', run_every => '1 day', active => false);
SELECT name, active, next_run FROM pqrun.periodic WHERE name = 'nightly';
BEGIN;
SELECT pqrun.schedule('nightly', 'sched.b', run_every => '1 day', active => true);
SELECT name, active, next_run = now() + interval '1 day' AS from_now FROM pqrun.periodic WHERE name = 'nightly';
COMMIT;

-- keys: one name, several schedules
SELECT pqrun.schedule('per-tenant', 'sync', run_every => '1 hour', key => 'tenant-1', payload => '{"tenant": 1}');
SELECT pqrun.schedule('per-tenant', 'sync', run_every => '1 hour', key => 'tenant-2', payload => '{"tenant": 2}');
SELECT pqrun.schedule('per-tenant', 'sync', run_every => '2 hours');
SELECT name, key, payload, run_every FROM pqrun.periodic WHERE name = 'per-tenant' ORDER BY key;
SELECT pqrun.unschedule('per-tenant');
SELECT pqrun.unschedule('per-tenant', 'tenant-1');
SELECT pqrun.unschedule('per-tenant', 'tenant-1');
SELECT pqrun.unschedule('no-such-schedule');
SELECT name, key FROM pqrun.periodic ORDER BY name, key;
SELECT pqrun.unschedule('per-tenant', 'tenant-2'), pqrun.unschedule('every5'), pqrun.unschedule('nightly');
SELECT count(*) AS schedules FROM pqrun.periodic;

-- 6. The run_every arithmetic: the first due + k * run_every (k >= 1)
-- strictly after the firing instant, so the phase is kept and a backlog
-- fires once.
SELECT id, run_every, due, after, pqrun._run_every_next(run_every, due, after) AS next
  FROM (VALUES
    (1,  '1 hour'::interval,   '2026-03-15 10:00:00+00'::timestamptz, '2026-03-15 10:00:00+00'::timestamptz),
    (2,  '1 hour',             '2026-03-15 10:00:00+00', '2026-03-15 10:00:00.000001+00'),
    (3,  '1 hour',             '2026-03-15 10:00:00+00', '2026-03-15 20:30:00+00'),
    (4,  '1 hour',             '2026-03-15 10:00:00+00', '2026-03-15 21:00:00+00'),
    (5,  '1 hour',             '2026-03-15 10:00:00+00', '2026-03-15 09:00:00+00'),
    -- a one-second schedule fired by a round every second
    (6,  '1 second',           '2026-03-15 10:00:00+00', '2026-03-15 10:00:00.2+00'),
    (7,  '1 second',           '2026-03-15 10:00:01+00', '2026-03-15 10:00:01.2+00'),
    (8,  '1 second',           '2026-03-15 10:00:02+00', '2026-03-15 10:00:02.2+00'),
    (9,  '90 seconds',         '2026-03-15 10:00:00+00', '2026-03-16 10:00:00+00'),
    (10, '1 minute',           '2000-01-01 00:00:00+00', '2026-03-15 10:20:30+00'),
    (11, '7 days',             '2026-03-16 09:00:00+00', '2026-05-01 00:00:00+00'),
    (12, '1 day 1 hour',       '2026-03-15 00:00:00+00', '2026-03-20 00:00:00+00'),
    -- months are calendar months from the original slot: the 31st stays the
    -- 31st where it exists, and the month end elsewhere
    (13, '1 month',            '2026-01-31 00:00:00+00', '2026-02-01 00:00:00+00'),
    (14, '1 month',            '2026-01-31 00:00:00+00', '2026-03-01 00:00:00+00'),
    (15, '1 month',            '2026-01-31 00:00:00+00', '2026-04-15 00:00:00+00'),
    (16, '1 month',            '2024-01-31 00:00:00+00', '2024-02-01 00:00:00+00'),
    (17, '1 year',             '2024-02-29 12:00:00+00', '2026-06-01 00:00:00+00'),
    (18, '1 year',             '2024-02-29 12:00:00+00', '2027-06-01 00:00:00+00')
  ) AS t(id, run_every, due, after)
 ORDER BY id;
-- days are calendar days in pqrun.cron_timezone: across the spring-forward
-- a daily schedule keeps its local time (23 hours later in UTC)
SET pqrun.cron_timezone = 'America/New_York';
SELECT pqrun._run_every_next('1 day', '2026-03-07 17:00:00+00', '2026-03-08 12:00:00+00') AS ny_day,
       pqrun._run_every_next('24 hours', '2026-03-07 17:00:00+00', '2026-03-08 12:00:00+00') AS ny_24h;
RESET pqrun.cron_timezone;
SELECT pqrun._run_every_next('1 day', '2026-03-07 17:00:00+00', '2026-03-08 12:00:00+00') AS utc_day;
\set VERBOSITY sqlstate
SELECT pqrun._run_every_next('0', '2026-03-15', '2026-03-16');
SELECT pqrun._run_every_next('-1 day', '2026-03-15', '2026-03-16');
SELECT pqrun._run_every_next('1 day', '-infinity', '2026-03-16');
\set VERBOSITY default

-- 7. Firing
SELECT pqrun.schedule('hourly', 'job.hourly', run_every => '1 hour', payload => '{"a": 1}',
                      priority => 5, queue => 'q1');
SELECT pqrun.schedule('yearly', 'job.yearly', cron => '0 3 1 1 *');
SELECT pqrun.schedule('paused', 'job.paused', run_every => '1 minute', active => false);
SELECT pqrun.schedule('later', 'job.later', run_every => '1 hour');

-- hourly is 10 periods late, yearly 3 days late, tick half a period late:
-- each fires exactly once and lands on its next slot after now(). (tick is
-- created and dropped inside the transaction, so that no background worker
-- fires it meanwhile.)
BEGIN;
SELECT pqrun.schedule('tick', 'job.tick', run_every => '1 second');
UPDATE pqrun.periodic SET next_run = now() - 10 * run_every WHERE name = 'hourly';
UPDATE pqrun.periodic SET next_run = now() - interval '3 days' WHERE name = 'yearly';
UPDATE pqrun.periodic SET next_run = now() - interval '1 hour' WHERE name = 'paused';
UPDATE pqrun.periodic SET next_run = now() - interval '0.5 seconds' WHERE name = 'tick';
SELECT pqrun._fire_due_schedules() AS fired;
SELECT name, active,
       last_run IS NOT NULL AS ran,
       last_run = CASE name WHEN 'hourly' THEN now() - interval '10 hours'
                            WHEN 'yearly' THEN now() - interval '3 days'
                            WHEN 'tick' THEN now() - interval '0.5 seconds' END AS last_run_is_slot,
       next_run > now() AS next_in_future,
       next_run = CASE name WHEN 'hourly' THEN now() + interval '1 hour'
                            WHEN 'yearly' THEN pqrun.cron_next('0 3 1 1 *', now())
                            WHEN 'paused' THEN now() - interval '1 hour'
                            WHEN 'later' THEN next_run
                            WHEN 'tick' THEN now() + interval '0.5 seconds' END AS next_is_expected_slot,
       last_job_id = (SELECT max(id) FROM pqrun.jobs j WHERE j.job_type = p.job_type) AS job_recorded
  FROM pqrun.periodic p ORDER BY name;
SELECT job_type, payload, priority, queue, status, max_attempts, dedupe_key, run_after = now() AS runs_now
  FROM pqrun.jobs WHERE job_type LIKE 'job.%' ORDER BY job_type;
-- nothing is due any more in this transaction
SELECT pqrun._fire_due_schedules() AS fired_again;
SELECT pqrun.unschedule('tick');
COMMIT;
SELECT pqrun._fire_due_schedules() AS fired_later;
SELECT job_type, count(*) FROM pqrun.jobs WHERE job_type LIKE 'job.%' GROUP BY job_type ORDER BY job_type;

-- the phase is kept: 10 h 20 min late fires once, the next slot is in 40 min
BEGIN;
UPDATE pqrun.periodic SET next_run = now() - interval '10 hours 20 minutes' WHERE name = 'hourly';
SELECT pqrun._fire_due_schedules() AS fired;
SELECT next_run = now() + interval '40 minutes' AS same_phase,
       last_run = now() - interval '10 hours 20 minutes' AS last_run_is_slot
  FROM pqrun.periodic WHERE name = 'hourly';
COMMIT;
SELECT job_type, count(*) FROM pqrun.jobs WHERE job_type LIKE 'job.%' GROUP BY job_type ORDER BY job_type;

-- a schedule that cannot fire is skipped to its next slot with a WARNING; the
-- others still fire
SELECT pqrun.schedule('big', 'job.big', run_every => '1 hour', payload => '{"size": "rather large"}');
BEGIN;
SET LOCAL pqrun.max_payload_bytes = 16;
UPDATE pqrun.periodic SET next_run = now() - interval '30 minutes' WHERE name IN ('big', 'later');
SELECT pqrun._fire_due_schedules() AS fired;
SELECT name, last_job_id IS NOT NULL AS fired, next_run = now() + interval '30 minutes' AS next_slot
  FROM pqrun.periodic WHERE name IN ('big', 'later') ORDER BY name;
COMMIT;
-- a cron expression broken behind schedule()'s back is retried a minute later
BEGIN;
UPDATE pqrun.periodic SET cron = 'every night', next_run = now() - interval '1 minute' WHERE name = 'yearly';
SELECT pqrun._fire_due_schedules() AS fired;
SELECT next_run = now() + interval '1 minute' AS retry_in_a_minute FROM pqrun.periodic WHERE name = 'yearly';
ROLLBACK;
SELECT job_type, count(*) FROM pqrun.jobs WHERE job_type LIKE 'job.%' GROUP BY job_type ORDER BY job_type;

-- 8. Privileges and volatility
SELECT p.oid::regprocedure AS function, p.provolatile, p.proisstrict, p.prosecdef,
       has_function_privilege('public', p.oid, 'EXECUTE') AS public_execute
  FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
 WHERE n.nspname = 'pqrun'
   AND p.proname IN ('schedule', 'unschedule', 'cron_next', '_fire_due_schedules', '_run_every_next')
 ORDER BY p.proname;

-- The store's first day of data: where the night's daily partitions start (store/calendar.py).
-- It lived in a file under ANIMA_HOME, so two hosts (a webserver, the daemon) sharing one
-- database could see different partitions. One row per store, holding the time of the
-- earliest message; the day is its local date in ANIMA_TIMEZONE, read when needed. It only
-- moves earlier: an import or append of older messages moves it, forgetting messages never
-- moves it later (their nights stay addressable).
CREATE TABLE store_calendar (
    id               boolean     PRIMARY KEY DEFAULT true CHECK (id),  -- one row per store
    first_message_at timestamptz NOT NULL,
    -- the legacy $ANIMA_HOME/first_day files already taken in (their absolute paths): each is
    -- read once, the first time a process of that home looks, then ignored
    legacy_files     text[]      NOT NULL DEFAULT '{}',
    updated_at       timestamptz NOT NULL DEFAULT now()
);

-- A store that already holds messages starts at its earliest one (one scan, here only).
INSERT INTO store_calendar (first_message_at)
SELECT min(created_at) FROM message HAVING count(*) > 0;

-- ... written through the audit log like every other change of the calendar
INSERT INTO memory_event (anima_id, table_name, memory_id, op, before, after, run_id, step)
SELECT '', 'store_calendar', 'first_message_at', 'move', NULL,
       jsonb_build_object('first_message_at', first_message_at, 'source', 'messages'),
       'migration-0009', 'migration'
FROM store_calendar;

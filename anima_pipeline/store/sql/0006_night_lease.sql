-- The night is recorded per (anima, day): sleep_state rows with step 'night'.
-- A 'running' night holds a lease that its run renews with a heartbeat; a night whose lease
-- has lapsed belongs to a run that is gone and is taken over by the next run of that day
-- (docs/ordering.md).
ALTER TABLE sleep_state
    ADD COLUMN lease_until  timestamptz,
    ADD COLUMN heartbeat_at timestamptz;

-- Earlier versions kept one night row per day under anima_id '*'. Carry each over to the
-- animas that have step rows that day, keeping its status, then drop the '*' rows.
INSERT INTO sleep_state (anima_id, day, step, status, stats, run_id, started_at, finished_at, error)
SELECT DISTINCT s.anima_id, m.day, 'night', m.status, m.stats, m.run_id, m.started_at, m.finished_at, m.error
FROM sleep_state m
JOIN sleep_state s ON s.day = m.day AND s.anima_id <> '*' AND s.step <> 'night'
WHERE m.anima_id = '*' AND m.step = 'night'
ON CONFLICT (anima_id, day, step) DO NOTHING;
DELETE FROM sleep_state WHERE anima_id = '*' AND step = 'night';

-- The heartbeat renews a run's running nights; the order guard reads an anima's nights.
CREATE INDEX sleep_state_run_idx ON sleep_state (run_id) WHERE status = 'running';

-- Schedules: a cron expression in a time zone that starts a workflow at each time it names.
-- The scheduler reads the earliest next_fire_at of the unpaused schedules through the partial
-- index, one query per look, however many schedules there are. `version` goes up with every
-- change and every fire: a fire or an update names the version it read, so two replicas racing
-- on one schedule cannot both apply. The cron math lives in the server, not here.
CREATE TABLE schedules (
    schedule_name TEXT COLLATE "C" PRIMARY KEY NOT NULL,
    cron          TEXT NOT NULL,
    timezone      TEXT NOT NULL,
    workflow_name TEXT NOT NULL,
    input         TEXT NOT NULL,
    queue_name    TEXT NOT NULL,
    paused        BOOLEAN NOT NULL DEFAULT FALSE,
    last_fire_at  BIGINT,
    next_fire_at  BIGINT,
    version       BIGINT NOT NULL DEFAULT 1,
    created_at    BIGINT NOT NULL,
    updated_at    BIGINT NOT NULL
);
CREATE INDEX schedules_due ON schedules (next_fire_at) WHERE NOT paused AND next_fire_at IS NOT NULL;

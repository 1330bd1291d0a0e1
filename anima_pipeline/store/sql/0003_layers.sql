-- Limbic, autobiographical, self, temporal, citation, dream and run-state layers (DESIGN §3).
CREATE TABLE emotional_anchor (
    id               bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    anima_id         text        NOT NULL,
    conversation_id  text,
    occurred_at      timestamptz NOT NULL,
    emotion          text        NOT NULL,
    valence          real        NOT NULL CHECK (valence >= -1 AND valence <= 1),
    arousal          real        NOT NULL CHECK (arousal >= 0 AND arousal <= 1),
    intensity        real        NOT NULL DEFAULT 0.5 CHECK (intensity >= 0 AND intensity <= 1),
    trigger          text,
    note             text,
    status           text        NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'deprecated')),
    created_at       timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX emotional_anchor_time_idx ON emotional_anchor (anima_id, occurred_at);

CREATE TABLE autobiographical_memory (
    id                  bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    anima_id            text        NOT NULL,
    title               text        NOT NULL,
    narrative           text        NOT NULL,
    significance        text        NOT NULL CHECK (significance IN ('routine', 'notable', 'milestone', 'turning_point')),
    occurred_from       timestamptz,
    occurred_until      timestamptz,
    source_memory_ids   bigint[]    NOT NULL DEFAULT '{}',
    source_sessions     text[]      NOT NULL DEFAULT '{}',
    status              text        NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'deprecated')),
    deprecated_reason   text,
    created_at          timestamptz NOT NULL DEFAULT now(),
    updated_at          timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX autobiographical_status_idx ON autobiographical_memory (anima_id, status, occurred_from);

-- Six named blocks per anima; every write keeps the previous version in self_block_history.
CREATE TABLE self_block (
    anima_id    text        NOT NULL,
    name        text        NOT NULL CHECK (name IN ('identity', 'persona', 'values', 'relationships',
                                                     'current_state', 'autobiography_summary')),
    content     text        NOT NULL DEFAULT '',
    version     integer     NOT NULL DEFAULT 1,
    updated_by  text        NOT NULL DEFAULT 'seed',
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (anima_id, name)
);
CREATE TABLE self_block_history (
    id          bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    anima_id    text        NOT NULL,
    name        text        NOT NULL,
    version     integer     NOT NULL,
    content     text        NOT NULL,
    updated_by  text        NOT NULL,
    updated_at  timestamptz NOT NULL
);
CREATE INDEX self_block_history_idx ON self_block_history (anima_id, name, version);

CREATE TABLE temporal_summary (
    id            bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    anima_id      text        NOT NULL,
    level         text        NOT NULL CHECK (level IN ('day', 'week', 'month', 'year')),
    period_start  date        NOT NULL,
    period_end    date        NOT NULL,
    content       text        NOT NULL,
    stats         jsonb       NOT NULL DEFAULT '{}'::jsonb,
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now(),
    UNIQUE (anima_id, level, period_start)
);

-- A memory cited by an assistant message as [[anima:f-123]].
CREATE TABLE memory_reference (
    id                  bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    anima_id            text        NOT NULL,
    memory_id           bigint      NOT NULL REFERENCES semantic_memory (id),
    cited_memory_id     bigint      NOT NULL,
    message_id          bigint      NOT NULL REFERENCES message (id) ON DELETE CASCADE,
    conversation_id     text        NOT NULL,
    referenced_at       timestamptz NOT NULL,
    created_at          timestamptz NOT NULL DEFAULT now(),
    UNIQUE (message_id, cited_memory_id)
);
CREATE INDEX memory_reference_memory_idx ON memory_reference (anima_id, memory_id, referenced_at);

CREATE TABLE dream_journal (
    id            bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    anima_id      text        NOT NULL,
    day           date        NOT NULL,
    aha_moments            jsonb NOT NULL DEFAULT '[]'::jsonb,
    creative_connections   jsonb NOT NULL DEFAULT '[]'::jsonb,
    confidence_updates     jsonb NOT NULL DEFAULT '[]'::jsonb,
    next_session_actions   jsonb NOT NULL DEFAULT '[]'::jsonb,
    bank_suggestions       jsonb NOT NULL DEFAULT '[]'::jsonb,
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now(),
    UNIQUE (anima_id, day)
);

-- Per (anima, day, step): the seeds' light_sleep_state.json, in the database.
CREATE TABLE sleep_state (
    anima_id     text        NOT NULL,
    day          date        NOT NULL,
    step         text        NOT NULL,
    status       text        NOT NULL CHECK (status IN ('running', 'done', 'failed', 'skipped')),
    stats        jsonb       NOT NULL DEFAULT '{}'::jsonb,
    run_id       text,
    started_at   timestamptz NOT NULL DEFAULT now(),
    finished_at  timestamptz,
    error        text,
    PRIMARY KEY (anima_id, day, step)
);
CREATE INDEX sleep_state_day_idx ON sleep_state (day, step);

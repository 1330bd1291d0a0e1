-- The conversation archive the agent host writes all day (DESIGN §3).
CREATE EXTENSION IF NOT EXISTS pg_trgm;

CREATE TABLE conversation (
    id          text        NOT NULL,
    anima_id    text        NOT NULL,
    platform    text        NOT NULL DEFAULT 'chat',
    title       text,
    debug       boolean     NOT NULL DEFAULT false,
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (anima_id, id)
);
CREATE INDEX conversation_updated_idx ON conversation (anima_id, updated_at);

CREATE TABLE message (
    id               bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    anima_id         text        NOT NULL,
    conversation_id  text        NOT NULL,
    external_id      text        NOT NULL,
    role             text        NOT NULL CHECK (role IN ('user', 'assistant', 'tool', 'system')),
    speaker          text,
    content          text        NOT NULL,
    created_at       timestamptz NOT NULL,
    metadata         jsonb       NOT NULL DEFAULT '{}'::jsonb,
    FOREIGN KEY (anima_id, conversation_id) REFERENCES conversation (anima_id, id) ON DELETE CASCADE,
    UNIQUE (anima_id, conversation_id, external_id)
);
CREATE INDEX message_anima_time_idx ON message (anima_id, created_at);
CREATE INDEX message_conversation_idx ON message (anima_id, conversation_id, created_at);

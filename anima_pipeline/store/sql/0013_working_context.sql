-- The working context of a turn (issue 20): the rolling summary of a session, one row per
-- (session, watermark), each extending the one before it; and the pre-compaction flush, one
-- row per compaction cycle (the same watermark), so a retried flush writes nothing twice.
CREATE TABLE session_summary (
    anima_id         text        NOT NULL,
    conversation_id  text        NOT NULL,
    watermark        bigint      NOT NULL,  -- message.id of the last message the summary covers
    watermark_at     timestamptz NOT NULL,  -- its created_at: messages are ordered by (created_at, id)
    previous         bigint,                -- the watermark this summary extends; NULL for the first
    content          text        NOT NULL,
    messages         integer     NOT NULL,  -- messages covered, from the session's first
    engine           text        NOT NULL,
    created_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (anima_id, conversation_id, watermark),
    FOREIGN KEY (anima_id, conversation_id) REFERENCES conversation (anima_id, id) ON DELETE CASCADE
);
CREATE INDEX session_summary_latest_idx ON session_summary (anima_id, conversation_id, watermark_at DESC);

CREATE TABLE session_flush (
    anima_id         text        NOT NULL,
    conversation_id  text        NOT NULL,
    watermark        bigint      NOT NULL,  -- the compaction cycle: the summary's new watermark
    from_watermark   bigint,                -- the turns flushed are those after this one
    memory_ids       bigint[]    NOT NULL DEFAULT '{}',  -- created or updated by the flush
    stats            jsonb       NOT NULL DEFAULT '{}'::jsonb,
    engine           text        NOT NULL,
    created_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (anima_id, conversation_id, watermark),
    FOREIGN KEY (anima_id, conversation_id) REFERENCES conversation (anima_id, id) ON DELETE CASCADE
);

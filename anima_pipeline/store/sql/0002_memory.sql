-- Durable memory: semantic facts with provenance and validity, and the audit log of every write.
CREATE TABLE semantic_memory (
    id               bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,  -- shown to the LLM as f-<id>
    anima_id         text        NOT NULL,
    type             text        NOT NULL CHECK (type IN ('world', 'experience', 'preference', 'opinion', 'imprint')),
    content          text        NOT NULL CHECK (length(btrim(content)) > 0),
    confidence       real        NOT NULL DEFAULT 0.8 CHECK (confidence >= 0 AND confidence <= 1),
    source_sessions  text[]      NOT NULL DEFAULT '{}',
    observed_at      timestamptz,
    valid_from       timestamptz,
    valid_until      timestamptz,
    status           text        NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'deprecated')),
    deprecated_reason text,
    superseded_by    bigint      REFERENCES semantic_memory (id),
    pinned           boolean     NOT NULL DEFAULT false,
    pinned_at        timestamptz,
    reference_count  real        NOT NULL DEFAULT 0,
    last_referenced_at timestamptz,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    search           tsvector    GENERATED ALWAYS AS (to_tsvector('simple', content)) STORED
);
CREATE INDEX semantic_memory_status_idx ON semantic_memory (anima_id, status);
CREATE INDEX semantic_memory_updated_idx ON semantic_memory (anima_id, updated_at);
CREATE INDEX semantic_memory_sources_idx ON semantic_memory USING gin (source_sessions);
CREATE INDEX semantic_memory_search_idx ON semantic_memory USING gin (search);
CREATE INDEX semantic_memory_trgm_idx ON semantic_memory USING gin (content gin_trgm_ops);

-- Every write by any step or tool: the audit trail and what a revert replays backwards.
CREATE TABLE memory_event (
    id          bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    anima_id    text        NOT NULL,
    table_name  text        NOT NULL,
    memory_id   text,
    op          text        NOT NULL,
    before      jsonb,
    after       jsonb,
    run_id      text        NOT NULL,
    day         date,
    step        text        NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX memory_event_run_idx ON memory_event (run_id);
CREATE INDEX memory_event_anima_day_idx ON memory_event (anima_id, day, step);
CREATE INDEX memory_event_memory_idx ON memory_event (table_name, memory_id);

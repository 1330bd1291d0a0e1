-- Review mode (docs/review.md): with ANIMA_REVIEW_MODE on, a night's destructive operations on
-- semantic memory (deprecate, merge, split, unpin) are stored here as proposals instead of
-- being applied. Only an approval changes the store, through the same tool executor, audited
-- under its own run id (so `anima revert --run` undoes an approval like any run).
CREATE TABLE review_proposal (
    id          bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,  -- shown as r-<id>
    anima_id    text        NOT NULL,
    day         date,
    run_id      text        NOT NULL,
    step        text        NOT NULL,
    tool        text        NOT NULL,
    input       jsonb       NOT NULL,
    reason      text,
    memory_ids  bigint[]    NOT NULL,            -- the memories the operation would change
    watermark   bigint      NOT NULL,            -- memory_event id when it was proposed
    status      text        NOT NULL DEFAULT 'pending'
                CHECK (status IN ('pending', 'approved', 'rejected', 'conflict')),
    decided_at  timestamptz,
    decided_by  text,
    decision    jsonb,                           -- the approval's run id and result, or why not
    created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX review_proposal_pending_idx ON review_proposal (anima_id, day) WHERE status = 'pending';
-- one open proposal per identical operation: a later night proposing it again finds it
CREATE UNIQUE INDEX review_proposal_same_idx ON review_proposal (anima_id, tool, md5(input::text))
    WHERE status = 'pending';

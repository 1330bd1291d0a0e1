-- Forget and correct (issue 21).

-- Every foreign key a delete follows gets an index on its referencing column: without one,
-- each deleted row scans the referencing table (deleting 99,000 memories ran for > 11 min,
-- every row looking for memories superseded by it). memory_reference.message_id already leads
-- UNIQUE (message_id, cited_memory_id); message (anima_id, conversation_id) leads
-- message_conversation_idx.
CREATE INDEX semantic_memory_superseded_idx ON semantic_memory (superseded_by) WHERE superseded_by IS NOT NULL;
CREATE INDEX memory_reference_memory_fk_idx ON memory_reference (memory_id);

-- The lineage a forget follows: anchors and narratives of a conversation.
CREATE INDEX emotional_anchor_conversation_idx ON emotional_anchor (anima_id, conversation_id);
CREATE INDEX autobiographical_sources_idx ON autobiographical_memory USING gin (source_sessions);

-- When a user (through the agent) last corrected a memory: a night treats it as settled and
-- neither merges it back, splits it, rewrites it, nor learns its old wording again.
ALTER TABLE semantic_memory ADD COLUMN settled_at timestamptz;

-- A soft forget hides a message from recall and from the nights without deleting it
-- (reverting the forget brings it back); a purge deletes it.
ALTER TABLE message ADD COLUMN forgotten_at timestamptz;

-- A purge scrubs the before/after of the erased rows' earlier events (ids, op and time
-- stay); a revert skips a scrubbed event, so no revert can bring erased content back.
ALTER TABLE memory_event ADD COLUMN erased_at timestamptz;

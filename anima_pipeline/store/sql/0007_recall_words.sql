-- The words an anima's memories and messages use, for spelling correction at recall: a
-- misspelt question word ("resturant") is matched by trigram similarity against this small
-- table instead of against every text, then searched through the full-text index as the
-- word it most resembles. Derived data, like an index: kept by statement-level triggers
-- (one INSERT per statement, however many rows), never audited, never read by the night.
CREATE TABLE recall_word (
    anima_id  text NOT NULL,
    word      text NOT NULL,
    PRIMARY KEY (anima_id, word)
);
CREATE INDEX recall_word_trgm_idx ON recall_word USING gin (word gin_trgm_ops) WITH (fastupdate = off);

-- Sorted inserts: two transactions adding overlapping words take the row locks in one order.
CREATE FUNCTION recall_word_collect() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO recall_word (anima_id, word)
    SELECT DISTINCT n.anima_id, w.word
    FROM new_rows n, regexp_split_to_table(lower(n.content), '[^a-z]+') AS w(word)
    WHERE length(w.word) BETWEEN 4 AND 30
    ORDER BY 1, 2
    ON CONFLICT DO NOTHING;
    RETURN NULL;
END
$$;

CREATE TRIGGER message_recall_words AFTER INSERT ON message
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION recall_word_collect();
CREATE TRIGGER semantic_memory_recall_words_insert AFTER INSERT ON semantic_memory
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION recall_word_collect();
CREATE TRIGGER semantic_memory_recall_words_update AFTER UPDATE ON semantic_memory
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION recall_word_collect();

INSERT INTO recall_word (anima_id, word)
SELECT DISTINCT anima_id, w.word
FROM (SELECT anima_id, content FROM message UNION ALL SELECT anima_id, content FROM semantic_memory) t,
     regexp_split_to_table(lower(t.content), '[^a-z]+') AS w(word)
WHERE length(w.word) BETWEEN 4 AND 30
ON CONFLICT DO NOTHING;

-- Recall no longer compares a word with every message by trigrams (0005 built that index).
DROP INDEX message_trgm_idx;

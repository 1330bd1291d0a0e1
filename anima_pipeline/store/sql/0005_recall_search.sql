-- Chat-time recall reads indexes (issue 9): one search vector per row of memories, messages
-- and temporal summaries, built by PostgreSQL's English configuration (stemming, stop words)
-- plus the character bigrams of CJK runs (no spaces to split on). Stored columns, so ranking
-- the top candidates reads the vector instead of re-parsing the text. fastupdate off: a GIN
-- pending list (rows written since the last vacuum) is read in full by every search, and
-- recall latency must not depend on when autovacuum last ran.
-- One self-contained function (only pg_catalog inside): PostgreSQL 17 runs index builds and
-- generated columns with search_path = pg_catalog, where a second function of ours would
-- not be found.
CREATE FUNCTION anima_search_vector(t text) RETURNS tsvector
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT to_tsvector('english'::regconfig, t) || array_to_tsvector(ARRAY(
        SELECT DISTINCT substr(r.run[1], g.i, 2)
        FROM regexp_matches(t, '[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\u3040-\u30ff\uac00-\ud7af]{2,}', 'g')
                 AS r(run),
             generate_series(1, length(r.run[1]) - 1) AS g(i)))
$$;

ALTER TABLE semantic_memory
    ADD COLUMN fts tsvector GENERATED ALWAYS AS (anima_search_vector(content)) STORED;
CREATE INDEX semantic_memory_fts_idx ON semantic_memory USING gin (fts) WITH (fastupdate = off);

ALTER TABLE message
    ADD COLUMN fts tsvector GENERATED ALWAYS AS (anima_search_vector(content)) STORED;
CREATE INDEX message_fts_idx ON message USING gin (fts) WITH (fastupdate = off);
CREATE INDEX message_trgm_idx ON message USING gin (content gin_trgm_ops) WITH (fastupdate = off);

CREATE INDEX temporal_summary_fts_idx ON temporal_summary USING gin (anima_search_vector(content));
CREATE INDEX temporal_summary_period_idx ON temporal_summary (anima_id, period_start, period_end);

-- The resident set (pinned ∪ most cited) without reading every memory of the anima.
CREATE INDEX semantic_memory_pinned_idx ON semantic_memory (anima_id, reference_count DESC, id)
    WHERE status = 'active' AND pinned;
CREATE INDEX semantic_memory_cited_idx ON semantic_memory (anima_id, reference_count DESC, id)
    WHERE status = 'active' AND NOT pinned AND reference_count > 0;

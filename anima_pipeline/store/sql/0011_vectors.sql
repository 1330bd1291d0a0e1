-- Vectors for recall by meaning (anima_pipeline/store/vectors.py), only where pgvector is
-- available: the migration applies on a server without it (recall then stays lexical and says
-- so). Derived data, like an index: rebuilt from the texts by `anima embed`, never audited.
--
-- Keyed by (anima, kind, item, model): a change of model embeds again beside the old vectors,
-- incrementally, and no query ever compares two models' spaces. `v` has no fixed dimension so
-- that models of different sizes share the table; each (model, kind) gets its own partial HNSW
-- index over `v::vector(d)`, created by the code the first time that model stores a vector.
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'vector') THEN
        CREATE EXTENSION IF NOT EXISTS vector;
        CREATE TABLE embedding (
            anima_id    text        NOT NULL,
            kind        text        NOT NULL CHECK (kind IN ('memory', 'message')),
            item_id     bigint      NOT NULL,
            model_id    text        NOT NULL,
            v           vector      NOT NULL,
            embedded_at timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (anima_id, kind, model_id, item_id)
        );
        CREATE TABLE embedding_model (
            model_id   text        PRIMARY KEY,
            dimension  int         NOT NULL CHECK (dimension > 0),
            created_at timestamptz NOT NULL DEFAULT now()
        );
    END IF;
END
$$;

-- The agent side (issue 10): per-anima API keys for `anima serve`, and when a conversation closed.
CREATE TABLE api_key (
    id          bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    anima_id    text        NOT NULL,
    name        text,
    prefix      text        NOT NULL,              -- the first characters, to tell keys apart in a list
    key_hash    text        NOT NULL UNIQUE,       -- sha256 of the key: the key itself is shown once, never stored
    created_at  timestamptz NOT NULL DEFAULT now(),
    revoked_at  timestamptz
);
CREATE INDEX api_key_anima_idx ON api_key (anima_id);

-- Set by the agent's "close conversation"; NULL while the conversation is open (or never closed).
ALTER TABLE conversation ADD COLUMN closed_at timestamptz;

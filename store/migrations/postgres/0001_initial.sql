-- The PostgreSQL store's schema: the embedded store's tables and keys
-- (store/migrations/sqlite/0001_initial.sql) in this dialect's types. TEXT for JSON, as there:
-- the store never queries inside it, and both backends read the same strings back.

CREATE TABLE transcript_entries (
    session_key TEXT NOT NULL,
    -- Position in the session, from 1: readers fetch what came after the last one they saw.
    -- Appends to one session are serialized by an advisory lock on the key (store/postgres.py).
    seq BIGINT NOT NULL,
    entry_id TEXT NOT NULL,
    -- The tool call a tool result answers; NULL for every other entry. Unique per session: one
    -- result per tool call, whichever attempt (on whichever host) writes first.
    result_for TEXT,
    body TEXT NOT NULL,
    PRIMARY KEY (session_key, seq),
    UNIQUE (session_key, entry_id),
    UNIQUE (session_key, result_for)
);

CREATE TABLE session_records (
    session_key TEXT PRIMARY KEY,
    record TEXT NOT NULL,
    updated DOUBLE PRECISION NOT NULL
);

CREATE TABLE branch_sources (
    session_key TEXT PRIMARY KEY,
    source TEXT NOT NULL
);

CREATE TABLE runs (
    session_key TEXT NOT NULL,
    run_id TEXT NOT NULL,
    recorded DOUBLE PRECISION NOT NULL,
    result TEXT NOT NULL,
    -- Insertion order (SQLite's rowid there): ties of `recorded` keep the order recorded.
    position BIGINT GENERATED ALWAYS AS IDENTITY,
    PRIMARY KEY (session_key, run_id)
);

CREATE TABLE run_workspaces (
    session_key TEXT NOT NULL,
    run_chain TEXT NOT NULL,
    workspace TEXT NOT NULL,
    PRIMARY KEY (session_key, run_chain)
);

CREATE TABLE auth_profiles (
    profile_id TEXT PRIMARY KEY,
    provider TEXT NOT NULL,
    type TEXT NOT NULL,
    base_url TEXT,
    auth_header TEXT,
    -- The key and header values, sealed (store/sealing.py).
    sealed BYTEA NOT NULL
);

CREATE TABLE profile_usage (
    profile_id TEXT PRIMARY KEY,
    usage TEXT NOT NULL,
    -- Bumped by every write: compare-and-set.
    version BIGINT NOT NULL
);

CREATE TABLE profile_last_good (
    provider TEXT PRIMARY KEY,
    profile_id TEXT NOT NULL
);

CREATE TABLE profile_order (
    provider TEXT PRIMARY KEY,
    profile_ids TEXT NOT NULL
);

CREATE TABLE gateway_tokens (
    token_id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    prefixes TEXT NOT NULL,
    read_only BOOLEAN NOT NULL,
    created DOUBLE PRECISION NOT NULL,
    sha256 TEXT NOT NULL
);

CREATE TABLE gateway_token_use (
    token_id TEXT PRIMARY KEY,
    last_used DOUBLE PRECISION NOT NULL
);

CREATE TABLE webhook_secrets (
    ref TEXT PRIMARY KEY,
    sealed BYTEA NOT NULL,
    updated DOUBLE PRECISION NOT NULL
);

CREATE TABLE webhook_deliveries (
    delivery_id TEXT PRIMARY KEY,
    progress TEXT NOT NULL,
    updated DOUBLE PRECISION NOT NULL
);

CREATE TABLE payloads (
    digest TEXT PRIMARY KEY,
    data BYTEA NOT NULL,
    created DOUBLE PRECISION NOT NULL
);

-- The embedded store's schema (SQLite). The PostgreSQL schema is the same tables and keys with
-- that dialect's types (store/migrations/postgres/).

CREATE TABLE transcript_entries (
    session_key TEXT NOT NULL,
    -- Position in the session, from 1: readers fetch what came after the last one they saw.
    seq INTEGER NOT NULL,
    entry_id TEXT NOT NULL,
    -- The tool call a tool result answers; NULL for every other entry. Unique per session: one
    -- result per tool call, whichever attempt writes first.
    result_for TEXT,
    -- The entry as JSON (agentlane.transcript.TranscriptEntry).
    body TEXT NOT NULL,
    PRIMARY KEY (session_key, seq),
    UNIQUE (session_key, entry_id),
    UNIQUE (session_key, result_for)
);

CREATE TABLE session_records (
    session_key TEXT PRIMARY KEY,
    record TEXT NOT NULL,
    updated REAL NOT NULL
);

CREATE TABLE branch_sources (
    session_key TEXT PRIMARY KEY,
    source TEXT NOT NULL
);

CREATE TABLE runs (
    session_key TEXT NOT NULL,
    run_id TEXT NOT NULL,
    recorded REAL NOT NULL,
    result TEXT NOT NULL,
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
    sealed BLOB NOT NULL
);

CREATE TABLE profile_usage (
    profile_id TEXT PRIMARY KEY,
    usage TEXT NOT NULL,
    -- Bumped by every write: compare-and-set.
    version INTEGER NOT NULL
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
    read_only INTEGER NOT NULL,
    created REAL NOT NULL,
    sha256 TEXT NOT NULL
);

CREATE TABLE gateway_token_use (
    token_id TEXT PRIMARY KEY,
    last_used REAL NOT NULL
);

CREATE TABLE webhook_secrets (
    ref TEXT PRIMARY KEY,
    sealed BLOB NOT NULL,
    updated REAL NOT NULL
);

CREATE TABLE webhook_deliveries (
    delivery_id TEXT PRIMARY KEY,
    progress TEXT NOT NULL,
    updated REAL NOT NULL
);

CREATE TABLE payloads (
    digest TEXT PRIMARY KEY,
    data BLOB NOT NULL,
    created REAL NOT NULL
);

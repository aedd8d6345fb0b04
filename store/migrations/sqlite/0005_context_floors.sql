-- Where each session's live context starts (issue 26, agentlane/context_floor.py): written with
-- the reset or compaction marker that moves it, in the same transaction, so a reader starts
-- there instead of at the session's first entry. A session without a row reads from its start
-- (the transcript cache records the row for a session written before this table existed).
CREATE TABLE context_floors (
    session_key TEXT PRIMARY KEY,
    -- The first seq a request can use.
    floor_seq INTEGER NOT NULL,
    -- The marker that set it: a later marker replaces the row, an earlier one never does.
    marker_seq INTEGER NOT NULL,
    -- The latest reset's seq (0: none), which a compaction's kept entries must follow.
    reset_seq INTEGER NOT NULL
);

-- The first entry of each run, so a run's entries are read from where it began (a run that
-- spans a compaction has entries below the floor).
CREATE TABLE run_starts (
    session_key TEXT NOT NULL,
    run_id TEXT NOT NULL,
    first_seq INTEGER NOT NULL,
    PRIMARY KEY (session_key, run_id)
);

INSERT INTO run_starts (session_key, run_id, first_seq)
SELECT session_key, json_extract(body, '$.run_id'), MIN(seq)
FROM transcript_entries
WHERE json_extract(body, '$.run_id') IS NOT NULL
GROUP BY session_key, json_extract(body, '$.run_id')

-- What an earlier attempt of a tool call did (an exec started, an edit applied), so a retried
-- attempt on any host knows: written once per (session, call, kind).
CREATE TABLE tool_marks (
    session_key TEXT NOT NULL,
    tool_call_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    value TEXT NOT NULL,
    PRIMARY KEY (session_key, tool_call_id, kind)
)

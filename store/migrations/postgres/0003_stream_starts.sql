-- Where each session's current run began in its event stream: a table of its own (until now
-- rows `stream-start/<key>` of webhook_deliveries, progress "<run id> <offset>"), those rows
-- moved here.
CREATE TABLE stream_starts (
    session_key TEXT PRIMARY KEY,
    run_id TEXT NOT NULL,
    stream_offset BIGINT NOT NULL,
    updated DOUBLE PRECISION NOT NULL
);

INSERT INTO stream_starts (session_key, run_id, stream_offset, updated)
SELECT substr(delivery_id, 14), split_part(progress, ' ', 1),
       CAST(split_part(progress, ' ', 2) AS BIGINT), updated
FROM webhook_deliveries
WHERE substr(delivery_id, 1, 13) = 'stream-start/' AND progress ~ '^[^ ]+ [0-9]+$'
ON CONFLICT DO NOTHING;

DELETE FROM webhook_deliveries WHERE substr(delivery_id, 1, 13) = 'stream-start/'

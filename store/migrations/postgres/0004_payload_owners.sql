-- Offloaded payloads are owned by the workflows whose histories reference them (the SDK names
-- the workflow when it stores one), so they can go once those have closed (agentlane gc).
-- `owned`: some workflow owned it (it goes when the last owner is released); never owned (a
-- client's own input): it goes after the retention, counted from `created` (its last put).
ALTER TABLE payloads ADD COLUMN owned BOOLEAN NOT NULL DEFAULT FALSE;

CREATE TABLE payload_owners (
    workflow_id TEXT NOT NULL,
    -- '' for any run of the workflow id (a child's input, stored before it had a run id).
    run_id TEXT NOT NULL,
    digest TEXT NOT NULL,
    -- When the owner last stored it: an owner without a run releases only what was stored
    -- before a later run of its workflow started (agentlane/payload_gc.py).
    stored DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (workflow_id, run_id, digest)
);

CREATE INDEX payload_owners_digest ON payload_owners (digest)

"""Work on transcripts that keeps a session's context usable (issue 10, SPEC §10–§12).

Pure functions over `TranscriptEntry` lists, no I/O and no Temporal: token estimates
(`token_estimate`), tool-result truncation and the live guard (`tool_result_truncation`),
transcript repair and a tolerant line loader (`transcript_repair`), the compaction cut point and
chunking (`compaction_plan`), the progress record a summary cannot lose (`progress_record`) and
the safeguard summary's texts (`safeguard_summary`). The activities that read and rewrite the
transcript store, and call a summariser, are built on them.
"""

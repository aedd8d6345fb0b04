"""State kept outside Temporal (transcripts, records, profiles and cooldowns, tokens, secrets,
offloaded payloads): one async interface (`store.interface.Store`), one module per backend.

Used by activities, workers and clients; workflows never import it (DESIGN "Where new code
goes"). `store.open.open_store(settings)` picks the backend from `AGENTLANE_DATABASE_URL`.
"""

"""sgam.ingest: the write path from episodes to validated deltas."""

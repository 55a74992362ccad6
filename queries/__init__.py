"""sgam.queries: the read path."""

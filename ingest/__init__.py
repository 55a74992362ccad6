"""sgam.ingest: the write path from episodes to validated, reconciled deltas.

``replay`` reads JSONL files of episodes with their structured deltas (the agent-given extractor);
model-based extraction and the background worker build on the same path.
"""

from .replay import LineError, ReplayLine, ReplaySummary, parse_line, parse_lines, replay

__all__ = ["LineError", "ReplayLine", "ReplaySummary", "parse_line", "parse_lines", "replay"]

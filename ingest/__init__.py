"""sgam.ingest: the write path from episodes to validated, reconciled deltas.

``episodes`` builds episodes from messages, tool results, business events and documents;
``pipeline`` records them, runs the extractors (``StructuredDeltas`` given by agents, the
``events`` mapping from ``graph/schemas/events.yaml``, model-based ones behind the ``extract``
protocol), writes what validates and quarantines the rest (``quarantine``); ``queue`` and
``worker`` process episodes in the background from a queue kept in Neo4j; ``replay`` reads JSONL
files of episodes with their structured deltas. ``extractors/`` holds the extractor families
(``events``, ``llm``, ``sgr``); ``graphiti/`` all Graphiti code: ``extractor`` runs graphiti-core's
extraction as an extractor, ``importer`` imports an existing Graphiti graph (``env`` imports
graphiti-core with telemetry and ``.env`` loading off).
"""

from .extractors.events import EventMapper, EventRules, load_event_rules
from .extract import Extractor, implied_fields
from .graphiti.extractor import GraphitiExtractor
from .graphiti.importer import GraphitiImportReport, GraphitiMapping, import_graphiti
from .pipeline import (
    IngestReport,
    QuarantineReplay,
    StructuredDeltas,
    default_extractors,
    ingest,
    list_quarantine,
    replay_quarantine,
    submit,
)
from .quarantine import QuarantineEntry
from .replay import LineError, ReplayLine, ReplaySummary, parse_line, parse_lines, replay
from .worker import Worker, WorkerOptions, WorkerStats

__all__ = [
    "EventMapper",
    "EventRules",
    "Extractor",
    "GraphitiExtractor",
    "GraphitiImportReport",
    "GraphitiMapping",
    "IngestReport",
    "LineError",
    "QuarantineEntry",
    "QuarantineReplay",
    "ReplayLine",
    "ReplaySummary",
    "StructuredDeltas",
    "Worker",
    "WorkerOptions",
    "WorkerStats",
    "default_extractors",
    "implied_fields",
    "import_graphiti",
    "ingest",
    "list_quarantine",
    "load_event_rules",
    "parse_line",
    "parse_lines",
    "replay",
    "replay_quarantine",
    "submit",
]

"""An extractor for worker subprocesses under test (``sgam worker -x tests.integration.ingest_helpers:LoggedEvents``).

It is the shipped event mapping, plus a line ``<pid> <episode id>`` appended to ``$SGAM_TEST_LOG``
for every episode it is asked about and a pause of ``$SGAM_TEST_DELAY`` seconds, so a test can
see which process handled what and kill a worker in the middle of a batch.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence

from sgam.graph.models import Episode
from sgam.graph.schema import Schema
from sgam.ingest.extractors.events import EventMapper
from sgam.ingest.extract import CurrentState, RawCandidate


class LoggedEvents:
    name = "events"

    def __init__(self, schema: Schema | None = None) -> None:
        self.inner = EventMapper(schema=schema)
        self.log = os.environ["SGAM_TEST_LOG"]
        self.delay = float(os.environ.get("SGAM_TEST_DELAY", "0"))

    def extract(self, episode: Episode, current: CurrentState) -> Sequence[RawCandidate]:
        with open(self.log, "a", encoding="utf-8") as log:
            log.write(f"{os.getpid()} {episode.id}\n")
        time.sleep(self.delay)
        return self.inner.extract(episode, current)

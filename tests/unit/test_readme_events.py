"""The README's event formats: every rule of events.yaml has a row, and every example maps."""

from __future__ import annotations

import json
import re
from pathlib import Path

from sgam.graph import default_schema
from sgam.ingest.episodes import event
from sgam.ingest.extractors.events import EventMapper, load_event_rules

README = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
START = README.index("An event is a JSON object with `type`")
OPEN = README.index("```json\n", START) + len("```json\n")
SECTION = README[START:README.index("```", OPEN)]  # the table and the examples after it
EXAMPLES = README[OPEN:README.index("```", OPEN)]


def test_every_event_type_has_a_row_and_one_example() -> None:
    rules = load_event_rules()
    rows = dict(re.findall(r"^\| `(\w+)` \| (.*?) \|", SECTION, re.MULTILINE))
    rows.pop("type")  # the header row
    examples = [json.loads(line) for line in EXAMPLES.splitlines() if line.strip()]
    assert set(rows) == set(rules.events) == {e["type"] for e in examples}
    assert len(examples) == len(rules.events)


def test_every_example_maps_to_the_attributes_its_row_names() -> None:
    mapper = EventMapper(load_event_rules(), schema=default_schema())
    rows = dict(re.findall(r"^\| `(\w+)` \| .*? \| (.*?) \|$", SECTION, re.MULTILINE))
    for line in EXAMPLES.splitlines():
        payload = json.loads(line)
        candidates = mapper.extract(event("readme", payload), {})
        written = {c["attribute"] for c in candidates}
        assert written and all(f"`{a}`" in rows[payload["type"]] for a in written), (payload, written)

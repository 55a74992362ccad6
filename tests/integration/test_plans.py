"""The write path's keyed lookups plan as index seeks.

A statement that looks up one node per row by its key (``UNWIND $ids AS id MATCH (x:Episode
{tenant_id: $tenant, id: id})``) can be planned as a scan of the whole index per row: the planner
picked it when the index's sampled statistics said it was nearly empty (a new server, or one whose
tenants were just deleted) and kept the plan cached until they moved, while the index filled
(sgam/bench/README.md, session 14). ``USING INDEX`` still allowed that scan; these statements say
``USING INDEX SEEK``. Each is planned here on new labels that carry the same key constraints and
indexes as the labels they stand for and hold rows the statistics have not sampled yet; any scan
fails it. (The statistics that made the old hints scan could not be recreated here: on these
labels the old hints seek too, so this guards the seeks rather than reproducing the fault.)
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from sgam import MemoryGraph
from sgam.graph import bulk, recording, writes

KEYED = {
    "writes.CHECK_STORED": writes.CHECK_STORED,
    "writes.lock_and_read_query": writes.lock_and_read_query(("HOME_CITY", "COVERED_BY")),
    "bulk.MISSING_EPISODES": bulk.MISSING_EPISODES,
    "bulk.MERGE_MENTIONS": bulk.MERGE_MENTIONS,
    "recording.LOOKUP": recording.LOOKUP,
    "recording.QUEUE_RECORDED": recording.QUEUE_RECORDED,
}
# Each label these statements look up by key, with its keys as graph/ddl.py indexes them: the first
# under a uniqueness constraint, the others under a range index.
KEYS = {"Episode": (("tenant_id", "id"), ("tenant_id", "content_hash")), "Entity": (("tenant_id", "id"),),
        "Tombstone": (("tenant_id", "subject"),), "Ledger": (("tenant_id", "subject", "attribute"),)}
ROWS = 5_000
SCANS = ("NodeIndexScan", "NodeUniqueIndexScan", "NodeByLabelScan", "AllNodesScan")


def _operators(plan: dict[str, Any]) -> Iterator[tuple[str, str]]:
    yield plan.get("operatorType", "").split("@")[0], str(plan.get("args", {}).get("Details", ""))
    for child in plan.get("children", []):
        yield from _operators(child)


@pytest.fixture
def new_labels(graph: MemoryGraph) -> Iterator[dict[str, str]]:
    """A new label for each of ``KEYS``, with the same constraint and indexes and ``ROWS`` rows; dropped afterwards."""
    suffix = uuid.uuid4().hex[:8]
    labels = {label: f"{label}_plan_{suffix}" for label in KEYS}
    names: list[str] = []
    with graph.store.driver.session() as session:
        try:
            for label, renamed in labels.items():
                for n, key in enumerate(KEYS[label]):
                    names.append(f"plan_test_{renamed.lower()}_{n}")
                    props = ", ".join(f"x.{k}" for k in key)
                    session.run(f"CREATE CONSTRAINT {names[-1]} FOR (x:{renamed}) REQUIRE ({props}) IS UNIQUE" if n == 0
                                else f"CREATE INDEX {names[-1]} FOR (x:{renamed}) ON ({props})").consume()
            session.run("CALL db.awaitIndexes(120)").consume()
            for label, renamed in labels.items():  # rows the planner's statistics have not sampled yet
                props = ", ".join(sorted({f"{k}: toString(i)" for key in KEYS[label] for k in key[1:]}))
                session.run(f"UNWIND range(1, $n) AS i CREATE (:{renamed} {{tenant_id: 't', {props}}})",
                            n=ROWS).consume()
            yield labels
        finally:
            for renamed in labels.values():
                session.run(f"MATCH (x:{renamed}) DELETE x").consume()
            for name in names:
                session.run(f"DROP CONSTRAINT {name} IF EXISTS").consume()
                session.run(f"DROP INDEX {name} IF EXISTS").consume()


@pytest.mark.parametrize("name", sorted(KEYED))
def test_keyed_lookups_seek_on_new_labels(graph: MemoryGraph, new_labels: dict[str, str], name: str) -> None:
    text = re.sub(r":(%s)\b" % "|".join(KEYS), lambda m: ":" + new_labels[m.group(1)], KEYED[name])
    assert text != KEYED[name]
    operators = list(_operators(graph.store.explain(text)))
    scans = [(op, details) for op, details in operators if op in SCANS]
    assert not scans, f"{name} scans instead of seeking: {scans}"
    seeks = [details for op, details in operators if "IndexSeek" in op]
    assert seeks, f"{name} plans no index seek: {operators}"

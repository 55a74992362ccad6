"""Statements plan as index seeks where an index reaches what they read.

The write path's keyed lookups and the reads that start from one subject seek (the first test
below); no statement scans every tenant's nodes unless it must (the last test, with the list of
those that must and why).

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

import importlib
import pkgutil
import re
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from sgam import MemoryGraph
from sgam.graph import bulk, recording, writes
from sgam.queries.loader import load_queries

KEYED = {
    "writes.CHECK_STORED": writes.CHECK_STORED,
    "writes.lock_and_read_query": writes.lock_and_read_query(("HOME_CITY", "COVERED_BY")),
    "bulk.MISSING_EPISODES": bulk.MISSING_EPISODES,
    "bulk.MERGE_MENTIONS": bulk.MERGE_MENTIONS,
    "recording.LOOKUP": recording.LOOKUP,
    "recording.QUEUE_RECORDED": recording.QUEUE_RECORDED,
}
# The reads that start from one subject, as SGAM sends them. Without their hints, on labels whose
# statistics were sampled empty, five of them planned a scan of the tenant_id index (every tenant's
# entities, each filtered), and the scale benchmark's 10k `current` ran 1.6-2x slower on such a plan
# cached from a database its own warm-up had just emptied (sgam/bench/README.md, "Session 30").
SUBJECT_READS = ("current", "as-of", "history", "history-chain", "neighbourhood", "picture", "provenance",
                 "traverse", "valid-during", "context-neighbourhood")
KEYED.update({f"query:{name}": load_queries()[name].packed_text for name in SUBJECT_READS})
# Each label these statements look up by key, with its keys as graph/ddl.py indexes them: the first
# under a uniqueness constraint, the others under a range index.
KEYS = {"Episode": (("tenant_id", "id"), ("tenant_id", "content_hash")), "Entity": (("tenant_id", "id"), ("tenant_id",)),
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


# -- every statement: no scan of the whole database where an index reaches the tenant ----------------

# Statements that may scan, and why. Any other module constant or named query that plans a label
# or all-nodes scan fails: a read that scans every tenant's nodes gets slower with every tenant
# (the empty-answer check scanned every tombstone, the read audit every audit record).
MAY_SCAN = {
    "query:doctor": "a diagnostic: it checks every node and relationship of the tenant, whatever its label",
    "query:residue": "it looks for anything left of a forgotten subject, under any label or type",
    "query:customer-policies": "an example domain query: the planner starts from whichever label is smallest",
    "sgam.demo.BROWSER_QUERY": "the demo tenant's Browser favourite",
    "sgam.graph.ddl.APPLIED": "migration records: one node per migration, no tenant",
    "sgam.graph.ddl.LATEST_SCHEMA": "schema versions: a few nodes, no tenant",
    "sgam.graph.ddl.UNSTAMPED_QUARANTINE": "a migration's backfill over every tenant, once",
    "sgam.graph.deletion.COUNT_TENANT": "a tenant deletion's dry run counts every label it removes",
    "sgam.graph.evolution.DROP_LEDGERS": "a schema migration drops the ledgers of an attribute in every tenant",
    "sgam.graph.evolution.IN_FORCE": "schema migration records: a few nodes, no tenant (asked once a second at most)",
    "sgam.graph.forget.CITED_BY_OTHERS": "erasure reads every fact of the tenant, wherever it is stored",
    "sgam.graph.forget.DELETE_BY_SUBJECT": "erasure removes every extraction naming the subject",
    "sgam.graph.forget.HELD_ELSEWHERE": "erasure reads every fact of the tenant, wherever it is stored",
    "sgam.graph.forget.SCAN_NODES": "erasure looks for the subject's name under any label",
    "sgam.graph.forget.SCAN_RELATIONSHIPS": "erasure looks for the subject's name on any relationship",
    "sgam.graph.residue.NODES": "it looks for anything left of a forgotten subject, under any label",
    "sgam.graph.residue.RELATIONSHIPS": "it looks for anything left of a forgotten subject, on any type",
    "sgam.graph.telemetry.QUARANTINE_OPEN": "a gauge over every tenant",
    "sgam.graph.writes.UNLEDGERED_ROWS": "a backfill over every tenant's entities, in pages",
    "sgam.ingest.graphiti.importer.READ_EPISODES": "Graphiti's own graph, which has no SGAM indexes",
    "sgam.ingest.graphiti.importer.READ_EDGES": "Graphiti's own graph, which has no SGAM indexes",
    "sgam.local.browser.BROWSER_QUERY": "the demo tenant's Browser favourite",
    "sgam.local.browser.PICTURE_QUERY": "the demo tenant's Browser favourite",
    "sgam.service.keys.ANY_ACTIVE": "API keys: a handful of nodes",
    "sgam.service.keys.LIST": "API keys: a handful of nodes",
}
# Constants that are templates (filled in before they run), planned as filled in elsewhere.
TEMPLATES = {"sgam.api.SUBJECT_OF", "sgam.graph.evolution.COUNT", "sgam.graph.evolution.CREATE_FACTS",
             "sgam.graph.evolution.DISTINCT_VALUES", "sgam.graph.evolution.MOVE", "sgam.graph.evolution.READ_VALUES",
             "sgam.graph.evolution.RENAME_IN_PLACE", "sgam.graph.writes.LOCK_AND_READ", "sgam.graph.writes._BRANCH",
             "sgam.ingest.queue._TURNS", "sgam.queries.embeddings._SET"}
PACKAGES = ("sgam", "sgam.graph", "sgam.queries", "sgam.ingest")
NOT_SCANNED = ("sgam.bench", "sgam.integrations")  # benchmarks; optional integrations with their own dependencies


def _statements() -> dict[str, list[str]]:
    """Every Cypher statement the package holds as a module constant (an upper-case name whose
    text matches or merges), and every named query as SGAM sends it: each text with its names
    (a module that imports a constant names it too)."""
    found: dict[str, list[str]] = {}
    for package in PACKAGES:
        for info in pkgutil.walk_packages(importlib.import_module(package).__path__, package + "."):
            if info.name.startswith(NOT_SCANNED) or info.name.endswith("__main__"):
                continue
            for key, value in vars(importlib.import_module(info.name)).items():
                if key.isupper() and isinstance(value, str) and re.search(r"\b(MATCH|MERGE)\b", value):
                    found.setdefault(value, []).append(f"{info.name}.{key}")
    for name, query in load_queries().items():
        found.setdefault(query.packed_text, []).append(f"query:{name}")
    return found


def test_no_statement_scans_every_tenant_unless_it_must(graph: MemoryGraph) -> None:
    statements = _statements()
    named = {name for names in statements.values() for name in names}
    assert len(statements) > 100 and {"sgam.api.KNOWN", "query:current"} <= named
    assert set(TEMPLATES) | set(MAY_SCAN) <= named, sorted((set(TEMPLATES) | set(MAY_SCAN)) - named)
    scanning, unplanned = {}, []
    for text, names in statements.items():
        if set(names) & TEMPLATES:
            continue
        try:
            operators = list(_operators(graph.store.explain(text)))
        except Exception as exc:  # reported below, with every other statement that does not plan
            unplanned.append(f"{names}: {exc}"[:200])
            continue
        scans = [f"{op} {details[:60]}" for op, details in operators if op in SCANS + (
            "DirectedAllRelationshipsScan", "UndirectedAllRelationshipsScan")]
        if scans and not set(names) & set(MAY_SCAN):
            scanning[", ".join(names)] = scans
    assert not unplanned, f"statements that do not plan (a template? add it to TEMPLATES): {unplanned}"
    assert not scanning, f"statements that scan every tenant's nodes (use an index, or say why in MAY_SCAN): {scanning}"

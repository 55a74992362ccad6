"""A tenant's whole subgraph, read from one store and copied exactly into another (``sgam tenants
move``, :func:`sgam.placement.move_tenant`).

Everything of a tenant carries its ``tenant_id``: the labels of :data:`PLACED_LABELS` (those a
tenant deletion removes, and its deletion records) and the relationships between them (facts,
mentions, aliases). :func:`read_op` reads it in one READ transaction; :func:`copy_op` creates
the same nodes and relationships in the target (labels, properties and types exactly), in batches;
:class:`Subgraph` has the counts and a content digest that do not depend on element ids, so the
copy is verified by reading it back and comparing both. A relationship between a tenant's node and
one outside the tenant would not survive a move: :func:`read_op` refuses such a tenant.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .deletion import DELETE_TENANT, TENANT_LABELS
from .errors import Conflict
from .steps import Auto, InTx, Operation, Records, Statement, Steps, Write

PLACED_LABELS = (*TENANT_LABELS, "Deletion")

# Temporal properties travel as the server's own text and type: the driver reads an instant stored
# with offset Z as UTC and would write it back with the zone id [UTC], a different value.
TEMPORAL = ("ZONED DATETIME NOT NULL", "LOCAL DATETIME NOT NULL", "DATE NOT NULL", "ZONED TIME NOT NULL",
            "LOCAL TIME NOT NULL", "DURATION NOT NULL")


def _temporal_of(var: str) -> str:
    return f"[k IN keys({var}) WHERE valueType({var}[k]) IN $temporal | [k, valueType({var}[k]), toString({var}[k])]]"


def _temporal_set(var: str) -> str:
    return (f"FOREACH (t IN r.temporal | SET {var}[t[0]] = CASE t[1]\n"
            "    WHEN 'ZONED DATETIME NOT NULL' THEN datetime(t[2]) WHEN 'LOCAL DATETIME NOT NULL' THEN localdatetime(t[2])\n"
            "    WHEN 'DATE NOT NULL' THEN date(t[2]) WHEN 'ZONED TIME NOT NULL' THEN time(t[2])\n"
            "    WHEN 'LOCAL TIME NOT NULL' THEN localtime(t[2]) WHEN 'DURATION NOT NULL' THEN duration(t[2]) END)")


# Label by label, so each scan uses the tenant's index (a node with two labels is read twice and
# kept once).
READ_NODES = tuple(
    f"MATCH (n:{label} {{tenant_id: $tenant}}) RETURN elementId(n) AS eid, labels(n) AS labels, "
    f"properties(n) AS props, {_temporal_of('n')} AS temporal"
    for label in PLACED_LABELS)
READ_RELATIONSHIPS = tuple(
    f"MATCH (n:{label} {{tenant_id: $tenant}})-[r]->(m) RETURN elementId(r) AS rid, type(r) AS type, "
    f"properties(r) AS props, elementId(n) AS start, elementId(m) AS end, {_temporal_of('r')} AS temporal"
    for label in PLACED_LABELS)
# Relationships reaching a tenant's node from a node of no tenant or another one.
FOREIGN = tuple(
    f"MATCH (n:{label} {{tenant_id: $tenant}})<-[r]-(m) WHERE m.tenant_id IS NULL OR m.tenant_id <> $tenant "
    "RETURN count(r) AS n"
    for label in PLACED_LABELS)

# Dynamic labels and types (Neo4j 5.26): one statement for every label set and fact type.
CREATE_NODES = """
UNWIND $rows AS r
CREATE (n:$(r.labels))
SET n = r.props
""" + _temporal_set("n") + """
RETURN r.eid AS old, elementId(n) AS new
"""
CREATE_RELATIONSHIPS = """
UNWIND $rows AS r
MATCH (a) WHERE elementId(a) = r.start
MATCH (b) WHERE elementId(b) = r.end
CREATE (a)-[x:$(r.type)]->(b)
SET x = r.props
""" + _temporal_set("x") + """
RETURN count(x) AS n
"""

# Everything of the tenant, its copied deletion records too, but the records the target held
# before (a tenant that once moved away): what clear_op removes from a target that got a partial
# or wrong copy (a tenant deletion would leave a record of it there).
DELETE_RECORDS = ("MATCH (n:Deletion {tenant_id: $tenant}) WHERE NOT n.id IN $keep "
                  "CALL (n) { DETACH DELETE n } IN TRANSACTIONS OF 2000 ROWS")
# The source's deletion records but the one of the move: their copies moved with the tenant.
DELETE_OTHER_RECORDS = "MATCH (d:Deletion {tenant_id: $tenant}) WHERE d.id <> $keep DETACH DELETE d"

DEFAULT_BATCH = 2000


@dataclass(frozen=True)
class Temporal:
    """A temporal property as the server writes it: its type (one of :data:`TEMPORAL`) and text."""

    kind: str
    text: str


@dataclass(frozen=True)
class Subgraph:
    """A tenant's nodes (element id -> labels, properties) and relationships (type, properties,
    start and end element ids) as one store holds them, temporal properties as :class:`Temporal`."""

    nodes: dict[str, tuple[tuple[str, ...], dict[str, Any]]]
    relationships: tuple[tuple[str, dict[str, Any], str, str], ...]

    @property
    def empty(self) -> bool:
        return not self.nodes

    def records_only(self) -> bool:
        """Whether all it holds are deletion records (what a tenant leaves where it moved from)."""
        return all(labels == ("Deletion",) for labels, _ in self.nodes.values()) and not self.relationships

    def record_ids(self) -> list[str]:
        return [str(props.get("id")) for labels, props in self.nodes.values() if "Deletion" in labels]

    def union(self, other: Subgraph) -> Subgraph:
        """Both subgraphs as one (read from two stores: their element ids do not collide)."""
        return Subgraph({**self.nodes, **other.nodes}, self.relationships + other.relationships)

    def counts(self) -> dict[str, int]:
        """Nodes per label and relationships per type (``:TYPE``), sorted by name."""
        counted: Counter[str] = Counter()
        for labels, _ in self.nodes.values():
            counted.update(labels)
        counted.update(f":{kind}" for kind, _, _, _ in self.relationships)
        return dict(sorted(counted.items()))

    def digest(self) -> str:
        """A SHA-256 of the content, independent of element ids and order: each node by its labels
        and properties, each relationship by its type, properties and its two nodes' content."""
        node_keys = {eid: _hash([sorted(labels), props]) for eid, (labels, props) in self.nodes.items()}
        rels = sorted(_hash([kind, props, node_keys[start], node_keys[end]])
                      for kind, props, start, end in self.relationships)
        return _hash([sorted(node_keys.values()), rels])


def _hash(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), default=_canonical)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _canonical(value: Any) -> str:
    # A Temporal (or any other value JSON has no form for) by its type and repr.
    return f"{type(value).__name__}:{value!r}"


def read_op(tenant: str) -> Operation[Subgraph]:
    """The tenant's subgraph, read in one READ transaction; :class:`Conflict` if a relationship
    joins it to a node outside the tenant."""
    subgraph: Subgraph = yield InTx(lambda: _read_steps(tenant), read=True)
    return subgraph


def _properties(row: dict[str, Any]) -> dict[str, Any]:
    """A row's properties with each temporal one as a :class:`Temporal`."""
    return {**row["props"], **{key: Temporal(kind, text) for key, kind, text in row["temporal"]}}


def _read_steps(tenant: str) -> Steps[Subgraph]:
    params = {"tenant": tenant, "temporal": list(TEMPORAL)}
    nodes: dict[str, tuple[tuple[str, ...], dict[str, Any]]] = {}
    for query in READ_NODES:
        for row in (yield Statement(query, params)):
            nodes[row["eid"]] = (tuple(sorted(row["labels"])), _properties(row))
    relationships: dict[str, tuple[str, dict[str, Any], str, str]] = {}
    for query in READ_RELATIONSHIPS:
        for row in (yield Statement(query, params)):
            relationships[row["rid"]] = (row["type"], _properties(row), row["start"], row["end"])
    foreign = sum(1 for _, _, _, end in relationships.values() if end not in nodes)
    for query in FOREIGN:
        foreign += (yield Statement(query, params))[0]["n"]
    if foreign:
        raise Conflict(f"tenant {tenant!r} has {foreign} relationship(s) to nodes outside the tenant: it cannot "
                       "be moved exactly (run `sgam doctor -t` on it and remove them first)")
    return Subgraph(nodes, tuple(relationships.values()))


def copy_op(subgraph: Subgraph, batch_size: int = DEFAULT_BATCH,
            on_progress: Callable[[int, int], None] | None = None) -> Operation[int]:
    """Create ``subgraph`` in the store that runs this, in write transactions of ``batch_size``
    rows: the nodes, then the relationships between the copies. ``on_progress(done, total)``
    after each batch. Returns the rows written. Not atomic: :func:`clear_op` undoes a partial copy."""
    node_rows = [{"eid": eid, "labels": list(labels), **_split(props)}
                 for eid, (labels, props) in subgraph.nodes.items()]
    total = len(node_rows) + len(subgraph.relationships)
    done = 0
    copied: dict[str, str] = {}
    for start in range(0, len(node_rows), batch_size):
        records: Records = yield Write(Statement(CREATE_NODES, {"rows": node_rows[start:start + batch_size]}))
        copied.update((row["old"], row["new"]) for row in records)
        done += len(records)
        if on_progress is not None:
            on_progress(done, total)
    rel_rows = [{"type": kind, **_split(props), "start": copied[begin], "end": copied[end]}
                for kind, props, begin, end in subgraph.relationships]
    for start in range(0, len(rel_rows), batch_size):
        batch = rel_rows[start:start + batch_size]
        yield Write(Statement(CREATE_RELATIONSHIPS, {"rows": batch}))
        done += len(batch)
        if on_progress is not None:
            on_progress(done, total)
    return done


def _split(props: dict[str, Any]) -> dict[str, Any]:
    """``props`` as a row: the plain properties, and the temporal ones as ``[key, type, text]``."""
    temporal = [[key, value.kind, value.text] for key, value in props.items() if isinstance(value, Temporal)]
    return {"props": {k: v for k, v in props.items() if not isinstance(v, Temporal)}, "temporal": temporal}


def clear_op(tenant: str, keep: list[str]) -> Operation[None]:
    """Remove everything of ``tenant`` from the store that runs this, deletion records included
    but those whose id is in ``keep``, leaving no record: for a target whose copy failed (never
    for a tenant's own store)."""
    for statement in (*DELETE_TENANT, DELETE_RECORDS):
        yield Auto(Statement(statement, {"tenant": tenant, "keep": keep}))


def drop_records_op(tenant: str, keep: str) -> Operation[None]:
    """Remove ``tenant``'s deletion records but ``keep`` (the source's, after a move)."""
    yield Write(Statement(DELETE_OTHER_RECORDS, {"tenant": tenant, "keep": keep}))


__all__ = ["PLACED_LABELS", "Subgraph", "clear_op", "copy_op", "drop_records_op", "read_op"]

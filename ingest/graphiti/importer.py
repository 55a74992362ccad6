"""Importing an existing Graphiti graph (in the connected Neo4j) as SGAM episodes and facts.

:func:`import_graphiti` reads Graphiti's ``(:Episodic)`` nodes and its fact edges
``(:Entity)-[:RELATES_TO]->(:Entity)`` (optionally of some ``group_id`` values only) and writes
them into one SGAM tenant through a :class:`GraphitiMapping` (a YAML file, see
``graph/schemas/graphiti-mapping.yaml``): Graphiti edge name -> schema attribute, entity name ->
subject id rule, Graphiti entity labels -> SGAM entity types.

* Every ``Episodic`` node becomes an SGAM episode ``graphiti-<uuid>`` (content, ``valid_at`` as
  the occurrence time, ``source`` -> kind, ``source_description`` -> actor, ``group_id`` ->
  session). An edge whose episodes are all missing gets an episode of its own,
  ``graphiti-edge-<uuid>``, holding its ``fact``, so every fact keeps a source.
* Every mapped edge becomes ordinary deltas, which go through the same validation and
  reconciliation as every other write; ``asserted_by`` is ``graphiti-edge:<uuid>``, the source
  episode is the edge's earliest episode. Times (the chosen semantics):

  - ``assert`` at ``valid_at`` (else the earliest episode's time, else ``created_at``);
  - ``invalid_at`` -> a ``retract`` at ``invalid_at`` (the fact ended: ``valid_to``), citing the
    edge's latest episode;
  - ``expired_at`` without ``invalid_at`` (Graphiti stopped believing it, but it never ended)
    -> the fact was never true, so it is no statement at all: it is left out and listed in the
    report's ``skipped`` (an assert and a retract at ``valid_at`` would be two change points, and
    the retract would end whatever else holds there; docs/temporal-semantics.md);
  - ``expired_at`` with ``invalid_at`` is only Graphiti's record of when it invalidated the
    edge and adds nothing; SGAM's own ``recorded_at``/``expired_at`` are the import's times.

* Edge names the mapping does not know are counted per name in the report, never dropped
  silently; edges that cannot be mapped (no id from a name, ``invalid_at`` not after
  ``valid_at``) are listed with the reason. Deltas are written per slot in time order.
* Importing twice changes nothing: episode ids and delta keys are deterministic.
* SGAM's rules apply where Graphiti's edges disagree with each other: two edges of one
  cardinality-one slot that overlap in valid time become a change at the later ``valid_at`` (and
  a ``retract`` of the earlier one that no longer holds is refused as a ``Conflict``, listed in
  ``problems``); overlapping edges with the same value are one version, ended by the first
  ``invalid_at``. All edges of the selected groups are read into memory at once.

Only Graphiti nodes and edges are read: ``RELATES_TO`` edges with a ``uuid`` between nodes with a
``uuid``; SGAM's own ``:Entity`` nodes carry ``tenant_id``/``id`` and never a ``uuid``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from sgam.graph.recording import record_op
from sgam.graph.errors import SchemaViolation, validation_problems
from sgam.graph.models import (
    MAX_EPISODE_BYTES,
    Episode,
    EpisodeKind,
    MemoryDelta,
    Op,
    check_id,
    check_tenant,
)
from sgam.graph.schema import Schema
from sgam.graph.codec import native

from sgam.ingest.graphiti.extractor import slug_id, utc

EPISODE_PREFIX = "graphiti-"
EDGE_EPISODE_PREFIX = "graphiti-edge-"
ASSERTED_BY_PREFIX = "graphiti-edge:"
ID_RULES = ("slug", "name", "uuid", "property:<key>")
VALUE_RULES = ("auto", "target", "target_name", "edge:<property>")
KINDS = {"message": EpisodeKind.MESSAGE, "json": EpisodeKind.EVENT, "text": EpisodeKind.DOCUMENT}

READ_EPISODES = """
MATCH (ep:Episodic)
WHERE ep.uuid IS NOT NULL AND ($groups IS NULL OR ep.group_id IN $groups)
RETURN ep {.uuid, .name, .group_id, .source, .source_description, .content, .valid_at,
           .created_at} AS episode
ORDER BY ep.valid_at, ep.uuid
"""

READ_EDGES = """
MATCH (s:Entity)-[e:RELATES_TO]->(t:Entity)
WHERE e.uuid IS NOT NULL AND s.uuid IS NOT NULL AND t.uuid IS NOT NULL
  AND ($groups IS NULL OR e.group_id IN $groups)
RETURN e {.*, fact_embedding: null} AS edge,
       s {.*, name_embedding: null, labels: labels(s)} AS source,
       t {.*, name_embedding: null, labels: labels(t)} AS target
ORDER BY e.group_id, e.uuid
"""


class _Rules(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class EdgeRule(_Rules):
    """How one Graphiti edge name maps: the schema attribute, where the value comes from, and
    whether the edge points from the value to the subject (``reverse``)."""

    attribute: str
    value: str = "auto"
    reverse: bool = False

    @field_validator("value")
    @classmethod
    def _value(cls, rule: str) -> str:
        if rule in ("auto", "target", "target_name") or (rule.startswith("edge:") and len(rule) > 5):
            return rule
        raise ValueError(f"value rule {rule!r} is not one of {', '.join(VALUE_RULES)}")


class EntityRules(_Rules):
    """Graphiti entity -> SGAM subject: the id rule, label -> type, and a fallback type."""

    id_rule: str = "slug"
    types: dict[str, str] = Field(default_factory=dict)
    default_type: str | None = None

    @field_validator("id_rule")
    @classmethod
    def _rule(cls, rule: str) -> str:
        if rule in ("slug", "name", "uuid") or (rule.startswith("property:") and len(rule) > 9):
            return rule
        raise ValueError(f"id_rule {rule!r} is not one of {', '.join(ID_RULES)}")


class GraphitiMapping(_Rules):
    """The mapping file of ``sgam import-graphiti`` (see ``graph/schemas/graphiti-mapping.yaml``)."""

    entities: EntityRules = Field(default_factory=EntityRules)
    edges: dict[str, EdgeRule]

    @field_validator("edges", mode="before")
    @classmethod
    def _short(cls, edges: Any) -> Any:
        if isinstance(edges, dict):
            return {k: {"attribute": v} if isinstance(v, str) else v for k, v in edges.items()}
        return edges

    @classmethod
    def from_file(cls, path: str | Path) -> GraphitiMapping:
        """Load a mapping from YAML, with errors that name the offending element."""
        path = Path(path)
        try:
            data = yaml.safe_load(path.read_text(encoding="utf-8"))
        except (OSError, yaml.YAMLError) as exc:
            raise SchemaViolation(f"graphiti mapping {path} could not be read: {exc}") from exc
        return cls.from_data(data, origin=str(path))

    @classmethod
    def from_data(cls, data: Any, origin: str = "graphiti mapping") -> GraphitiMapping:
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            raise SchemaViolation(f"{origin} is not a valid graphiti mapping: {validation_problems(exc)}") from exc

    def check(self, schema: Schema) -> GraphitiMapping:
        """Refuse attributes and types the schema does not know (naming the known ones)."""
        for name, rule in self.edges.items():
            if rule.attribute not in schema.attributes:
                raise SchemaViolation(
                    f"graphiti mapping: edge {name!r} maps to unknown attribute {rule.attribute!r}; "
                    f"schema {schema.name!r} v{schema.version} knows: {', '.join(sorted(schema.attributes))}")
            spec = schema.attributes[rule.attribute]
            if rule.value == "target" and spec.value_type != "entity":
                raise SchemaViolation(
                    f"graphiti mapping: edge {name!r}: value 'target' (an entity id) needs a relation, "
                    f"but {rule.attribute!r} holds {spec.value_type} values; use target_name or edge:<property>")
        for label, sgam_type in [*self.entities.types.items(), ("default_type", self.entities.default_type)]:
            if sgam_type is not None and sgam_type not in schema.entity_types:
                raise SchemaViolation(
                    f"graphiti mapping: {label!r} maps to unknown entity type {sgam_type!r}; "
                    f"known: {', '.join(schema.entity_types)}")
        return self


@dataclass
class GraphitiImportReport:
    """What an import read, wrote and refused."""

    tenant_id: str
    dry_run: bool
    episodes_read: int = 0
    edges_read: int = 0
    episodes: Counter[str] = field(default_factory=Counter)
    """Recording outcomes: created, existing, duplicate (planned when ``dry_run``)."""
    deltas: int = 0
    outcomes: Counter[str] = field(default_factory=Counter)
    unmapped: Counter[str] = field(default_factory=Counter)
    """Edges per Graphiti edge name that the mapping does not know."""
    problems: list[dict[str, str]] = field(default_factory=list)
    """Edges or episodes that could not be mapped, or deltas SGAM refused: ``uuid``, ``reason``."""
    skipped: list[dict[str, str]] = field(default_factory=list)
    """Never-true edges left out (see :func:`plan_edges`): ``uuid``, ``reason``."""

    @property
    def written(self) -> int:
        return sum(n for k, n in self.outcomes.items() if k != "unchanged")

    def as_dict(self) -> dict[str, Any]:
        """The report as plain JSON-ready data."""
        return {"tenant_id": self.tenant_id, "dry_run": self.dry_run, "episodes_read": self.episodes_read,
                "edges_read": self.edges_read, "episodes": dict(self.episodes), "deltas": self.deltas,
                "outcomes": dict(self.outcomes), "written": self.written, "unmapped": dict(self.unmapped),
                "problems": list(self.problems), "skipped": list(self.skipped)}


@dataclass(frozen=True)
class _Planned:
    episode: Episode
    order: tuple[Any, ...]
    delta: MemoryDelta
    edge: str


def _props(record: Any) -> dict[str, Any]:
    return {k: native(v) for k, v in dict(record).items() if v is not None}


def _episode(row: dict[str, Any], tenant: str) -> Episode:
    when = row.get("valid_at") or row.get("created_at")
    if not isinstance(when, datetime):
        raise ValueError("it has neither valid_at nor created_at")
    actor = str(row.get("source_description") or "graphiti")[:200] or "graphiti"
    return Episode(tenant_id=tenant, id=check_id(f"{EPISODE_PREFIX}{row['uuid']}", "episode id"),
                   content=str(row.get("content") or ""), occurred_at=utc(when),
                   kind=KINDS.get(str(row.get("source")), EpisodeKind.DOCUMENT), actor=actor,
                   session_id=row.get("group_id"))


class _Importer:
    def __init__(self, schema: Schema, mapping: GraphitiMapping, tenant: str,
                 report: GraphitiImportReport) -> None:
        self.schema, self.mapping, self.tenant, self.report = schema, mapping, tenant, report
        self.episodes: dict[str, Episode] = {}
        self.extra: dict[str, Episode] = {}

    def add_episodes(self, rows: Sequence[dict[str, Any]]) -> None:
        for row in rows:
            try:
                self.episodes[row["uuid"]] = _episode(row, self.tenant)
            except (ValueError, ValidationError) as exc:
                self.report.problems.append({"uuid": str(row.get("uuid")),
                                             "reason": f"episode not imported: {_reason(exc)}"})

    def subject(self, node: dict[str, Any]) -> str:
        rule = self.mapping.entities.id_rule
        if rule == "uuid":
            return check_id(str(node["uuid"]), "subject (uuid rule)")
        if rule == "name":
            return check_id(str(node.get("name")), "subject (name rule)")
        if rule.startswith("property:"):
            key = rule.partition(":")[2]
            if node.get(key) is None:
                raise ValueError(f"entity {node.get('name')!r} ({node['uuid']}) has no property {key!r}")
            return check_id(str(node[key]), f"subject (property {key!r})")
        return slug_id(str(node.get("name") or ""))

    def entity_type(self, node: dict[str, Any]) -> str | None:
        types = self.mapping.entities.types
        found = [types[label] for label in node.get("labels", ()) if label in types]
        return found[0] if found else self.mapping.entities.default_type

    def value(self, rule: EdgeRule, edge: dict[str, Any], node: dict[str, Any]) -> Any:
        spec = self.schema.attributes[rule.attribute]
        how = rule.value if rule.value != "auto" else ("target" if spec.value_type == "entity" else "target_name")
        if how == "target":
            return self.subject(node)
        if how == "target_name":
            return node.get("name")
        key = how.partition(":")[2]
        if edge.get(key) is None:
            raise ValueError(f"edge has no property {key!r}")
        return edge[key]

    def sources(self, edge: dict[str, Any]) -> list[Episode]:
        found = sorted((self.episodes[u] for u in edge.get("episodes") or () if u in self.episodes),
                       key=lambda e: (e.occurred_at, e.id))
        if found:
            return found
        when = edge.get("valid_at") or edge.get("created_at")
        if not isinstance(when, datetime):
            raise ValueError("it cites no imported episode and has neither valid_at nor created_at")
        own = Episode(tenant_id=self.tenant, id=check_id(f"{EDGE_EPISODE_PREFIX}{edge['uuid']}", "episode id"),
                      content=str(edge.get("fact") or edge.get("name")), occurred_at=utc(when),
                      kind=EpisodeKind.DOCUMENT, actor="graphiti", session_id=edge.get("group_id"))
        self.extra[own.id] = own
        return [own]

    def plan(self, row: dict[str, Any]) -> list[_Planned]:
        edge, source, target = (_props(row[k]) for k in ("edge", "source", "target"))
        rule = self.mapping.edges.get(str(edge.get("name")))
        if rule is None:
            self.report.unmapped[str(edge.get("name"))] += 1
            return []
        if rule.reverse:
            source, target = target, source
        try:
            return self._deltas(rule, edge, source, target)
        except (ValueError, ValidationError) as exc:
            self.report.problems.append({"uuid": str(edge["uuid"]),
                                         "reason": f"edge {edge.get('name')!r} not imported: {_reason(exc)}"})
            return []

    def _deltas(self, rule: EdgeRule, edge: dict[str, Any], source: dict[str, Any],
                target: dict[str, Any]) -> list[_Planned]:
        episodes = self.sources(edge)
        start = utc(edge["valid_at"]) if isinstance(edge.get("valid_at"), datetime) else episodes[0].occurred_at
        end = utc(edge["invalid_at"]) if isinstance(edge.get("invalid_at"), datetime) else None
        if end is not None and end <= start:
            raise ValueError(f"invalid_at {end.isoformat()} is not after valid_at {start.isoformat()}")
        fields = {"tenant_id": self.tenant, "subject": self.subject(source), "attribute": rule.attribute,
                  "value": self.value(rule, edge, target), "subject_type": self.entity_type(source),
                  "subject_name": source.get("name"), "asserted_by": f"{ASSERTED_BY_PREFIX}{edge['uuid']}"}
        slot = (fields["subject"], rule.attribute)
        assert_ = MemoryDelta(**fields, valid_from=start, source_episode_id=episodes[0].id)
        if end is None and edge.get("expired_at") is not None:
            self.report.skipped.append({"uuid": str(edge["uuid"]), "reason": (
                "expired without invalid_at: Graphiti found it never true, so it is not imported")})
            return []
        planned = [_Planned(episodes[0], (*slot, 1, start, 1, edge["uuid"]), assert_, edge["uuid"])]
        if end is not None:
            retract = MemoryDelta(**fields, valid_from=end, op=Op.RETRACT, source_episode_id=episodes[-1].id)
            planned.append(_Planned(episodes[-1], (*slot, 1, end, 0, edge["uuid"]), retract, edge["uuid"]))
        return planned


def plan_edges(importer: _Importer, edge_rows: Iterable[Any]) -> list[_Planned]:
    """Every edge's deltas, per slot in time order."""
    return sorted((p for row in edge_rows for p in importer.plan(row)), key=lambda p: p.order)


def _reason(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        return "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'value'}: {e['msg']}" for e in exc.errors())
    return str(exc)


def import_graphiti(graph: Any, mapping: GraphitiMapping, tenant: str, *,
                    group_ids: Sequence[str] | None = None, dry_run: bool = False) -> GraphitiImportReport:
    """Import the Graphiti graph in ``graph``'s database into ``tenant`` (see the module docstring).

    ``group_ids`` restricts the import to those Graphiti groups (default: all). With ``dry_run``
    nothing is written and the report says what would be.
    """
    check_tenant(tenant)
    mapping.check(graph.schema)
    groups = list(group_ids) if group_ids else None
    report = GraphitiImportReport(tenant, dry_run)
    importer = _Importer(graph.schema, mapping, tenant, report)
    episode_rows = [_props(r["episode"]) for r in graph.store.read(READ_EPISODES, {"groups": groups})]
    report.episodes_read = len(episode_rows)
    importer.add_episodes(episode_rows)
    edge_rows = graph.store.read(READ_EDGES, {"groups": groups})
    report.edges_read = len(edge_rows)
    planned = plan_edges(importer, edge_rows)
    episodes = [*importer.episodes.values(), *importer.extra.values()]
    if dry_run:
        report.episodes["planned"] = len(episodes)
        report.deltas = len(planned)
        return report
    stored: dict[str, str] = {}
    for recorded in graph.store.run(record_op(episodes, graph.clock)) if episodes else ():
        report.episodes[recorded.outcome] += 1
        stored[recorded.id] = recorded.stored_id
    deltas = [p.delta.model_copy(update={"source_episode_id": stored.get(p.delta.source_episode_id,
                                                                         p.delta.source_episode_id)})
              for p in planned]
    report.deltas = len(deltas)
    if deltas:
        result = graph.write_many(deltas, workers=1)
        for r in result.results:
            if r.ok:
                report.outcomes[r.outcome] += 1
            else:
                report.problems.append({"uuid": planned[r.index].edge, "reason": r.message or str(r.error)})
    return report


__all__ = ["EdgeRule", "EntityRules", "GraphitiImportReport", "GraphitiMapping", "import_graphiti"]

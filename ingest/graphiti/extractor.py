"""An extractor that runs graphiti-core's own extraction, typed by the SGAM schema.

:class:`GraphitiExtractor` drives graphiti-core's entity and fact extraction
(``extract_nodes`` then ``extract_edges``, its prompts and response models) through any graphiti
``LLMClient``, with entity and edge types *generated from the SGAM schema*:

* every schema entity type becomes a Graphiti entity type (a pydantic model whose docstring
  lists the type's attributes);
* every schema attribute becomes a Graphiti edge type named after its relationship type
  (``passport_deadline`` -> ``PASSPORT_DEADLINE``, ``holds`` -> ``HOLDS``), with the signature
  ``(subject type, target type)``; for a literal attribute the target "entity" is the value
  itself (``(Mira)-[PASSPORT_DEADLINE]->(2026-07-15)``), so its signature is
  ``(subject type, Entity)``.

What Graphiti extracts is mapped to raw candidates of the
:class:`~sgam.ingest.extract.Extractor` protocol and goes through the same validation and
reconciliation as every other extractor. Graphiti's own deduplication, contradiction detection
and invalidation are not run: SGAM decides what a new fact replaces.

The mapping of one extracted fact (edge):

* ``subject``: the source entity's name as an id (:func:`slug_id`), ``subject_type`` its
  schema label, ``subject_name`` the name;
* ``attribute``: the schema attribute whose relationship type is the edge's ``relation_type``;
* ``value``: the target's id for a relation, the target's name for a literal attribute;
* ``valid_from``: the edge's ``valid_at`` (else the episode's time); ``evidence``: its ``fact``;
* an ``invalid_at`` adds a ``retract`` of the same value at that instant.

An edge that cannot be mapped (a relation type that is no schema attribute, a name that makes no
id, ``invalid_at`` not after ``valid_at``) becomes a *refused* candidate: the pipeline
quarantines it with the reason (stage ``validate``) and keeps Graphiti's output. Output that
does not even parse (graphiti's response models reject it) raises :class:`GraphitiOutputError`,
quarantined at stage ``extract`` with the raw answer.
"""

from __future__ import annotations

import asyncio
import json
import re
import unicodedata
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from typing import Any

from pydantic import BaseModel, ValidationError, create_model

from sgam.graph.errors import ExtractionError
from sgam.graph.models import Episode, EpisodeKind, check_id
from sgam.graph.schema import Schema, default_schema

from sgam.ingest.extract import REFUSED_KEY, CurrentState, RawCandidate
from sgam.ingest.graphiti.env import load_graphiti

GRAPHITI_ENTITY = "Entity"
_NOT_ID = re.compile(r"[^a-z0-9_.:@\-]+")


class GraphitiOutputError(ExtractionError):
    """graphiti-core's extraction rejected the model's answer (terminal; ``raw`` holds it)."""

    def __init__(self, message: str, *, raw: str, problems: Sequence[str] = ()) -> None:
        self.raw = raw
        self.problems = tuple(problems)
        super().__init__(message)


class TransientGraphitiError(ExtractionError):
    """The model endpoint behind the graphiti client failed in a way that may pass (retry later)."""

    transient = True


def slug_id(name: str) -> str:
    """An SGAM id from an entity name: ASCII-folded, lowercased, other runs of characters -> ``-``.

    ``"Mira Okafor"`` -> ``"mira-okafor"``. Raises ``ValueError`` when nothing id-like is left.
    """
    folded = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode("ascii")
    slug = _NOT_ID.sub("-", folded.strip().lower()).strip("-.:@_")[:128]
    return check_id(slug, f"id made from name {name!r}")


# -- types generated from the schema ------------------------------------------------------------


def entity_types(schema: Schema) -> dict[str, type[BaseModel]]:
    """One Graphiti entity type per schema entity type; the docstring lists its attributes."""
    types: dict[str, type[BaseModel]] = {}
    for label in schema.entity_types:
        names = [n for n, s in schema.attributes.items() if not s.subject_types or label in s.subject_types]
        doc = f"A {label} of the SGAM schema {schema.name!r}. Facts about it: {', '.join(names) or 'none'}."
        types[label] = create_model(label, __doc__=doc)
    return types


def _edge_doc(name: str, schema: Schema) -> str:
    spec = schema.attributes[name]
    what = (f"links to the {spec.target} it names" if spec.value_type == "entity" else
            f"the target entity is the value itself ({spec.value_type}"
            + (f", one of {', '.join(spec.values)}" if spec.values else "") + ")")
    many = "several at a time" if spec.cardinality.value == "many" else "one at a time"
    return f"{spec.description or name.replace('_', ' ')} ({name}; {what}; {many})."


def edge_types(schema: Schema) -> tuple[dict[str, type[BaseModel]], dict[tuple[str, str], list[str]]]:
    """Graphiti edge types (one per schema attribute, named by its relationship type) and the
    edge type map of their ``(source, target)`` signatures."""
    types: dict[str, type[BaseModel]] = {}
    signatures: dict[tuple[str, str], list[str]] = {}
    for name, spec in schema.attributes.items():
        rel = schema.rel_type(name)
        types[rel] = create_model(rel, __doc__=_edge_doc(name, schema))
        target = spec.target if spec.value_type == "entity" and spec.target else GRAPHITI_ENTITY
        for source in spec.subject_types or schema.entity_types:
            signatures.setdefault((source, target), []).append(rel)
    return types, signatures


# -- the extractor ------------------------------------------------------------------------------


_SOURCES = {EpisodeKind.MESSAGE: "message", EpisodeKind.EVENT: "json",
            EpisodeKind.TOOL_RESULT: "json", EpisodeKind.DOCUMENT: "text"}


def _run(coroutine: Any) -> Any:
    """Run a coroutine to completion from sync code, also when an event loop is running here."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coroutine).result()


class GraphitiExtractor:
    """graphiti-core's extraction as an SGAM extractor (see the module docstring).

    ``llm_client`` is any ``graphiti_core.llm_client.LLMClient`` (OpenAI, Anthropic, a local
    OpenAI-compatible server...). Only the extraction prompts run: no database, embedder or
    cross-encoder is used.
    """

    name = "graphiti"

    def __init__(self, llm_client: Any, schema: Schema | None = None) -> None:
        load_graphiti()
        self.llm_client = llm_client
        self.schema = schema or default_schema()
        self.entity_types = entity_types(self.schema)
        self.edge_types, self.edge_type_map = edge_types(self.schema)
        self.attribute_by_rel = {self.schema.rel_type(n): n for n in self.schema.attributes}

    @classmethod
    def from_settings(cls, settings: Any = None, schema: Schema | None = None) -> GraphitiExtractor:
        """graphiti's OpenAI-compatible client on the ``SGAM_LLM_*`` endpoint (``-x graphiti``)."""
        if settings is None:
            from sgam.settings import Settings

            settings = Settings()
        if not settings.llm_base_url or not settings.llm_model:
            raise ExtractionError(
                "the graphiti extractor needs an endpoint: set SGAM_LLM_BASE_URL and SGAM_LLM_MODEL "
                "(any OpenAI-compatible server, e.g. http://127.0.0.1:11434/v1 for Ollama)")
        load_graphiti()
        from graphiti_core.llm_client.config import LLMConfig
        from graphiti_core.llm_client.openai_generic_client import OpenAIGenericClient

        key = settings.llm_api_key.get_secret_value() if settings.llm_api_key is not None else "unused"
        config = LLMConfig(api_key=key, model=settings.llm_model, small_model=settings.llm_model,
                           base_url=settings.llm_base_url)
        return cls(OpenAIGenericClient(config=config), schema)

    def extract(self, episode: Episode, current: CurrentState) -> Sequence[RawCandidate]:
        nodes, edges = _run(self._graphiti_extract(episode))
        by_uuid = {n.uuid: n for n in nodes}
        out: list[RawCandidate] = []
        for edge in edges:
            out.extend(self.candidates(edge, by_uuid.get(edge.source_node_uuid),
                                       by_uuid.get(edge.target_node_uuid)))
        return out

    async def _graphiti_extract(self, episode: Episode) -> tuple[list[Any], list[Any]]:
        from graphiti_core.graphiti_types import GraphitiClients
        from graphiti_core.nodes import EpisodeType, EpisodicNode
        from graphiti_core.utils.maintenance.edge_operations import extract_edges
        from graphiti_core.utils.maintenance.node_operations import extract_nodes

        # Extraction reads only the LLM client; the other clients (driver, embedder, reranker)
        # serve Graphiti's own dedup and storage, which SGAM replaces, so none is built.
        clients = GraphitiClients.model_construct(llm_client=self.llm_client)
        node = EpisodicNode(
            name=episode.id, group_id=episode.tenant_id, source=EpisodeType(_SOURCES[episode.kind]),
            source_description=f"{episode.kind.value} by {episode.actor}", content=episode.content,
            valid_at=episode.occurred_at, created_at=episode.occurred_at,
        )
        try:
            nodes, _ = await extract_nodes(clients, node, [], entity_types=self.entity_types)
            edges, extra = await extract_edges(clients, node, nodes, [], self.edge_type_map,
                                               episode.tenant_id, edge_types=self.edge_types)
        except ValidationError as exc:
            raise GraphitiOutputError(
                f"graphiti-core rejected the model's answer for episode {episode.id!r}: "
                f"{exc.error_count()} problem(s)", raw=_raw(exc),
                problems=[f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()],
            ) from exc
        except Exception as exc:  # the LLM client's own errors: classify, never leak
            raise _classified(exc, episode) from exc
        return [*nodes, *[n for n in extra if n not in nodes]], edges

    # -- mapping ----------------------------------------------------------------------------

    def _type_of(self, node: Any) -> str | None:
        return next((label for label in node.labels if label in self.schema.entity_types), None)

    def candidates(self, edge: Any, source: Any, target: Any) -> list[RawCandidate]:
        """The raw candidates for one extracted Graphiti edge (refused ones carry the reason)."""
        output = _edge_output(edge, source, target)
        attribute = self.attribute_by_rel.get(edge.name)
        if attribute is None:
            return [_refused(f"graphiti relation type {edge.name!r} is not a schema attribute; "
                             f"known: {', '.join(sorted(self.attribute_by_rel))}", output)]
        if source is None or target is None:
            return [_refused(f"graphiti edge {edge.name!r} names an entity it did not extract", output)]
        spec = self.schema.attributes[attribute]
        try:
            subject = slug_id(source.name)
            value = slug_id(target.name) if spec.value_type == "entity" else target.name
        except ValueError as exc:
            return [_refused(str(exc), output)]
        base: RawCandidate = {"subject": subject, "subject_name": source.name, "attribute": attribute,
                              "value": value, "evidence": [edge.fact]}
        if (label := self._type_of(source)) is not None:
            base["subject_type"] = label
        if edge.valid_at is not None:
            base["valid_from"] = edge.valid_at
        if edge.invalid_at is None:
            return [base]
        if edge.valid_at is not None and edge.invalid_at <= edge.valid_at:
            return [_refused(f"graphiti edge {edge.name!r}: invalid_at {edge.invalid_at.isoformat()} "
                             f"is not after valid_at {edge.valid_at.isoformat()}", output)]
        retract = {**base, "op": "retract", "valid_from": edge.invalid_at}
        return [base, retract]


def _edge_output(edge: Any, source: Any, target: Any) -> dict[str, Any]:
    return {"relation_type": edge.name, "fact": edge.fact,
            "source": getattr(source, "name", None), "target": getattr(target, "name", None),
            "valid_at": edge.valid_at, "invalid_at": edge.invalid_at}


def _refused(reason: str, output: Mapping[str, Any]) -> RawCandidate:
    return {REFUSED_KEY: reason, "graphiti": dict(output)}


def _raw(exc: ValidationError) -> str:
    try:
        return json.dumps([e.get("input") for e in exc.errors()], default=str)[:10_000]
    except (TypeError, ValueError):
        return repr(exc)[:10_000]


_TRANSIENT_NAMES = frozenset({"RateLimitError", "APIConnectionError", "APITimeoutError",
                              "InternalServerError", "TimeoutException", "ConnectError",
                              "ReadTimeout", "RemoteProtocolError"})


def _classified(exc: Exception, episode: Episode) -> ExtractionError:
    if isinstance(exc, ExtractionError):
        return exc
    kinds = {cls.__name__ for cls in type(exc).__mro__}
    what = f"graphiti extraction failed for episode {episode.id!r}: {type(exc).__name__}: {exc}"
    if kinds & _TRANSIENT_NAMES:
        return TransientGraphitiError(what + " (retry later)")
    return GraphitiOutputError(what, raw=str(exc))


def utc(value: datetime) -> datetime:
    """``value`` in UTC (naive values from Graphiti are UTC by its convention)."""
    return value.replace(tzinfo=timezone.utc) if value.tzinfo is None else value.astimezone(timezone.utc)


__all__ = ["GraphitiExtractor", "GraphitiOutputError", "TransientGraphitiError",
           "edge_types", "entity_types", "slug_id", "utc"]

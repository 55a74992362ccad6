"""Graphiti (``graphiti-core``) as a system in the benchmarks, driven without an LLM.

The same facts the replay benchmark gives SGAM are written as a Graphiti graph with graphiti-core's
own save functions (``EntityNode`` / ``EntityEdge`` / ``EpisodicNode`` / ``EpisodicEdge`` ``.save``;
``add_nodes_and_edges_bulk`` in :func:`scale_probe`) and answered with graphiti-core's ``search``
(recipe ``EDGE_HYBRID_SEARCH_RRF``: BM25 over ``edge_name_and_fact`` plus MiniLM cosine, fused by
RRF, top 10), with the same all-MiniLM-L6-v2 embedder as SGAM and the text-memory baselines.

**What stands in for Graphiti's LLM.** ``add_episode`` extracts and resolves facts with an LLM; here
an ideal extractor does it: every statement becomes exactly its fact, and the contradiction judgement
is exact (for a single-valued attribute every other value of the same person and attribute is
flagged; set members never contradict). The dates are then set by Graphiti's own deterministic rule
(``_apply_temporal_invalidation`` in ``utils/maintenance/edge_operations.py``), with ``utc_now()``
replaced by the episode's (simulated) day so transaction-time filters mean something:

* a new value (first, change, backdated, set add): a new ``RELATES_TO`` edge, ``name`` = the
  attribute in upper case (``HOME_CITY``), ``fact`` = ``"<person>'s <attribute> is <value>"``
  (``includes`` for sets), ``valid_at`` = the date the statement gives ("as of D"),
  ``created_at`` = ``reference_time`` = the episode's day. Earlier contradicted edges get
  ``invalid_at`` = the new ``valid_at`` and ``expired_at`` = the episode's day; a new edge that
  starts before a contradicted one gets ``invalid_at`` = that edge's ``valid_at`` and is expired at
  once (Graphiti's back-dating rule);
* a correction ("was actually X, not Y, as of D") is a new value as of D, as the text reads:
  Graphiti has no transaction-time correction, so Y stays valid before D (mutated in place, no
  version record);
* a restatement is a duplicate: the episode is appended to the existing edge's ``episodes``;
* a retraction or set removal ("is no longer X as of D") ends the edge that holds X:
  ``invalid_at`` = D, ``expired_at`` = the episode's day (an edge with an end date is historical);
* an erasure ("forget everything about P") deletes P's entity node (``DETACH``, so its facts and
  mentions go) and the episodes that mention P, with graphiti-core's ``delete`` functions
  (``remove_episode`` needs the LLM).

Each tenant is one ``group_id`` (``graphiti-<tenant>``), and every search passes ``group_ids``.
Entity nodes: one per person and one per distinct value per group (``"Berlin"``), with MiniLM name
embeddings. Episodes: one ``Episodic`` node per statement (``source_description`` = the speaker,
``valid_at`` = ``created_at`` = its day) with a ``MENTIONS`` edge to the person.

**Answer rule** (fixed; the same for both columns except the filters): the query is the question
without its tenant tag; of the returned edges (best first) keep those whose ``name`` is the asked
attribute and whose fact (parsed) is about the asked person. ``current`` / ``abstain`` /
``as_of`` / ``believed_at``: the top kept edge's value (sets: every kept value, sorted); ``who_said``:
the speaker of the top kept edge's first episode (read with ``EpisodicNode.get_by_uuids``);
``history``: kept values ordered by ``valid_at``; ``replaced``: the value after the asked one in that
order; ``false_premise``: the ``invalid_at`` day of a kept edge with the asked value, else "none".
Column ``graphiti`` searches with no filter; ``graphiti-datefilter`` adds ``SearchFilters``:
``invalid_at IS NULL`` for current-type questions (the maintainers' recipe, getzep/graphiti #769),
``valid_at <= t AND (invalid_at IS NULL OR invalid_at > t)`` for ``as_of``, plus
``created_at <= k AND (expired_at IS NULL OR expired_at > k)`` for ``believed_at``.

**Same database as SGAM.** Both use the label ``Entity`` and the relationship type ``MENTIONS``:
Graphiti's nodes carry ``group_id`` and no ``tenant_id``, SGAM's the other way round, every SGAM query
is anchored on ``tenant_id`` and every Graphiti query on ``group_id``, and the two sets of index names
and indexed properties do not overlap (SGAM's are ``sgam_*``). Graphiti's fulltext index
``node_name_and_summary`` does index SGAM entity names (and SGAM's ``sgam_entity_name`` Graphiti's);
both filter the hits by their own tenant key. Graphiti creates no vector index: its cosine search
scans every ``RELATES_TO`` edge of the group. ``tests/integration/test_bench_graphiti.py`` checks
that Graphiti's answers are the same with and without SGAM data beside them, and the replay smoke
test that SGAM stays exact with Graphiti's graph and indexes in the same database.

Telemetry: graphiti-core is imported through :func:`sgam.ingest.graphiti.env.load_graphiti`
(``GRAPHITI_TELEMETRY_ENABLED`` = ``false`` first), and
``Graphiti()`` (the only place that sends it) is never constructed; search is called with a
``GraphitiClients`` whose LLM and cross-encoder raise if ever used.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime, timezone
from typing import Any

from sgam.bench.common import package_version, percentile
from sgam.bench.workload import ATTRS, NONE
from sgam.ingest.graphiti.env import GraphitiUnavailable, load_graphiti

# Importing this module is the choice to run Graphiti: graphiti-core is imported here, through the
# one loader (telemetry off, no .env loading, no import warnings); GraphitiUnavailable if missing.
load_graphiti()

from graphiti_core.cross_encoder.client import CrossEncoderClient  # noqa: E402
from graphiti_core.driver.neo4j_driver import Neo4jDriver  # noqa: E402
from graphiti_core.edges import EntityEdge, EpisodicEdge  # noqa: E402
from graphiti_core.embedder.client import EmbedderClient  # noqa: E402
from graphiti_core.graphiti_types import GraphitiClients  # noqa: E402
from graphiti_core.helpers import semaphore_gather, validate_group_id  # noqa: E402
from graphiti_core.llm_client import LLMClient  # noqa: E402
from graphiti_core.nodes import EntityNode, EpisodicNode, EpisodeType, Node  # noqa: E402
from graphiti_core.search.search import search as graphiti_search  # noqa: E402
from graphiti_core.search.search_config_recipes import EDGE_HYBRID_SEARCH_RRF  # noqa: E402
from graphiti_core.search.search_filters import ComparisonOperator, DateFilter, SearchFilters  # noqa: E402
from graphiti_core.tracer import NoOpTracer  # noqa: E402
from graphiti_core.utils.bulk_utils import add_nodes_and_edges_bulk  # noqa: E402
from graphiti_core.utils.maintenance.edge_operations import _apply_temporal_invalidation  # noqa: E402

TOP_K = 10
SYSTEMS = ("graphiti", "graphiti-datefilter")
FACT_RE = re.compile(r"^(?P<person>.+?)'s (?P<phrase>[a-z_ ]+?) (?:is|includes) (?P<value>.+)$")
_CONCURRENCY = 8
# recorded in the replay result file next to the numbers
RULES = {
    "extraction": "ideal: each statement becomes exactly its fact; contradictions flagged exactly "
                  "(single-valued: every other value of the same person and attribute; sets: none)",
    "dates": "valid_at = the statement's 'as of' date; created_at = the episode's day; graphiti's "
             "_apply_temporal_invalidation sets invalid_at/expired_at (expired_at = the episode's "
             "day); corrections are new values as of their date; restatements append the episode; "
             "retractions set invalid_at = the date and expired_at = the day; erasures delete the "
             "person's entity node (DETACH) and its episodes",
    "search": f"graphiti_core.search.search, EDGE_HYBRID_SEARCH_RRF (BM25 + MiniLM cosine, RRF), "
              f"top {TOP_K}, group_ids = [graphiti-<tenant>], no LLM, no cross-encoder",
    "answer_rule": "top returned edge whose name is the attribute and whose fact names the person; "
                   "sets: all such values; history: such values by valid_at",
    "datefilter": "current/abstain/who_said: invalid_at IS NULL; as_of: valid_at <= t AND "
                  "(invalid_at IS NULL OR invalid_at > t); believed_at: plus created_at <= k AND "
                  "(expired_at IS NULL OR expired_at > k); other types unfiltered",
}


# -- the clients graphiti-core's search needs ----------------------------------------------------


class MiniLMEmbedder(EmbedderClient):
    """graphiti-core's ``EmbedderClient`` around an SGAM embedder (default: the bundled
    all-MiniLM-L6-v2, offline). Encodes in the calling thread: the benchmark's event loop serves
    one question at a time, and the encode is part of the measured search latency."""

    def __init__(self, embedder: Any = None) -> None:
        if embedder is None:
            from sgam.queries.embeddings import default_embedder

            embedder = default_embedder()
        self.inner = embedder

    async def create(self, input_data: Any) -> list[float]:
        if isinstance(input_data, str):
            text = input_data
        elif isinstance(input_data, list) and input_data and isinstance(input_data[0], str):
            text = input_data[0]
        else:
            raise GraphitiUnavailable(
                f"the MiniLM embedder takes a text or a list of texts, not {type(input_data).__name__} "
                "(token ids are not supported)")
        return self.inner.embed([text])[0]

    async def create_batch(self, input_data_list: list[str]) -> list[list[float]]:
        return self.inner.embed(list(input_data_list))


class _NoLLM(LLMClient):
    """Stands where graphiti-core wants an LLM client; any call is an error (none is expected)."""

    def __init__(self) -> None:
        super().__init__(None)

    async def _generate_response(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        raise GraphitiUnavailable("the Graphiti benchmark runs without an LLM; search called one")


class _NoCrossEncoder(CrossEncoderClient):
    async def rank(self, query: str, passages: list[str]) -> list[tuple[str, float]]:
        raise GraphitiUnavailable("the Graphiti benchmark uses no cross-encoder recipe")


def _embedder_client(embedder: Any) -> EmbedderClient:
    if isinstance(embedder, EmbedderClient):
        return embedder
    if embedder is not None and not callable(getattr(embedder, "embed", None)):
        raise GraphitiUnavailable(
            f"embedder must be a graphiti EmbedderClient or an SGAM Embedder (with .embed), "
            f"not {type(embedder).__name__}")
    return MiniLMEmbedder(embedder)


def group_for(tenant: str) -> str:
    """The Graphiti ``group_id`` of an SGAM benchmark tenant (a separate id space)."""
    return f"graphiti-{tenant}"


def edge_name(attribute: str) -> str:
    """Graphiti's relation-name style for an attribute: ``home_city`` -> ``HOME_CITY``."""
    return re.sub(r"[^A-Za-z0-9]+", "_", attribute).strip("_").upper()


def _f(op: ComparisonOperator, date: datetime | None = None) -> DateFilter:
    return DateFilter(date=date, comparison_operator=op)


def current_filter() -> SearchFilters:
    return SearchFilters(invalid_at=[[_f(ComparisonOperator.is_null)]])


def as_of_filter(valid_at: datetime, known_at: datetime | None = None) -> SearchFilters:
    """Facts valid at ``valid_at`` (and, with ``known_at``, recorded and not yet expired then).
    One comparison per OR group, so graphiti's parameter naming cannot collide."""
    kwargs: dict[str, Any] = {
        "valid_at": [[_f(ComparisonOperator.less_than_equal, valid_at)]],
        "invalid_at": [[_f(ComparisonOperator.is_null)],
                       [_f(ComparisonOperator.greater_than, valid_at)]]}
    if known_at is not None:
        kwargs["created_at"] = [[_f(ComparisonOperator.less_than_equal, known_at)]]
        kwargs["expired_at"] = [[_f(ComparisonOperator.is_null)],
                                [_f(ComparisonOperator.greater_than, known_at)]]
    return SearchFilters(**kwargs)


class GraphitiSession:
    """A graphiti-core driver and search clients on one private event loop (sync facade)."""

    def __init__(self, uri: str, auth: tuple[str, str] | None, embedder: Any = None,
                 database: str = "neo4j") -> None:
        self.runner = asyncio.Runner()
        user, password = auth or ("", "")
        # built outside a running loop, so the driver does not schedule its own index build
        self.driver = Neo4jDriver(uri, user, password, database=database)
        self.embedder = _embedder_client(embedder)
        self.clients = GraphitiClients(driver=self.driver, llm_client=_NoLLM(),
                                       embedder=self.embedder, cross_encoder=_NoCrossEncoder(),
                                       tracer=NoOpTracer())
        self.config = EDGE_HYBRID_SEARCH_RRF.model_copy(deep=True)
        self.config.limit = TOP_K

    def run(self, coro: Any) -> Any:
        return self.runner.run(coro)

    def build_indices(self, timeout_s: int = 300) -> dict[str, int]:
        """Graphiti's own ``build_indices_and_constraints``, then wait until every index is online;
        returns how many range/fulltext/vector indexes Graphiti owns (by its index names)."""
        async def go() -> dict[str, int]:
            await self.driver.build_indices_and_constraints()
            await self.driver.execute_query("CALL db.awaitIndexes($t)", t=timeout_s)
            records, _, _ = await self.driver.execute_query(
                "SHOW INDEXES YIELD name, type WHERE NOT name STARTS WITH 'sgam_' "
                "RETURN type, count(*) AS n")
            return {r["type"].lower(): r["n"] for r in records}
        return self.run(go())

    def search(self, query: str, group: str, filters: SearchFilters | None = None) -> list[EntityEdge]:
        results = self.run(graphiti_search(self.clients, query, [group], self.config,
                                           filters or SearchFilters()))
        return list(results.edges)

    def delete_group(self, group: str) -> int:
        """Everything of ``group`` (graphiti-core's ``delete_by_group_id``); returns what is left."""
        async def go() -> int:
            await Node.delete_by_group_id(self.driver, group)
            records, _, _ = await self.driver.execute_query(
                "MATCH (n {group_id: $g}) RETURN count(n) AS n", g=group)
            return int(records[0]["n"])
        return self.run(go())

    def close(self) -> None:
        try:
            self.run(self.driver.close())
        finally:
            self.runner.close()


async def _gather(coros: Iterable[Any]) -> None:
    await semaphore_gather(*coros, max_coroutines=_CONCURRENCY)


def _expiries(edges: Sequence[EntityEdge]) -> dict[str, datetime | None]:
    return {e.uuid: e.expired_at for e in edges}


def _invalidate(new: EntityEdge, candidates: list[EntityEdge], day: datetime) -> None:
    """Graphiti's temporal invalidation, with its ``utc_now()`` replaced by the episode's day."""
    before = _expiries([new, *candidates])
    _apply_temporal_invalidation(new, candidates)
    for e in (new, *candidates):
        if before[e.uuid] is None and e.expired_at is not None:
            e.expired_at = day


# -- the replay benchmark ------------------------------------------------------------------------


class GraphitiReplay:
    """The replay world as a Graphiti graph, and the two answer columns."""

    def __init__(self, session: GraphitiSession) -> None:
        self.s = session
        self.groups: list[str] = []
        self.speakers: dict[str, str] = {}

    def load(self, world: Any) -> dict[str, Any]:

        started = time.perf_counter()
        persons: dict[tuple[str, str], EntityNode] = {}
        values: dict[tuple[str, str], EntityNode] = {}
        slot_edges: dict[tuple[str, str, str], dict[str, EntityEdge]] = defaultdict(dict)
        episodes: list[EpisodicNode] = []
        mentions: list[EpisodicEdge] = []
        by_person: dict[tuple[str, str], list[EpisodicNode]] = defaultdict(list)
        erase: list[tuple[str, str]] = []
        counts: dict[str, int] = defaultdict(int)
        self.groups = [group_for(t) for t in world.tenants]
        for g in self.groups:
            validate_group_id(g)

        def node(cache: dict[tuple[str, str], EntityNode], group: str, name: str,
                 day: datetime) -> EntityNode:
            if (group, name) not in cache:
                cache[(group, name)] = EntityNode(name=name, group_id=group, labels=["Entity"],
                                                  created_at=day, summary="")
            return cache[(group, name)]

        for e in world.events:
            group, day = group_for(e.tenant), e.recorded
            if e.op == "erase":
                erase.append((group, e.person))
                counts["erase"] += 1
                continue
            person = node(persons, group, e.person, day)
            ep = EpisodicNode(name=e.episode_id, group_id=group, labels=[],
                              source=EpisodeType.message, source_description=e.speaker,
                              content=e.text, valid_at=day, created_at=day, entity_edges=[])
            self.speakers[ep.uuid] = e.speaker
            episodes.append(ep)
            by_person[(group, e.person)].append(ep)
            mentions.append(EpisodicEdge(source_node_uuid=ep.uuid, target_node_uuid=person.uuid,
                                         group_id=group, created_at=day))
            phrase, many = ATTRS[e.attribute]
            edges = slot_edges[(group, e.subject, e.attribute)]
            if e.op == "retract":
                value = e.value if many else \
                    world.slots[(e.tenant, e.subject, e.attribute)].value_at(e.valid_from, e.recorded)
                held = edges.get(value or "")
                if held is not None and (held.invalid_at is None or held.invalid_at > e.valid_from):
                    held.invalid_at = e.valid_from
                    held.expired_at = held.expired_at or day
                    held.episodes.append(ep.uuid)
                    ep.entity_edges.append(held.uuid)
                    counts["ended"] += 1
                continue
            value = e.value or ""
            if value in edges:                                  # a duplicate: provenance only
                edges[value].episodes.append(ep.uuid)
                ep.entity_edges.append(edges[value].uuid)
                counts["duplicate"] += 1
                continue
            target = node(values, group, value, day)
            new = EntityEdge(group_id=group, source_node_uuid=person.uuid,
                             target_node_uuid=target.uuid, name=edge_name(e.attribute),
                             fact=f"{e.person}'s {phrase} {'includes' if many else 'is'} {value}",
                             episodes=[ep.uuid], created_at=day, valid_at=e.valid_from,
                             reference_time=day)
            _invalidate(new, [] if many else list(edges.values()), day)
            edges[value] = new
            ep.entity_edges.append(new.uuid)
            counts["edges"] += 1
        all_edges = [x for edges in slot_edges.values() for x in edges.values()]
        nodes = [*persons.values(), *values.values()]
        t_embed = time.perf_counter()
        names = self.s.run(self.s.embedder.create_batch([n.name for n in nodes]))
        for n, vector in zip(nodes, names):
            n.name_embedding = vector
        facts = self.s.run(self.s.embedder.create_batch([x.fact for x in all_edges]))
        for x, vector in zip(all_edges, facts):
            x.fact_embedding = vector
        embed_s = time.perf_counter() - t_embed
        indexes = self.s.build_indices()

        async def save() -> None:
            driver = self.s.driver
            await _gather(n.save(driver) for n in nodes)
            await _gather(x.save(driver) for x in all_edges)
            await _gather(ep.save(driver) for ep in episodes)
            await _gather(m.save(driver) for m in mentions)
            # erasure: the person's node (and so its facts and mentions), then its episodes
            for group, name in erase:
                if (group, name) in persons:
                    await persons[(group, name)].delete(driver)
                    await _gather(ep.delete(driver) for ep in by_person[(group, name)])
        self.s.run(save())
        return {"seconds": round(time.perf_counter() - started, 3),
                "embed_seconds": round(embed_s, 3),
                "groups": self.groups, "entity_nodes": len(nodes), "entity_edges": len(all_edges),
                "episodes": len(episodes), "operations": dict(counts),
                "graphiti_indexes": indexes}

    # -- answers --

    def _filters(self, q: Any) -> SearchFilters | None:
        if q.qtype in ("current", "abstain", "who_said"):
            return current_filter()
        if q.qtype == "as_of":
            return as_of_filter(q.valid_at)
        if q.qtype == "believed_at":
            return as_of_filter(q.valid_at, q.known_at)
        return None

    def answer(self, q: Any, datefilter: bool) -> str:

        query = re.sub(r"^\[[^\]]*\]\s*", "", q.text)
        edges = self.s.search(query, group_for(q.tenant), self._filters(q) if datefilter else None)
        name, phrase, many = edge_name(q.attribute), *ATTRS[q.attribute]
        kept: list[tuple[EntityEdge, str]] = []
        for x in edges:
            m = FACT_RE.match(x.fact)
            if x.name == name and m and m["person"] == q.person and m["phrase"] == phrase:
                kept.append((x, m["value"]))
        if q.qtype in ("current", "abstain", "as_of", "believed_at"):
            if not kept:
                return NONE
            return ", ".join(sorted({v for _, v in kept})) if many else kept[0][1]
        if q.qtype == "who_said":
            if not kept:
                return NONE
            first = kept[0][0].episodes[0]
            found = self.s.run(EpisodicNode.get_by_uuids(self.s.driver, [first]))
            return found[0].source_description if found else NONE
        if q.qtype == "false_premise":
            ended = [x for x, v in kept if v == q.value and x.invalid_at is not None]
            return ended[0].invalid_at.strftime("%Y-%m-%d") if ended else NONE
        order: list[str] = []
        for x, v in sorted(kept, key=lambda xv: (xv[0].valid_at or datetime.min.replace(
                tzinfo=timezone.utc))):
            if not order or order[-1] != v:
                order.append(v)
        if q.qtype == "history":
            return " > ".join(order) or NONE
        if q.qtype == "replaced":
            i = order.index(q.value) if q.value in order else -1
            return order[i + 1] if 0 <= i < len(order) - 1 else NONE
        raise GraphitiUnavailable(f"unknown question type {q.qtype!r}")

    def systems(self) -> dict[str, Callable[[Any], str]]:
        return {"graphiti": lambda q: self.answer(q, False),
                "graphiti-datefilter": lambda q: self.answer(q, True)}

    def delete(self) -> dict[str, int]:
        return {g: self.s.delete_group(g) for g in self.groups}


# -- the scale benchmark -------------------------------------------------------------------------


def _pct(values: Sequence[float], p: float) -> float:

    return float(percentile(list(values), p)) if values else float("nan")


def scale_probe(uri: str, auth: tuple[str, str], rows: Sequence[dict], questions: Sequence[dict],
                *, group_id: str, embedder: Any = None) -> dict[str, float]:
    """Graphiti's search latency and accuracy on the scale benchmark's facts.

    ``rows``: ``{"subject", "attribute", "value", "valid_from", "valid_to"}`` (aware datetimes,
    ``valid_to`` may be None); ``questions``: ``{"subject", "attribute", "as_of"}`` (``as_of`` None:
    the current value). The rows are written as a Graphiti graph in ``group_id`` (one entity per
    subject and per distinct value, one ``RELATES_TO`` edge per row with ``valid_at`` / ``invalid_at``
    = the row's interval, ``created_at`` = ``valid_from`` and ``expired_at`` = ``valid_to``, fact
    ``"<subject>'s <attribute> is <value>"`` with its MiniLM embedding) through graphiti-core's
    ``add_nodes_and_edges_bulk``, after ``build_indices_and_constraints``. Each question is a
    graphiti-core search (``EDGE_HYBRID_SEARCH_RRF``, top 10) for ``"What is <subject>'s
    <attribute>?"``, with the as-of date filter when ``as_of`` is given and no filter otherwise;
    the answer is the top edge from the subject with the attribute's name (all such edges' values
    when the gold answer is a set). The group is deleted afterwards, also on failure.

    Returns ``rows``, ``load_s`` (embedding and writing), ``search_p50_ms`` / ``p95`` / ``p99``
    and ``accuracy`` (exact match against the rows' value at ``as_of`` or now).
    """
    try:
        validate_group_id(group_id)
    except Exception as exc:
        raise GraphitiUnavailable(f"group_id {group_id!r}: {exc}") from None
    if not group_id:
        raise GraphitiUnavailable("group_id must be a non-empty string of letters, digits, - and _")
    required = {"subject", "attribute", "value", "valid_from", "valid_to"}
    for i, row in enumerate(rows):
        missing = required - set(row)
        if missing:
            raise GraphitiUnavailable(f"row {i} lacks {sorted(missing)}; rows need {sorted(required)}")
    session = GraphitiSession(uri, auth, embedder)
    try:
        return _scale_probe(session, rows, questions, group_id)
    finally:
        try:
            session.delete_group(group_id)
        finally:
            session.close()


def _scale_probe(s: GraphitiSession, rows: Sequence[dict], questions: Sequence[dict],
                 group: str) -> dict[str, float]:
    s.build_indices()
    started = time.perf_counter()
    first = min((r["valid_from"] for r in rows), default=datetime.now(timezone.utc))
    subjects: dict[str, EntityNode] = {}
    values: dict[str, EntityNode] = {}
    edges: list[EntityEdge] = []
    for r in rows:
        subject, value = str(r["subject"]), str(r["value"])
        if subject not in subjects:
            subjects[subject] = EntityNode(name=subject, group_id=group, labels=["Entity"],
                                           created_at=first, summary="")
        if value not in values:
            values[value] = EntityNode(name=value, group_id=group, labels=["Entity"],
                                       created_at=first, summary="")
        edges.append(EntityEdge(
            group_id=group, source_node_uuid=subjects[subject].uuid,
            target_node_uuid=values[value].uuid, name=edge_name(str(r["attribute"])),
            fact=f"{subject}'s {r['attribute']} is {value}", episodes=[],
            created_at=r["valid_from"], valid_at=r["valid_from"], invalid_at=r["valid_to"],
            expired_at=r["valid_to"], reference_time=r["valid_from"]))
    nodes = [*subjects.values(), *values.values()]
    batch = 2_000

    async def load() -> None:
        # Each distinct text is embedded once (a value that is also a subject's name, a fact held
        # over two intervals): MiniLM's encoding is most of the load, about 300 texts/s here.
        texts = list(dict.fromkeys([*(n.name for n in nodes), *(x.fact for x in edges)]))
        vectors: dict[str, list[float]] = {}
        for i in range(0, len(texts), batch):
            chunk_texts = texts[i:i + batch]
            vectors.update(zip(chunk_texts, await s.embedder.create_batch(chunk_texts)))
        for items, text, attr in ((nodes, lambda n: n.name, "name_embedding"),
                                  (edges, lambda x: x.fact, "fact_embedding")):
            for i in range(0, len(items), batch):
                chunk = items[i:i + batch]
                for x in chunk:
                    setattr(x, attr, vectors[text(x)])
                if attr == "name_embedding":
                    await add_nodes_and_edges_bulk(s.driver, [], [], chunk, [], s.embedder)
                else:
                    await add_nodes_and_edges_bulk(s.driver, [], [], [], chunk, s.embedder)
    s.run(load())
    load_s = time.perf_counter() - started

    by_slot: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for r in rows:
        by_slot[(str(r["subject"]), str(r["attribute"]))].append(r)
    now = datetime.now(timezone.utc)
    latencies: list[float] = []
    correct = 0
    for q in questions:
        subject, attribute, as_of = str(q["subject"]), str(q["attribute"]), q.get("as_of")
        t = as_of or now
        gold = {str(r["value"]) for r in by_slot.get((subject, attribute), [])
                if r["valid_from"] <= t and (r["valid_to"] is None or r["valid_to"] > t)}
        t0 = time.perf_counter()
        found = s.search(f"What is {subject}'s {attribute}?", group,
                         as_of_filter(as_of) if as_of is not None else None)
        source = subjects.get(subject)
        hits = [x.fact.rsplit(" is ", 1)[-1] for x in found
                if source is not None and x.source_node_uuid == source.uuid
                and x.name == edge_name(attribute)]
        latencies.append((time.perf_counter() - t0) * 1000)
        answer = set(hits) if len(gold) > 1 else set(hits[:1])
        correct += answer == gold
    return {"rows": float(len(rows)), "load_s": round(load_s, 3),
            "search_p50_ms": round(_pct(latencies, 50), 3),
            "search_p95_ms": round(_pct(latencies, 95), 3),
            "search_p99_ms": round(_pct(latencies, 99), 3),
            "accuracy": round(correct / len(questions), 4) if questions else float("nan")}


def versions() -> dict[str, str | None]:

    return {"graphiti_core": package_version("graphiti-core")}


__all__ = ["GraphitiReplay", "GraphitiSession", "GraphitiUnavailable", "MiniLMEmbedder",
           "SYSTEMS", "as_of_filter", "current_filter", "edge_name", "group_for", "scale_probe"]

"""Point-in-time subgraphs for notebooks: :func:`to_networkx`, and GraphML / JSON files of them.

The Cypher is the named query ``subgraph`` (``queries/subgraph.cypher``), run in READ mode like
every analyst query. The result is a :class:`networkx.MultiDiGraph`:

* entity nodes keyed by entity id (``kind='entity'``, ``id``, ``type``, ``name``, ``tenant_id``);
* value nodes keyed by their value key, ``subject|attribute|value`` (``kind='value'``, ``value``,
  ``value_type``, ``attribute``, ``name``), one per subject, as stored;
* one edge per fact, subject -> value node or subject -> target entity, keyed by ``memory_id``,
  with every fact property plus ``rel_type`` (``HOLDS``, ``PASSPORT_DEADLINE``, ...). Instants are
  timezone-aware :class:`datetime.datetime` in UTC, date values :class:`datetime.date`.

A fact is included when it is valid at ``valid_at`` and believed at ``known_at`` (now when None),
whatever its ``status`` (the edge carries it). With ``subjects``, the graph holds those entities,
the entities within ``hops`` relation hops of them (either direction, every hop valid at
``valid_at``), their attribute facts and the relation facts among them; without, every fact of the
tenant valid at ``valid_at``.

GraphML stores only strings, numbers and booleans, one type per attribute: :func:`write` writes
instants and dates as ISO 8601 strings, lists and non-string values (``value``) as JSON strings,
and leaves absent (null) properties out. XML cannot hold NUL, the other control characters but tab
and line feed, U+FFFE or U+FFFF, and its readers turn a carriage return into a line feed: in
strings and node ids each is written as the six characters ``\\uXXXX`` (``\\u0000`` for NUL).
:func:`node_link` is the JSON form (``networkx.node_link_graph(data, edges="edges")`` reads it
back, with ISO strings for instants).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from datetime import date, datetime
from pathlib import Path
from typing import Any, Literal

import networkx as nx

from sgam.graph.codec import native

from .api import Instant, MemoryGraph, instant_arg, names_arg, optional_instant, renamed

Format = Literal["graphml", "json"]
FORMATS: tuple[str, ...] = ("graphml", "json")


def _props(item: Any) -> dict[str, Any]:
    return {key: _native(value) for key, value in dict(item).items()}


def _native(value: Any) -> Any:
    value = native(value)
    if isinstance(value, list):
        return [_native(v) for v in value]
    return value


def _node(graph: nx.MultiDiGraph, node: Any) -> str:
    props = _props(node)
    labels = set(getattr(node, "labels", ()))
    if "Value" in labels:
        key = props["key"]
        graph.add_node(key, kind="value", **{k: v for k, v in props.items() if k != "kind"})
    else:
        key = props["id"]
        graph.add_node(key, kind="entity", labels=sorted(labels),
                       **{k: v for k, v in props.items() if k != "kind"})
    return key


def to_networkx(graph: MemoryGraph, tenant: str, valid_at: Instant | None = None,
                known_at: Instant | None = None, subjects: Iterable[str] | str | None = None,
                hops: int = 1, principal: str | None = None, *,
                as_of: Instant | None = None) -> nx.MultiDiGraph:
    """The subgraph of ``tenant`` valid at ``valid_at`` (default now), as believed at ``known_at``.

    Times are aware datetimes or ISO 8601 strings with a zone; a date alone is midnight UTC.
    ``subjects`` (entity ids) restricts it to those entities and their ``hops``-hop relation
    neighbourhood (0 to 4); None exports the whole tenant. A tenant with no data gives an empty
    graph. Only facts ``principal`` may read are drawn (None: shared facts only; ``"*"``: all).
    Graph attributes record the question: ``tenant``, ``as_of`` (the ``valid_at`` instant; the
    attribute keeps its name so that readers of exported files do not break), ``known_at``,
    ``subjects``, ``hops``. ``as_of=`` is the deprecated old name of ``valid_at``.
    """
    params = subgraph_params(graph, tenant, valid_at, known_at, subjects, hops, principal, as_of=as_of)
    return subgraph(graph.query("subgraph", **params), params)


def subgraph_params(graph: Any, tenant: str, valid_at: Instant | None = None,
                    known_at: Instant | None = None, subjects: Iterable[str] | str | None = None,
                    hops: int = 1, principal: str | None = None, *,
                    as_of: Instant | None = None) -> dict[str, Any]:
    """The ``subgraph`` query's parameters for :func:`to_networkx` (shared with the async graph)."""
    when = renamed(valid_at, as_of, "to_networkx")
    return {"tenant": graph._tenant(tenant),
            "valid_at": graph.clock() if when is None else instant_arg(when, "valid_at"),
            "known_at": optional_instant(known_at, "known_at"),
            "subjects": None if subjects is None else names_arg(subjects, "subjects"),
            "hops": hops, "principal": principal}


def subgraph(records: list[dict[str, Any]], params: dict[str, Any]) -> nx.MultiDiGraph:
    """The ``subgraph`` query's records as a MultiDiGraph, its attributes the question."""
    known_at = params["known_at"]
    result = nx.MultiDiGraph(tenant=params["tenant"], as_of=native(params["valid_at"]),
                             known_at=None if known_at is None else native(known_at),
                             subjects=params["subjects"], hops=params["hops"])
    for record in records:
        source = _node(result, record["subject"])
        fact = record["fact"]
        if fact is None:
            continue
        target = _node(result, record["object"])
        props = _props(fact)
        result.add_edge(source, target, key=props["memory_id"], rel_type=fact.type, **props)
    return result


# Characters XML 1.0 cannot carry at all (NUL and the other C0 controls but tab and line feed,
# U+FFFE, U+FFFF), and the carriage return, which every XML reader turns into a line feed.
_NOT_XML = re.compile(r"[^\t\n\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _xml_text(text: str) -> str:
    """``text`` with each character GraphML cannot hold written as the six characters ``\\uXXXX``."""
    return _NOT_XML.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def _plain(value: Any) -> Any:
    """A GraphML-storable value: ISO strings for instants and dates, JSON for collections."""
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    if isinstance(value, (list, tuple, dict)):
        return json.dumps(jsonable(value))
    if isinstance(value, str):
        return _xml_text(value)
    return value


def jsonable(value: Any) -> Any:
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, dict):
        return {k: jsonable(v) for k, v in value.items()}
    return value


def _flat(attrs: dict[str, Any]) -> dict[str, Any]:
    flat = {k: _plain(v) for k, v in attrs.items() if v is not None}
    if "value" in flat and not isinstance(flat["value"], str):
        # GraphML types each attribute once; values are of many types (value_type says which).
        flat["value"] = json.dumps(flat["value"])
    return flat


def graphml_ready(graph: nx.MultiDiGraph) -> nx.MultiDiGraph:
    """A copy whose graph, node and edge attributes GraphML can store (see the module doc)."""
    flat = nx.MultiDiGraph(**_flat(graph.graph))
    flat.add_nodes_from((_plain(n), _flat(a)) for n, a in graph.nodes(data=True))
    flat.add_edges_from((_plain(u), _plain(v), _plain(k), _flat(a))
                        for u, v, k, a in graph.edges(keys=True, data=True))
    return flat


def node_link(graph: nx.MultiDiGraph) -> dict[str, Any]:
    """The graph as node-link JSON data (``edges`` key), instants as ISO strings."""
    return {
        "directed": True,
        "multigraph": True,
        "graph": jsonable(graph.graph),
        "nodes": [{"id": n, **jsonable(a)} for n, a in graph.nodes(data=True)],
        "edges": [{"source": u, "target": v, "key": k, **jsonable(a)}
                  for u, v, k, a in graph.edges(keys=True, data=True)],
    }


def write(graph: nx.MultiDiGraph, path: Path | str, fmt: Format) -> None:
    """Write ``graph`` to ``path`` as GraphML or node-link JSON."""
    if fmt == "graphml":
        nx.write_graphml(graphml_ready(graph), str(path))
    elif fmt == "json":
        Path(path).write_text(json.dumps(node_link(graph), indent=2, ensure_ascii=False) + "\n",
                              encoding="utf-8")
    else:
        raise ValueError(f"unknown format {fmt!r}; use one of {FORMATS}")


def dumps(graph: nx.MultiDiGraph, fmt: Format) -> str:
    """The file text :func:`write` would write."""
    if fmt == "graphml":
        return "\n".join(nx.generate_graphml(graphml_ready(graph))) + "\n"
    if fmt == "json":
        return json.dumps(node_link(graph), indent=2, ensure_ascii=False) + "\n"
    raise ValueError(f"unknown format {fmt!r}; use one of {FORMATS}")


__all__ = ["FORMATS", "dumps", "graphml_ready", "node_link", "to_networkx", "write"]

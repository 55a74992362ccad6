"""sgam.queries: the read path. Named, documented ``.cypher`` files and their loader.

Each query file in this folder is runnable as-is in Neo4j Browser after its ``:param`` line, and
is what :class:`sgam.MemoryGraph` runs for ``current``, ``as_of``, ``history``, ``provenance`` and
``traverse``.
"""

from .loader import NamedQuery, QueryParam, get_query, load_queries, parse, parse_instant

__all__ = ["NamedQuery", "QueryParam", "get_query", "load_queries", "parse", "parse_instant"]

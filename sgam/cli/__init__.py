"""The ``sgam`` command line: a thin shell over the library.

    sgam neo4j up|down|status      run the local Neo4j (no Docker needed)
    sgam schema show|diff|apply    the schema: its attributes, two versions compared, a migration
    sgam browser help|export|guide Neo4j Browser: the style, favourites and the guide
    sgam replay FILE.jsonl         replay episodes with their structured deltas
    sgam query NAME ...            run a named query (current, as-of, history, provenance, traverse)
    sgam export -t T --format F    a point-in-time subgraph as GraphML or node-link JSON
    sgam timeline -t T -s S -o F   a subject's history as a picture (valid time x belief)
    sgam context -t T "QUESTION"   the smallest cited context for an agent's prompt
    sgam confirm -t T -s S -a A    confirm a pending candidate (sgam query candidates lists them)
    sgam doctor -t T               check a tenant's invariants; sgam stats -t T summarises it
    sgam purge -t T                remove facts whose retention expired
    sgam forget -t T -s S          erase a subject completely, leaving a tombstone
    sgam audit -t T [-s S] [-p P]  who read which subject's private attributes, and when
    sgam embed -t T                backfill embeddings for vector expansion (sgam[embeddings])
    sgam demo                      the seed example, side by side with a naive text memory
    sgam bench [scale|replay|locomo|baseline|service]   benchmarks: SGAM vs raw Cypher, text memory, Graphiti
    sgam ingest FILE... -t T       record episodes, process them now or queue them
    sgam import-graphiti -t T ...  import a Graphiti graph from this Neo4j as SGAM facts
    sgam delete memory|episode|tenant -t T ...   delete at one grain, with --dry-run and an audit record
    sgam export-subject -t T -s S  everything stored about a subject, as JSON
    sgam entities merge|split|alias|candidates   entity resolution, with --dry-run and a merge record
    sgam worker                    process the queue; sgam queue / sgam quarantine inspect it
    sgam rebuild -t T --into T2    re-extract a tenant's episodes into a fresh tenant, report the difference
    sgam serve                     the memory service: HTTP API under /v1 and MCP at /mcp
    sgam mcp                       the MCP server on stdio (what desktop clients launch)
    sgam keys create|list|revoke   the service's API keys (tenant, principal, scope)
    sgam tools --format F          tool definitions from the schema (openai, anthropic, mcp)
    sgam tenants place|list|move   where each tenant lives (server, database), and moving one there
"""

from __future__ import annotations

# Importing a command module registers its commands on the app; this order is the order of
# `sgam --help` (commands, then command groups, each in registration order).
from sgam.cli import commands  # noqa: F401  (isort: keep this order)
from sgam.cli import bench  # noqa: F401
from sgam.cli import ingest  # noqa: F401
from sgam.cli import deletion  # noqa: F401
from sgam.cli import service  # noqa: F401
from sgam.cli import rebuild  # noqa: F401
from sgam.cli import entities  # noqa: F401
from sgam.cli import audit  # noqa: F401
from sgam.cli import tenants  # noqa: F401
from sgam.cli.common import app

__all__ = ["app"]

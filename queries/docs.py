"""The named queries' documentation, generated from their headers.

``queries/README.md`` is :func:`render_readme` of the shipped files (``sgam query --readme``
prints it; a unit test fails when the committed file differs), and :func:`problems` is the header
check the same test runs: a name, a doc line, documented parameters and example ``:param`` lines
naming exactly the declared parameters.
"""

from __future__ import annotations

import re

from .loader import NamedQuery, arrow_param, load_queries

README_TITLE = "# Named queries"

_INTRO = """\
<!-- Generated from the headers of queries/*.cypher by `sgam query --readme`; do not edit by hand
     (tests/unit/test_query_docs.py fails when this file and the headers disagree). -->

Each query is a `.cypher` file in this folder: a header (`// name:`, `// doc:`, one `// param:`
line per parameter, one `// example: :param name => value` line per parameter), then the Cypher.
Every query filters on one tenant and only reads.

* **Neo4j Browser**: paste the example's `:param` lines, then the Cypher (or import the favourites
  from `sgam browser export`). The examples use Browser's arrow form, `:param valid_at =>
  datetime('2026-06-02T00:00:00Z')`, which Browser evaluates on the server; its map form
  `:param {valid_at: datetime('...')}` keeps the datetime a string and turns integers into
  floats, so the queries would find nothing or fail.
* **CLI**: `sgam query NAME -t TENANT -p key=value ...` prints a table (`--json` for JSON,
  `--print` shows the Cypher). Instants are ISO 8601 with a timezone; a date alone (`2026-06-02`)
  means midnight UTC; bools are `true` or `false`; lists are comma-separated; `null` leaves an
  optional parameter out. The CLI runs queries in READ access
  mode, so the server refuses any write.
* **Python**: `MemoryGraph.query(NAME, **params)` returns the rows as dicts.

Time: valid time is `[valid_from, valid_to)`, transaction time `[recorded_at, expired_at)`; a null
end is open. *Believed now* is `expired_at IS NULL`; *believed at K* is
`recorded_at <= K < expired_at`; *valid at T* is `valid_from <= T < valid_to`.
"""

def example_keys(example: str) -> list[str]:
    """The parameter names of an example (one ``:param name => expression`` line each), in order.

    ValueError names a line that is not Browser's arrow form (the map form ``:param {...}`` is
    refused: Browser does not evaluate its values).
    """
    return [arrow_param(line)[0] for line in example.splitlines() if line.strip()]


def problems(query: NamedQuery) -> list[str]:
    """What is missing or inconsistent in a query's header (empty when it is complete)."""
    found: list[str] = []
    if not re.fullmatch(r"[a-z][a-z0-9-]*", query.name):
        found.append(f"name {query.name!r} is not lower-case-with-dashes")
    if len(query.doc) < 20:
        found.append("the doc line is missing or too short to say what the query answers")
    if not any(p.name == "tenant" and not p.optional for p in query.params):
        found.append("no required 'tenant' parameter: every query filters on one tenant")
    for param in query.params:
        if not param.doc:
            found.append(f"parameter {param.name!r} has no doc")
        if f"${param.name}" not in query.text:
            found.append(f"parameter {param.name!r} is declared but the Cypher never uses it")
    used = set(re.findall(r"\$([A-Za-z_][A-Za-z0-9_]*)", query.text))
    undeclared = used - {p.name for p in query.params}
    if undeclared:
        found.append(f"the Cypher uses undeclared parameters {sorted(undeclared)}")
    try:
        keys = example_keys(query.example)
    except ValueError as exc:
        found.append(str(exc))
    else:
        declared = [p.name for p in query.params]
        if sorted(keys) != sorted(declared) or len(keys) != len(set(keys)):
            found.append(f"the example :param names {keys}, the header declares {declared}")
    return found


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _section(query: NamedQuery) -> str:
    lines = [f"## `{query.name}`", "", query.doc, "", f"File: `{query.path}`", ""]
    lines += ["| parameter | type | required | meaning |", "|---|---|---|---|"]
    for p in query.params:
        lines.append(f"| `{p.name}` | {_cell(p.kind)} | {'no' if p.optional else 'yes'} | {_cell(p.doc)} |")
    lines += ["", "```cypher", query.param_script(), "```", ""]
    flags = " ".join(f"-p {p.name}=..." for p in query.params if not p.optional)
    lines += ["```bash", f"sgam query {query.name} {flags}".rstrip(), "```", ""]
    return "\n".join(lines)


def render_readme(queries: dict[str, NamedQuery] | None = None) -> str:
    """The text of ``queries/README.md``: an index, then one section per query."""
    queries = load_queries() if queries is None else queries
    ordered = sorted(queries.values(), key=lambda q: q.name)
    index = ["| query | what it answers |", "|---|---|"]
    index += [f"| [`{q.name}`](#{q.name}) | {_cell(q.doc)} |" for q in ordered]
    parts = [README_TITLE, "", _INTRO, "\n".join(index), ""]
    parts += [_section(q) for q in ordered]
    return "\n".join(parts).rstrip() + "\n"

"""The discovery of module-level Cypher (EXPLAINed in tests/integration/test_cypher_constants.py),
and the read-path fragments the named queries repeat so each file runs alone in Browser."""

from __future__ import annotations

import re
from pathlib import Path

from sgam import queries
from tests.cypher_constants import Constant, discover, fragments, is_cypher, statements, templates

CYPHER_FILES = sorted(Path(queries.__file__).parent.glob("*.cypher"))


def test_the_rule_takes_cypher_and_leaves_prose() -> None:
    assert is_cypher("\n// why\nMATCH (n) RETURN n")
    assert is_cypher("CALL () { RETURN 1 AS one } RETURN one")
    assert is_cypher("UNWIND $rows AS r\nSET r.x = 1")
    assert not is_cypher("set")
    assert not is_cypher("Return the facts of a subject")
    assert not is_cypher(":config autoComplete: false")


def test_discovery_reaches_every_folder_of_the_package() -> None:
    """graph/, ingest/ and queries/ live outside the sgam/ folder: the walk finds them too."""
    found = discover()
    folders = {c.module.split(".")[1] for c in found if c.module.count(".") >= 2}
    assert {"graph", "ingest", "queries"} <= folders
    assert len(statements(found)) >= 100
    assert {"sgam.graph.writes.LOCK_AND_READ", "sgam.graph.writes._BRANCH"} <= {c.where for c in templates(found)}
    assert "sgam.ingest.queue._TURNS" in {c.where for c in fragments(found)}


def test_imported_constants_count_once_in_their_home_module() -> None:
    """ingest/quarantine.py imports graph/writes.py's RESTRICT_EPISODES: it is not listed twice."""
    wheres = [c.where for c in discover()]
    assert len(wheres) == len(set(wheres))
    assert "sgam.graph.writes.RESTRICT_EPISODES" in wheres
    assert "sgam.ingest.quarantine.RESTRICT_EPISODES" not in wheres


def test_a_template_matches_its_filled_statement_only() -> None:
    template = Constant("m", "T", "MATCH (s)-[f:%(type)s]->() WHERE f.x IN %s RETURN f")
    assert template.instance_in("UNWIND $a AS a MATCH (s)-[f:`HOME_CITY`]->() WHERE f.x IN [1] RETURN f")
    assert not template.instance_in("MATCH (s)-[f:`HOME_CITY`]->() RETURN f")


def _projections(text: str) -> list[str]:
    """Each ``v {.*, ...}`` map projection, whitespace collapsed and its variable renamed ``f``."""
    found = []
    for start in re.finditer(r"(\w+) \{\.\*,", text):
        depth, end = 0, start.end(1) + 1
        for end in range(start.end(1) + 1, len(text)):
            depth += {"{": 1, "}": -1}.get(text[end], 0)
            if depth == 0:
                break
        body = re.sub(r"\s+", " ", text[start.end(1):end + 1])
        found.append(re.sub(rf"\b{start.group(1)}\.", "f.", body))
    return found


def test_the_fact_projection_is_the_same_in_every_query() -> None:
    """The instants of a fact come back as ISO strings, the same way in every query; after them a
    query may add its own fields (the context reads the value as text). The picture's virtual
    relationships are not rows but drawings: Browser shows their instants itself."""
    instants = (" {.*, valid_from: toString(f.valid_from), valid_to: toString(f.valid_to),"
                " recorded_at: toString(f.recorded_at), expired_at: toString(f.expired_at),"
                " last_confirmed_at: toString(f.last_confirmed_at)")
    projections = {(path.name, projection) for path in CYPHER_FILES if path.name != "picture.cypher"
                   for projection in _projections(path.read_text(encoding="utf-8"))}
    assert len(projections) >= 10
    differ = sorted((name, p) for name, p in projections if not p.startswith(instants))
    assert not differ, f"the fact projection differs from the others' instants: {differ}"


def test_the_alias_prelude_is_the_same_in_every_query() -> None:
    """A renamed attribute is read under its old name while a migration runs (or dual-reads)."""
    preludes = {}
    for path in CYPHER_FILES:
        match = re.search(r"WITH CASE WHEN \$attribute IS NULL THEN \[\].*?END AS aliases",
                          path.read_text(encoding="utf-8"), re.DOTALL)
        if match:
            preludes[path.name] = match.group(0)
    assert len(preludes) >= 3
    assert len(set(preludes.values())) == 1, f"the alias prelude differs between files: {sorted(preludes)}"

"""Every module-level Cypher constant passes EXPLAIN on the real server.

The constants are discovered by walking the package (the rule is in tests/cypher_constants.py):
statements are EXPLAINed as they are; templates through the functions that build them, listed in
``BUILT`` with representative arguments; fragments inside the statements that splice them. A
template no built statement matches fails, naming it. EXPLAIN needs no parameter values for any of
them today (the server plans ``$name`` without a value), so none are passed.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from datetime import datetime, timezone
from typing import Any

import pytest

from sgam import MemoryGraph
from sgam.graph import evolution
from sgam.graph.schema import default_schema
from sgam.graph.writes import lock_and_read_query
from sgam.integrations import langgraph
from sgam.queries.loader import FACT_COLUMNS
from tests.cypher_constants import Constant, discover, statements, templates

CONSTANTS = discover()
NOW = datetime(2026, 1, 1, tzinfo=timezone.utc)


def _step(kind: str, attribute: str, from_type: str, to: str, to_type: str,
          function: str | None = None) -> evolution.PlannedStep:
    return evolution.PlannedStep(kind, attribute, from_type, (to,), (to_type,), function, "m-explain",
                                 ((attribute, from_type),))


PLAN = evolution.MigrationPlan("default", 1, 2, (), (), None, ())
MOVE = _step("rename", "home_city", "HOME_CITY", "address", "ADDRESS")
IN_PLACE = _step("rename", "home_city", "HOME_CITY", "address", "HOME_CITY")
RETYPE = _step("retype", "loyalty_points", "LOYALTY_POINTS", "loyalty_points", "LOYALTY_POINTS", "str_to_int")


def _yielded(op: Generator[Any, Any, Any], answers: list[Any]) -> list[str]:
    """The statements ``op`` yields when it gets ``answers`` in turn (a scripted store)."""
    queries = [next(op).query]
    for answer in answers:
        queries.append(op.send(answer).query)
    return queries


ROW = {"sid": "e1", "fid": "f1", "props": {"value": "7", "memory_id": "m1", "subject": "mira"}}

# Templated statements, through their builders: the module that owns each and how to build one.
BUILT: dict[str, Callable[[MemoryGraph], list[str]]] = {
    "sgam.graph.writes": lambda graph: [lock_and_read_query(("HOME_CITY", "COVERED_BY"))],
    "sgam.graph.evolution": lambda graph: [
        *_yielded(evolution.move_batch(PLAN, 0, MOVE, default_schema(), 10, NOW), []),
        *_yielded(evolution.move_batch(PLAN, 0, IN_PLACE, default_schema(), 10, NOW), []),
        # READ_VALUES, then DELETE_FACTS and CREATE_FACTS for the one row it read
        *_yielded(evolution.convert_batch(PLAN, 0, RETYPE, default_schema(), 10, NOW), [[ROW], [{"values": []}]]),
        evolution.count_statement(RETYPE, RETYPE.sources[0]).query,
        evolution.values_statement(RETYPE, RETYPE.sources[0]).query,
    ],
    "sgam.api": lambda graph: [
        graph._subject_of({"tenant": "t", "memory_id": "m1"})[0],
        # ANSWERED: a typed read and its check of the tenant and subject, in one statement
        next(graph._checked("current", {"tenant": "t", "subject": "s"}, FACT_COLUMNS)()).query,
        # BATCHED: many such reads as one statement (current_many)
        next(graph._each_checked("current", graph._many("t", ["s", "u"], None, None, False, None, "raise"),
                                 FACT_COLUMNS)()).query,
    ],
    "sgam.integrations.langgraph": lambda graph: [langgraph.current_items_query(langgraph.store_schema())],
}


@pytest.mark.parametrize("constant", statements(CONSTANTS), ids=lambda c: c.where)
def test_statement_passes_explain(graph: MemoryGraph, constant: Constant) -> None:
    assert _explain(graph, constant.text, constant.where) is not None


@pytest.mark.parametrize("module", sorted(BUILT))
def test_built_statements_pass_explain(graph: MemoryGraph, module: str) -> None:
    for i, query in enumerate(BUILT[module](graph)):
        assert _explain(graph, query, f"{module}: built statement {i}") is not None


@pytest.mark.parametrize("template", templates(CONSTANTS), ids=lambda c: c.where)
def test_every_template_is_built(graph: MemoryGraph, template: Constant) -> None:
    """Each template is matched by a built statement of its module or by another of its constants."""
    built = BUILT[template.module](graph) if template.module in BUILT else []
    siblings = [c.text for c in CONSTANTS if c.module == template.module and not c.template]
    assert any(template.instance_in(q) for q in built + siblings), (
        f"{template.where} is a template (it has %-slots) that no built statement matches: add its "
        f"builder, with representative arguments, to BUILT in {__name__}"
    )


def _explain(graph: MemoryGraph, query: str, where: str) -> Any:
    try:
        return graph.store.explain(query)
    except Exception as error:  # the test names the constant, whatever the server said
        pytest.fail(f"{where} does not pass EXPLAIN: {error}")

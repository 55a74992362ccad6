"""Reads of one single-valued attribute stop at the first fact that answers (a real Neo4j).

``current``, ``current_many`` and ``as_of`` are sent in a form that keeps at most ``first`` rows
before its closing order (``NamedQuery.packed_for(stop=True)``), and a read of one single-valued
attribute, confirmed facts only, sends 1: the temporal model believes at most one value of such
an attribute at any valid instant for any transaction instant, so the server may stop at the
first fact it finds instead of reading every fact of the subject. Every other read sends the
same text with no effective limit (one text, so one plan). These tests hold the fast form to the
query as written (``graph.query`` sends it with its order and no limit) over random histories,
answers and their order, check the property the fast form rests on (the query as written never
finds two facts of a single-valued attribute), and pin down which reads stop at one row.
"""

from __future__ import annotations

import time
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import sgam.graph.store as store_module
from sgam import Episode, MemoryDelta, MemoryGraph
from sgam.graph.steps import Statement

EPOCH = datetime(2025, 1, 1, tzinfo=timezone.utc)
SUBJECT = "c1"
# Attributes of the default schema's Customer: single-valued, one private to its readers, and a
# set-valued relation (never sent with the limit), with small alphabets so values repeat.
VALUES = {
    "address": ("1 Main St", "2 High St", "3 Low Rd"),
    "date_of_birth": ("1990-01-01", "1991-02-02"),
    "email": ("a@x.org", "b@x.org"),
    "holds": ("acc-1", "acc-2", "acc-3"),
}
SINGLE = ("address", "date_of_birth", "email")
READERS = (None, "agent:kyc", "*")
SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

statement = st.tuples(st.sampled_from(sorted(VALUES)), st.booleans(), st.integers(0, 2), st.integers(0, 5))
histories = st.lists(st.lists(statement, min_size=1, max_size=4), min_size=1, max_size=4)


def _delta(tenant: str, attribute: str, retract: bool, value: int, day: int, n: int) -> MemoryDelta:
    choices = VALUES[attribute]
    return MemoryDelta(tenant_id=tenant, subject=SUBJECT, attribute=attribute, value=choices[value % len(choices)],
                       op="retract" if retract else "assert", valid_from=EPOCH + timedelta(days=day),
                       source_episode_id=f"e{n}", asserted_by="user:ops", subject_type="Customer")


def _ids(rows: list[Any]) -> list[str]:
    return sorted(r.memory_id if hasattr(r, "memory_id") else r["memory_id"] for r in rows)


@SETTINGS
@given(history=histories)
def test_single_valued_reads_answer_as_the_query_as_written(graph: MemoryGraph, history: list[list[Any]]) -> None:
    tenant = f"t-single-{time.monotonic_ns()}"
    try:
        graph.record_episodes([Episode(tenant_id=tenant, id=f"e{n}", content=f"statement batch {n}",
                                       occurred_at=EPOCH, actor="user:ops") for n in range(len(history))])
        known: list[datetime | None] = [None]
        for n, batch in enumerate(history):
            first = [_delta(tenant, "address", False, 0, 3, n)] if n == 0 else []  # c1 is always stored
            assert not graph.write_many(first + [_delta(tenant, *item, n) for item in batch]).rejected
            known.append(datetime.now(timezone.utc))
        for attribute in VALUES:
            for reader in READERS:
                written = graph.query("current", tenant=tenant, subject=SUBJECT, attribute=attribute,
                                      principal=reader)
                fast = graph.current(tenant, SUBJECT, attribute, principal=reader)
                assert _ids(fast) == _ids(written)
                assert [f.value for f in fast] == [r["value"] for r in written]  # the query's order
                many = graph.current_many(tenant, [SUBJECT, "nobody"], attribute, principal=reader, errors="return")
                assert _ids(many[SUBJECT]) == _ids(written)
                if attribute in SINGLE:
                    assert len(written) <= 1, written
                for day in range(7):
                    for at in known:
                        valid_at = EPOCH + timedelta(days=day, hours=12)
                        written = graph.query("as-of", tenant=tenant, subject=SUBJECT, attribute=attribute,
                                              valid_at=valid_at, known_at=at, principal=reader)
                        fast = graph.as_of(tenant, SUBJECT, attribute, valid_at=valid_at, known_at=at,
                                           principal=reader)
                        assert _ids(fast) == _ids(written), (attribute, reader, day, at)
                        assert [f.value for f in fast] == [r["value"] for r in written]
                        if attribute in SINGLE:
                            assert len(written) <= 1, written
    finally:
        graph.delete_tenant(tenant)


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, dict[str, Any]]]:
    """The statements the store sends from now on, as the server receives them."""
    texts: list[tuple[str, dict[str, Any]]] = []
    run = store_module._run

    def recording(tx: Any, statement: Statement) -> Any:
        query, params = statement.sent()
        texts.append((str(query), params))
        return run(tx, statement)

    monkeypatch.setattr(store_module, "_run", recording)
    return texts


def _rows_kept(query: str, params: dict[str, Any]) -> int | None:
    """The row limit a sent read keeps before its order (None: the text has none)."""
    if "\nWITH * LIMIT $args.first\n" in query:
        return params["args"]["first"]
    if "\nWITH * LIMIT $first\n" in query:
        return params["first"]
    return None


def test_only_reads_of_one_single_valued_attribute_stop_at_the_first_fact(
        graph: MemoryGraph, tenant: str, sent: list[tuple[str, dict[str, Any]]]) -> None:
    graph.record_episode(tenant_id=tenant, id="e0", content="c1 moved", occurred_at=EPOCH, actor="user:ops")
    graph.write_many([_delta(tenant, "address", False, 0, 0, 0), _delta(tenant, "holds", False, 1, 0, 0)])
    graph.store.migrations.learn(False, time.monotonic())  # no migration's dual read is in force
    valid_at = EPOCH + timedelta(days=1)
    reads = {
        "current, single-valued": (lambda: graph.current(tenant, SUBJECT, "address"), True),
        "as_of, single-valued": (lambda: graph.as_of(tenant, SUBJECT, "address", valid_at=valid_at), True),
        "as_of, single-valued, known_at": (lambda: graph.as_of(tenant, SUBJECT, "address", valid_at=valid_at,
                                                               known_at=datetime.now(timezone.utc)), True),
        "current, set-valued": (lambda: graph.current(tenant, SUBJECT, "holds"), False),
        "as_of, set-valued": (lambda: graph.as_of(tenant, SUBJECT, "holds", valid_at=valid_at), False),
        "current, every attribute": (lambda: graph.current(tenant, SUBJECT), False),
        "current with candidates": (lambda: graph.current(tenant, SUBJECT, "address", include_candidates=True), False),
        "as_of with candidates": (lambda: graph.as_of(tenant, SUBJECT, "address", valid_at=valid_at,
                                                      include_candidates=True), False),
        "current_many, single-valued": (lambda: graph.current_many(tenant, [SUBJECT], "address"), True),
        "current_many, set-valued": (lambda: graph.current_many(tenant, [SUBJECT], "holds"), False),
        "current_many with candidates": (lambda: graph.current_many(tenant, [SUBJECT], "address",
                                                                    include_candidates=True), False),
        "history": (lambda: graph.history(tenant, SUBJECT, "address"), False),
    }
    texts: dict[str, str] = {}
    for name, (read, limited) in reads.items():
        sent.clear()
        assert read(), name
        query, params = sent[-1]
        texts[name] = query
        kept = _rows_kept(query, params)
        assert "LIMIT 1\n" not in query, name
        if name == "history":
            assert kept is None
        else:
            assert kept is not None, (name, query)
            assert (kept == 1) is limited, (name, kept)
    # One text, so one plan, whatever the attribute's cardinality: a read of a set-valued
    # attribute plans nothing a single-valued one has not (the replay benchmark's p99 did).
    for read in ("current", "as_of", "current_many"):
        assert texts[f"{read}, single-valued"] == texts[f"{read}, set-valued"], read
    # While a schema migration's dual read is in force, the reads widen the attribute with its
    # old names, which may hold a second fact: no limit then.
    graph.store.migrations.learn(True, time.monotonic())
    try:
        sent.clear()
        assert graph.current(tenant, SUBJECT, "address")
        query, params = sent[-1]
        assert _rows_kept(query, params) is None and "aliases" in query
    finally:
        graph.store.migrations.learn(False, time.monotonic())

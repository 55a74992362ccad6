"""current_many and the service's coalesced reads, against the real server.

The specification: ``current_many(tenant, subjects, ...)`` answers each subject exactly as
``current(tenant, subject, ...)`` answers it alone (its facts, filtered for the reader; or the
error an unknown, forgotten or merged subject raises), and leaves the same read audit records.
:class:`~sgam.service.coalesce.Coalescer` answers concurrent ``current`` reads the same way, each
for its own reader, whatever reads it is batched with.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from datetime import datetime, timezone
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sgam import AsyncMemoryGraph, MemoryGraph
from sgam.graph.errors import InvalidDelta, SgamError, UnknownAttribute, UnknownSubject, UnknownTenant
from sgam.service.coalesce import Coalescer

EPOCH = datetime(2026, 1, 1, tzinfo=timezone.utc)
STORED = ["ada", "bob", "cyd"]
POOL = STORED + ["gone", "old", "nobody"]      # forgotten, merged into bob, never stored
READERS = [None, "user:ada", "agent:kyc", "user:bob", "user:eve", "*"]
ATTRIBUTES = [None, "country", "date_of_birth", "address"]


@pytest.fixture(scope="module")
def world(shared_graph: MemoryGraph) -> Iterator[str]:
    """Three customers with a private date of birth (readers: the customer, agent:kyc) and shared facts;
    ``gone`` forgotten, ``old`` merged into ``bob``."""
    graph, tenant = shared_graph, f"many-{uuid.uuid4().hex[:10]}"
    graph.record_episode(tenant_id=tenant, id="e1", content="the people", occurred_at=EPOCH)
    for index, subject in enumerate(STORED + ["gone", "old"]):
        facts = [("country", ["DE", "PT", "FR", "NO", "IT"][index]), ("date_of_birth", f"199{index}-04-01")]
        if index % 2 == 0:
            facts.append(("address", ["Berlin", "Porto", "Lyon"][index // 2]))
        for attribute, value in facts:
            graph.write(tenant_id=tenant, subject=subject, subject_type="Customer", attribute=attribute,
                        value=value, valid_from=EPOCH, source_episode_id="e1")
    graph.forget_subject(tenant, "gone", actor="admin:test", reason="asked to be forgotten")
    graph.merge_entities(tenant, "bob", "old", actor="admin:test", reason="one person")
    yield tenant
    graph.delete_tenant(tenant)


def alone(graph: MemoryGraph, tenant: str, subject: str, **options: Any) -> Any:
    """What ``current`` answers for one subject: its facts, or the error it raises."""
    try:
        return graph.current(tenant, subject, **options)
    except SgamError as exc:
        return exc


def same(expected: Any, got: Any) -> bool:
    if isinstance(expected, SgamError):
        return type(got) is type(expected) and str(got) == str(expected)
    return bool(got == expected)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(subjects=st.lists(st.sampled_from(POOL), min_size=1, max_size=10), principal=st.sampled_from(READERS),
       attribute=st.sampled_from(ATTRIBUTES), include_candidates=st.booleans(),
       memory_types=st.sampled_from([None, "profile", ["profile", "preference"]]))
def test_each_subject_is_answered_as_current_answers_it_alone(
        graph: MemoryGraph, world: str, subjects: list[str], principal: str | None, attribute: str | None,
        include_candidates: bool, memory_types: Any) -> None:
    options = {"attribute": attribute, "principal": principal, "include_candidates": include_candidates,
               "memory_types": memory_types}
    answers = graph.current_many(world, subjects, errors="return", **options)
    assert list(answers) == list(dict.fromkeys(subjects))            # each once, in the order given
    for subject in subjects:
        assert same(alone(graph, world, subject, **options), answers[subject]), subject
    problems = [answers[s] for s in answers if isinstance(answers[s], SgamError)]
    if problems:      # errors="raise" (the default) raises the first subject's problem
        with pytest.raises(type(problems[0])) as raised:
            graph.current_many(world, subjects, **options)
        assert str(raised.value) == str(problems[0])
    else:
        assert graph.current_many(world, subjects, **options) == answers


def test_private_values_go_only_to_their_readers_and_leave_the_same_audit(graph: MemoryGraph, world: str) -> None:
    by_kyc = graph.current_many(world, ["ada", "cyd"], "date_of_birth", principal="agent:kyc")
    assert {s: [f.value.isoformat() for f in facts] for s, facts in by_kyc.items()} == {
        "ada": ["1990-04-01"], "cyd": ["1992-04-01"]}
    assert graph.current_many(world, ["ada", "cyd"], "date_of_birth", principal="user:eve") == {"ada": [], "cyd": []}
    by_cyd = graph.current_many(world, ["ada", "cyd"], "date_of_birth", principal="user:cyd")
    assert (by_cyd["ada"], [f.value.isoformat() for f in by_cyd["cyd"]]) == ([], ["1992-04-01"])
    rows = [r for r in graph.read_audit(world) if r["principal"] == "agent:kyc"]
    assert sorted((r["subject"], r["attributes"], r["operation"]) for r in rows[:2]) == [
        ("ada", ["date_of_birth"], "current"), ("cyd", ["date_of_birth"], "current")]


def test_bad_arguments_are_refused_naming_what_to_do(graph: MemoryGraph, world: str) -> None:
    with pytest.raises(InvalidDelta, match="use current\\(\\) for one"):
        graph.current_many(world, "ada")                               # type: ignore[arg-type]
    with pytest.raises(InvalidDelta, match="'raise' or 'return'"):
        graph.current_many(world, ["ada"], errors="ignore")
    with pytest.raises(UnknownAttribute, match="favourite_colour"):
        graph.current_many(world, ["ada", "bob"], "favourite_colour")
    with pytest.raises(UnknownTenant):
        graph.current_many(f"nobody-{uuid.uuid4().hex[:8]}", ["ada"])
    assert graph.current_many(world, []) == {}


def test_the_async_graph_answers_the_same(neo4j_connection: tuple[str, tuple[str, str]], graph: MemoryGraph,
                                          world: str) -> None:
    async def main() -> dict[str, Any]:
        uri, auth = neo4j_connection
        agraph = await AsyncMemoryGraph.connect(uri, auth)
        try:
            return await agraph.current_many(world, POOL, principal="user:ada", errors="return")
        finally:
            await agraph.close()

    answers = asyncio.run(main())
    for subject in POOL:
        assert same(alone(graph, world, subject, principal="user:ada"), answers[subject]), subject


class Counting(AsyncMemoryGraph):
    """The real async graph, counting the statements current_many sends (never a stand-in)."""

    batches: list[int]
    alone: int = 0

    async def current_many(self, tenant: str, subjects: Any, *args: Any, **kwargs: Any) -> Any:
        self.batches.append(len(subjects))
        return await super().current_many(tenant, subjects, *args, **kwargs)

    async def current(self, *args: Any, **kwargs: Any) -> Any:
        self.alone += 1
        return await super().current(*args, **kwargs)


def test_concurrent_reads_are_batched_and_each_gets_its_own_answer(
        neo4j_connection: tuple[str, tuple[str, str]], graph: MemoryGraph, world: str) -> None:
    reads = [(subject, principal, attribute) for subject in POOL for principal in ("user:ada", "user:bob")
             for attribute in (None, "date_of_birth")] * 3

    async def main() -> tuple[list[Any], list[int]]:
        uri, auth = neo4j_connection
        agraph = await Counting.connect(uri, auth)
        agraph.batches = []
        coalescer = Coalescer(agraph, max_batch=4)
        try:
            async def one(subject: str, principal: str, attribute: str | None) -> Any:
                try:
                    return await coalescer.current(world, subject, attribute, principal=principal)
                except SgamError as exc:
                    return exc

            answers = await asyncio.gather(*(one(*read) for read in reads))
            # A read whose client left is dropped; the others of its batch are answered.
            left = asyncio.ensure_future(coalescer.current(world, "ada", principal="user:ada"))
            kept = asyncio.ensure_future(coalescer.current(world, "bob", principal="user:ada"))
            await asyncio.sleep(0)
            left.cancel()
            assert await kept == graph.current(world, "bob", principal="user:ada")
            # A whole batch that fails (an attribute no schema knows) fails each read with its own error.
            unknown = await asyncio.gather(*(coalescer.current(world, s, "favourite_colour") for s in STORED),
                                           return_exceptions=True)
            assert all(isinstance(e, UnknownAttribute) for e in unknown)
            # A lone read goes as current, once, error or not.
            before = agraph.alone
            with pytest.raises(UnknownSubject):
                await coalescer.current(world, "nobody", principal="user:ada")
            assert agraph.alone == before + 1
            assert not coalescer._waiting and not coalescer._draining
            return answers, agraph.batches
        finally:
            await agraph.close()

    answers, batches = asyncio.run(main())
    for (subject, principal, attribute), answer in zip(reads, answers):
        assert same(alone(graph, world, subject, attribute=attribute, principal=principal), answer), subject
    assert max(batches) == 4 and len(batches) < len(reads) / 2     # batched, never above max_batch
    assert isinstance(answers[reads.index(("nobody", "user:ada", None))], UnknownSubject)

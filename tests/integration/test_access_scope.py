"""Access scope by property: private facts reach only their readers, and no tenant sees another's.

Random facts (shared and private attributes, shared and private relations) are written; then every
read path is swept for every reader: the API reads, provenance, traversal, context (graph, full
text and vector expansion), the networkx export and every named query that takes a principal.
A private fact is recognised in any output by its memory ids, its value and a marker in the text
of the episode that stated it.
"""

from __future__ import annotations

import uuid
import zlib
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st

from sgam import InvalidDelta, MemoryDelta, MemoryGraph, SchemaViolation, UnknownSubject
from sgam.graph.ddl import EMBEDDING_DIMENSIONS
from sgam.graph.schema import Schema, default_schema
from sgam.queries.loader import load_queries

EPOCH = datetime(2026, 1, 1, tzinfo=timezone.utc)
CUSTOMERS = ["c1", "c2"]
READERS = [None, "user:c1", "user:c2", "agent:hr", "agent:other", "*"]
SWEEPERS = 3   # readers swept at once (threads sharing the graph's driver)

SCHEMA = Schema.from_data({
    "name": "access-scope-test",
    "version": 1,
    "entity_types": ["Customer", "Account", "Policy"],
    "attributes": {
        "nickname": {"value_type": "string", "subject_types": ["Customer"]},
        "secret_note": {"value_type": "string", "subject_types": ["Customer"], "visibility": "private",
                        "readers": ["subject", "agent:hr"]},
        "holds": {"value_type": "entity", "target": "Account", "cardinality": "many",
                  "subject_types": ["Customer"]},
        "secret_account": {"value_type": "entity", "target": "Account", "cardinality": "many",
                           "subject_types": ["Customer"], "visibility": "private", "readers": ["subject"]},
        "covered_by": {"value_type": "entity", "target": "Policy", "subject_types": ["Account"],
                       "visibility": "private", "readers": ["agent:hr"]},
        "plan": {"value_type": "string", "subject_types": ["Policy"]},
    },
})


def allowed(attribute: str, subject: str) -> set[str | None] | None:
    """The readers of a fact, worked out here independently of the schema code; None = everyone."""
    return {"secret_note": {f"user:{subject}", "agent:hr", "*"},
            "secret_account": {f"user:{subject}", "*"},
            "covered_by": {"agent:hr", "*"}}.get(attribute)


class MarkerEmbedder:
    """Puts every text that carries the run's marker on one axis, so kNN finds exactly this data."""

    model_name = "marker-test"
    dimensions = EMBEDDING_DIMENSIONS

    def __init__(self, marker: str) -> None:
        self.marker = marker
        self.axis = 1 + zlib.crc32(marker.encode()) % (EMBEDDING_DIMENSIONS - 1)

    def embed(self, texts: list[str]) -> list[list[float]]:
        return [self.vector(self.axis if self.marker in text else 0) for text in texts]

    @staticmethod
    def vector(axis: int) -> list[float]:
        return [1.0 if i == axis else 0.0 for i in range(EMBEDDING_DIMENSIONS)]


@pytest.fixture(scope="module")
def scoped(neo4j_connection: tuple[str, tuple[str, str]]) -> Iterator[MemoryGraph]:
    with MemoryGraph.connect(*neo4j_connection, schema=SCHEMA) as graph:
        yield graph


Row = tuple[str, int, int, int]  # (attribute, owner, value, day)
rows = st.lists(
    st.tuples(st.sampled_from(["nickname", "secret_note", "holds", "secret_account", "covered_by", "plan"]),
              st.integers(0, 1), st.integers(0, 2), st.integers(0, 30)),
    min_size=1, max_size=10,
)


def write(graph: MemoryGraph, tenant: str, data: list[Row], marker: str) -> dict[str, set[str]]:
    """Write ``data``; return, per fact slot key, the strings that betray each written fact."""
    stated: list[tuple[MemoryDelta, set[str]]] = []
    for index, (attribute, owner, value, day) in enumerate(data):
        subject = {"covered_by": f"acc-{marker}-{owner}", "plan": f"pol-{marker}-{owner}"}.get(
            attribute, CUSTOMERS[owner])
        token = f"tok{index}{marker}"
        target = {"holds": f"acc-{marker}-{value}", "secret_account": f"acc-{marker}-{value}",
                  "covered_by": f"pol-{marker}-{value}"}.get(attribute)
        content = f"{subject} {attribute} {target or token} ep{index}{marker}"
        eid = graph.record_episode(tenant_id=tenant, id=f"e{index}", content=content,
                                   occurred_at=EPOCH + timedelta(days=day)).id
        delta = MemoryDelta(tenant_id=tenant, subject=subject, attribute=attribute, value=target or token,
                            valid_from=EPOCH + timedelta(days=day), source_episode_id=eid)
        stated.append((delta, {f"ep{index}{marker}", *([] if target else [token])}))
    result = graph.write_many([d for d, _ in stated])
    assert not result.rejected, [r.message for r in result.rejected]
    return {f"{d.subject}|{d.attribute}|{i}": tells for i, (d, tells) in enumerate(stated)}


def absent(read: Any, *args: Any, empty: Any = (), **kwargs: Any) -> Any:
    """``read(...)``, or ``empty`` for a subject the generated rows never stored (the API raises
    UnknownSubject for it, which tells a reader no more than an empty answer would)."""
    try:
        return read(*args, **kwargs)
    except UnknownSubject:
        return empty


def sweep(graph: MemoryGraph, tenant: str, principal: str | None, marker: str,
          episodes: list[str], apoc: bool = True) -> str:
    """Everything every read path returns to ``principal`` in ``tenant``, as one string (the
    queries that call APOC only where the server has it: ``apoc``)."""
    now = graph.clock()
    subjects = [*CUSTOMERS, *(f"acc-{marker}-{i}" for i in range(3)), *(f"pol-{marker}-{i}" for i in range(3))]
    out: list[Any] = []
    for subject in subjects:
        out += absent(graph.current, tenant, subject, principal=principal)
        out += absent(graph.as_of, tenant, subject, valid_at=EPOCH + timedelta(days=15), principal=principal)
        out += absent(graph.history, tenant, subject, principal=principal)
        for fact in absent(graph.history, tenant, subject, principal="*"):
            out.append(graph.provenance(tenant, subject, fact.memory_id, principal=principal))
        for relations in (["holds"], ["secret_account"], ["holds", "covered_by"], ["secret_account", "covered_by"]):
            out += absent(graph.traverse, tenant, subject, relations, valid_at=now, principal=principal)
    embedder = MarkerEmbedder(marker)
    for question in (f"what about c1 and c2 {marker}", "tok secret note nickname"):
        context = absent(graph.context, tenant, question, subjects=CUSTOMERS, principal=principal,
                         embedder=embedder, expand=True, budget_tokens=20000, min_score=0.5, empty=None)
        out.append(context and context.model_dump_json())
    exported = graph.to_networkx(tenant, principal=principal)
    out += list(exported.edges(data=True))
    around = absent(graph.to_networkx, tenant, subjects=CUSTOMERS, hops=2, principal=principal, empty=None)
    out += list(around.edges(data=True)) if around is not None else []
    values: dict[str, Any] = {
        "tenant": tenant, "valid_at": now, "known_at": None, "since": EPOCH, "until": now + timedelta(days=1),
        "attribute": None, "threshold": 1.0, "days": 0, "status": None, "customer": None, "hops": 2,
        "relations": None, "subjects": subjects, "limit": 50, "episodes": episodes, "k": 50,
        "fetch": 10000, "min_score": 0.5, "vector": embedder.vector(embedder.axis), "text": "tok* OR ep*",
        "principal": principal, "valid_from": EPOCH, "valid_to": now + timedelta(days=1),
    }
    for query in load_queries().values():
        declared = {p.name for p in query.params}
        if "principal" not in declared or ("apoc." in query.text and not apoc):
            continue
        per_subject = "subject" in declared
        for subject in subjects if per_subject else [None]:
            params = {name: values.get(name) for name in declared}
            if per_subject:
                params["subject"] = subject
            if "attribute" in declared and query.name == "history-chain":
                for attribute in SCHEMA.attributes:
                    out += absent(graph.query, query.name, **{**params, "attribute": attribute})
                continue
            if query.name == "traverse":
                for relations in (["holds"], ["secret_account"], ["holds", "covered_by"]):
                    out += absent(graph.query, query.name, **{**params, "relations": relations})
                continue
            if "memory_id" in declared:
                for fact in absent(graph.history, tenant, subject, principal="*"):
                    out += absent(graph.query, query.name, **{**params, "memory_id": fact.memory_id})
                continue
            out += absent(graph.query, query.name, **params)
    return repr(out)


def secret_strings(graph: MemoryGraph, tenant: str, tells: dict[str, set[str]],
                   principal: str | None) -> tuple[set[str], set[str]]:
    """(strings ``principal`` must never see, strings of current private facts it must see)."""
    forbidden: set[str] = set()
    for key, strings in tells.items():
        subject, attribute, _ = key.split("|")
        readers = allowed(attribute, subject)
        if readers is not None and principal not in readers:
            forbidden |= strings
    for subject in {key.split("|")[0] for key in tells}:
        for fact in graph.history(tenant, subject, principal="*"):
            readers = allowed(fact.attribute, subject)
            if readers is not None and principal not in readers:
                forbidden.add(fact.memory_id)
    expected = {
        fact.memory_id
        for subject in {key.split("|")[0] for key in tells}
        for fact in graph.current(tenant, subject, principal="*")
        if allowed(fact.attribute, subject) is not None and principal in allowed(fact.attribute, subject)
    }
    return forbidden, expected


# No shrinking: one example sweeps every read path for six readers (seconds each); the failure
# message names the reader and the leaked ids, which is what a shrunk example would show.
NO_SHRINK = [Phase.explicit, Phase.reuse, Phase.generate]


@settings(max_examples=6, deadline=None, phases=NO_SHRINK,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=rows)
def test_a_private_fact_reaches_only_its_readers(scoped: MemoryGraph, has_apoc: bool, data: list[Row]) -> None:
    tenant = f"acl-{uuid.uuid4().hex[:8]}"
    marker = uuid.uuid4().hex[:10]
    try:
        tells = write(scoped, tenant, data, marker)
        scoped.embed(tenant, embedder=MarkerEmbedder(marker))
        episodes = [f"e{i}" for i in range(len(data))]

        def check(principal: str | None) -> None:
            seen = sweep(scoped, tenant, principal, marker, episodes, has_apoc)
            forbidden, expected = secret_strings(scoped, tenant, tells, principal)
            leaked = sorted(s for s in forbidden if s in seen)
            assert not leaked, f"{principal!r} saw private {leaked}"
            missing = sorted(m for m in expected if m not in seen)
            assert not missing, f"{principal!r} did not see its own private facts {missing}"

        # The readers' sweeps are independent reads, hundreds of round trips each: side by side,
        # one waits on the server while another's answers are decoded. A failure is raised here.
        with ThreadPoolExecutor(SWEEPERS) as pool:
            for done in [pool.submit(check, principal) for principal in READERS]:
                done.result()
    finally:
        scoped.delete_tenant(tenant)


@settings(max_examples=4, deadline=None, phases=NO_SHRINK,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(a=rows, b=rows)
def test_no_read_path_of_one_tenant_returns_the_others(scoped: MemoryGraph, has_apoc: bool, a: list[Row],
                                                       b: list[Row]) -> None:
    """Both tenants use the same entity ids; every read of one (as admin) is swept for the other's data."""
    tenants = [f"iso-{uuid.uuid4().hex[:8]}" for _ in "ab"]
    markers = [uuid.uuid4().hex[:10] for _ in "ab"]
    try:
        tells = [write(scoped, t, d, m) for t, d, m in zip(tenants, (a, b), markers)]
        for tenant, marker in zip(tenants, markers):
            scoped.embed(tenant, embedder=MarkerEmbedder(marker))
        with ThreadPoolExecutor(SWEEPERS) as pool:   # independent reads side by side, as above
            swept = {(side, marker): pool.submit(sweep, scoped, tenants[side], "*", marker,
                                                 [f"e{i}" for i in range(10)], has_apoc)
                     for side in (0, 1) for marker in markers}
        for side in (0, 1):
            other = 1 - side
            # Reads of `side`, asked with the other tenant's markers too, must never carry its data.
            seen = "".join(swept[side, marker].result() for marker in markers)
            theirs = {s for strings in tells[other].values() for s in strings}
            theirs |= {f.memory_id for subject in {k.split("|")[0] for k in tells[other]}
                       for f in scoped.history(tenants[other], subject, principal="*")}
            assert not sorted(s for s in theirs if s in seen)
            assert tenants[other] not in seen
            assert scoped.doctor(tenants[side]) == []
    finally:
        for tenant in tenants:
            scoped.delete_tenant(tenant)


def test_private_attribute_of_the_shipped_schema(graph: MemoryGraph, tenant: str) -> None:
    graph.record_episode(tenant_id=tenant, id="e1", content="ada was born on 1990-04-01",
                         occurred_at=EPOCH)
    graph.write(tenant_id=tenant, subject="ada", attribute="date_of_birth", value="1990-04-01",
                valid_from=EPOCH, source_episode_id="e1")
    assert graph.current(tenant, "ada") == []
    assert graph.current(tenant, "ada", principal="user:bob") == []
    assert [f.visible_to for f in graph.current(tenant, "ada", principal="user:ada")] == [("user:ada", "agent:kyc")]
    assert len(graph.current(tenant, "ada", principal="agent:kyc")) == 1
    embedder = MarkerEmbedder("born")
    for principal, shown in ((None, False), ("user:bob", False), ("user:ada", True), ("*", True)):
        context = graph.context(tenant, "when was ada born", subjects="ada", embedder=embedder,
                                principal=principal)
        assert ("1990" in context.text) is shown, (principal, context.text)


@pytest.mark.parametrize("principal", ["mira", "user:", ":mira", "User:mira", "user:mi ra", "user:`x`", "**", ""])
def test_a_malformed_principal_is_refused(graph: MemoryGraph, tenant: str, principal: str) -> None:
    with pytest.raises(InvalidDelta, match="principal"):
        graph.current(tenant, "mira", principal=principal)
    with pytest.raises(InvalidDelta, match="principal"):
        graph.query("current", tenant=tenant, subject="mira", attribute=None, principal=principal)


@pytest.mark.parametrize(("spec", "words"), [
    ({"visibility": "private"}, ["private", "readers"]),
    ({"readers": ["agent:hr"]}, ["readers", "private"]),
    ({"visibility": "private", "readers": ["hr"]}, ["principal", "hr"]),
    ({"visibility": "secret", "readers": ["subject"]}, ["visibility"]),
])
def test_private_attribute_specs_are_checked(spec: dict[str, Any], words: list[str]) -> None:
    data = default_schema().model_dump(mode="json")
    data["attributes"]["salary"] = {"value_type": "int", **spec}
    with pytest.raises(SchemaViolation) as caught:
        Schema.from_data(data)
    for word in words:
        assert word in str(caught.value)


def test_cli_reads_as_a_principal(env: None, graph: MemoryGraph, tenant: str) -> None:
    from typer.testing import CliRunner

    from sgam.cli import app

    graph.record_episode(tenant_id=tenant, id="e1", content="ada was born on 1990-04-01", occurred_at=EPOCH)
    graph.write(tenant_id=tenant, subject="ada", attribute="date_of_birth", value="1990-04-01",
                valid_from=EPOCH, source_episode_id="e1")
    runner = CliRunner()
    for extra, shown in (([], False), (["--as", "user:bob"], False), (["--as", "user:ada"], True),
                         (["--as", "*"], True)):
        for args in (["query", "current", "-t", tenant, "-s", "ada", "--json"],
                     ["export", "-t", tenant, "-f", "json"],
                     ["context", "when was ada born", "-t", tenant, "-s", "ada", "--no-expand"]):
            result = runner.invoke(app, [*args, *extra])
            assert result.exit_code == 0, result.output
            assert ("1990-04-01" in result.output) is shown, (args, extra, result.output)
    result = runner.invoke(app, ["query", "current", "-t", tenant, "-s", "ada", "--as", "bob"])
    assert result.exit_code != 0 and "principal 'bob' is not valid" in result.output


# A delta of the import test: (subject, attribute, value index, episode index).
IMPORTED = st.lists(st.tuples(st.sampled_from(CUSTOMERS), st.sampled_from(["nickname", "secret_note", "holds",
                                                                             "secret_account"]),
                              st.integers(0, 2), st.integers(0, 3)), min_size=1, max_size=12)


def _episode_readers(graph: MemoryGraph, tenant: str) -> dict[str, list[str] | None]:
    rows = graph.store.read("MATCH (ep:Episode {tenant_id: $t}) RETURN ep.id AS id, ep.visible_to AS readers",
                            {"t": tenant})
    return {r["id"]: None if r["readers"] is None else sorted(r["readers"]) for r in rows}


@settings(max_examples=15, deadline=None, phases=[Phase.explicit, Phase.generate, Phase.target],
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(statements=IMPORTED, chunk_size=st.sampled_from([1, 2, 5000]))
# The same private value stated again by a later episode, and a shared one beside it.
@example(statements=[("c1", "secret_note", 0, 0), ("c1", "secret_note", 0, 1), ("c2", "nickname", 0, 1),
                     ("c2", "secret_account", 1, 1)], chunk_size=5000)
def test_an_import_restricts_the_episodes_of_private_facts_as_a_write_does(
        scoped: MemoryGraph, statements: list[tuple[str, str, int, int]], chunk_size: int) -> None:
    """An episode that states a private fact is read only by the readers every such fact allows,
    whether its statements came through ``write_many`` or ``import_history`` (whose chunks plan
    the restriction ahead of their transaction), in chunks of any size."""
    tenants = [f"imp-{uuid.uuid4().hex[:10]}" for _ in range(2)]
    try:
        for tenant in tenants:
            for e in range(4):
                scoped.record_episode(tenant_id=tenant, id=f"e{e}", content=f"episode {e}",
                                      occurred_at=EPOCH + timedelta(days=e))

        def deltas(tenant: str) -> list[MemoryDelta]:
            return [MemoryDelta(tenant_id=tenant, subject=subject, attribute=attribute,
                                value=(f"acct-{v}" if attribute in ("holds", "secret_account") else f"v{v}"),
                                valid_from=EPOCH + timedelta(days=e), source_episode_id=f"e{e}",
                                asserted_by="tool:test")
                    for subject, attribute, v, e in statements]
        written = scoped.write_many(deltas(tenants[0]))
        imported = scoped.import_history(deltas(tenants[1]), chunk_size=chunk_size)
        assert [r.outcome for r in imported.results] == [r.outcome for r in written.results]
        expected = {f"e{e}": None for e in range(4)}
        for subject, attribute, _, e in statements:   # the rule, from the schema's readers
            readers = {"secret_note": [f"user:{subject}", "agent:hr"],
                       "secret_account": [f"user:{subject}"]}.get(attribute)
            if readers is not None:
                now = expected[f"e{e}"]
                expected[f"e{e}"] = sorted(readers if now is None else set(now) & set(readers))
        assert _episode_readers(scoped, tenants[0]) == expected
        assert _episode_readers(scoped, tenants[1]) == expected
    finally:
        for tenant in tenants:
            scoped.delete_tenant(tenant)

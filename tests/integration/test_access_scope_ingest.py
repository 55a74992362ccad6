"""Access scope by property on the write path's stores: quarantine, queue and candidates.

A private attribute's value must reach only its readers on every path that can print it, not
just the fact reads (tests/integration/test_access_scope.py): a value the write path refused
(quarantined at the validate or write stage), a value waiting as a candidate, and a value an
episode queued for the worker carries (its stored deltas; the error it was dead-lettered with
quotes its text). Random rows over shared and private attributes go down each path; then every
listing is swept for every reader: ``graph.quarantine``, ``graph.candidates``, the ``quarantine``,
``queue``, ``candidates`` and ``search-episodes`` named queries. A value is recognised by its
token, which is also in the text of the episode that stated it.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator, Sequence
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from sgam import MemoryGraph
from sgam.graph.errors import Conflict, InvalidDelta, StoreUnavailable
from sgam.graph.models import Episode
from sgam.graph.schema import Schema
from sgam.ingest import episodes as ep
from sgam.ingest.pipeline import defer, record
from sgam.ingest.worker import Worker, WorkerOptions

EPOCH = datetime(2026, 1, 1, tzinfo=timezone.utc)
CUSTOMERS = ["c1", "c2"]
READERS = [None, "user:c1", "user:c2", "agent:hr", "agent:other", "*"]

PRIVATE = {"visibility": "private", "readers": ["subject", "agent:hr"]}
SCHEMA = Schema.from_data({
    "name": "access-scope-ingest-test",
    "version": 1,
    "entity_types": ["Customer"],
    "attributes": {
        "nickname": {"value_type": "string", "subject_types": ["Customer"]},
        "secret_note": {"value_type": "string", "subject_types": ["Customer"], **PRIVATE},
        "age": {"value_type": "int", "subject_types": ["Customer"]},
        "secret_age": {"value_type": "int", "subject_types": ["Customer"], "visibility": "private",
                       "readers": ["subject"]},
        "pending_nick": {"value_type": "string", "subject_types": ["Customer"], "requires": 2},
        "pending_secret": {"value_type": "string", "subject_types": ["Customer"], "requires": 2, **PRIVATE},
    },
})

# Per path, the (shared, private) attribute a row names. A string for an int attribute is refused
# by the schema (stage write); a confidence of 5 is not a valid delta (stage validate).
PATHS = {
    "write": ("age", "secret_age"),
    "validate": ("nickname", "secret_note"),
    "candidate": ("pending_nick", "pending_secret"),
    "queued": ("nickname", "secret_note"),
}


def allowed(attribute: str, subject: str) -> set[str | None] | None:
    """The readers of a value, worked out here from the schema above; None = everyone."""
    return {"secret_note": {f"user:{subject}", "agent:hr", "*"},
            "secret_age": {f"user:{subject}", "*"},
            "pending_secret": {f"user:{subject}", "agent:hr", "*"}}.get(attribute)


class Unreadable:
    """An extractor that fails terminally, quoting the episode (as a careless error message would)."""

    name = "unreadable"

    def extract(self, episode: Episode, current: Any) -> list[Any]:
        raise InvalidDelta(f"cannot read {episode.content!r}")


@pytest.fixture(scope="module")
def scoped(neo4j_connection: tuple[str, tuple[str, str]]) -> Iterator[MemoryGraph]:
    with MemoryGraph.connect(*neo4j_connection, schema=SCHEMA) as graph:
        yield graph


Row = tuple[str, bool, int]  # (path, private, owner)
rows = st.lists(st.tuples(st.sampled_from(sorted(PATHS)), st.booleans(), st.integers(0, 1)),
                min_size=1, max_size=5)  # the queue lists five dead-letter errors at most


def stage(graph: MemoryGraph, tenant: str, data: Sequence[Row], marker: str) -> dict[str, tuple[str, str]]:
    """Send each row down its path; return each row's token with its (attribute, subject)."""
    tokens: dict[str, tuple[str, str]] = {}
    queued = False
    for index, (path, private, owner) in enumerate(data):
        subject, attribute = CUSTOMERS[owner], PATHS[path][private]
        token = f"tok{index}{marker}"
        tokens[token] = (attribute, subject)
        said = ep.message(tenant, f"{subject} says {token} ep{index}{marker}", speaker=f"user:{subject}",
                          occurred_at=EPOCH + timedelta(days=index), id=f"e{index}")
        delta = {"subject": subject, "subject_type": "Customer", "attribute": attribute, "value": token}
        if path == "validate":
            delta["confidence"] = 5
        if path == "queued":
            # A real-time write that failed transiently: queued with the agent's deltas on it.
            stored, _ = record(graph.store, said)
            defer(graph.store, stored, [delta], StoreUnavailable("Neo4j went away"))
            queued = True
            continue
        report = graph.ingest(said, deltas=[delta], extractors=[])
        assert (report.quarantined != ()) is (path != "candidate"), report
    if queued:
        # The worker polls until the deferred episodes' short backoff has passed, then dead-letters them.
        options = WorkerOptions(tenant=tenant, max_attempts=1, backoff=timedelta(0), poll=0.05)
        stats = Worker(graph.store, [Unreadable()], options).run(until_idle=True)
        assert stats.failed == sum(1 for p, _, _ in data if p == "queued")
    return tokens


def sweep(graph: MemoryGraph, tenant: str, principal: str | None) -> str:
    """Everything the quarantine, queue and candidate listings return to ``principal``."""
    out: list[Any] = []
    out += graph.quarantine(tenant, status=None, principal=principal)
    out += graph.query("quarantine", tenant=tenant, episode=None, since=None, status=None,
                       principal=principal)
    out += graph.query("queue", tenant=tenant, principal=principal)
    out += graph.candidates(tenant, principal=principal)
    out += graph.query("candidates", tenant=tenant, subject=None, attribute=None, principal=principal)
    out += graph.query("search-episodes", tenant=tenant, text="tok*", valid_at=graph.clock(), k=100,
                       principal=principal)
    return repr(out)


NO_SHRINK = [Phase.explicit, Phase.reuse, Phase.generate]


@settings(max_examples=6, deadline=None, phases=NO_SHRINK,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=rows)
# Every path with a private value, and a shared one queued beside them, whatever else is drawn.
@example(data=[("write", True, 0), ("validate", True, 1), ("candidate", True, 0), ("queued", True, 1),
               ("queued", False, 0)])
def test_a_refused_queued_or_pending_private_value_reaches_only_its_readers(
        scoped: MemoryGraph, data: list[Row]) -> None:
    tenant = f"aclq-{uuid.uuid4().hex[:8]}"
    marker = uuid.uuid4().hex[:10]
    try:
        tokens = stage(scoped, tenant, data, marker)
        for principal in READERS:
            seen = sweep(scoped, tenant, principal)
            readable = {t for t, (a, s) in tokens.items()
                        if allowed(a, s) is None or principal in allowed(a, s)}
            leaked = sorted(t for t in tokens if t not in readable and t in seen)
            assert not leaked, f"{principal!r} saw private {leaked}"
            missing = sorted(t for t in readable if t not in seen)
            assert not missing, f"{principal!r} did not see {missing}"
    finally:
        scoped.delete_tenant(tenant)


def test_a_refused_private_value_restricts_its_episode(scoped: MemoryGraph, tenant: str) -> None:
    said = ep.message(tenant, "c1 is 41 years old, or forty-one", speaker="user:c1",
                      occurred_at=EPOCH, id="e1")
    [entry] = scoped.ingest(said, extractors=[], deltas=[
        {"subject": "c1", "attribute": "secret_age", "value": "forty-one"}]).quarantined
    assert entry.stage == "write"
    for principal, shown in ((None, False), ("user:c2", False), ("agent:hr", False), ("user:c1", True),
                             ("*", True)):
        listed = scoped.quarantine(tenant, principal=principal)
        assert [e.id for e in listed] == ([entry.id] if shown else []), principal
        episodes = scoped.query("search-episodes", tenant=tenant, text="forty*", valid_at=scoped.clock(), k=5,
                                principal=principal)
        assert len(episodes) == shown, principal
    [listed] = scoped.quarantine(tenant, principal="user:c1")
    assert listed.visible_to == ("user:c1",)


def test_an_extract_entry_follows_its_episode(scoped: MemoryGraph, tenant: str) -> None:
    """The raw reading of an episode is as readable as the episode: restricted once it stated a
    private value."""
    class Failing:
        name = "failing"

        def extract(self, episode: Episode, current: Any) -> list[Any]:
            from sgam.graph.errors import ExtractionError

            raise ExtractionError(f"no sense in {episode.content!r}")

    said = ep.message(tenant, "c2 note: rosebud", speaker="user:c2", occurred_at=EPOCH, id="e1")
    report = scoped.ingest(said, extractors=[Failing()], deltas=[
        {"subject": "c2", "attribute": "secret_note", "value": "rosebud"}])
    assert report.written == 1 and [e.stage for e in report.quarantined] == ["extract"]
    assert scoped.quarantine(tenant) == [] and scoped.quarantine(tenant, principal="user:c1") == []
    assert [e.stage for e in scoped.quarantine(tenant, principal="agent:hr")] == ["extract"]


def test_a_malformed_principal_is_refused_by_the_new_listings(scoped: MemoryGraph, tenant: str) -> None:
    for call in (lambda: scoped.quarantine(tenant, principal="c1"),
                 lambda: scoped.query("queue", tenant=tenant, principal="user:"),
                 lambda: scoped.query("quarantine", tenant=tenant, principal="**")):
        with pytest.raises(InvalidDelta, match="principal"):
            call()


def test_cli_lists_quarantine_and_queue_as_a_principal(env: None, graph: MemoryGraph, tenant: str) -> None:
    from sgam.cli import app

    said = ep.message(tenant, "ada: born 1990-02-31", speaker="user:ada", occurred_at=EPOCH, id="e1")
    [entry] = graph.ingest(said, extractors=[], deltas=[
        {"subject": "ada", "attribute": "date_of_birth", "value": "1990-02-31"}]).quarantined
    later = ep.message(tenant, "ada: born 1990-02-30", speaker="user:ada", occurred_at=EPOCH, id="e2")
    stored, _ = record(graph.store, later)
    defer(graph.store, stored, [{"subject": "ada", "attribute": "date_of_birth", "value": "1990-02-30"}],
          StoreUnavailable("Neo4j went away"))
    runner = CliRunner()
    for extra, shown in (([], False), (["--as", "user:bob"], False), (["--as", "user:ada"], True),
                         (["--as", "agent:kyc"], True), (["--as", "*"], True)):
        listed = runner.invoke(app, ["quarantine", "list", "-t", tenant, "--status", "all", "--json", *extra])
        assert listed.exit_code == 0, listed.output
        assert ("1990-02-31" in listed.output) is shown and (entry.id in listed.output) is shown, extra
        replayed = runner.invoke(app, ["quarantine", "replay", "-t", tenant, "--json", *extra])
        assert replayed.exit_code == 0, replayed.output
        report = json.loads(replayed.stdout)
        assert ("1990-02-31" in replayed.output) is shown, (extra, replayed.output)
        assert (report["hidden"], len(report["failing"])) == ((0, 1) if shown else (1, 0)), report
        status = runner.invoke(app, ["queue", "status", "-t", tenant, "--json", *extra])
        assert status.exit_code == 0 and "1990-02-30" not in status.output  # counts only, no error yet
        found = runner.invoke(app, ["query", "search-episodes", "-t", tenant, "-p", "text=born",
                                    "-p", "k=5", "--valid-at", "2030-01-01", "--json", *extra])
        assert found.exit_code == 0, found.output
        assert ("1990-02-30" in found.output) is shown and ("1990-02-31" in found.output) is shown, extra
    refused = runner.invoke(app, ["quarantine", "list", "-t", tenant, "--as", "bob"])
    assert refused.exit_code != 0 and "principal 'bob' is not valid" in refused.output


def test_entries_stored_before_they_carried_readers_are_stamped_on_upgrade(
        graph: MemoryGraph, tenant: str, neo4j_connection) -> None:
    """An upgraded store: entries written without ``visible_to`` get their attribute's readers
    (and their episode is restricted) the first time a graph connects after the upgrade."""
    from sgam.graph.ddl import QUARANTINE_READERS

    private = {"tenant_id": tenant, "subject": "c1", "attribute": "secret_note", "value": 17}
    shared = {"tenant_id": tenant, "subject": "c1", "attribute": "nickname", "value": 17}
    for i, candidate in enumerate([private, shared]):
        graph.store.run_write(
            "CREATE (:Quarantine {tenant_id: $t, id: $id, episode_id: $ep, extractor: 'old', stage: 'write', "
            "reason: 'r', error: 'e', candidate: $c, subjects: ['c1'], status: 'open', created_at: datetime()}) "
            "CREATE (:Episode {tenant_id: $t, id: $ep, content: 'old text', occurred_at: datetime(), "
            "recorded_at: datetime(), dedupe_key: $ep, content_hash: $ep, kind: 'message', actor: 'x'})",
            {"t": tenant, "id": f"q-old-{i}", "ep": f"old-{i}", "c": json.dumps(candidate)})
    graph.store.run_write("MATCH (m:Migration {id: $id}) DELETE m", {"id": QUARANTINE_READERS})
    uri, auth = neo4j_connection
    with MemoryGraph.connect(uri, auth, schema=SCHEMA) as upgraded:
        rows = {r["id"]: r["readers"] for r in upgraded.store.read(
            "MATCH (q:Quarantine {tenant_id: $t}) OPTIONAL MATCH (e:Episode {tenant_id: $t, id: q.episode_id}) "
            "RETURN q.id AS id, [q.visible_to, e.visible_to] AS readers", {"t": tenant})}
        assert rows == {"q-old-0": [["user:c1", "agent:hr"]] * 2, "q-old-1": [None, None]}
        assert [e.id for e in upgraded.quarantine(tenant, principal="user:c2")] == ["q-old-1"]
        assert {e.id for e in upgraded.quarantine(tenant, principal="agent:hr")} == {"q-old-0", "q-old-1"}


@pytest.mark.parametrize("actor, sees", [("agent:other", False), ("agent:hr", True), ("user:c1", True)])
def test_confirming_shows_a_private_pending_value_only_to_its_readers(
        scoped: MemoryGraph, actor: str, sees: bool) -> None:
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    when = datetime(2026, 1, 1, tzinfo=timezone.utc)
    for i, value in enumerate(["s3cret-one", "s3cret-two"]):
        scoped.record_episode(tenant_id=tenant, id=f"e{i}", content=f"noted {i}", occurred_at=when)
        scoped.write(tenant_id=tenant, subject="c1", subject_type="Customer", attribute="pending_secret",
                     value=value, valid_from=when, source_episode_id=f"e{i}")
    scoped.record_episode(tenant_id=tenant, id="ok", content="confirmed", occurred_at=when)
    with pytest.raises(Conflict) as several:
        scoped.confirm(tenant, "c1", "pending_secret", actor=actor, episode="ok")
    assert ("s3cret" in str(several.value)) is sees
    result = scoped.confirm(tenant, "c1", "pending_secret", "s3cret-two", actor=actor, episode="ok")
    assert result.outcome == "promoted" and ("s3cret" in result.message) is sees

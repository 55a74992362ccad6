"""The ingest path's pure parts: episode builders, event rules, recording plans, files, queue maths."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from sgam.graph.recording import plan_recording
from sgam.graph.errors import Conflict, ExtractionError, InvalidDelta, SchemaViolation
from sgam.graph.models import MAX_EPISODE_BYTES, EpisodeKind
from sgam.graph.schema import default_schema, load_schema
from sgam.ingest import episodes as ep
from sgam.ingest import quarantine as q
from sgam.ingest.extractors.events import EventMapper, EventRules, load_event_rules
from sgam.ingest.files import Defaults, Item, ItemError, read_items
from sgam.ingest.pipeline import is_explicit_memory, mention_tokens, validate
from sgam.ingest.worker import WorkerOptions

T = "acme"
WHEN = datetime(2026, 3, 1, tzinfo=timezone.utc)


def event(**fields):
    return ep.event(T, {"occurred_at": "2026-03-01T00:00:00Z", **fields})


# -- episode builders ------------------------------------------------------------------------------

def test_ids_derive_from_the_content_hash() -> None:
    a = ep.message(T, "hi", speaker="user:mira", occurred_at=WHEN)
    b = ep.message(T, "hi", speaker="user:mira", occurred_at="2026-03-01T00:00:00Z")
    c = ep.message(T, "hi", speaker="user:ana", occurred_at=WHEN)
    assert a.id == b.id == "ep-" + a.content_hash[:24] and c.id != a.id
    assert ep.message(T, "hi", speaker="user:mira", occurred_at=WHEN, id="m1").id == "m1"


def test_builders_set_kind_actor_and_content() -> None:
    tool = ep.tool_result(T, {"b": 1, "a": "é"}, tool="crm", occurred_at=WHEN)
    assert (tool.kind, tool.actor, tool.content) == (EpisodeKind.TOOL_RESULT, "tool:crm", '{"a":"é","b":1}')
    doc = ep.document(T, "\ufeffpolicy text".encode(), occurred_at=WHEN)
    assert (doc.kind, doc.content) == (EpisodeKind.DOCUMENT, "policy text")
    evt = event(type="ticket_closed", customer_id="c1")
    assert evt.kind is EpisodeKind.EVENT and evt.actor == "system:events" and evt.occurred_at == WHEN
    assert json.loads(evt.content)["customer_id"] == "c1"


@pytest.mark.parametrize(("make", "words"), [
    (lambda: ep.message(T, "", speaker="u:a", occurred_at=WHEN), "content is empty"),
    (lambda: ep.message(T, " \t", speaker="u:a", occurred_at=WHEN), "content is empty"),
    (lambda: ep.message(T, "x" * (MAX_EPISODE_BYTES + 1), speaker="u:a", occurred_at=WHEN), "100000-byte limit"),
    (lambda: ep.message(T, "é" * (MAX_EPISODE_BYTES // 2 + 1), speaker="u:a", occurred_at=WHEN), "100002 bytes"),
    (lambda: ep.message(T, "a\ud800b", speaker="u:a", occurred_at=WHEN), "lone surrogate"),
    (lambda: ep.message(T, "hi", speaker="u:a", occurred_at="2026-03-01T00:00:00"), "naive"),
    (lambda: ep.document(T, b"caf\xe9 au lait", occurred_at=WHEN, name="menu.txt"),
     "menu.txt is not UTF-8 text: byte 0xe9 at offset 3"),
    (lambda: ep.event(T, {"type": "ticket_closed"}), "has no occurrence time"),
    (lambda: ep.event(T, ["not", "an", "object"]), "must be a JSON object"),  # type: ignore[arg-type]
    (lambda: ep.message("bad tenant", "hi", speaker="u:a", occurred_at=WHEN), "tenant_id"),
])
def test_bad_episodes_are_clear_errors(make, words: str) -> None:
    with pytest.raises(InvalidDelta, match=words):
        make()


def test_speaker_and_actor_are_one_field() -> None:
    assert ep.episode_from_fields({"tenant_id": T, "content": "x", "occurred_at": WHEN,
                                   "speaker": "user:mira"}).actor == "user:mira"
    with pytest.raises(InvalidDelta, match="speaker or its actor"):
        ep.episode_from_fields({"tenant_id": T, "content": "x", "occurred_at": WHEN,
                                "speaker": "user:mira", "actor": "user:ana"})


# -- event rules -----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def mapper() -> EventMapper:
    return EventMapper(load_event_rules(), schema=default_schema())


def test_shipped_rules_fit_the_shipped_schemas() -> None:
    rules = load_event_rules()
    assert {"address_changed", "policy_renewed", "ticket_closed", "account_opened",
            "policy_upgraded"} <= set(rules.events)
    rules.check(default_schema())
    rules.check(load_schema("customer-support"))
    with pytest.raises(SchemaViolation, match="address_changed.deltas"):
        rules.check(load_schema("personal-assistant"))


def test_a_rule_naming_an_unknown_attribute_is_refused() -> None:
    rules = EventRules.model_validate({"events": {"moved": {"deltas": [
        {"subject": "{id}", "attribute": "postcode", "value": "{postcode}"}]}}})
    with pytest.raises(SchemaViolation, match="moved.deltas\\[0\\].*unknown attribute 'postcode'"):
        EventMapper(rules, schema=default_schema())


def test_templates_keep_types_and_drop_absent_optional_fields(mapper: EventMapper) -> None:
    [premium] = mapper.extract(event(type="policy_renewed", policy_id="pol-1", monthly_premium=19.5), {})
    assert premium == {"subject": "pol-1", "attribute": "monthly_premium", "value": 19.5, "op": "assert"}
    [address] = mapper.extract(event(type="address_changed", customer_id="c1", address="1 Road",
                                     effective_at="2026-02-01T00:00:00Z"), {})
    assert address["valid_from"] == "2026-02-01T00:00:00Z" and address["subject_type"] == "Customer"
    opened = mapper.extract(event(type="account_opened", customer_id="c1", account_id="a1"), {})
    assert [c["attribute"] for c in opened] == ["holds", "account_status"]  # no policy: skipped
    closed = mapper.extract(event(type="account_closed", customer_id="c1", account_id="a1"), {})
    assert closed[1]["op"] == "retract"


def test_nested_fields_and_embedded_placeholders() -> None:
    rules = EventRules.model_validate({"events": {"moved": {"deltas": [
        {"subject": "cust-{customer.id}", "subject_type": "Customer", "attribute": "address",
         "value": "{customer.street}, {customer.city}"}]}}})
    [candidate] = EventMapper(rules).extract(
        event(type="moved", customer={"id": 7, "street": "1 Road", "city": "Porto"}), {})
    assert (candidate["subject"], candidate["value"]) == ("cust-7", "1 Road, Porto")


@pytest.mark.parametrize(("fields", "words"), [
    ({"type": "address_changed", "customer_id": "c1"}, "missing field 'address'"),
    ({"type": "account_opened"}, "missing fields 'customer_id', 'account_id'"),
    ({"type": "parcel_lost"}, "no rule for event type 'parcel_lost'.*address_changed"),
    ({"customer_id": "c1"}, "has no 'type' field"),
])
def test_unmappable_events_name_the_problem(mapper: EventMapper, fields: dict, words: str) -> None:
    with pytest.raises(ExtractionError, match=words) as caught:
        mapper.extract(event(**fields), {})
    assert not caught.value.transient


def test_only_events_are_mapped(mapper: EventMapper) -> None:
    assert mapper.extract(ep.message(T, '{"type": "address_changed"}', speaker="u:a", occurred_at=WHEN), {}) == []
    broken = ep.new_episode(tenant_id=T, content="{not json", occurred_at=WHEN, kind="event")
    with pytest.raises(ExtractionError, match="is not JSON"):
        mapper.extract(broken, {})


# -- recording plans -------------------------------------------------------------------------------

def test_recording_plan_dedupes_by_hash_and_guards_ids() -> None:
    a = ep.message(T, "one", speaker="u:a", occurred_at=WHEN, id="a")
    a_again = ep.message(T, "one", speaker="u:a", occurred_at=WHEN, id="a2")
    b = ep.message(T, "two", speaker="u:a", occurred_at=WHEN, id="b")
    stored = ep.message(T, "three", speaker="u:a", occurred_at=WHEN, id="c")
    found = [{"tenant_id": T, "id": "a", "content_hash": a.content_hash, "id_hash": None, "same_id": None},
             {"tenant_id": T, "id": "a2", "content_hash": a.content_hash, "id_hash": None, "same_id": None},
             {"tenant_id": T, "id": "b", "content_hash": b.content_hash, "id_hash": None, "same_id": "old-b"},
             {"tenant_id": T, "id": "c", "content_hash": stored.content_hash, "id_hash": stored.content_hash,
              "same_id": "c"}]
    known, create = plan_recording([a, a_again, b, stored], found)
    assert [e.id for e in create] == ["a"]
    assert {(r.id, r.stored_id, r.outcome) for r in known} == {
        ("a2", "a", "duplicate"), ("b", "old-b", "duplicate"), ("c", "c", "existing")}
    with pytest.raises(Conflict, match="'c' of tenant 'acme' is already recorded"):
        plan_recording([ep.message(T, "other", speaker="u:a", occurred_at=WHEN, id="c")], found)


def test_one_id_twice_in_a_batch_is_a_conflict_even_when_one_content_is_stored_elsewhere() -> None:
    # The second content is stored as "old-b": the first episode must not be taken for its duplicate.
    first = ep.message(T, "one", speaker="u:a", occurred_at=WHEN, id="x")
    second = ep.message(T, "two", speaker="u:a", occurred_at=WHEN, id="x")
    found = [{"tenant_id": T, "id": "x", "content_hash": first.content_hash, "id_hash": None, "same_id": None},
             {"tenant_id": T, "id": "x", "content_hash": second.content_hash, "id_hash": None,
              "same_id": "old-b"}]
    with pytest.raises(Conflict, match="'x' of tenant 'acme' is already recorded"):
        plan_recording([first, second], found)


# -- files for `sgam ingest` -----------------------------------------------------------------------

def test_jsonl_lines_become_items_or_errors(tmp_path: Path) -> None:
    path = tmp_path / "in.jsonl"
    path.write_bytes(b"\n".join([
        b"# a comment",
        json.dumps({"speaker": "user:mira", "text": "hi", "occurred_at": "2026-03-01T00:00:00Z",
                    "deltas": [{"subject": "mira", "attribute": "home_city", "value": "Porto"}],
                    "remember": True}).encode(),
        json.dumps({"kind": "tool_result", "tool": "crm", "result": {"ok": True}}).encode(),
        json.dumps({"kind": "event", "type": "ticket_closed", "customer_id": "c1"}).encode(),
        json.dumps({"text": "hi", "tenant_id": "other"}).encode(),
        json.dumps({"text": "hi", "deltas": "nope"}).encode(),
        b"",
        json.dumps({"kind": "memo", "text": "hi"}).encode(),
        json.dumps({"speaker": "user:mira"}).encode(),
    ]))
    items = list(read_items(path, Defaults(T, occurred_at=WHEN)))
    good = [i for i in items if isinstance(i, Item)]
    bad = {i.source.rsplit(":", 1)[1]: i.message for i in items if isinstance(i, ItemError)}
    assert [i.episode.kind for i in good] == [EpisodeKind.MESSAGE, EpisodeKind.TOOL_RESULT, EpisodeKind.EVENT]
    assert good[0].remember and good[0].deltas[0]["value"] == "Porto"
    assert good[1].episode.actor == "tool:crm" and good[1].episode.content == '{"ok":true}'
    assert good[2].episode.occurred_at == WHEN  # the command's time when the event has none
    assert set(bad) == {"5", "6", "8", "9"}
    assert "tenant 'other'" in bad["5"] and "'deltas' must be a list" in bad["6"]
    assert "unknown kind" in bad["8"] and "needs its text or content" in bad["9"]


def test_documents_need_a_time_and_utf8(tmp_path: Path) -> None:
    doc = tmp_path / "doc.txt"
    doc.write_bytes(b"\xff\xfeoops")
    [error] = read_items(doc, Defaults(T, kind=EpisodeKind.DOCUMENT, occurred_at=WHEN))
    assert isinstance(error, ItemError) and "not UTF-8" in error.message
    doc.write_text("fine", encoding="utf-8")
    [error] = read_items(doc, Defaults(T, kind=EpisodeKind.DOCUMENT))
    assert isinstance(error, ItemError) and "--occurred-at" in error.message
    [missing] = read_items(tmp_path / "nope.txt", Defaults(T, kind=EpisodeKind.DOCUMENT, occurred_at=WHEN))
    assert isinstance(missing, ItemError) and "cannot be read" in missing.message


# -- the pipeline's pure steps ---------------------------------------------------------------------

def test_validation_fills_implied_fields_and_refuses_foreign_candidates() -> None:
    episode = ep.message(T, "x", speaker="user:mira", occurred_at=WHEN, id="e1")
    valid, refused = validate(episode, [
        ("s", {"subject": "mira", "attribute": "home_city", "value": "Porto", "evidence": ["x"]}),
        ("s", {"subject": "mira", "attribute": "home_city", "value": "Porto", "source_episode_id": "e2"}),
        ("s", {"subject": "mira", "attribute": "home_city", "value": "Porto", "tenant_id": "other"}),
        ("s", {"subject": "bad id", "attribute": "home_city"}),
        ("s", "not a dict"),
    ])
    [(_, candidate, delta)] = valid
    assert (delta.tenant_id, delta.source_episode_id, delta.valid_from, delta.asserted_by) == (
        T, "e1", WHEN, "user:mira")
    assert candidate["evidence"] == ["x"]
    assert [r.stage for r in refused] == ["validate"] * 4
    assert "cite it as source_episode_id" in refused[0].reason
    assert "stay in tenant" in refused[1].reason and "subject" in refused[2].reason


def test_quarantine_entry_ids_are_stable() -> None:
    one = q.entry(T, "e1", "structured", "write", "unknown attribute", "SchemaViolation",
                  {"subject": "mira", "valid_from": WHEN})
    two = q.entry(T, "e1", "structured", "write", "another reason", "SchemaViolation",
                  {"valid_from": WHEN, "subject": "mira"})
    assert one.id == two.id and one.subjects == ("mira",)
    assert json.loads(one.candidate) == {"subject": "mira", "valid_from": WHEN.isoformat()}
    assert q.entry(T, "e1", "events", "extract", "a", "E", None).id != q.entry(T, "e1", "events", "extract", "b", "E", None).id


def test_mentions_and_explicit_memories() -> None:
    assert mention_tokens("Ada (cust-ada) holds acc-1001. Call user:mira!") == [
        "Ada", "Call", "acc-1001", "cust-ada", "holds", "user:mira"]
    say = lambda text: ep.message(T, text, speaker="u:a", occurred_at=WHEN)  # noqa: E731
    assert is_explicit_memory(say("Remember that I live in Porto"))
    assert is_explicit_memory(say("please remember: concise answers"))
    assert not is_explicit_memory(say("Do you remember me?"))
    assert not is_explicit_memory(ep.document(T, "Remember the Alamo", occurred_at=WHEN))


def test_backoff_doubles_and_is_capped() -> None:
    options = WorkerOptions(backoff=timedelta(seconds=2), max_backoff=timedelta(seconds=10))
    assert [options.backoff_for(n).total_seconds() for n in (1, 2, 3, 4)] == [2, 4, 8, 10]
    with pytest.raises(ValueError):
        WorkerOptions(batch_size=0)


def test_a_transient_neo4j_error_is_a_transient_sgam_error() -> None:
    from neo4j.exceptions import Neo4jError

    from sgam.graph.errors import SgamError, StoreUnavailable
    from sgam.graph.store import translated

    deadlock = Neo4jError._hydrate_neo4j(code="Neo.TransientError.Transaction.DeadlockDetected",
                                         message="a deadlock")
    with pytest.raises(StoreUnavailable, match="transient error Neo.TransientError.Transaction.DeadlockDetected") as caught:
        with translated("bolt://127.0.0.1:1"):
            raise deadlock
    assert caught.value.transient
    syntax = Neo4jError._hydrate_neo4j(code="Neo.ClientError.Statement.SyntaxError", message="bad")
    with pytest.raises(SgamError) as caught:
        with translated("bolt://127.0.0.1:1"):
            raise syntax
    assert not caught.value.transient


def test_stored_deltas_of_a_deferred_episode() -> None:
    from sgam.ingest.queue import stored_deltas

    assert stored_deltas(None) == [] and stored_deltas("") == []
    assert stored_deltas('[{"attribute": "home_city", "value": "Porto"}, 3]') == [
        {"attribute": "home_city", "value": "Porto"}]

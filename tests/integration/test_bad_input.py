"""Bad input gets a clear error naming what was wrong, and nothing is written for it."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from pydantic import ValidationError

from sgam import (
    Conflict, InvalidDelta, MemoryDelta, MemoryGraph, SchemaViolation, StoreUnavailable, UnknownSubject,
)
from sgam.graph.schema import default_schema


def utc(*parts: int) -> datetime:
    return datetime(*parts, tzinfo=timezone.utc)


@pytest.fixture
def seeded(graph: MemoryGraph, tenant: str) -> MemoryGraph:
    graph.record_episode(tenant_id=tenant, id="e1", content="said", occurred_at=utc(2026, 1, 1))
    return graph


def node_count(graph: MemoryGraph, tenant: str) -> int:
    records = graph.store.read(
        "MATCH (n) WHERE n.tenant_id = $t RETURN count(n) AS n", {"t": tenant}
    )
    return records[0]["n"]


def delta(tenant: str, **overrides) -> MemoryDelta:
    fields = dict(tenant_id=tenant, subject="mira", attribute="home_city", value="Porto",
                  valid_from=utc(2026, 1, 1), source_episode_id="e1")
    fields.update(overrides)
    return MemoryDelta(**fields)


@pytest.mark.parametrize(
    ("overrides", "error", "words"),
    [
        ({"attribute": "shoe_size"}, SchemaViolation, ["shoe_size", "passport_deadline"]),
        ({"attribute": "passport_deadline", "value": "next week"}, Exception, ["passport_deadline", "date"]),
        ({"attribute": "loyalty_points", "subject_type": "Customer", "value": "many"}, Exception, ["int"]),
        ({"source_episode_id": "e404"}, InvalidDelta, ["e404", "record the episode"]),
        ({"valid_from": datetime(9000, 1, 1, tzinfo=timezone.utc)}, InvalidDelta, ["valid_from", "after now", "SGAM_MAX_FUTURE_DAYS"]),
        ({"attribute": "contact_preference", "subject_type": "Customer", "value": "pigeon"}, Exception, ["email"]),
        ({"attribute": "holds", "value": "acc-1", "subject": "mira", "subject_type": "Person"},
         SchemaViolation, ["holds", "Customer"]),
    ],
)
def test_rejected_delta_writes_nothing(seeded: MemoryGraph, tenant: str, overrides, error, words) -> None:
    before = node_count(seeded, tenant)
    with pytest.raises(error) as caught:
        seeded.write(delta(tenant, **overrides))
    for word in words:
        assert word in str(caught.value)
    assert node_count(seeded, tenant) == before


def test_model_level_errors_name_the_field(tenant: str) -> None:
    with pytest.raises(ValidationError, match="naive datetime"):
        delta(tenant, valid_from=datetime(2026, 1, 1))
    with pytest.raises(ValidationError, match="tenant_id"):
        delta("")
    with pytest.raises(ValidationError, match="subject"):
        delta(tenant, subject="bad id with spaces")


def test_entity_type_clash_is_refused(seeded: MemoryGraph, tenant: str) -> None:
    seeded.write(delta(tenant))
    with pytest.raises(SchemaViolation, match="is a Person"):
        seeded.write(delta(tenant, attribute="address", subject_type="Customer", value="1 Road"))


def test_a_relation_to_an_entity_of_the_wrong_type_is_refused(seeded: MemoryGraph, tenant: str) -> None:
    seeded.write(delta(tenant))  # mira is a Person
    before = node_count(seeded, tenant)
    with pytest.raises(SchemaViolation) as caught:
        seeded.write(delta(tenant, subject="ada", attribute="holds", value="mira", subject_type="Customer"))
    assert all(word in str(caught.value) for word in ("target", "'mira'", "Person", "holds", "Account"))
    assert node_count(seeded, tenant) == before
    with pytest.raises(UnknownSubject, match="no subject 'ada'"):   # nothing was stored for it
        seeded.history(tenant, "ada", principal="*")


def test_one_batch_cannot_give_a_new_entity_two_types(seeded: MemoryGraph, tenant: str) -> None:
    # mira is new: the first delta makes her a Person, so the second may not point `holds` at her
    batch = [delta(tenant), delta(tenant, subject="ada", attribute="holds", value="mira", subject_type="Customer"),
             delta(tenant, subject="ada", attribute="holds", value="acc-1", subject_type="Customer")]
    result = seeded.write_many(batch)
    [rejected] = result.rejected
    assert rejected.index == 1 and isinstance(rejected.error, SchemaViolation)
    assert all(word in rejected.message for word in ("'mira'", "Person", "delta 0", "holds", "Account"))
    assert [f.value for f in seeded.current(tenant, "ada", "holds")] == ["acc-1"]
    types = seeded.store.read("MATCH (e:Entity {tenant_id: $t}) RETURN e.id AS id, labels(e) AS labels",
                              {"t": tenant})
    assert {r["id"]: sorted(r["labels"]) for r in types} == {
        "mira": ["Entity", "Person"], "ada": ["Customer", "Entity"], "acc-1": ["Account", "Entity"]}
    other = f"{tenant}-atomic"
    seeded.record_episode(tenant_id=other, id="e1", content="said", occurred_at=utc(2026, 1, 1))
    with pytest.raises(SchemaViolation, match="delta 0 of the same batch"):
        seeded.write_many([delta(other), delta(other, subject="ada", attribute="holds", value="mira",
                                                  subject_type="Customer")], atomic=True)
    assert node_count(seeded, other) == 1  # only the episode


def test_an_unknown_entity_type_names_the_known_ones(seeded: MemoryGraph, tenant: str) -> None:
    with pytest.raises(SchemaViolation, match="unknown entity type 'Spaceship'; known: Person, Customer"):
        seeded.write(delta(tenant, subject_type="Spaceship"))
    with pytest.raises(UnknownSubject):
        seeded.history(tenant, "mira", principal="*")


@pytest.mark.parametrize(("raw", "stored"), [("Germany", "DE"), ("germany", "DE"), ("DEU", "DE"),
                                             ("Deutschland", "DE"), (" de ", "DE"), ("United Kingdom", "GB")])
def test_country_is_stored_as_its_iso_code(seeded: MemoryGraph, tenant: str, raw: str, stored: str) -> None:
    seeded.write(delta(tenant, subject="ada", subject_type="Customer", attribute="country", value=raw))
    assert [f.value for f in seeded.current(tenant, "ada", "country")] == [stored]


def test_an_unknown_country_is_refused_by_name(seeded: MemoryGraph, tenant: str) -> None:
    with pytest.raises(InvalidDelta, match="'Atlantis' is not valid for attribute 'country'.*ISO 3166"):
        seeded.write(delta(tenant, subject="ada", subject_type="Customer", attribute="country", value="Atlantis"))
    assert node_count(seeded, tenant) == 1  # the episode only


def test_retracting_a_value_not_held_is_kept_and_bites_once_that_value_holds(
        seeded: MemoryGraph, tenant: str) -> None:
    seeded.write(delta(tenant))
    kept = seeded.write(delta(tenant, op="retract", value="Lisbon", valid_from=utc(2026, 3, 1)))
    assert kept.outcome == "kept"
    assert [f.value for f in seeded.current(tenant, "mira", "home_city")] == ["Porto"]
    # A backdated Lisbon from February: the kept retract now ends it on 1 March.
    seeded.write(delta(tenant, value="Lisbon", valid_from=utc(2026, 2, 1)))
    believed = sorted((f.valid_from, f.valid_to, f.value) for f in seeded.history(tenant, "mira", "home_city")
                      if f.expired_at is None)
    assert believed == [(utc(2026, 1, 1), utc(2026, 2, 1), "Porto"), (utc(2026, 2, 1), utc(2026, 3, 1), "Lisbon")]


def test_write_many_reports_bad_ones_and_applies_good_ones(seeded: MemoryGraph, tenant: str) -> None:
    batch = [
        delta(tenant),
        delta(tenant, attribute="shoe_size"),
        delta(tenant, subject="ana", source_episode_id="missing"),
        delta(tenant, subject="ben"),
    ]
    result = seeded.write_many(batch)
    assert [r.ok for r in result.results] == [True, False, False, True]
    assert [r.index for r in result.rejected] == [1, 2]
    assert [f.value for f in seeded.current(tenant, "ben", "home_city")] == ["Porto"]
    with pytest.raises(UnknownSubject):
        seeded.current(tenant, "ana", "home_city")


def test_atomic_write_many_writes_none(seeded: MemoryGraph, tenant: str) -> None:
    before = node_count(seeded, tenant)
    with pytest.raises(InvalidDelta, match="missing"):
        seeded.write_many([delta(tenant), delta(tenant, subject="ana", source_episode_id="missing")],
                          atomic=True)
    assert node_count(seeded, tenant) == before
    with pytest.raises(UnknownSubject):
        seeded.current(tenant, "mira", "home_city")


def test_episode_id_reuse_with_other_content_is_refused(seeded: MemoryGraph, tenant: str) -> None:
    with pytest.raises(Conflict, match="already recorded"):
        seeded.record_episode(tenant_id=tenant, id="e1", content="something else",
                              occurred_at=utc(2026, 1, 1))


def test_bad_read_arguments(graph: MemoryGraph, tenant: str) -> None:
    with pytest.raises(InvalidDelta, match="naive"):
        graph.as_of(tenant, "mira", valid_at=datetime(2026, 1, 1))
    with pytest.raises(InvalidDelta, match="tenant_id"):
        graph.current("", "mira")


def test_unreachable_neo4j_is_one_clear_error() -> None:
    with pytest.raises(StoreUnavailable, match="not reachable at bolt://127.0.0.1:1"):
        MemoryGraph.connect("bolt://127.0.0.1:1", ("neo4j", "x"), schema=default_schema())


def test_wrong_password_is_one_clear_error(neo4j_connection) -> None:
    uri, (user, _) = neo4j_connection
    with pytest.raises(StoreUnavailable, match="refused the credentials"):
        MemoryGraph.connect(uri, (user, "wrong-password"), schema=default_schema())


def test_a_scheduled_change_is_an_ordinary_fact_and_absurd_years_are_refused(
        seeded: MemoryGraph, tenant: str) -> None:
    now = seeded.clock()
    seeded.write(delta(tenant))
    moving = now + timedelta(days=40)
    assert seeded.write(delta(tenant, value="Lisbon", valid_from=moving)).outcome == "changed"
    assert [f.value for f in seeded.current(tenant, "mira", "home_city")] == ["Porto"]
    assert [f.value for f in seeded.as_of(tenant, "mira", "home_city", valid_at=moving)] == ["Lisbon"]
    assert len([f for f in seeded.history(tenant, "mira", "home_city") if f.expired_at is None]) == 2
    with pytest.raises(InvalidDelta, match="valid_from.*36500 days after now.*SGAM_MAX_FUTURE_DAYS"):
        seeded.write(delta(tenant, valid_from=now.replace(year=now.year + 101)))
    assert len([f for f in seeded.history(tenant, "mira", "home_city") if f.expired_at is None]) == 2


def test_keyword_writes_raise_sgam_errors(graph: MemoryGraph, tenant: str) -> None:
    with pytest.raises(InvalidDelta, match="valid_from.*naive"):
        graph.write(tenant_id=tenant, subject="mira", attribute="home_city", value="Porto",
                    valid_from=datetime(2026, 1, 1), source_episode_id="e1")
    with pytest.raises(InvalidDelta, match="occurred_at"):
        graph.record_episode(tenant_id=tenant, id="e1", content="x", occurred_at="yesterday")

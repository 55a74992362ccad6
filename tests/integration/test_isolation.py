"""Tenant isolation by property: random data in two tenants; no read of one returns the other's."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sgam import MemoryDelta, MemoryGraph, UnknownSubject, UnknownTenant

EPOCH = datetime(2026, 1, 1, tzinfo=timezone.utc)
SUBJECTS = ["mira", "ada", "acc-1"]
CITIES = ["Porto", "Oslo", "Faro", "Lima"]

rows = st.lists(
    st.tuples(st.integers(0, 1), st.sampled_from(["mira", "ada"]), st.sampled_from(CITIES), st.integers(0, 40)),
    min_size=1, max_size=12,
)


def stored(graph: MemoryGraph, tenant: str, subject: str) -> bool:
    try:
        graph.history(tenant, subject)
    except (UnknownSubject, UnknownTenant):
        return False
    return True


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=rows)
def test_no_read_crosses_tenants(graph: MemoryGraph, data) -> None:
    tenants = [f"iso-{uuid.uuid4().hex[:8]}-{side}" for side in ("a", "b")]
    deltas = []
    for index, (side, subject, city, day) in enumerate(data):
        tenant = tenants[side]
        # The same statement twice is one episode (deduplicated by content): cite the stored id.
        eid = graph.record_episode(tenant_id=tenant, id=f"e{index}", content=f"{subject} lives in {city}",
                                   occurred_at=EPOCH + timedelta(days=day)).id
        subject_type = "Person" if subject == "mira" else "Customer"
        attribute = "home_city" if subject == "mira" else "address"
        deltas.append(MemoryDelta(tenant_id=tenant, subject=subject, attribute=attribute, value=city,
                                  subject_type=subject_type, valid_from=EPOCH + timedelta(days=day),
                                  source_episode_id=eid))
        deltas.append(MemoryDelta(tenant_id=tenant, subject="ada", attribute="holds", value="acc-1",
                                  valid_from=EPOCH + timedelta(days=day), source_episode_id=eid))
    assert not graph.write_many(deltas).rejected
    for tenant in tenants:
        if not stored(graph, tenant, "ada"):   # every row went to the other tenant: this one holds nothing
            with pytest.raises(UnknownTenant):
                graph.doctor(tenant)
            continue
        seen = []
        # a subject that only the other tenant holds is unknown here (and says no more than that)
        for subject in [s for s in SUBJECTS if stored(graph, tenant, s)]:
            seen += graph.current(tenant, subject)
            seen += graph.history(tenant, subject)
            seen += graph.as_of(tenant, subject, valid_at=EPOCH + timedelta(days=20))
            for fact in graph.history(tenant, subject):
                provenance = graph.provenance(tenant, subject, fact.memory_id)
                assert provenance is not None and provenance.episode["tenant_id"] == tenant
                seen += [*provenance.superseded, *provenance.superseded_by]
        for path in graph.traverse(tenant, "ada", ["holds"], valid_at=EPOCH + timedelta(days=41)):
            seen += list(path.facts)
        assert {fact.tenant_id for fact in seen} <= {tenant}
        assert graph.doctor(tenant) == []
        other = tenants[1] if tenant == tenants[0] else tenants[0]
        for fact in graph.history(other, "mira") if stored(graph, other, "mira") else []:
            if stored(graph, tenant, "mira"):
                assert graph.provenance(tenant, "mira", fact.memory_id) is None
            else:
                with pytest.raises(UnknownSubject):
                    graph.provenance(tenant, "mira", fact.memory_id)
    for tenant in tenants:
        graph.delete_tenant(tenant)

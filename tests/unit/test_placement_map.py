"""The placement map (sgam/settings.py) and the choice of a call's target (sgam/placement.py),
without a server: the stores compared are stand-ins that only carry an address."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sgam.graph.errors import InvalidSetting
from sgam.placement import Stores
from sgam.settings import DEFAULT_TARGET, Placement, Settings, Target, load_placement, save_placement

TENANTS = st.from_regex(r"[a-z0-9][a-z0-9_-]{0,10}", fullmatch=True)
TARGETS = st.builds(Target, uri=st.sampled_from([None, "bolt://10.0.0.2:7687", "neo4j+s://x.example:7687"]),
                    database=st.sampled_from([None, "neo4j", "tenants"]))


@dataclass
class Address:
    uri: str = "bolt://127.0.0.1:7687"
    database: str = "neo4j"


@given(st.dictionaries(TENANTS, TARGETS, max_size=6))
def test_the_map_survives_its_file(tenants: dict[str, Target]) -> None:
    placement = Placement()
    for tenant, target in tenants.items():
        placement = placement.placed(tenant, target)
    path = Path(f"/tmp/sgam-placement-test-{abs(hash(str(tenants)))}.json")
    try:
        save_placement(path, placement)
        assert load_placement(path) == placement
    finally:
        path.unlink(missing_ok=True)
    for tenant, target in tenants.items():
        assert placement.target(tenant) == target       # a default target is no entry, and reads as one
    assert placement.target("never-named") == DEFAULT_TARGET


def test_no_file_is_no_placement_and_a_bad_one_names_the_problem(tmp_path: Path) -> None:
    assert Settings(placement_file=tmp_path / "none.json").placement_map() == Placement()
    bad = tmp_path / "bad.json"
    bad.write_text('{"tenants": {"acme": {"uri": "http://127.0.0.1:7474"}}}', encoding="utf-8")
    with pytest.raises(InvalidSetting, match=r"tenants\.acme\.uri.*not a Bolt address"):
        Settings(placement_file=bad).placement_map()
    bad.write_text('{"tenants": {"no spaces": {}}}', encoding="utf-8")
    with pytest.raises(InvalidSetting, match="tenant_id 'no spaces' is not valid"):
        load_placement(bad)


def test_a_call_spanning_two_targets_is_refused_and_one_target_is_chosen() -> None:
    placement = Placement(tenants={"b1": Target(uri="bolt://10.0.0.2:7687"), "b2": Target(uri="bolt://10.0.0.2:7687"),
                                   "same": Target(uri="bolt://127.0.0.1:7687", database="neo4j")})
    stores = Stores(Address(), ("neo4j", "pw"), placement, bootstrap=False, retry_seconds=1)  # type: ignore[arg-type]
    assert stores.target_of(["b1", "b2"]) == Target(uri="bolt://10.0.0.2:7687")
    assert stores.key("same") == stores.key("unplaced") == ("bolt://127.0.0.1:7687", "neo4j")
    stores.target_of(["same", "unplaced"])   # the default server named outright is the default
    with pytest.raises(InvalidSetting, match="'a' on default/default, 'b1' on bolt://10.0.0.2:7687/default"):
        stores.target_of(["a", "b1"])


def test_a_password_comes_from_the_variable_the_entry_names(monkeypatch: pytest.MonkeyPatch) -> None:
    stores = Stores(Address(), ("neo4j", "default-pw"), Placement(), bootstrap=False, retry_seconds=1)  # type: ignore[arg-type]
    monkeypatch.delenv("SGAM_B_PW", raising=False)
    with pytest.raises(InvalidSetting, match="SGAM_B_PW, which is not set"):
        stores.connection(Target(uri="bolt://10.0.0.2:7687", password_env="SGAM_B_PW"))
    monkeypatch.setenv("SGAM_B_PW", "b-pw")
    assert stores.connection(Target(uri="bolt://10.0.0.2:7687", user="ops", password_env="SGAM_B_PW")).auth == ("ops", "b-pw")
    assert stores.connection(Target(database="other")).auth == ("neo4j", "default-pw")

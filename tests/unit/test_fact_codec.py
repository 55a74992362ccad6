"""A fact read back from its stored properties (``codec.fact_from_properties``).

Properties come as the driver hands them: instants as ISO text (the API's reads) or as driver
temporal types (``properties(f)``), a date or datetime value as text or typed. The reads' usual
case (every property a plain value and no date to parse) takes a shorter path; it must build the
very fact the general one builds, for any properties, and both must read an instant the same
whether it came as text or typed.
"""

from __future__ import annotations

from datetime import date, datetime, timedelta, timezone
from typing import Any
from unittest.mock import patch

import neo4j.time
from hypothesis import given
from hypothesis import strategies as st

from sgam.graph import codec
from sgam.graph.models import Fact

INSTANTS = st.datetimes(min_value=datetime(1990, 1, 1), max_value=datetime(2100, 1, 1),
                        timezones=st.just(timezone.utc))
TEXT = st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7e), min_size=1, max_size=12)
VALUES = {"string": TEXT, "int": st.integers(-10**6, 10**6), "float": st.floats(-1e6, 1e6, allow_nan=False),
          "bool": st.booleans(), "date": st.dates(date(1990, 1, 1), date(2100, 1, 1)), "datetime": INSTANTS}


@st.composite
def stored(draw: st.DrawFn) -> tuple[dict[str, Any], dict[str, Any]]:
    """A fact's properties as read with instants as text, and the same with the driver's types."""
    value_type = draw(st.sampled_from(sorted(VALUES)))
    value = draw(VALUES[value_type])
    start = draw(INSTANTS)
    end = draw(st.none() | st.just(start + timedelta(days=draw(st.integers(1, 400)))))
    recorded = draw(INSTANTS)
    expired = draw(st.none() | st.just(recorded + timedelta(seconds=draw(st.integers(1, 10**6)))))
    instants = {"valid_from": start, "valid_to": end, "recorded_at": recorded, "expired_at": expired,
                "last_confirmed_at": draw(st.none() | st.just(recorded))}
    props = {"memory_id": "m-1", "tenant_id": "t", "subject": "s", "attribute": "a", "value_key": "k",
             "value_type": value_type, "kind": "attribute", "memory_type": "profile",
             "schema_version": draw(st.integers(1, 9)), "source_episode_id": "e1",
             "asserted_by": "tool:x", "confidence": draw(st.floats(0, 1)), "retention_policy": "permanent",
             "status": draw(st.sampled_from(["confirmed", "candidate"])),
             "op": draw(st.sampled_from(["assert", "correct"])),
             "support_count": draw(st.integers(1, 5)), "support_episodes": ["e1"], "delta_keys": ["d1"]}
    if draw(st.booleans()):
        props["visible_to"] = ["user:s"]
    as_text = {**props, **{k: None if v is None else v.isoformat() for k, v in instants.items()},
               "value": value.isoformat() if value_type in ("date", "datetime") else value}
    typed = {**props, **{k: None if v is None else neo4j.time.DateTime.from_native(v) for k, v in instants.items()},
             "value": neo4j.time.DateTime.from_native(value) if value_type == "datetime"
             else neo4j.time.Date.from_native(value) if value_type == "date" else value}
    return as_text, typed


@given(props=stored())
def test_the_short_path_builds_the_fact_the_general_one_builds(props: tuple[dict[str, Any], dict[str, Any]]) -> None:
    as_text, typed = props
    fact = codec.fact_from_properties(as_text)
    with patch.object(codec, "_plain_fact", lambda _: False):
        assert codec.fact_from_properties(dict(as_text)) == fact
    assert codec.fact_from_properties(typed) == fact
    assert isinstance(fact, Fact) and fact.valid_from.utcoffset() == timedelta(0)
    if as_text["value_type"] in ("date", "datetime"):
        assert not codec._plain_fact(as_text)      # its value is text to parse
        assert type(fact.value) is (date if as_text["value_type"] == "date" else datetime)
    else:
        assert codec._plain_fact(as_text) and fact.value == as_text["value"]

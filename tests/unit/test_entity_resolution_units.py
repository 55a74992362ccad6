"""Entity resolution, the parts without a database: alias keys and word runs, re-keyed statements,
and the evidence of candidate merges."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest
from hypothesis import given, strategies as st

from sgam.graph.aliases import MAX_ALIAS_WORDS, alias_grams, alias_key, checked_aliases
from sgam.graph.candidates import _entity, _evidence
from sgam.graph.errors import InvalidDelta
from sgam.graph.merge import rekeyed
from sgam.graph.models import MemoryDelta
from sgam.graph.reconcile import Point, delta_key


def utc(*parts: int) -> datetime:
    return datetime(*parts, tzinfo=timezone.utc)


def test_alias_keys_are_words_case_folded() -> None:
    assert alias_key("  Ada   LOVELACE ") == "ada lovelace"
    assert alias_key("Ada@Example.org") == "ada@example.org"
    assert checked_aliases(["Ada", "ada", "ADA "]) == [{"key": "ada", "name": "Ada"}]
    with pytest.raises(InvalidDelta, match="no letter or digit"):
        checked_aliases(["--"])
    with pytest.raises(InvalidDelta, match="longer than"):
        checked_aliases([" ".join(["w"] * (MAX_ALIAS_WORDS + 1))])


def test_an_alias_in_a_text_is_one_of_its_word_runs() -> None:
    grams = alias_grams("Yesterday the Countess of Lovelace wrote.")
    assert "countess of lovelace" in grams and "lovelace wrote" in grams and "lovelace" in grams
    assert "countess lovelace" not in grams


@given(op=st.sampled_from(["assert", "retract", "correct"]), month=st.integers(1, 12),
       value=st.sampled_from(["Porto", "Lisbon"]), until=st.booleans())
def test_a_moved_statement_is_keyed_as_the_delta_about_the_kept_entity(op: str, month: int, value: str,
                                                                      until: bool) -> None:
    valid_to = utc(2027, 1, 1) if until and op != "correct" else None
    about = {s: MemoryDelta(tenant_id="t", subject=s, attribute="home_city", op=op, value=value,
                            valid_from=utc(2026, month, 1), valid_to=valid_to, source_episode_id="e1")
             for s in ("ada", "ada-l")}
    vkey = "str:" + value
    point = Point(at=about["ada-l"].valid_from, op=op, value=value, value_key=vkey,
                  key=delta_key(about["ada-l"], vkey), episode="e1", asserted_by="unknown", confidence=1.0,
                  until=valid_to)
    assert rekeyed(point, "t", "ada", "home_city").key == delta_key(about["ada"], vkey)


def test_a_statement_standing_for_a_row_keeps_its_key() -> None:
    point = Point(at=utc(2026, 1, 1), op="assert", value="x", value_key="str:x", key="row:m-1", episode="e",
                  asserted_by="unknown", confidence=1.0)
    assert rekeyed(point, "t", "ada", "home_city").key == "row:m-1"


def _row(id: str, name: str | None, aliases: list[str] = (), emails: list[str] = ()) -> dict:
    return {"id": id, "type": "Person", "name": name, "aliases": list(aliases), "emails": list(emails),
            "embedded": False}


def test_the_evidence_of_a_pair() -> None:
    ada = _entity(_row("ada", "Ada"))
    lovelace = _entity(_row("ada-l", "Ada Lovelace", emails=["ada.lovelace@example.org"]))
    email = _entity(_row("ada.lovelace@example.org", "ada.lovelace@example.org"))
    assert _evidence(ada, lovelace) == {"name words": 0.6}
    assert _evidence(lovelace, email)["email matches name"] == 0.7
    twin = _entity(_row("ada-2", "A. L.", aliases=["ada lovelace"], emails=["ada.lovelace@example.org"]))
    assert {"same alias": 1.0, "same email": 0.95}.items() <= _evidence(lovelace, twin).items()
    grace = _entity(_row("grace", "Grace Hopper"))
    assert _evidence(ada, grace) == {}

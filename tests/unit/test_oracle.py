"""The oracle itself, against tables worked by hand from docs/temporal-semantics.md (no database).

Intervals are checked against SQL:2011 ``UPDATE / DELETE ... FOR PORTION OF`` before/after tables:
the part of a row inside the portion is updated or deleted, the parts outside are kept.
"""

from __future__ import annotations

import itertools
from datetime import datetime, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sgam.graph import Conflict, InvalidDelta, NotAllowed, NotFound
from sgam.bench.oracle import ASSERT, CONFIRM, CORRECT, RETRACT, Slot, Statement, believed


def at(text: str) -> datetime:
    """'Jan 1' style dates in 2020 (and 'Jan 1 2021' when a year is given), UTC midnight."""
    parts = text.split()
    year = int(parts[2]) if len(parts) == 3 else 2020
    return datetime.strptime(f"{parts[0]} {parts[1]} {year}", "%b %d %Y").replace(tzinfo=timezone.utc)


def s(op: str, value, start: str, end: str | None = None, episode: str | None = None,
      confidence: float = 1.0, replaces=None) -> Statement:
    return Statement(op, value, at(start), at(end) if end else None,
                     episode or f"{op}-{value}-{start}", confidence, replaces)


def runs(*table: tuple) -> list:
    """Expected runs from ('Jan 1', 'Feb 1', 'A') rows; None as the end means open."""
    return [(at(start), at(end) if end else None, value) for start, end, value in table]


def every_order(statements: list[Statement], many: bool = False) -> list:
    """The runs of the slot after arrival in every order (asserting they are all equal)."""
    seen = []
    for order in itertools.permutations(statements):
        slot = Slot(many=many)
        for k, statement in enumerate(order):
            slot.apply(statement, at("Jan 1 2030").replace(second=k))
        seen.append(slot.runs())
    assert all(r == seen[0] for r in seen)
    assert seen[0] == believed(statements, many).runs()
    return seen[0]


# -- cardinality one: the sweep ---------------------------------------------------------------------


def test_the_issues_example_gives_rome_in_every_order() -> None:
    statements = [s(ASSERT, "Lisbon", "Jan 1"), s(ASSERT, "Rome", "Feb 11"), s(ASSERT, "Rome", "Jan 3"),
                  s(ASSERT, "Lisbon", "Jan 4")]
    assert every_order(statements) == runs(("Jan 1", "Jan 3", "Lisbon"), ("Jan 3", "Jan 4", "Rome"),
                                           ("Jan 4", "Feb 11", "Lisbon"), ("Feb 11", None, "Rome"))
    assert believed(statements).value_at(at("Jun 1")) == "Rome"


def test_a_late_backdated_value_ends_at_the_next_change_point_even_a_reassert() -> None:
    statements = [s(ASSERT, "A", "Jan 1"), s(ASSERT, "A", "Mar 1"), s(ASSERT, "B", "Feb 1")]
    assert every_order(statements) == runs(("Jan 1", "Feb 1", "A"), ("Feb 1", "Mar 1", "B"),
                                           ("Mar 1", None, "A"))


def test_a_reassert_of_the_value_in_force_makes_no_new_run() -> None:
    assert every_order([s(ASSERT, "A", "Jan 1"), s(ASSERT, "A", "Feb 1")]) == runs(("Jan 1", None, "A"))


@pytest.mark.parametrize("statements, expected", [
    # the more confident statement wins the instant
    ([s(ASSERT, "A", "Jan 1", confidence=0.9), s(ASSERT, "B", "Jan 1", confidence=0.5)], "A"),
    ([s(ASSERT, "A", "Jan 1", confidence=0.5), s(ASSERT, "B", "Jan 1", confidence=0.9)], "B"),
    # equal confidence: the greater canonical value is applied last
    ([s(ASSERT, "B", "Jan 1"), s(ASSERT, "A", "Jan 1")], "B"),
    # a correct is applied after the asserts of its instant, whatever their confidence
    ([s(ASSERT, "A", "Jan 1", confidence=1.0), s(CORRECT, "B", "Jan 1", confidence=0.1)], "B"),
    # retracts come first: a retract at an instant ends what held before it, so an assert at the
    # same instant holds from there (an end and a start meet, as [a, t) and [t, b) do)
    ([s(ASSERT, "A", "Jan 1"), s(CORRECT, "B", "Jan 1"), s(RETRACT, None, "Jan 1")], "B"),
    ([s(ASSERT, "A", "Jan 1"), s(RETRACT, "B", "Jan 1")], "A"),
    ([s(ASSERT, "A", "Jan 1"), s(RETRACT, "A", "Jan 1")], "A"),
    ([s(ASSERT, "A", "Jan 1"), s(RETRACT, "A", "Feb 1"), s(ASSERT, "A", "Feb 1")], "A"),
])
def test_the_same_instant_rule(statements: list[Statement], expected) -> None:
    every_order(statements)
    assert believed(statements).value_at(at("Jan 1")) == expected


def test_correct_replaces_the_change_point_in_force_not_the_whole_run() -> None:
    base = [s(ASSERT, "A", "Jan 1"), s(ASSERT, "B", "Feb 1"), s(ASSERT, "A", "Mar 1")]
    assert every_order([*base, s(CORRECT, "C", "Feb 15")]) == runs(
        ("Jan 1", "Feb 1", "A"), ("Feb 1", "Mar 1", "C"), ("Mar 1", None, "A"))
    # a later re-assert of the old value still stands
    assert every_order([s(ASSERT, "A", "Jan 1"), s(ASSERT, "A", "Mar 1"), s(CORRECT, "B", "Feb 1")]) == runs(
        ("Jan 1", "Mar 1", "B"), ("Mar 1", None, "A"))


def test_correct_with_nothing_in_force_is_an_assert() -> None:
    assert every_order([s(CORRECT, "B", "Feb 1")]) == runs(("Feb 1", None, "B"))
    assert every_order([s(ASSERT, "A", "Jan 1"), s(RETRACT, None, "Feb 1"), s(CORRECT, "B", "Mar 1")]) == runs(
        ("Jan 1", "Feb 1", "A"), ("Mar 1", None, "B"))


def test_a_retract_at_a_values_start_does_not_undo_it() -> None:
    """Retracts are applied first at an instant, so a retract there ends what held before."""
    assert every_order([s(ASSERT, "A", "Jan 1"), s(RETRACT, None, "Jan 1")]) == runs(("Jan 1", None, "A"))
    assert every_order([s(ASSERT, "B", "Jan 1"), s(ASSERT, "A", "Feb 1"), s(RETRACT, "B", "Feb 1")]) == runs(
        ("Jan 1", "Feb 1", "B"), ("Feb 1", None, "A"))
    # adjacent intervals of one value meet: A until Feb 1, A again from Feb 1
    assert every_order([s(ASSERT, "A", "Jan 1"), s(RETRACT, "A", "Feb 1"), s(ASSERT, "A", "Feb 1")]) == runs(
        ("Jan 1", None, "A"))


def test_never_true_is_said_with_an_interval_retract() -> None:
    assert every_order([s(ASSERT, "A", "Jan 1"), s(RETRACT, "A", "Jan 1", "Mar 1")]) == runs(
        ("Mar 1", None, "A"))


def test_clear_if_becomes_effective_when_a_backdated_assert_arrives() -> None:
    slot = Slot()
    slot.apply(s(ASSERT, "B", "Jan 1"), at("Jun 1"))
    slot.apply(s(RETRACT, "A", "Mar 1"), at("Jun 2"))          # A does not hold on Mar 1: no effect
    assert slot.runs() == runs(("Jan 1", None, "B"))
    slot.apply(s(ASSERT, "A", "Feb 1"), at("Jun 3"))           # now it does, and the retract ends it
    assert slot.runs() == runs(("Jan 1", "Feb 1", "B"), ("Feb 1", "Mar 1", "A"))
    assert slot.runs(known_at=at("Jun 2")) == runs(("Jan 1", None, "B"))


def test_a_retract_where_nothing_holds_is_kept() -> None:
    assert every_order([s(RETRACT, None, "Mar 1"), s(ASSERT, "A", "Feb 1")]) == runs(("Feb 1", "Mar 1", "A"))


# -- intervals: SQL:2011 FOR PORTION OF ---------------------------------------------------------------

# The table before every case: A [Jan 1, Apr 1), B [Apr 1, Jul 1), C [Jul 1, open).
ROWS = [s(ASSERT, "A", "Jan 1"), s(ASSERT, "B", "Apr 1"), s(ASSERT, "C", "Jul 1")]


@pytest.mark.parametrize("portion, after", [
    # UPDATE ... FOR PORTION OF FROM Feb 1 TO Mar 1 SET value = 'X': inside one row
    ([s(ASSERT, "X", "Feb 1", "Mar 1")],
     [("Jan 1", "Feb 1", "A"), ("Feb 1", "Mar 1", "X"), ("Mar 1", "Apr 1", "A"), ("Apr 1", "Jul 1", "B"),
      ("Jul 1", None, "C")]),
    # overlapping the end of A
    ([s(ASSERT, "X", "Mar 1", "Apr 1")],
     [("Jan 1", "Mar 1", "A"), ("Mar 1", "Apr 1", "X"), ("Apr 1", "Jul 1", "B"), ("Jul 1", None, "C")]),
    # overlapping the start of B
    ([s(ASSERT, "X", "Apr 1", "May 1")],
     [("Jan 1", "Apr 1", "A"), ("Apr 1", "May 1", "X"), ("May 1", "Jul 1", "B"), ("Jul 1", None, "C")]),
    # across a row boundary: the end of A and the start of B
    ([s(ASSERT, "X", "Mar 1", "May 1")],
     [("Jan 1", "Mar 1", "A"), ("Mar 1", "May 1", "X"), ("May 1", "Jul 1", "B"), ("Jul 1", None, "C")]),
    # covering several rows, and part of the open one
    ([s(ASSERT, "X", "Feb 1", "Aug 1")],
     [("Jan 1", "Feb 1", "A"), ("Feb 1", "Aug 1", "X"), ("Aug 1", None, "C")]),
    # inside the open row
    ([s(ASSERT, "X", "Aug 1", "Sep 1")],
     [("Jan 1", "Apr 1", "A"), ("Apr 1", "Jul 1", "B"), ("Jul 1", "Aug 1", "C"), ("Aug 1", "Sep 1", "X"),
      ("Sep 1", None, "C")]),
    # nested: the inner portion is applied after the outer one, in any arrival order
    ([s(ASSERT, "Y", "Mar 1", "Apr 1"), s(ASSERT, "X", "Feb 1", "Jun 1")],
     [("Jan 1", "Feb 1", "A"), ("Feb 1", "Mar 1", "X"), ("Mar 1", "Apr 1", "Y"), ("Apr 1", "Jun 1", "X"),
      ("Jun 1", "Jul 1", "B"), ("Jul 1", None, "C")]),
    # nested with the same start: the later end is applied first
    ([s(ASSERT, "Y", "Feb 1", "Mar 1"), s(ASSERT, "X", "Feb 1", "Jun 1")],
     [("Jan 1", "Feb 1", "A"), ("Feb 1", "Mar 1", "Y"), ("Mar 1", "Jun 1", "X"), ("Jun 1", "Jul 1", "B"),
      ("Jul 1", None, "C")]),
    # setting the neighbour's value: the runs stay maximal
    ([s(ASSERT, "A", "Mar 1", "May 1")],
     [("Jan 1", "May 1", "A"), ("May 1", "Jul 1", "B"), ("Jul 1", None, "C")]),
    # DELETE ... FOR PORTION OF FROM Feb 1 TO Mar 1: inside one row
    ([s(RETRACT, None, "Feb 1", "Mar 1")],
     [("Jan 1", "Feb 1", "A"), ("Mar 1", "Apr 1", "A"), ("Apr 1", "Jul 1", "B"), ("Jul 1", None, "C")]),
    # overlapping the end of A and the start of B
    ([s(RETRACT, None, "Mar 1", "May 1")],
     [("Jan 1", "Mar 1", "A"), ("May 1", "Jul 1", "B"), ("Jul 1", None, "C")]),
    # covering several rows
    ([s(RETRACT, None, "Feb 1", "Aug 1")], [("Jan 1", "Feb 1", "A"), ("Aug 1", None, "C")]),
    # nested deletes and updates: delete [Feb 1, Jun 1), then update [Mar 1, Apr 1) inside it
    ([s(ASSERT, "Y", "Mar 1", "Apr 1"), s(RETRACT, None, "Feb 1", "Jun 1")],
     [("Jan 1", "Feb 1", "A"), ("Mar 1", "Apr 1", "Y"), ("Jun 1", "Jul 1", "B"), ("Jul 1", None, "C")]),
    # DELETE ... FOR PORTION OF ... WHERE value = 'B': only where B held
    ([s(RETRACT, "B", "Mar 1", "Aug 1")], [("Jan 1", "Apr 1", "A"), ("Jul 1", None, "C")]),
    ([s(RETRACT, "Z", "Mar 1", "Aug 1")], [("Jan 1", "Apr 1", "A"), ("Apr 1", "Jul 1", "B"), ("Jul 1", None, "C")]),
])
def test_intervals_match_sql_2011_for_portion_of(portion: list[Statement], after: list) -> None:
    assert every_order([*ROWS, *portion]) == runs(*after)


def test_an_interval_where_nothing_holds_inserts_the_portion() -> None:
    assert every_order([s(ASSERT, "X", "Feb 1", "Mar 1")]) == runs(("Feb 1", "Mar 1", "X"))
    assert every_order([s(RETRACT, None, "Feb 1", "Mar 1")]) == []


def test_intervals_apply_after_the_sweep() -> None:
    """A change point inside an interval does not cut it; outside it, it holds from the interval's end."""
    statements = [s(ASSERT, "A", "Jan 1"), s(ASSERT, "X", "Feb 1", "Jun 1"), s(ASSERT, "D", "Mar 1")]
    assert every_order(statements) == runs(("Jan 1", "Feb 1", "A"), ("Feb 1", "Jun 1", "X"), ("Jun 1", None, "D"))


def test_correct_takes_no_valid_to_and_an_interval_must_not_be_empty() -> None:
    with pytest.raises(InvalidDelta, match="correct takes no valid_to"):
        s(CORRECT, "A", "Jan 1", "Feb 1")
    with pytest.raises(InvalidDelta, match="not after valid_from"):
        s(ASSERT, "A", "Feb 1", "Feb 1")


# -- sets ----------------------------------------------------------------------------------------------


def test_each_member_has_its_own_timeline() -> None:
    statements = [s(ASSERT, "ana", "Jan 1"), s(ASSERT, "ben", "Feb 1"), s(RETRACT, "ana", "Mar 1"),
                  s(ASSERT, "ana", "Feb 1", episode="again"), s(ASSERT, "cy", "Feb 1", "Apr 1"),
                  s(RETRACT, "ben", "Mar 1", "Apr 1")]
    assert every_order(statements, many=True) == runs(
        ("Jan 1", "Mar 1", "ana"), ("Feb 1", "Mar 1", "ben"), ("Feb 1", "Apr 1", "cy"), ("Apr 1", None, "ben"))
    assert believed(statements, many=True).value_at(at("Feb 15")) == {"ana", "ben", "cy"}


def test_correct_with_replaces_cancels_one_membership_and_sets_the_right_member_at_its_instant() -> None:
    assert every_order([s(ASSERT, "ana", "Jan 1"), s(CORRECT, "ben", "Feb 1", replaces="ana")],
                       many=True) == runs(("Jan 1", None, "ben"))
    # a later re-assert of the wrong member still stands
    assert every_order([s(ASSERT, "ana", "Jan 1"), s(ASSERT, "ana", "Mar 1"),
                        s(CORRECT, "ben", "Feb 1", replaces="ana")], many=True) == runs(
        ("Jan 1", None, "ben"), ("Mar 1", None, "ana"))
    # nothing of the wrong member in force: the right one is set at the correct's own instant
    assert every_order([s(ASSERT, "ana", "Jan 1"), s(RETRACT, "ana", "Feb 1"),
                        s(CORRECT, "ben", "Mar 1", replaces="ana")], many=True) == runs(
        ("Jan 1", "Feb 1", "ana"), ("Mar 1", None, "ben"))


def test_a_chain_of_set_corrections_looks_up_instants_on_the_stated_memberships_only() -> None:
    """ben's membership comes only from the first correction, so the second one finds nothing of
    ben in force on ben's own statements: cy is set at Feb 15; on ben's timeline the derived
    membership from Jan 1 is then the change point in force at Feb 15, and it was never true."""
    statements = [s(ASSERT, "ana", "Jan 1"), s(CORRECT, "ben", "Feb 1", replaces="ana"),
                  s(CORRECT, "cy", "Feb 15", replaces="ben")]
    assert every_order(statements, many=True) == runs(("Feb 15", None, "cy"))


# -- identity and transaction time ---------------------------------------------------------------------


def test_the_same_statement_twice_is_one_and_keeps_its_first_transaction_time() -> None:
    a = s(ASSERT, "A", "Jan 1", episode="e1")
    assert a.key != s(ASSERT, "A", "Jan 1", episode="e2").key
    assert believed([a, a]) == believed([a])
    slot = Slot()
    slot.apply(a, at("Jun 1"))
    slot.apply(s(ASSERT, "B", "Feb 1"), at("Jun 2"))
    slot.apply(a, at("Jun 3"))
    assert slot.runs(known_at=at("Jun 1")) == runs(("Jan 1", None, "A"))
    assert slot.runs(known_at=at("Jun 2")) == slot.runs() == runs(("Jan 1", "Feb 1", "A"), ("Feb 1", None, "B"))
    assert slot.runs(known_at=at("May 31")) == []


# -- candidates ----------------------------------------------------------------------------------------


def test_a_candidate_becomes_a_change_point_at_its_openers_valid_from() -> None:
    slot = Slot(requires=3)
    slot.apply(s(ASSERT, "csv", "Jan 1", episode="e1"), at("Jun 1"))
    slot.apply(s(ASSERT, "csv", "Jan 1", episode="e1"), at("Jun 2"))     # a replay
    slot.apply(s(ASSERT, "csv", "Mar 1", episode="e2"), at("Jun 3"))
    assert slot.runs() == [] and slot.pending() == {"csv": (at("Jan 1"), 2)}
    slot.apply(s(ASSERT, "csv", "May 1", episode="e3"), at("Jun 4"))
    assert slot.runs() == runs(("Jan 1", None, "csv")) and slot.pending() == {}
    assert slot.runs(known_at=at("Jun 3")) == []


def test_a_sensitive_candidate_waits_for_an_allowed_confirmer() -> None:
    slot = Slot(sensitive=True)
    slot.apply(s(ASSERT, "1990-01-02", "Jan 1", episode="e1"), at("Jun 1"))
    slot.apply(s(ASSERT, "1985-05-05", "Feb 1", episode="e2"), at("Jun 1"))
    with pytest.raises(NotAllowed):
        slot.apply(Statement(CONFIRM, None, at("Jun 2"), episode="c1"), at("Jun 2"), allowed=False)
    with pytest.raises(Conflict):
        slot.apply(Statement(CONFIRM, None, at("Jun 2"), episode="c1"), at("Jun 2"))
    with pytest.raises(NotFound):
        slot.apply(Statement(CONFIRM, "2000-12-31", at("Jun 2"), episode="c1"), at("Jun 2"))
    slot.apply(Statement(CONFIRM, "1985-05-05", at("Jun 2"), episode="c1"), at("Jun 2"))
    assert slot.runs() == runs(("Feb 1", None, "1985-05-05"))
    assert slot.pending() == {"1990-01-02": (at("Jan 1"), 1)}


# -- permutation invariance of the oracle --------------------------------------------------------------

DAYS = ["Jan 1", "Jan 2", "Jan 3", "Jan 4"]
one_statements = st.lists(st.builds(
    lambda op, value, start, length, episode, confidence: s(
        op, None if op == RETRACT and value == "-" else value, DAYS[start],
        DAYS[start + length] if length and op != CORRECT and start + length < len(DAYS) else None,
        episode=f"e{episode}", confidence=confidence),
    st.sampled_from([ASSERT, ASSERT, CORRECT, RETRACT]), st.sampled_from(["A", "B", "-"]),
    st.integers(0, 3), st.integers(0, 2), st.integers(0, 1), st.sampled_from([0.5, 0.9]),
).filter(lambda x: x.value is not None or x.op == RETRACT), max_size=8)


@settings(max_examples=200, deadline=None)
@given(statements=one_statements, data=st.data())
def test_the_oracle_is_invariant_under_arrival_order(statements, data) -> None:
    unique = list({x.key: x for x in statements}.values())
    order = data.draw(st.permutations(unique))
    slot = Slot()
    for k, statement in enumerate([*order, *order[: len(order) // 2]]):
        slot.apply(statement, at("Jan 1 2030").replace(second=k))
    assert slot.runs() == believed(unique).runs() == believed(reversed(unique)).runs()


member_statements = st.lists(st.builds(
    lambda op, value, other, start, episode: s(
        op, value, DAYS[start], episode=f"e{episode}", replaces=other if op == CORRECT and other != value else None),
    st.sampled_from([ASSERT, ASSERT, CORRECT, RETRACT]), st.sampled_from(["ana", "ben", "cy"]),
    st.sampled_from(["ana", "ben", "cy"]), st.integers(0, 3), st.integers(0, 1),
), max_size=8)


@settings(max_examples=200, deadline=None)
@given(statements=member_statements, data=st.data())
def test_the_oracle_is_invariant_under_arrival_order_for_sets(statements, data) -> None:
    unique = list({x.key: x for x in statements}.values())
    order = data.draw(st.permutations(unique))
    assert believed(order, many=True).runs() == believed(unique, many=True).runs()

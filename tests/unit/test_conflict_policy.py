"""The conflict policy an attribute declares (docs/temporal-semantics.md, "Conflict policy"): the
schema checks it, reconcile applies it, and the independent oracle agrees in every arrival order.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sgam.graph import Conflict, Fact, MemoryDelta, NotAllowed, NotFound, Schema, SchemaViolation, Status, default_schema, reconcile
from sgam.graph.reconcile import Point, apply_plan
from sgam.graph.schema_diff import diff
from sgam.bench.oracle import ASSERT, CONFIRM, CORRECT, RETRACT, Slot, Statement, believed, held, policy_rank
from sgam.cli.tables import attribute_table

BASE = default_schema()
EPOCH = datetime(2026, 1, 1, tzinfo=timezone.utc)
SOURCES = ("tool:crm", "user:{subject}", "agent:*")
ACTORS = ("tool:crm", "user:mira", "agent:a", "agent:b", "bot:x")
CITIES = ("Lisbon", "Rome", "Porto")
MEMBERS = ("ana", "ben", "cy")


def day(n: float) -> datetime:
    return EPOCH + timedelta(days=n)


def with_policy(**policy: Any) -> Schema:
    """The default schema with ``home_city`` and ``contact`` (a set) under ``policy``."""
    attributes = dict(BASE.attributes)
    for name in ("home_city", "contact"):
        chosen = {k: v for k, v in policy.items() if name == "home_city" or k != "disagreement"}
        attributes[name] = Schema.from_data({**BASE.model_dump(mode="json"), "attributes": {
            name: {**attributes[name].model_dump(mode="json"), **chosen}}}).attributes[name]
    return BASE.model_copy(update={"attributes": attributes})


def _invalid(**options: Any) -> str:
    data = BASE.model_dump(mode="json")
    data["attributes"]["home_city"] = {**data["attributes"]["home_city"], **options}
    with pytest.raises(SchemaViolation) as caught:
        Schema.from_data(data, origin="policy.yaml")
    return str(caught.value)


# -- the schema --------------------------------------------------------------------------------------


def test_latest_wins_is_the_default_and_ranks_nothing() -> None:
    spec = BASE.attribute("home_city")
    assert (spec.conflict, spec.sources, spec.disagreement) == ("latest", (), "believe")
    assert not spec.ranked and not spec.holds_disagreement


@pytest.mark.parametrize(("options", "named"), [
    ({"conflict": "newest"}, r"home_city\.conflict: Input should be 'latest', 'confidence' or 'source_priority'"),
    ({"conflict": "source_priority"}, r"home_city: .*source_priority needs 'sources'"),
    ({"sources": ["tool:crm"]}, r"home_city: .*'sources' only apply to conflict: source_priority"),
    ({"conflict": "source_priority", "sources": ["tool:*crm"]}, r"source 'tool:\*crm' is not valid"),
    ({"conflict": "source_priority", "sources": ["agent:*", "agent:*"]}, r"name a pattern twice"),
    ({"disagreement": "hold"}, r"home_city\.disagreement: Input should be 'believe' or 'candidate'"),
    ({"disagreement": "candidate", "cardinality": "many"}, r"home_city: .*single-valued attributes"),
    ({"disagreement": "candidate", "sensitive": True}, r"home_city: .*implied by requires/sensitive"),
])
def test_a_bad_policy_is_refused_naming_the_attribute_and_what_is_allowed(options: dict, named: str) -> None:
    message = _invalid(**options)
    assert message.startswith("policy.yaml is not a valid SGAM schema")
    assert __import__("re").search(named, message), message


def test_source_priority_ranks_the_first_matching_pattern_highest() -> None:
    spec = with_policy(conflict="source_priority", sources=list(SOURCES)).attribute("home_city")
    ranks = [spec.rank(actor, 0.5, "mira") for actor in ("tool:crm", "user:mira", "agent:a", "user:ada", None)]
    assert ranks == [0.0, -1.0, -2.0, -3.0, -3.0]
    assert with_policy(conflict="confidence").attribute("home_city").rank("agent:a", 0.9, "mira") == 0.9


def test_the_attribute_table_and_schema_diff_show_a_policy() -> None:
    new = with_policy(conflict="source_priority", sources=list(SOURCES), disagreement="candidate")
    table = attribute_table(new)
    assert "`home_city` (string, sources tool:crm > user:{subject} > agent:*, disagreement held as candidate)" in table
    assert "`contact` (string, many, sources tool:crm > user:{subject} > agent:*)" in table
    assert "highest confidence wins" in attribute_table(with_policy(conflict="confidence"))
    assert "wins" not in attribute_table(BASE) and "sources" not in attribute_table(BASE)
    changes = {c.element: c for c in diff(BASE, new)}
    conflict = changes["attribute home_city.conflict"]
    assert not conflict.breaking
    assert conflict.detail.startswith("'latest' -> 'source_priority'; changes believed history")
    assert "derived again under the new policy" in changes["attribute home_city.disagreement"].detail


# -- the oracle, from the written rule ---------------------------------------------------------------


def _say(op: str, value: Any, start: float, by: str = "agent:a", confidence: float = 1.0,
         until: float | None = None, episode: str = "e") -> Statement:
    return Statement(op, value, day(start), day(until) if until is not None else None, episode,
                     confidence, asserted_by=by)


def test_oracle_a_higher_confidence_value_holds_against_later_lower_ones() -> None:
    rank = policy_rank("confidence")
    said = [_say(ASSERT, "Lisbon", 0, confidence=0.9), _say(ASSERT, "Rome", 2, confidence=0.4),
            _say(RETRACT, None, 3, confidence=0.4), _say(CORRECT, "Porto", 4, confidence=0.6)]
    assert believed(said, rank=rank).runs() == [(day(0), None, "Lisbon")]
    assert believed(said).runs() == [(day(0), day(2), "Lisbon"), (day(2), day(3), "Rome"),
                                     (day(4), None, "Porto")]
    higher = [*said, _say(ASSERT, "Rome", 5, confidence=0.9)]  # an equal rank: latest wins
    assert believed(higher, rank=rank).runs() == [(day(0), day(5), "Lisbon"), (day(5), None, "Rome")]


def test_oracle_source_priority_intervals_and_sets() -> None:
    rank = policy_rank("source_priority", SOURCES, "mira")
    said = [_say(ASSERT, "Lisbon", 0, by="tool:crm"), _say(ASSERT, "Rome", 1, by="agent:a", until=3),
            _say(ASSERT, "Porto", 2, by="user:mira")]
    assert believed(said, rank=rank).runs() == [(day(0), None, "Lisbon")]
    # where nothing holds, a lower source applies; its interval keeps the parts a higher one holds
    gap = [_say(RETRACT, None, 1, by="tool:crm"), _say(ASSERT, "Lisbon", 2, by="tool:crm"),
           _say(ASSERT, "Rome", 0, by="agent:a", until=3)]
    assert believed(gap, rank=rank).runs() == [(day(0), day(2), "Rome"), (day(2), None, "Lisbon")]
    members = [_say(ASSERT, "ana", 0, by="tool:crm"), _say(RETRACT, "ana", 1, by="agent:a"),
               Statement(CORRECT, "ben", day(2), replaces="ana", asserted_by="agent:b")]
    assert believed(members, many=True, rank=rank).runs() == [(day(0), None, "ana")]


# -- reconcile against the oracle --------------------------------------------------------------------


@st.composite
def statements(draw: Any, many: bool) -> list[Statement]:
    said: dict[tuple, Statement] = {}
    for _ in range(draw(st.integers(1, 9))):
        op = draw(st.sampled_from([ASSERT, ASSERT, ASSERT, CORRECT, RETRACT, RETRACT]))
        value = draw(st.sampled_from(MEMBERS if many else CITIES))
        if op == RETRACT and not many and draw(st.booleans()):
            value = None
        start = draw(st.integers(0, 4))
        until = draw(st.integers(start + 1, 6)) if op != CORRECT and draw(st.integers(0, 3)) == 0 else None
        replaces = draw(st.sampled_from([m for m in MEMBERS if m != value])) if op == CORRECT and many else None
        s = Statement(op, value, day(start), day(until) if until else None, draw(st.sampled_from(["e0", "e1"])),
                      draw(st.sampled_from([0.4, 0.6, 0.9])), replaces, draw(st.sampled_from(ACTORS)))
        said.setdefault(s.key, s)
    return list(said.values())


def _delta(s: Statement, attribute: str) -> MemoryDelta:
    return MemoryDelta(tenant_id="t1", subject="mira", attribute=attribute, value=s.value,
                       valid_from=s.valid_from, valid_to=s.valid_to, source_episode_id=s.episode, op=s.op,
                       asserted_by=s.asserted_by, confidence=s.confidence, replaces=s.replaces)


def _write(schema: Schema, attribute: str, arrival: list[Statement], oracle: Slot | None = None,
           rows: list[Fact] | None = None, points: list[Point] | None = None,
           ) -> tuple[list[Fact], list[Point]]:
    rows, points = list(rows or []), list(points or [])
    for step, s in enumerate(arrival):
        now = day(100 + step)
        refused = None
        if oracle is not None:
            try:
                oracle.apply(s, now)
            except (Conflict, NotFound, NotAllowed) as exc:
                refused = type(exc)
        if refused is not None:
            with pytest.raises(refused):
                reconcile(rows, _delta(s, attribute), schema, now, statements=points)
            continue
        plan = reconcile(rows, _delta(s, attribute), schema, now, statements=points)
        rows, points = apply_plan(rows, plan), [*points, *plan.statements]
    return rows, points


def _runs(rows: list[Fact], status: Status = Status.CONFIRMED) -> list[tuple]:
    return sorted(((r.valid_from, r.valid_to, r.value) for r in rows
                   if r.expired_at is None and r.status is status), key=lambda run: (run[0], str(run[2])))


POLICIES = {"confidence": {"conflict": "confidence"},
            "source_priority": {"conflict": "source_priority", "sources": list(SOURCES)}}


@settings(max_examples=150, deadline=None)
@given(policy=st.sampled_from(sorted(POLICIES)), many=st.booleans(), data=st.data())
def test_reconcile_matches_the_oracle_in_every_arrival_order(policy: str, many: bool, data: Any) -> None:
    schema = with_policy(**POLICIES[policy])
    attribute = "contact" if many else "home_city"
    said = data.draw(statements(many))
    rank = policy_rank(policy, SOURCES, "mira")
    expected = believed(said, many=many, rank=rank).runs()
    for _ in range(2):
        arrival = data.draw(st.permutations(said))
        rows, _ = _write(schema, attribute, arrival)
        assert _runs(rows) == sorted(expected, key=lambda run: (run[0], str(run[2]))), arrival


@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_held_disagreements_match_the_oracle(data: Any) -> None:
    schema = with_policy(conflict="source_priority", sources=list(SOURCES), disagreement="candidate")
    said = data.draw(statements(False))
    confirms = data.draw(st.lists(st.sampled_from([*CITIES, None]), max_size=3))
    arrival = data.draw(st.permutations([*said, *(Statement(CONFIRM, value, day(9), episode=f"c{i}",
                                                            asserted_by="user:mira")
                                               for i, value in enumerate(confirms))]))
    oracle = Slot(rank=policy_rank("source_priority", SOURCES, "mira"), hold=True)
    rows, _ = _write(schema, "home_city", arrival, oracle)
    assert _runs(rows) == sorted(oracle.runs(), key=lambda run: (run[0], str(run[2])))
    assert {r.value for r in rows if r.expired_at is None and r.status is Status.CANDIDATE} == set(oracle.pending())


HOLDING = {"latest": {"disagreement": "candidate"},
           "source_priority": {"conflict": "source_priority", "sources": list(SOURCES), "disagreement": "candidate"}}


def _pending(rows: list[Fact]) -> dict[Any, tuple]:
    return {r.value: (r.valid_from, r.valid_to, set(r.support_episodes)) for r in rows
            if r.expired_at is None and r.status is Status.CANDIDATE}


@st.composite
def with_confirms(draw: Any) -> list[Statement]:
    """Single-valued statements and confirms naming a value (a confirm without one is resolved on
    arrival, so it is not part of a set)."""
    values = draw(st.lists(st.sampled_from(CITIES), max_size=2, unique=True))
    return [*draw(statements(False)), *(Statement(CONFIRM, v, day(9), episode=f"c{i}", asserted_by="user:mira")
                                        for i, v in enumerate(values))]


@settings(max_examples=200, deadline=None)
@given(policy=st.sampled_from(sorted(HOLDING)), said=with_confirms(), data=st.data())
def test_held_disagreements_do_not_depend_on_arrival_order(policy: str, said: list[Statement], data: Any) -> None:
    schema = with_policy(**HOLDING[policy])
    timeline, pending = held(said, rank=policy_rank(policy, SOURCES, "mira"))
    expected = sorted(timeline.runs(), key=lambda run: (run[0], str(run[2])))
    candidates = {v: (first.valid_from, first.valid_to, {s.episode for s in group})
                  for v, (first, group) in pending.items()}
    for _ in range(3):
        arrival = data.draw(st.permutations(said))
        rows, points = _write(schema, "home_city", arrival)
        assert _runs(rows) == expected, arrival
        assert _pending(rows) == candidates, arrival
        # the ledger holds every statement, confirms included, whether held or not
        assert len(points) == len(said)


def test_held_disagreement_examples_from_the_rule() -> None:
    schema = with_policy(**HOLDING["latest"])
    lisbon, rome = _say(ASSERT, "Lisbon", 0, by="user:mira"), _say(ASSERT, "Rome", 2, by="agent:a", episode="e1")
    confirm = Statement(CONFIRM, "Rome", day(9), episode="c0", asserted_by="user:mira")
    # a confirm that arrives first promotes the statement when it comes
    for arrival in ([lisbon, rome, confirm], [confirm, rome, lisbon], [rome, confirm, lisbon]):
        rows, _ = _write(schema, "home_city", arrival)
        assert _runs(rows) == [(day(0), day(2), "Lisbon"), (day(2), None, "Rome")]
        assert _pending(rows) == {}
        if arrival[-1] is confirm:  # the promoted row names its confirmer
            assert [r.confirmed_by for r in rows if r.expired_at is None and r.value == "Rome"] == ["user:mira"]
    # arriving before the value it disagrees with, the agent's statement is held all the same
    rows, _ = _write(schema, "home_city", [rome, lisbon])
    assert _runs(rows) == [(day(0), None, "Lisbon")]
    assert _pending(rows) == {"Rome": (day(2), None, {"e1"})}
    # a retract of Rome at or after it withdraws it; before it, it does not
    later = _say(RETRACT, "Rome", 3, by="user:mira", episode="e2")
    earlier = _say(RETRACT, "Rome", 1, by="user:mira", episode="e2")
    assert _pending(_write(schema, "home_city", [rome, later, lisbon])[0]) == {}
    assert set(_pending(_write(schema, "home_city", [earlier, rome, lisbon])[0])) == {"Rome"}
    # the source of the value in force changes its own mind directly; a confirm without value names
    # the one candidate pending, and is refused when none is
    rows, points = _write(schema, "home_city", [lisbon, _say(ASSERT, "Porto", 1, by="user:mira", episode="e1"), rome])
    assert _runs(rows) == [(day(0), day(1), "Lisbon"), (day(1), None, "Porto")]
    plan = reconcile(rows, _delta(Statement(CONFIRM, None, day(9), episode="c0", asserted_by="user:mira"),
                                  "home_city"), schema, day(200), statements=points)
    assert plan.outcome == "promoted" and plan.statements[-1].value == "Rome"
    with pytest.raises(NotFound):
        reconcile(apply_plan(rows, plan), _delta(Statement(CONFIRM, None, day(9), episode="c1",
                                                           asserted_by="user:mira"), "home_city"),
                  schema, day(201), statements=[*points, *plan.statements])


def test_a_rebuilt_ledger_keeps_a_held_candidate() -> None:
    schema = with_policy(**HOLDING["latest"])
    rows, _ = _write(schema, "home_city", [_say(ASSERT, "Lisbon", 0, by="user:mira"),
                                           _say(ASSERT, "Rome", 2, by="agent:a", episode="e1")])
    # no ledger (as after a deletion): the candidate row stands for its statement
    plan = reconcile(rows, _delta(_say(ASSERT, "Faro", 4, by="user:mira", episode="e2"), "home_city"),
                     schema, day(200), statements=None)
    rows = apply_plan(rows, plan)
    assert _runs(rows) == [(day(0), day(4), "Lisbon"), (day(4), None, "Faro")]
    assert set(_pending(rows)) == {"Rome"}


def test_a_policy_change_derives_the_slot_again_on_its_next_write() -> None:
    said = [_say(ASSERT, "Lisbon", 0, confidence=0.9, episode="e0"),
            _say(ASSERT, "Rome", 2, confidence=0.4, episode="e1")]
    rows, points = _write(BASE, "home_city", said)
    assert _runs(rows) == [(day(0), day(2), "Lisbon"), (day(2), None, "Rome")]
    ranked = with_policy(conflict="confidence")
    later = [_say(ASSERT, "Porto", 5, confidence=0.4, episode="e2")]
    rows, _ = _write(ranked, "home_city", later, rows=rows, points=points)
    assert _runs(rows) == [(day(0), None, "Lisbon")]


def test_the_readme_policy_example_loads_and_schema_show_lists_it(tmp_path: Any) -> None:
    import yaml
    from typer.testing import CliRunner

    from sgam.cli import app

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    block = readme.split("### Conflict policy")[1].split("```yaml\n")[1].split("```")[0]
    data = BASE.model_dump(mode="json")
    data["attributes"].update(yaml.safe_load(block))
    path = tmp_path / "policy.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    shown = CliRunner().invoke(app, ["schema", "show", str(path)], env={"COLUMNS": "200"})
    assert shown.exit_code == 0, shown.output
    assert ("conflict policy of home_city: sources tool:crm > user:{subject} > agent:*, "
            "disagreement held as candidate") in shown.output
    assert "conflict policy of email" not in shown.output

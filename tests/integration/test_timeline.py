"""`sgam timeline` and MemoryGraph.timeline: the drawn bars are exactly the stored rows, and no
label covers another (a set's members believed at once get lanes)."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path

import matplotlib.dates as mdates
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from sgam import MemoryGraph
from sgam.cli import app
from sgam.graph.models import Episode, Fact, MemoryDelta

from .demo_data import replay_demo

runner = CliRunner()
EPS = 1e-6  # matplotlib date numbers are days: a microsecond is ~1e-11


def strips(fig) -> dict[str, tuple[str, list]]:
    """memory_id -> (attribute panel, its Rectangles) for every row drawn in the figure."""
    drawn: dict[str, tuple[str, list]] = {}
    for ax in fig.axes:
        for patch in ax.patches:
            if patch.get_gid():
                drawn.setdefault(patch.get_gid(), (ax.get_title(loc="left"), []))[1].append(patch)
    return drawn


def bars(fig) -> dict[str, tuple[str, object]]:
    """memory_id -> (attribute panel, Rectangle) where every row is one bar (no lanes)."""
    drawn = strips(fig)
    assert all(len(patches) == 1 for _, patches in drawn.values()), "a row was split into lanes"
    return {gid: (panel, patches[0]) for gid, (panel, patches) in drawn.items()}


def believed_at(fact: Fact, instant: datetime) -> bool:
    """The specification of a belief step: recorded at or before it and not yet retired."""
    return fact.recorded_at <= instant and (fact.expired_at is None or fact.expired_at > instant)


def assert_picture_is_history(fig, history: list[Fact]) -> None:
    """Every strip spans its row's valid window; between two ticks (belief steps, one per
    transaction instant, oldest lowest) exactly the rows believed at the lower one are drawn,
    plus the rows recorded and retired at once at the upper one (in the half step below it);
    strips that share valid time never share height."""
    drawn = strips(fig)
    assert set(drawn) == {f.memory_id for f in history}
    right = fig.axes[-1].get_xlim()[1]
    for ax in fig.axes:
        attribute = ax.get_title(loc="left")
        rows = [f for f in history if f.attribute == attribute]
        instants = sorted({t for f in rows for t in (f.recorded_at, f.expired_at) if t is not None})
        ticks = list(ax.get_yticks())
        assert [label.get_text()[:23] for label in ax.get_yticklabels()] == [
            f"{t:%Y-%m-%d %H:%M:%S}.{t.microsecond // 1000:03d}" for t in instants]
        assert ticks == sorted(ticks) and ticks[0] >= 0
        mine = [(f, patch) for f in rows for patch in drawn[f.memory_id][1]]
        for fact, patch in mine:
            assert drawn[fact.memory_id][0] == attribute
            assert patch.get_x() == pytest.approx(mdates.date2num(fact.valid_from), abs=EPS)
            end = right if fact.valid_to is None else mdates.date2num(fact.valid_to)
            assert patch.get_x() + patch.get_width() == pytest.approx(end, abs=EPS)
        edges = [0.0, *ticks, ax.get_ylim()[1]]
        lower = [None, *instants]  # below the first tick only rows recorded and retired at once
        for low, high, instant, upper in zip(edges, edges[1:], lower, [*instants, None]):
            shown = {f.memory_id for f, patch in mine
                     if patch.get_y() < high - EPS and patch.get_y() + patch.get_height() > low + EPS}
            expected = {f.memory_id for f in rows if (instant is not None and believed_at(f, instant))
                        or f.recorded_at == f.expired_at == upper}
            assert shown == expected, f"{attribute} between y={low} and y={high}"
        for i, (a, pa) in enumerate(mine):
            for b, pb in mine[i + 1:]:
                share_x = (pa.get_x() < pb.get_x() + pb.get_width() - EPS
                           and pb.get_x() < pa.get_x() + pa.get_width() - EPS)
                share_y = (pa.get_y() < pb.get_y() + pb.get_height() - EPS
                           and pb.get_y() < pa.get_y() + pa.get_height() - EPS)
                assert not (share_x and share_y), f"{a.value!r} and {b.value!r} drawn over each other"


def assert_labels_apart(fig) -> list:
    """No two labels' boxes overlap once drawn (the figure's own renderer); returns the labels."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    texts = [text for ax in fig.axes for text in ax.texts]
    boxes = [text.get_window_extent(renderer) for text in texts]
    for i, (a, box) in enumerate(zip(texts, boxes)):
        for b, other in zip(texts[i + 1:], boxes[i + 1:]):
            assert not box.overlaps(other), f"labels {a.get_text()!r} and {b.get_text()!r} overlap"
    return texts


@pytest.fixture
def mira(graph: MemoryGraph, tenant: str) -> str:
    replay_demo(graph, tenant)
    now = graph.clock()
    graph.record_episode(tenant_id=tenant, id="e9", content="From next quarter: detailed answers; "
                         "and I often want CSV.", actor="user:mira", occurred_at=now)
    # a scheduled version (valid from a future instant) and a pending candidate (needs 3 episodes)
    graph.write(tenant_id=tenant, subject="mira", attribute="response_style", value="detailed",
                valid_from=now + timedelta(days=60), source_episode_id="e9")
    graph.write(tenant_id=tenant, subject="mira", attribute="export_format", value="csv",
                valid_from=now, source_episode_id="e9")
    return tenant


def test_every_bar_is_a_history_row_over_its_valid_window(graph: MemoryGraph, mira: str) -> None:
    history = graph.history(mira, "mira")
    fig = graph.timeline(mira, "mira")
    assert len(bars(fig)) == len(history)  # single-valued: one bar per row, as before lanes
    assert_picture_is_history(fig, history)
    assert_labels_apart(fig)


def span(bar) -> tuple[float, float]:
    return bar.get_y(), bar.get_y() + bar.get_height()


def by_value(history: list[Fact], attribute: str, value: str, *, believed: bool) -> Fact:
    [fact] = [f for f in history if f.attribute == attribute and str(f.value) == value
              and (f.expired_at is None) == believed]
    return fact


def test_a_correction_retires_the_old_bar_where_the_new_one_starts(graph: MemoryGraph, mira: str) -> None:
    history = graph.history(mira, "mira")
    drawn = bars(graph.timeline(mira, "mira", "home_city"))
    lisbon = drawn[by_value(history, "home_city", "Lisbon", believed=False).memory_id][1]
    porto = drawn[by_value(history, "home_city", "Porto", believed=True).memory_id][1]
    assert set(drawn) == {lisbon.get_gid(), porto.get_gid()}  # only the attribute asked for
    # the same valid window, stacked in belief: Lisbon below, ending where Porto (e4) begins
    assert lisbon.get_x() == pytest.approx(porto.get_x())
    assert span(lisbon)[1] < span(porto)[0] and span(porto)[0] - span(lisbon)[1] < 0.2
    assert lisbon.get_hatch() == "xx" and not porto.get_hatch()


def test_scheduled_and_candidate_versions_are_drawn_apart(graph: MemoryGraph, mira: str) -> None:
    history = graph.history(mira, "mira")
    drawn = bars(graph.timeline(mira, "mira"))
    scheduled = drawn[by_value(history, "response_style", "detailed", believed=True).memory_id][1]
    candidate = drawn[by_value(history, "export_format", "csv", believed=True).memory_id][1]
    concise = drawn[by_value(history, "response_style", "concise", believed=True).memory_id][1]
    assert scheduled.get_hatch() == "//" and candidate.get_linestyle() == "--"
    assert len({tuple(b.get_facecolor()) for b in (scheduled, candidate, concise)}) == 3


def test_each_bar_is_labelled_with_its_value_and_episode(graph: MemoryGraph, mira: str) -> None:
    fig = graph.timeline(mira, "mira", "passport_deadline")
    labels = {text.get_text() for text in fig.axes[0].texts}
    assert {"2026-07-15\ne1", "2026-06-30 →\ne2"} <= labels
    # e1 and e2 came in one replay batch: e1's open-ended version, cut short by e2 in that batch, was
    # never believed and is not stored (docs/temporal-semantics.md, "Transaction time")
    assert "2026-07-15 →\ne1" not in labels


def test_the_command_writes_png_and_svg(env, mira: str, tmp_path: Path) -> None:
    for name in ("mira.png", "mira.svg"):
        result = runner.invoke(app, ["timeline", "-t", mira, "-s", "mira", "--out", str(tmp_path / name)])
        assert result.exit_code == 0, result.output
        assert "stored versions of 'mira'" in result.stdout
    assert (tmp_path / "mira.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "<svg" in (tmp_path / "mira.svg").read_text(encoding="utf-8")[:500]
    wrong = runner.invoke(app, ["timeline", "-t", mira, "-s", "mira", "--out", str(tmp_path / "m.gif")])
    assert wrong.exit_code == 1 and ".png or .svg" in wrong.output
    nobody = runner.invoke(app, ["timeline", "-t", mira, "-s", "nobody", "--out", str(tmp_path / "n.png")])
    assert nobody.exit_code == 4 and "no subject 'nobody'" in nobody.output  # exit 4: unknown subject
    assert not (tmp_path / "n.png").exists()


DAY0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


def contacts(graph: MemoryGraph, tenant: str, writes: list[list[tuple]], *,
             atomic: bool = False) -> list[Fact]:
    """Mira's set attribute `contact` after ``writes`` (each one batch of (op, member, valid_from
    day[, days it holds]) from its own episode e1, e2, ...; unless atomic, rejected deltas are
    skipped); returns her history."""
    graph.record_episodes([Episode(tenant_id=tenant, id=f"e{i + 1}", content=f"contacts {i + 1}",
                                   occurred_at=DAY0, actor="user:mira") for i in range(len(writes))])
    for i, write in enumerate(writes):
        graph.write_many([MemoryDelta(tenant_id=tenant, subject="mira", subject_type="Person",
                                      attribute="contact", value=member, op=op, source_episode_id=f"e{i + 1}",
                                      valid_from=DAY0 + timedelta(days=day),
                                      valid_to=DAY0 + timedelta(days=day + days[0]) if days else None)
                          for op, member, day, *days in write], atomic=atomic)
    return graph.history(tenant, "mira")


def test_a_sets_members_believed_at_once_get_lanes_and_labels_apart(graph: MemoryGraph, tenant: str) -> None:
    # the reviewer's case: four members in one write, two retracted later, two more added
    history = contacts(graph, tenant, [[("assert", m, 10) for m in ("Ana", "Bruno", "Carla", "Duarte")],
                                       [("retract", m, 60) for m in ("Ana", "Bruno")],
                                       [("assert", m, 90) for m in ("Eva", "Filipe")]], atomic=True)
    fig = graph.timeline(tenant, "mira")
    assert_picture_is_history(fig, history)
    texts = assert_labels_apart(fig)
    assert {f.memory_id for f in history} <= {t.get_gid() for t in texts}  # every row labelled
    for text in texts:
        [fact] = [f for f in history if f.memory_id == text.get_gid()]
        assert text.get_text().startswith(str(fact.value))
    # Carla keeps her place among the members at each of the three steps: the same height above
    # the step's tick (the draft put one strip in the middle of her whole span instead)
    ticks = list(fig.axes[0].get_yticks())
    carla = strips(fig)[by_value(history, "contact", "Carla", believed=True).memory_id][1]
    assert len(carla) == 3
    assert {round(p.get_y() - max(t for t in ticks if t <= p.get_y()), 6) for p in carla} == {2.06}


def test_narrow_members_side_by_side_keep_their_labels_apart(graph: MemoryGraph, tenant: str) -> None:
    # one-day windows ten days apart: each label is wider than the gap between them
    history = contacts(graph, tenant, [[("assert", "Ana", 10, 1), ("assert", "Bruno", 20, 1),
                                        ("assert", "Carla", 30, 1), ("assert", "Duarte", 0)]], atomic=True)
    fig = graph.timeline(tenant, "mira")
    assert_picture_is_history(fig, history)
    texts = assert_labels_apart(fig)
    assert sorted(t.get_text().split("\n")[0] for t in texts) == ["Ana", "Bruno", "Carla", "Duarte →"]


MEMBERS = ("Ana", "Bruno", "Carla", "Duarte", "Eva")
OP, MEMBER, DAY = (st.sampled_from(("assert", "assert", "retract")), st.sampled_from(MEMBERS),
                   st.integers(0, 36).map(lambda n: n * 10))
# open and closed windows, some short: members side by side in a lane, labels wider than bars
WRITE = st.lists(st.tuples(OP, MEMBER, DAY) | st.tuples(OP, MEMBER, DAY, st.integers(1, 40)),
                 min_size=1, max_size=4)


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(writes=st.lists(WRITE, min_size=1, max_size=4))
def test_generated_set_histories_are_drawn_as_they_are_stored(graph: MemoryGraph, writes) -> None:
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    history = contacts(graph, tenant, writes)
    if not history:  # every write was rejected (retracts of members never asserted)
        return
    fig = graph.timeline(tenant, "mira")
    assert_picture_is_history(fig, history)
    assert_labels_apart(fig)

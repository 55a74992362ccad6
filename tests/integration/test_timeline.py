"""`sgam timeline` and MemoryGraph.timeline: the drawn bars are exactly the stored rows."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import matplotlib.dates as mdates
import pytest
from typer.testing import CliRunner

from sgam import MemoryGraph
from sgam.cli import app
from sgam.graph.models import Fact

from .demo_data import replay_demo

runner = CliRunner()
EPS = 1e-6  # matplotlib date numbers are days: a microsecond is ~1e-11


def bars(fig) -> dict[str, tuple[str, object]]:
    """memory_id -> (attribute panel, Rectangle) for every bar of the figure."""
    return {patch.get_gid(): (ax.get_title(loc="left"), patch)
            for ax in fig.axes for patch in ax.patches if patch.get_gid()}


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
    drawn = bars(fig)
    assert set(drawn) == {f.memory_id for f in history}
    right = fig.axes[-1].get_xlim()[1]
    for fact in history:
        panel, bar = drawn[fact.memory_id]
        assert panel == fact.attribute
        assert bar.get_x() == pytest.approx(mdates.date2num(fact.valid_from), abs=EPS)
        end = right if fact.valid_to is None else mdates.date2num(fact.valid_to)
        assert bar.get_x() + bar.get_width() == pytest.approx(end, abs=EPS)


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
    assert {"2026-07-15\ne1", "2026-06-30 →\ne2", "2026-07-15 →\ne1"} <= labels


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

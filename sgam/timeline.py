"""A subject's bitemporal history as a picture (``sgam timeline``, :meth:`MemoryGraph.timeline`).

One panel per attribute. The x axis is valid time (when a value held in the world); the y axis is
what the store believed, in steps of transaction time: every instant at which a row was recorded
or retired is one step, oldest at the bottom. Each stored row (``history()``) is one bar: as wide
as its valid window, as tall as the steps during which it was believed. A correction therefore
shows as the old bar ending at the step where it was corrected and the new one starting there.
Steps are ranks, not durations, because corrections often arrive seconds apart; their instants
are the tick labels. Rendering uses matplotlib's Agg canvas (no display needed).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from sgam.graph.errors import SgamError
from sgam.graph.models import Fact, Status

INSTALL_HINT = "pip install 'sgam[timeline]' (matplotlib)"
FORMATS = ("png", "svg")
# How each kind of row is drawn: fill, edge, hatch, line style. The kinds are exclusive, in order.
STYLES: dict[str, dict[str, Any]] = {
    "retired": {"facecolor": "#d9d9d9", "edgecolor": "#7f7f7f", "hatch": "xx", "linestyle": "-"},
    "candidate": {"facecolor": "white", "edgecolor": "#9467bd", "hatch": "", "linestyle": "--"},
    "scheduled": {"facecolor": "#ffbb78", "edgecolor": "#d62728", "hatch": "//", "linestyle": "-"},
    "past": {"facecolor": "#aec7e8", "edgecolor": "#1f77b4", "hatch": "", "linestyle": "-"},
    "current": {"facecolor": "#1f77b4", "edgecolor": "#0b3c61", "hatch": "", "linestyle": "-"},
}
LABELS = {"retired": "retired (no longer believed)", "candidate": "candidate (pending)",
          "scheduled": "scheduled (valid from a future time)", "past": "past (believed, ended)",
          "current": "current (believed, valid now)"}


class TimelineUnavailable(SgamError):
    """The timeline picture was asked for, but matplotlib is not installed or the format is unknown."""


def kind(fact: Fact, now: datetime) -> str:
    """How a row is drawn: retired, candidate, scheduled, past or current (in that precedence)."""
    if fact.expired_at is not None:
        return "retired"
    if fact.status is Status.CANDIDATE:
        return "candidate"
    if fact.valid_from > now:
        return "scheduled"
    if fact.valid_to is not None and fact.valid_to <= now:
        return "past"
    return "current"


# Rows recorded and retired at the same instant (one transaction wrote and replaced them) were
# never believed for any time; they get this much of a step, just below it, so they stay visible.
INSTANT_ROW = 0.5


def belief_steps(rows: Sequence[Fact]) -> tuple[dict[datetime, float], float]:
    """The y position of every transaction instant of ``rows`` (oldest lowest) and the top."""
    instants = sorted({t for f in rows for t in (f.recorded_at, f.expired_at) if t is not None})
    at_once = {f.recorded_at for f in rows if f.expired_at == f.recorded_at}
    steps: dict[datetime, float] = {}
    y = 0.0
    for i, t in enumerate(instants):
        y += (INSTANT_ROW if t in at_once else 0.0) + (1.0 if i else 0.0)
        steps[t] = y
    return steps, y + 1.0


def believed_span(fact: Fact, steps: dict[datetime, float], top: float) -> tuple[float, float]:
    """The y extent of a row: from the step it was recorded at to the one it was retired at."""
    y0 = steps[fact.recorded_at]
    if fact.expired_at is None:
        return y0, top
    if fact.expired_at == fact.recorded_at:
        return y0 - INSTANT_ROW, y0
    return y0, steps[fact.expired_at]


def value_text(value: Any) -> str:
    return value.isoformat() if hasattr(value, "isoformat") else str(value)


def figure(facts: Sequence[Fact], subject: str, *, now: datetime) -> Any:
    """The picture of ``facts`` (a subject's ``history()`` rows) as a matplotlib ``Figure``.

    Each bar is a ``Rectangle`` whose gid is the row's memory_id; an open valid end reaches the
    right edge of the axes, an open known end the top step.
    """
    try:
        import matplotlib.dates as mdates
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
        from matplotlib.patches import Patch, Rectangle
    except ImportError:
        raise TimelineUnavailable(f"the timeline needs matplotlib: {INSTALL_HINT}") from None

    by_attribute: dict[str, list[Fact]] = defaultdict(list)
    for fact in facts:
        by_attribute[fact.attribute].append(fact)
    attributes = sorted(by_attribute) or ["(no facts)"]
    instants = [t for f in facts for t in (f.valid_from, f.valid_to) if t is not None] + [now]
    span = max(max(instants) - min(instants), timedelta(days=30))
    left, right = min(instants) - span * 0.05, max(instants) + span * 0.15

    fig = Figure(figsize=(11, 1.2 + 1.9 * len(attributes)), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(len(attributes), 1, sharex=True, squeeze=False)[:, 0]
    for ax, attribute in zip(axes, attributes):
        rows = sorted(by_attribute.get(attribute, []), key=lambda f: (f.recorded_at, f.valid_from))
        steps, top = belief_steps(rows)
        for fact in rows:
            style = STYLES[kind(fact, now)]
            x0 = mdates.date2num(fact.valid_from)
            x1 = mdates.date2num(fact.valid_to if fact.valid_to is not None else right)
            y0, y1 = believed_span(fact, steps, top)
            bar = Rectangle((x0, y0 + 0.06), x1 - x0, y1 - y0 - 0.12, linewidth=1.2, **style)
            bar.set_gid(fact.memory_id)
            ax.add_patch(bar)
            open_end = "" if fact.valid_to is not None else " →"
            ax.text(x0 + (x1 - x0) / 2, (y0 + y1) / 2,
                    f"{value_text(fact.value)}{open_end}\n{fact.source_episode_id}",
                    ha="center", va="center", fontsize=8, clip_on=True,
                    color="white" if kind(fact, now) == "current" else "black")
        ax.axvline(mdates.date2num(now), color="#d62728", linestyle=":", linewidth=1)
        ax.set_ylim(0, max(top, 1))
        # A step's label: when it happened (UTC) and the episodes whose rows were recorded then.
        said = defaultdict(set)
        for fact in rows:
            said[fact.recorded_at].add(fact.source_episode_id)
        ax.set_yticks(list(steps.values()))
        ax.set_yticklabels([f"{t:%Y-%m-%d %H:%M:%S}.{t.microsecond // 1000:03d}"
                            + (f" ({', '.join(sorted(said[t]))})" if said[t] else "") for t in steps],
                           fontsize=7, va="bottom")
        ax.set_title(attribute, loc="left", fontsize=10, fontweight="bold")
        ax.set_ylabel("known since ↑\n(transaction time)", fontsize=8)
    locator = mdates.AutoDateLocator()
    axes[-1].xaxis.set_major_locator(locator)
    axes[-1].xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator))
    axes[-1].set_xlim(mdates.date2num(left), mdates.date2num(right))
    axes[-1].set_xlabel(f"valid time (UTC); dotted line: now, {now:%Y-%m-%d %H:%M}")
    fig.suptitle(f"{subject}: each version over valid time, layered by when the store believed it",
                 fontsize=11)
    fig.legend(handles=[Patch(label=LABELS[k], **STYLES[k]) for k in STYLES], loc="outside lower center",
               ncols=3, fontsize=8, frameon=False)
    return fig


def save(fig: Any, path: Path) -> None:
    """Write the picture as PNG or SVG, by the file's suffix."""
    fmt = path.suffix.lower().lstrip(".")
    if fmt not in FORMATS:
        raise TimelineUnavailable(f"{path}: the timeline is written as .png or .svg, "
                                  f"not {path.suffix or 'no suffix'!r}")
    fig.savefig(path, format=fmt, dpi=110)

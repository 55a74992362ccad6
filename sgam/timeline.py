"""A subject's bitemporal history as a picture (``sgam timeline``, :meth:`MemoryGraph.timeline`).

One panel per attribute. The x axis is valid time (when a value held in the world); the y axis is
what the store believed, in steps of transaction time: every instant at which a row was recorded
or retired is one step, oldest at the bottom. Each stored row (``history()``) is one bar: as wide
as its valid window, as tall as the steps during which it was believed. A correction therefore
shows as the old bar ending at the step where it was corrected and the new one starting there.
Rows believed at the same step over overlapping valid time (a set's members, a pending candidate
beside the value it would replace), or narrow ones whose labels would collide, get lanes: that
step's band is as many strips tall as it needs, one per row, each member keeping its lane from the
step below when it can, so a row spanning several steps is drawn as one strip per band, each in
the band it was believed in (a line marks where each step begins).
Steps are ranks, not durations, because corrections often arrive seconds apart; their instants
are the tick labels. Rendering uses matplotlib's Agg canvas (no display needed).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
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
# never believed for any time; they get a band of this much of a step, just below it, so they
# stay visible.
INSTANT_ROW = 0.5
# Room for a one-line label in each lane (inches per step), and a panel's title and margins.
LANE_INCHES = 0.25
PANEL_INCHES = 1.9
PANEL_MARGIN_INCHES = 0.55
# The x axis's width on the page and a label character's (8 pt), to foresee labels that collide.
AXES_INCHES = 8.7
CHAR_INCHES = 0.07


@dataclass(frozen=True)
class Strip:
    """The part of a row's bar in one band of belief steps (several bands when they touch)."""

    fact: Fact
    y0: float
    y1: float
    first: bool  # in the band where the row was recorded: the label names its episode


def overlaps(a: Fact, b: Fact) -> bool:
    """Whether the valid windows of two rows intersect (an open end reaches forever)."""
    return ((b.valid_to is None or a.valid_from < b.valid_to)
            and (a.valid_to is None or b.valid_from < a.valid_to))


def member(fact: Fact) -> str:
    return value_text(fact.value)


def bands(rows: Sequence[Fact]) -> list[tuple[datetime, float, list[Fact]]]:
    """The bands of belief, oldest first: (instant, height of a lane, rows believed in it).

    Every transaction instant starts a band of the rows believed from it to the next instant;
    an instant at which some rows were recorded and retired at once is preceded by a half-height
    band holding them and the rows believed across that instant.
    """
    instants = sorted({t for f in rows for t in (f.recorded_at, f.expired_at) if t is not None})
    at_once = {f.recorded_at for f in rows if f.expired_at == f.recorded_at}
    out = []
    for t in instants:
        if t in at_once:
            out.append((t, INSTANT_ROW, [f for f in rows if f.recorded_at == f.expired_at == t or (
                f.recorded_at < t and (f.expired_at is None or f.expired_at >= t))]))
        out.append((t, 1.0, [f for f in rows
                             if f.recorded_at <= t and (f.expired_at is None or f.expired_at > t)]))
    return out


Clash = Callable[[Fact, Fact], bool]


def lanes(believed: Sequence[Fact], rank: dict[str, int], before: dict[str, int],
          clash: Clash) -> dict[str, int]:
    """Each row's lane in one band (memory_id -> lane, 0 lowest): rows that clash (valid windows
    that overlap, or labels that would) get different lanes, so nothing covers another. A member
    keeps the lane it had in the band below when it is free; the others fill the lowest free
    lane, in the order members first became known; empty lanes are then dropped, keeping the
    order."""
    ordered = sorted(believed, key=lambda f: (rank[member(f)], f.valid_from, f.recorded_at))
    taken: dict[int, list[Fact]] = defaultdict(list)
    lane: dict[str, int] = {}
    for fact in ordered:
        kept = before.get(member(fact))
        if kept is not None and not any(clash(fact, other) for other in taken[kept]):
            lane[fact.memory_id] = kept
            taken[kept].append(fact)
    for fact in ordered:
        if fact.memory_id not in lane:
            free = next(i for i in range(len(ordered) + len(before))
                        if not any(clash(fact, other) for other in taken[i]))
            lane[fact.memory_id] = free
            taken[free].append(fact)
    used = {old: new for new, old in enumerate(sorted(set(lane.values())))}
    return {memory_id: used[old] for memory_id, old in lane.items()}


def layout(rows: Sequence[Fact], clash: Clash) -> tuple[list[Strip], dict[datetime, float], float, bool]:
    """The strips of a panel's rows, the y of every transaction instant (a tick), the top, and
    whether some band has more than one lane.

    A band is as many lanes tall as it needs; a single-valued history therefore keeps one lane
    per band, and each row's strips join into one bar from its recorded step to its retired one.
    """
    rank: dict[str, int] = {}
    for fact in sorted(rows, key=lambda f: (f.recorded_at, f.valid_from, member(f))):
        rank.setdefault(member(fact), len(rank))
    strips: dict[str, list[Strip]] = defaultdict(list)
    ticks: dict[datetime, float] = {}
    before: dict[str, int] = {}
    y = 0.0
    crowded = False
    for instant, height, believed in bands(rows):
        lane = lanes(believed, rank, before, clash)
        if height != INSTANT_ROW:
            ticks[instant] = y
        for fact in believed:
            low = y + height * lane[fact.memory_id]
            own = strips[fact.memory_id]
            if own and abs(own[-1].y1 - low) < 1e-9:  # touches the strip below: one bar
                own[-1] = Strip(fact, own[-1].y0, low + height, own[-1].first)
            else:
                own.append(Strip(fact, low, low + height, not own))
        before = {member(f): lane[f.memory_id] for f in believed}
        crowded = crowded or max(lane.values(), default=0) > 0
        y += height * max(lane.values(), default=0) + height
    return [s for own in strips.values() for s in own], ticks, max(y, 1.0), crowded


def value_text(value: Any) -> str:
    return value.isoformat() if hasattr(value, "isoformat") else str(value)


def figure(facts: Sequence[Fact], subject: str, *, now: datetime) -> Any:
    """The picture of ``facts`` (a subject's ``history()`` rows) as a matplotlib ``Figure``.

    Each bar is drawn as ``Rectangle`` strips whose gid is the row's memory_id (one strip unless
    other rows were believed beside it over overlapping valid time: then one per band of belief
    steps); an open valid end reaches the right edge of the axes, an open known end the top.
    Labels carry the row's memory_id as gid too and never overlap each other.
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

    # Narrow bars side by side would have their labels collide: such rows take lanes too. A
    # label's width is estimated here (the axes' width is only known once laid out, below).
    per_inch = (mdates.date2num(right) - mdates.date2num(left)) / AXES_INCHES

    def label_window(fact: Fact) -> tuple[float, float]:
        x0 = mdates.date2num(fact.valid_from)
        centre = (x0 + mdates.date2num(fact.valid_to if fact.valid_to is not None else right)) / 2
        [(text, _), *_] = label_texts(fact, first=True)
        half = per_inch * CHAR_INCHES * max(len(line) for line in text.split("\n")) / 2
        return centre - half, centre + half

    def clash(a: Fact, b: Fact) -> bool:
        (a0, a1), (b0, b1) = label_window(a), label_window(b)
        return overlaps(a, b) or (a0 < b1 and b0 < a1)

    panels = {a: layout(by_attribute.get(a, []), clash) for a in attributes}
    heights = [max(PANEL_INCHES, PANEL_MARGIN_INCHES + LANE_INCHES * top) for _, _, top, _ in panels.values()]
    fig = Figure(figsize=(11, 1.2 + sum(heights)), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(len(attributes), 1, sharex=True, squeeze=False,
                        gridspec_kw={"height_ratios": heights})[:, 0]
    labels = []
    for ax, attribute in zip(axes, attributes):
        strips, ticks, top, crowded = panels[attribute]
        for strip in strips:
            fact = strip.fact
            x0 = mdates.date2num(fact.valid_from)
            x1 = mdates.date2num(fact.valid_to if fact.valid_to is not None else right)
            bar = Rectangle((x0, strip.y0 + 0.06), x1 - x0, strip.y1 - strip.y0 - 0.12, linewidth=1.2,
                            **STYLES[kind(fact, now)])
            bar.set_gid(fact.memory_id)
            ax.add_patch(bar)
            labels.append((ax, bar, strip))
        ax.axvline(mdates.date2num(now), color="#d62728", linestyle=":", linewidth=1)
        ax.set_ylim(0, top)
        # A step's label: when it happened (UTC) and the episodes whose rows were recorded then.
        said = defaultdict(set)
        for strip in strips:
            said[strip.fact.recorded_at].add(strip.fact.source_episode_id)
        ax.set_yticks(list(ticks.values()))
        # Stacked lanes read as one pile without a line where each belief step begins.
        if crowded:
            ax.yaxis.grid(True, color="#555555", linewidth=0.8)
        ax.set_yticklabels([f"{t:%Y-%m-%d %H:%M:%S}.{t.microsecond // 1000:03d}"
                            + (f" ({', '.join(sorted(said[t]))})" if said[t] else "") for t in ticks],
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
    label_bars(fig, labels, now)
    return fig


def label_texts(fact: Fact, *, first: bool) -> list[tuple[str, float]]:
    """A strip's label, longest first with its font size: value (→ when open) and, in the band
    where the row was recorded (``first``), its episode; later strips repeat the value only."""
    value = f"{value_text(fact.value)}{'' if fact.valid_to is not None else ' →'}"
    texts = [f"{value}\n{fact.source_episode_id}", f"{value} · {fact.source_episode_id}"] if first else []
    return [(text, size) for size in (8, 7) for text in [*texts, value]]


def label_bars(fig: Any, bars: list[tuple[Any, Any, Strip]], now: datetime) -> None:
    """Label every strip with the longest text that fits its height and overlaps no label
    already placed (widest strips first); a strip too crowded for even its value stays bare.

    Sizes are measured with the figure's renderer, so the layout is settled first; the labels
    are then kept out of the layout, which therefore stays as measured.
    """
    fig.draw_without_rendering()
    renderer = fig.canvas.get_renderer()
    placed: list[Any] = []
    for ax, bar, strip in sorted(bars, key=lambda b: (-b[1].get_width(), b[2].y0)):
        inside = bar.get_window_extent(renderer)
        frame = ax.get_window_extent(renderer)
        for text, size in label_texts(strip.fact, first=strip.first):
            label = ax.text(bar.get_x() + bar.get_width() / 2, bar.get_y() + bar.get_height() / 2, text,
                            ha="center", va="center", fontsize=size, clip_on=True, gid=strip.fact.memory_id,
                            color="white" if kind(strip.fact, now) == "current" else "black")
            label.set_in_layout(False)
            box = label.get_window_extent(renderer)
            if (inside.y0 <= box.y0 and box.y1 <= inside.y1 and frame.x0 <= box.x0 and box.x1 <= frame.x1
                    and not any(box.overlaps(other) for other in placed)):
                placed.append(box)
                break
            label.remove()


def save(fig: Any, path: Path) -> None:
    """Write the picture as PNG or SVG, by the file's suffix."""
    fmt = path.suffix.lower().lstrip(".")
    if fmt not in FORMATS:
        raise TimelineUnavailable(f"{path}: the timeline is written as .png or .svg, "
                                  f"not {path.suffix or 'no suffix'!r}")
    fig.savefig(path, format=fmt, dpi=110)

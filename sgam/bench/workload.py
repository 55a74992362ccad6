"""The benchmarks' shared workload vocabulary: what the generated streams and worlds are made of.

The baseline and scale streams draw people, values and operations from here; the replay world and
Graphiti's harness (which renders and parses the same statements) share its attribute phrases and
its "no answer" token.
"""

from __future__ import annotations

import functools
import itertools
import random
from datetime import date, datetime, timedelta, timezone
from typing import Any

from sgam.graph.models import EpisodeKind
from sgam.graph.schema import Schema

EPOCH = datetime(2020, 1, 1, tzinfo=timezone.utc)
HORIZON = datetime(2025, 6, 1, tzinfo=timezone.utc)  # every valid_from lies before this

# Operation mix once a slot has history (the first statement about a slot is an assert).
ONE_OPS = (("change", 52), ("reassert", 18), ("backdated", 12), ("correct", 8),
           ("retract", 5), ("replay", 5))
MANY_OPS = (("add", 55), ("reassert", 15), ("retract", 15), ("backdated", 10), ("replay", 5))

CITIES = ("Berlin", "Lisbon", "Paris", "Madrid", "Rome", "Vienna", "Prague", "Warsaw", "Oslo",
          "Stockholm", "Helsinki", "Dublin", "London", "Amsterdam", "Brussels", "Zurich", "Geneva",
          "Munich", "Hamburg", "Milan", "Porto", "Seville", "Athens", "Budapest", "Krakow",
          "Copenhagen", "Riga", "Tallinn", "Vilnius", "Ljubljana", "Zagreb", "Sofia", "Bucharest",
          "Belgrade", "Valencia", "Lyon", "Marseille", "Turin", "Naples", "Edinburgh")
STYLES = ("concise", "detailed", "bullet points", "formal", "casual", "step by step",
          "with examples", "short answers first")
FIRST = ("ada", "ben", "chloe", "dmitri", "elena", "farid", "greta", "hugo", "ines", "jonas",
         "kira", "leo", "mira", "nadia", "omar", "paula", "quentin", "rosa", "sami", "tara")
LAST = ("adams", "berg", "costa", "dubois", "eriksen", "fischer", "garcia", "horvat", "ivanova",
        "jansen", "kowalski", "lopez", "moreau", "novak", "olsen", "petrov", "rossi", "schmidt")
ACTORS = (("user:self", EpisodeKind.MESSAGE), ("agent:support", EpisodeKind.MESSAGE),
          ("tool:crm", EpisodeKind.TOOL_RESULT), ("tool:calendar", EpisodeKind.EVENT))

# The replay world's attributes: name -> (the phrase its statements use, set-valued?).
ATTRS = {"home_city": ("home city", False), "response_style": ("response style", False),
         "email": ("email", False), "contact": ("contact", True)}
# The answer when nothing holds (and the gold answer of abstain questions).
NONE = "none"


class Values:
    """Realistic values per attribute, by name and value type."""

    def __init__(self, rng: random.Random, schema: Schema) -> None:
        self.rng = rng
        self.schema = schema
        self.people = [f"{f} {l}" for f in FIRST for l in LAST]

    def draw(self, attribute: str, subject: str, at: datetime) -> Any:
        rng, spec = self.rng, self.schema.attribute(attribute)
        if attribute == "home_city":
            return rng.choice(CITIES)
        if attribute == "response_style":
            return rng.choice(STYLES)
        if attribute == "email":
            return f"{rng.choice(FIRST)}.{rng.choice(LAST)}{rng.randrange(100)}@example.com"
        if attribute == "contact":
            return rng.choice(self.people)
        kind = spec.value_type
        if kind == "date":
            return date(2025, 1, 1) + timedelta(days=rng.randrange(3000))
        if kind == "datetime":
            return (at - timedelta(minutes=rng.randrange(24 * 60))).replace(microsecond=0)
        if kind == "int":
            return rng.randrange(100_000)
        if kind == "float":
            return round(rng.uniform(1, 500), 2)
        if kind == "bool":
            return rng.random() < 0.5
        if kind == "enum":
            return rng.choice(spec.values)
        return f"{attribute}-{rng.randrange(1000)}"


def choose(rng: random.Random, table: tuple[tuple[str, int], ...]) -> str:
    """A name of ``table`` drawn by its weight (the draw ``rng.choices(names, weights)`` makes)."""
    names, cumulative = _cumulative(table)
    return rng.choices(names, cum_weights=cumulative)[0]


@functools.cache
def _cumulative(table: tuple[tuple[str, int], ...]) -> tuple[tuple[str, ...], list[int]]:
    # choices() sums the weights on every call otherwise: a sixth of generating the scale stream.
    names, weights = zip(*table)
    return names, list(itertools.accumulate(weights))

"""Deterministic replay benchmark: SGAM against descriptive text memory (DM) and Graphiti, no LLM.

A seeded generator builds multi-tenant episode streams (one statement per episode, with its
structured delta): changes, retroactive corrections, backdated facts, out-of-order arrival,
retractions, set-valued adds/removes, repeated statements (restates), changes by different speakers,
erasures (``forget_subject``), and cross-tenant distractors (every tenant has the same person
names). :mod:`sgam.bench.oracle` (the temporal semantics written from docs/temporal-semantics.md, not
``reconcile``) yields exact gold answers for:
``current``, ``as_of`` (value at a date, as believed now), ``believed_at`` (value at a date as
believed on an earlier transaction date), ``history`` (believed values in valid-time order),
``replaced`` (what replaced value V), ``who_said`` (asserted_by of the current value), ``abstain``
(never stated, erased or retracted: answer "none"), ``false_premise`` (asks when a value that was
never held ended: answer "none").

Systems, scored on the same data in the same run:

* **sgam**: episodes and deltas written through ``MemoryGraph`` with a simulated clock, so a fact's
  ``recorded_at`` is its episode's day and ``known_at`` questions are exact; answers come from
  ``current`` / ``as_of`` (with ``known_at``) / ``history`` only.
* **graphiti / graphiti-datefilter**: the same facts as a Graphiti graph written with
  graphiti-core's own save functions (no LLM; an ideal extractor, Graphiti's own temporal
  invalidation rule) in the same database, answered by graphiti-core's hybrid search (BM25 + MiniLM
  cosine, RRF) without and with its date filters; see :mod:`sgam.bench.graphiti`.
* **dm-bm25-top1 / dm-bm25-newest / dm-minilm-top1 / dm-minilm-newest**: the same episodes as free
  text in one shared text store (the tenant is a label inside the text, not a hard filter), top-k by
  BM25 (``bm25s``: Okapi, k1=1.5, b=0.75, Robertson idf; see :class:`sgam.bench.BM25`) or MiniLM
  cosine (numpy), answered by fixed rules: the top hit, or the newest
  hit (latest stated date at or before the question's reference date) among hits about the asked
  person and attribute; values are parsed from the templated text.

Metrics per question type and system: exact-match accuracy, stale-answer rate (a wrong answer that
was an earlier value of the same slot), resurrection rate (an erased or retracted value returned),
cross-tenant leak rate (a value only another tenant's same-named person had), latency p50/p95.
Output: ``replay-<timestamp>.json``, ``.md`` and ``.png`` (matplotlib, optional extra ``bench``).

    sgam bench replay --size smoke --seed 7    # Graphiti at smoke/small; --graphiti/--no-graphiti
"""

from __future__ import annotations

import json
import random
import re
import secrets
import subprocess
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from sgam.bench import oracle
from sgam.bench.common import BM25, git_state, machine_info, package_version, percentile, top_k, torch_threads
from sgam.bench.workload import ATTRS, NONE
from sgam.graph.errors import NotFound, SgamError
from sgam.ingest.graphiti.env import GraphitiUnavailable
from sgam.graph.models import Episode, EpisodeKind, MemoryDelta, Op

DAY = timedelta(days=1)
START = datetime(2023, 1, 2, tzinfo=timezone.utc)
END = datetime(2025, 6, 1, tzinfo=timezone.utc)       # every write happens before this
TOP_K = 10
EMBED_CHUNK = 8192        # texts per embed call when MiniLM indexes the episodes
GRAPHITI_SIZES = ("smoke", "small")   # Graphiti by default at these sizes (see run)
GRAPHITI_PROBE_PERSONS = 40           # persons of one tenant loaded to measure Graphiti's load rate
QTYPES = ("current", "as_of", "believed_at", "history", "replaced", "who_said", "abstain",
          "false_premise")

SIZES: dict[str, dict[str, int]] = {
    # tenants, persons per tenant, questions per type (at most); a person has ~12 episodes, so
    # large has 106,241 episodes at seed 7
    "smoke": {"tenants": 2, "persons": 6, "per_type": 12},
    "small": {"tenants": 4, "persons": 40, "per_type": 80},
    "large": {"tenants": 8, "persons": 1100, "per_type": 400},
}
FIRST = ("Alex", "Sam", "Mira", "Jonas", "Elena", "Farid", "Greta", "Hugo", "Ines", "Kira", "Leo",
         "Nadia", "Omar", "Paula", "Rosa", "Tara", "Ben", "Chloe", "Dmitri", "Ada")
LAST = ("Kim", "Berg", "Costa", "Dubois", "Eriksen", "Fischer", "Garcia", "Horvat", "Novak",
        "Olsen", "Petrov", "Rossi", "Schmidt", "Lopez", "Moreau")
# more person names for sizes beyond FIRST x LAST (300); contact values stay FIRST x LAST
MORE_FIRST = ("Anna", "Bruno", "Carla", "David", "Emma", "Felix", "Gina", "Hannah", "Ivan", "Julia",
              "Karl", "Lena", "Marco", "Nina", "Oskar", "Pia", "Quentin", "Ruth", "Stefan", "Tom",
              "Ulla", "Vera", "Walter", "Xenia", "Yusuf", "Zoe", "Aron", "Bea", "Cem", "Dora")
MORE_LAST = ("Andersen", "Bauer", "Cohen", "Dahl", "Engel", "Ferrari", "Gruber", "Haas", "Ivanova",
             "Jensen", "Keller", "Lang", "Meyer", "Nowak", "Ortiz")
CITIES = ("Berlin", "Lisbon", "Paris", "Madrid", "Rome", "Vienna", "Prague", "Warsaw", "Oslo",
          "Dublin", "London", "Amsterdam", "Zurich", "Munich", "Porto", "Athens", "Riga", "Sofia",
          "Lyon", "Turin", "Naples", "Seville", "Krakow", "Tallinn", "Geneva", "Milan")
STYLES = ("concise", "detailed", "formal", "casual", "bulleted", "stepwise", "playful", "terse")
SPEAKERS = ("user:self", "agent:support", "tool:crm", "colleague:jo", "colleague:pat")
# attribute -> (phrase in text, set-valued?)


@dataclass
class Event:
    """One episode with its one statement."""

    tenant: str
    label: str                 # the tenant's name inside DM text
    person: str                # display name
    subject: str               # entity id
    attribute: str
    op: str                    # assert | correct | retract | erase
    kind: str                  # change, restate, correct, backdated, retract, add, remove, erase, first
    value: str | None
    speaker: str
    recorded: datetime
    valid_from: datetime
    episode_id: str = ""
    text: str = ""


@dataclass
class Slot:
    """One slot's statements in arrival order; the gold answers come from :mod:`sgam.bench.oracle`."""

    many: bool
    events: list[Event] = field(default_factory=list)

    def model(self, known_before: datetime | None = None) -> oracle.Timeline | oracle.SetTimeline:
        """The believed timeline of the events recorded before ``known_before`` (all when None)."""
        return oracle.believed(
            (_statement(e) for e in self.events if known_before is None or e.recorded < known_before),
            self.many)

    def value_at(self, instant: datetime, known_before: datetime | None = None) -> str:
        held = self.model(known_before).value_at(instant)
        if self.many:
            return ", ".join(sorted(held)) if held else NONE
        return NONE if held is None else held

    def values(self) -> list[str]:
        """Believed values in valid-time order, consecutive repeats collapsed."""
        out: list[str] = []
        for _, _, value in self.model().runs():
            if not out or out[-1] != value:
                out.append(value)
        return out

    def speaker(self, value: str) -> str:
        """Who stated ``value``: a slot's values are drawn fresh, and a restate keeps the speaker."""
        return next(e.speaker for e in self.events if e.value == value)

    def stated(self, before: datetime | None = None) -> set[str]:
        return {e.value for e in self.events
                if e.value and (before is None or e.recorded <= before)}


def _statement(e: Event) -> oracle.Statement:
    # Recorded days strictly increase within a slot, so they tell its statements apart as the
    # episode ids (given out later, in delivery order) do; 0.9 is the confidence load_sgam writes.
    return oracle.Statement(e.op, e.value, e.valid_from, episode=e.recorded.isoformat(), confidence=0.9,
                            asserted_by=e.speaker)


@dataclass
class Question:
    qid: str
    qtype: str
    tenant: str
    label: str
    person: str
    subject: str
    attribute: str
    text: str
    gold: str
    reference: datetime        # the date the question is about (for DM's newest-hit rule)
    valid_at: datetime | None = None
    known_at: datetime | None = None
    value: str | None = None   # the value a replaced / false-premise question names
    note: str = ""


@dataclass
class World:
    seed: int
    size: str
    tenants: list[str]
    labels: dict[str, str]
    events: list[Event]                        # arrival order
    slots: dict[tuple[str, str, str], Slot]    # (tenant, subject, attribute)
    erased: dict[str, set[str]]                # tenant -> erased subjects
    persons: dict[str, str]                    # subject -> display name
    questions: list[Question]
    ops: Counter


def _slug(name: str) -> str:
    return name.lower().replace(" ", "-")


def _draw(rng: random.Random, attribute: str, person: str, used: set[str]) -> str:
    for _ in range(200):
        if attribute == "home_city":
            v = rng.choice(CITIES)
        elif attribute == "response_style":
            v = rng.choice(STYLES)
        elif attribute == "email":
            v = f"{person.split()[0].lower()}{rng.randrange(1000)}@example.com"
        else:
            v = f"{rng.choice(FIRST)} {rng.choice(LAST)}"
        if v not in used:
            used.add(v)
            return v
    raise RuntimeError("value space exhausted")


def _slot_events(rng: random.Random, tenant: str, label: str, person: str, attribute: str,
                 many: bool) -> list[Event]:
    """A slot's statements in arrival order: recorded dates strictly increase within a slot."""
    subject = _slug(person)
    used: set[str] = set()
    rec = START + DAY * rng.randrange(0, 200) + timedelta(hours=12)
    ev = lambda op, kind, value, speaker, vf: Event(  # noqa: E731
        tenant, label, person, subject, attribute, op, kind, value, speaker, rec,
        vf.replace(hour=0) if vf != rec else vf)
    first = _draw(rng, attribute, person, used)
    out = [ev("assert", "first", first, rng.choice(SPEAKERS), rec - DAY * rng.randrange(0, 20))]
    held: list[str] = [first]
    for _ in range(rng.randint(1, 5)):
        rec = rec + DAY * rng.randint(10, 90)
        if rec >= END - DAY:
            break
        r = rng.random()
        if many:
            if held and r < 0.25:
                gone = rng.choice(held)
                held.remove(gone)
                out.append(ev("retract", "remove", gone, rng.choice(SPEAKERS), rec))
            elif held and r < 0.4:
                out.append(ev("assert", "restate", rng.choice(held), rng.choice(SPEAKERS), rec))
            else:
                value = _draw(rng, attribute, person, used)
                held.append(value)
                out.append(ev("assert", "add", value, rng.choice(SPEAKERS), rec))
            continue
        speaker = rng.choice(SPEAKERS)
        sofar = Slot(False, list(out))
        now_held = sofar.model().value_at(rec)             # what holds now
        if now_held is None:                               # after a retraction: a new value
            out.append(ev("assert", "change", _draw(rng, attribute, person, used), speaker, rec))
        elif r < 0.12:
            out.append(ev("retract", "retract", None, speaker, rec))
        elif r < 0.27:
            out.append(ev("correct", "correct", _draw(rng, attribute, person, used), speaker, rec))
        elif r < 0.42:
            # backdated: stated today, true since up to 80 days ago; may predate earlier statements
            out.append(ev("assert", "backdated", _draw(rng, attribute, person, used), speaker,
                          rec - DAY * rng.randint(1, 80)))
        elif r < 0.52:
            # restate the value holding now, by the speaker who stated it (support only)
            out.append(ev("assert", "restate", now_held, sofar.speaker(now_held), rec))
        else:
            out.append(ev("assert", "change", _draw(rng, attribute, person, used), speaker, rec))
    return out


def _text(e: Event, old: str | None) -> str:
    rec, vf = e.recorded.strftime("%Y-%m-%d"), e.valid_from.strftime("%Y-%m-%d")
    phrase = ATTRS.get(e.attribute, (e.attribute, False))[0]
    head = f"[{e.label}] On {rec}, {e.speaker}"
    if e.op == "erase":
        return f"{head} asked to forget everything about {e.person}."
    if e.kind == "restate":
        return f"{head} confirmed: {e.person}'s {phrase} is still {e.value} as of {vf}."
    if e.op == "correct":
        return f"{head} corrected: {e.person}'s {phrase} was actually {e.value}, not {old}, as of {vf}."
    if e.op == "retract":
        gone = e.value or old or "unknown"
        return f"{head} said: {e.person}'s {phrase} is no longer {gone} as of {vf}."
    verb = "includes" if ATTRS[e.attribute][1] else "is"
    return f"{head} said: {e.person}'s {phrase} {verb} {e.value} as of {vf}."


def generate(size: str, seed: int, run_id: str = "run") -> World:
    """The world for ``(size, seed)``; ``run_id`` only names the tenants it is written to."""
    spec = SIZES[size]
    rng = random.Random(seed)
    names = [f"{f} {l}" for f in FIRST for l in LAST]
    rng.shuffle(names)
    if spec["persons"] > len(names):                       # smoke and small never get here
        more = [f"{f} {l}" for f in FIRST + MORE_FIRST for l in LAST + MORE_LAST]
        more = [n for n in more if n not in set(names)]
        rng.shuffle(more)
        names += more
    if spec["persons"] > len(names):
        raise SgamError(f"size {size!r}: {spec['persons']} persons per tenant, but there are only "
                        f"{len(names)} distinct names")
    persons = names[:spec["persons"]]                      # the same names in every tenant
    tenants = [f"rb-{run_id}-{i}" for i in range(spec["tenants"])]
    labels = {t: f"tenant-{i}" for i, t in enumerate(tenants)}
    slots: dict[tuple[str, str, str], Slot] = {}
    events: list[Event] = []
    erased: dict[str, set[str]] = {t: set() for t in tenants}
    for tenant in tenants:
        for person in persons:
            subject = _slug(person)
            # each person has 2-4 of the attributes; the rest are never stated (abstain questions)
            chosen = sorted(rng.sample(sorted(ATTRS), rng.randint(2, 4)))
            for attribute in chosen:
                many = ATTRS[attribute][1]
                slot = Slot(many)
                slot.events = _slot_events(rng, tenant, labels[tenant], person, attribute, many)
                slots[(tenant, subject, attribute)] = slot
                events.extend(slot.events)
        for person in rng.sample(persons, max(1, len(persons) // 10)):
            erased[tenant].add(_slug(person))
    # out-of-order arrival: delivery is by recorded day, shuffled within a day
    rng.shuffle(events)
    events.sort(key=lambda e: e.recorded.date())
    for i, e in enumerate(events):
        e.episode_id = f"ep-{i:07d}"
    # erasure requests arrive last, after every statement
    for tenant in tenants:
        for subject in sorted(erased[tenant]):
            person = next(p for p in persons if _slug(p) == subject)
            events.append(Event(tenant, labels[tenant], person, subject, "*", "erase", "erase", None,
                                "user:self", END, END, f"ep-{len(events):07d}"))
    for key, slot in slots.items():
        for e in slot.events:
            before = NONE if slot.many else slot.value_at(e.valid_from, e.recorded)
            e.text = _text(e, None if before == NONE else before)
    for e in events:
        if e.op == "erase":
            e.text = _text(e, None)
    ops = Counter(e.kind for e in events)
    ops["out_of_order"] = sum(
        1 for s in slots.values() for i, e in enumerate(s.events)
        if any(p.valid_from > e.valid_from for p in s.events[:i]))
    world = World(seed, size, tenants, labels, events, slots, erased,
                  {_slug(p): p for p in persons}, [], ops)
    world.questions = _questions(world, random.Random(seed * 7919 + 3), spec["per_type"])
    return world


def _questions(w: World, rng: random.Random, per_type: int) -> list[Question]:
    now = END + DAY * 30
    out: dict[str, list[Question]] = defaultdict(list)
    keys = sorted(w.slots)
    rng.shuffle(keys)

    def q(qtype: str, key: tuple[str, str, str], text: str, gold: str, reference: datetime,
          **extra: Any) -> None:
        tenant, subject, attribute = key
        label, person = w.labels[tenant], w.persons[subject]
        phrase = ATTRS[attribute][0]
        out[qtype].append(Question(f"{qtype}-{len(out[qtype]):04d}", qtype, tenant, label, person,
                                   subject, attribute,
                                   f"[{label}] {text.format(p=person, a=phrase)}", gold, reference,
                                   **extra))

    for key in keys:
        tenant, subject, attribute = key
        slot = w.slots[key]
        if subject in w.erased[tenant]:
            q("abstain", key, "What is {p}'s {a} now?", NONE, now, note="erased")
            continue
        current = slot.value_at(now)
        if current == NONE:
            q("abstain", key, "What is {p}'s {a} now?", NONE, now, note="retracted")
        else:
            q("current", key, "What is {p}'s {a} now?", current, now)
        first = min(e.valid_from for e in slot.events)
        t = first + (now - first) * rng.random()
        t = t.replace(hour=6, minute=0, second=0, microsecond=0)
        q("as_of", key, "What was {p}'s {a} on " + f"{t:%Y-%m-%d}?", slot.value_at(t), t, valid_at=t)
        # believed_at: just before a revision arrived, about the instant it revised
        revising = [e for e in slot.events[1:] if e.kind in ("correct", "backdated", "retract",
                                                             "change", "remove", "add")]
        if revising:
            e = rng.choice(revising)
            k = e.recorded.replace(hour=0)
            t = e.valid_from.replace(hour=6) if e.valid_from.replace(hour=6) < k else k - DAY
        else:
            k = slot.events[0].recorded + DAY * rng.randint(1, 100)
            t = k - DAY
        q("believed_at", key, "On " + f"{k:%Y-%m-%d}" + ", what did we believe {p}'s {a} was on "
          + f"{t:%Y-%m-%d}?", slot.value_at(t, k), k, valid_at=t, known_at=k)
        if slot.many:
            continue
        values = slot.values()
        q("history", key, "List every {a} {p} has had, in order.", " > ".join(values) or NONE, now)
        if len(values) >= 2:
            i = rng.randrange(len(values) - 1)
            q("replaced", key, "What replaced " + values[i] + " as {p}'s {a}?", values[i + 1], now,
              value=values[i])
        if current != NONE:
            q("who_said", key, "Who said {p}'s {a} is " + current + "?", slot.speaker(current), now)
        stated = slot.stated()
        # false premise: a value this slot never held, preferably one the same-named person in
        # another tenant did hold (a distractor)
        others = sorted({v for t2 in w.tenants if t2 != tenant
                         for v in (w.slots.get((t2, subject, attribute)) or Slot(False)).stated()}
                        - stated)
        fake = rng.choice(others) if others else _draw(rng, attribute, w.persons[subject], set(stated))
        q("false_premise", key, "When did {p} stop having " + fake + " as {a}?", NONE, now, value=fake)
    # never stated: attributes a person has no slot for
    for tenant in w.tenants:
        for subject in sorted(w.persons):
            for attribute in sorted(ATTRS):
                if (tenant, subject, attribute) not in w.slots and subject not in w.erased[tenant]:
                    q("abstain", (tenant, subject, attribute), "What is {p}'s {a} now?", NONE, now,
                      note="never stated")
    chosen: list[Question] = []
    for qtype in QTYPES:
        pool = out[qtype]
        if qtype == "abstain":   # balance the three abstain reasons
            by = defaultdict(list)
            for x in pool:
                by[x.note].append(x)
            pool = [x for group in zip(*[by[n] for n in sorted(by)]) for x in group] + \
                   [x for n in sorted(by) for x in by[n]]
            pool = list({x.qid: x for x in pool}.values())
        chosen.extend(pool[:per_type])
    return chosen


# -- SGAM ------------------------------------------------------------------------------------------


class SimClock:
    """A settable clock: the store stamps ``recorded_at`` with the simulated transaction day."""

    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


def load_sgam(graph: Any, clock: SimClock, world: World) -> dict[str, Any]:
    """Write the world day by day, with the clock at each day; then the erasures."""
    by_day: dict[Any, list[Event]] = defaultdict(list)
    for e in world.events:
        if e.op != "erase":
            by_day[e.recorded.date()].append(e)
    outcomes: Counter = Counter()
    rejected: list[str] = []
    started = time.perf_counter()
    for day in sorted(by_day):
        batch = by_day[day]
        clock.now = batch[0].recorded
        graph.record_episodes([
            Episode(tenant_id=e.tenant, id=e.episode_id, content=e.text, occurred_at=e.recorded,
                    kind=EpisodeKind.MESSAGE, actor=e.speaker, session_id=f"s-{day}")
            for e in batch])
        result = graph.write_many([
            MemoryDelta(tenant_id=e.tenant, subject=e.subject, attribute=e.attribute,
                        value=e.value if (e.op != "retract" or ATTRS[e.attribute][1]) else None,
                        valid_from=e.valid_from, source_episode_id=e.episode_id, op=Op(e.op),
                        asserted_by=e.speaker, confidence=0.9, subject_type="Person",
                        subject_name=e.person)
            for e in batch])
        outcomes.update(r.outcome for r in result.results)
        rejected.extend(f"{r.index}: {r.message}" for r in result.rejected)
    clock.now = END
    for tenant, subjects in world.erased.items():
        for subject in sorted(subjects):
            graph.forget_subject(tenant, subject)
    return {"seconds": round(time.perf_counter() - started, 3), "outcomes": dict(outcomes),
            "rejected": len(rejected), "rejected_examples": rejected[:5]}


def _fmt(value: Any) -> str:
    return str(value)


def answer_sgam(graph: Any, q: Question) -> str:
    """SGAM's answer; a subject it does not hold (never stored, or forgotten) answers nothing."""
    try:
        return _answer_sgam(graph, q)
    except NotFound:
        return NONE


def _answer_sgam(graph: Any, q: Question) -> str:
    t, s, a = q.tenant, q.subject, q.attribute
    if q.qtype in ("current", "abstain"):
        facts = graph.current(t, s, a)
        return ", ".join(sorted(_fmt(f.value) for f in facts)) or NONE
    if q.qtype in ("as_of", "believed_at"):
        facts = graph.as_of(t, s, a, valid_at=q.valid_at, known_at=q.known_at)
        return ", ".join(sorted(_fmt(f.value) for f in facts)) or NONE
    if q.qtype == "who_said":
        facts = graph.current(t, s, a)
        return facts[0].asserted_by if facts else NONE
    believed = sorted((f for f in graph.history(t, s, a)
                       if f.expired_at is None and f.status == "confirmed"),
                      key=lambda f: f.valid_from)
    values: list[str] = []
    for f in believed:
        if not values or values[-1] != _fmt(f.value):
            values.append(_fmt(f.value))
    if q.qtype == "history":
        return " > ".join(values) or NONE
    if q.qtype == "replaced":
        i = values.index(q.value) if q.value in values else -1
        return values[i + 1] if 0 <= i < len(values) - 1 else NONE
    if q.qtype == "false_premise":
        ended = [f for f in believed if _fmt(f.value) == q.value and f.valid_to is not None]
        return ended[-1].valid_to.strftime("%Y-%m-%d") if ended else NONE
    raise ValueError(q.qtype)


# -- DM: descriptive text memory -------------------------------------------------------------------

TEXT_RE = re.compile(
    r"^\[(?P<label>[^\]]+)\] On (?P<rec>\d{4}-\d\d-\d\d), (?P<speaker>\S+) "
    r"(?:(?P<erase>asked to forget everything about (?P<eperson>.+)\.)|"
    r"(?:said|confirmed|corrected): (?P<person>.+?)'s (?P<phrase>[a-z ]+?) "
    r"(?P<verb>is still|is no longer|was actually|includes|is) (?P<value>.+?)(?:, not .+?)?"
    r" as of (?P<vf>\d{4}-\d\d-\d\d)\.)$")
PHRASES = {phrase: name for name, (phrase, _) in ATTRS.items()}


@dataclass(frozen=True)
class Parsed:
    label: str
    recorded: str
    speaker: str
    person: str
    attribute: str | None      # None: an erasure (about every attribute)
    value: str                 # NONE for retractions and erasures
    stated: str | None         # the value a retraction names
    valid_from: str


def parse(text: str) -> Parsed:
    m = TEXT_RE.match(text)
    if not m:
        raise ValueError(f"unparsable DM text: {text!r}")
    if m["erase"]:
        return Parsed(m["label"], m["rec"], m["speaker"], m["eperson"], None, NONE, None, m["rec"])
    retract = m["verb"] == "is no longer"
    return Parsed(m["label"], m["rec"], m["speaker"], m["person"], PHRASES[m["phrase"]],
                  NONE if retract else m["value"], m["value"] if retract else None, m["vf"])


def _tokens(text: str) -> list[str]:
    return re.findall(r"[a-z0-9@.]+", text.lower().replace("'s", ""))


class TextMemory:
    """The episodes as free text; ``search(query)`` gives the indices of the top-k documents (score
    descending, ties by index). BM25 is :class:`sgam.bench.BM25` (bm25s, Okapi with k1=1.5,
    b=0.75, Robertson idf); MiniLM embeds the texts in batches of ``EMBED_CHUNK`` into one float32
    matrix (at 100k episodes 150 MB, where the embedder's lists of Python floats for all of them at
    once would take ~1.3 GB) and ranks by cosine (the vectors are normalized)."""

    def __init__(self, texts: Sequence[str], retriever: str, embedder: Any = None) -> None:
        import numpy as np

        self.texts = list(texts)
        self.parsed = [parse(t) for t in self.texts]
        self.retriever = retriever
        self.np = np
        if retriever == "bm25":
            self.bm25 = BM25([_tokens(t) for t in self.texts])
        else:
            self.embedder = embedder
            self.matrix = np.zeros((len(self.texts), embedder.dimensions), dtype=np.float32)
            for i in range(0, len(self.texts), EMBED_CHUNK):
                chunk = self.texts[i:i + EMBED_CHUNK]
                self.matrix[i:i + len(chunk)] = np.asarray(embedder.embed(chunk), dtype=np.float32)

    def search(self, query: str, k: int = TOP_K) -> list[int]:
        if self.retriever == "bm25":
            return self.bm25.top(_tokens(query), k)
        vector = self.np.asarray(self.embedder.embed([query])[0], dtype=self.np.float32)
        return top_k(self.matrix @ vector, k)


def answer_dm(memory: TextMemory, reader: str, q: Question) -> str:
    hits = [memory.parsed[i] for i in memory.search(q.text)]
    # the newest-hit reader keeps only hits about the asked person, attribute and tenant label;
    # top-1 takes the best hit as it is
    about = [h for h in hits if h.person == q.person and h.attribute in (q.attribute, None)
             and (reader == "top1" or h.label == q.label)]
    ref = q.reference.strftime("%Y-%m-%d")

    def pick() -> Parsed | None:
        if reader == "top1":
            return hits[0] if hits else None
        dated = [h for h in about if h.recorded <= ref] if q.qtype != "believed_at" else \
            [h for h in about if h.recorded < ref]
        return max(dated, key=lambda h: h.recorded) if dated else None

    if q.qtype in ("history", "replaced"):
        values: list[str] = []
        for h in sorted((h for h in about if h.attribute and h.value != NONE),
                        key=lambda h: (h.valid_from, h.recorded)):
            if not values or values[-1] != h.value:
                values.append(h.value)
        if q.qtype == "history":
            return " > ".join(values) or NONE
        i = values.index(q.value) if q.value in values else -1
        return values[i + 1] if 0 <= i < len(values) - 1 else NONE
    hit = pick()
    if hit is None:
        return NONE
    if q.qtype == "who_said":
        return hit.speaker
    if q.qtype == "false_premise":
        return hit.valid_from if (hit.stated or hit.value) == q.value else NONE
    return hit.value


# -- scoring ---------------------------------------------------------------------------------------


def _parts(answer: str) -> set[str]:
    return set() if answer == NONE else {p.strip() for p in re.split(r",| > ", answer) if p.strip()}


def score(world: World, q: Question, answer: str) -> dict[str, bool]:
    correct = answer.strip().lower() == q.gold.strip().lower()
    flags = {"correct": correct, "stale": False, "resurrected": False, "leak": False}
    if correct or q.qtype in ("who_said", "history", "false_premise"):
        return flags
    slot = world.slots.get((q.tenant, q.subject, q.attribute))
    own = slot.stated() if slot else set()
    wrong = _parts(answer) - _parts(q.gold)
    others = {v for t in world.tenants if t != q.tenant
              for v in (world.slots.get((t, q.subject, q.attribute)) or Slot(False)).stated()}
    if q.qtype == "abstain" and q.note in ("erased", "retracted") and wrong & own:
        flags["resurrected"] = True
    elif wrong & own:
        flags["stale"] = True
    if wrong and wrong & others and not wrong & own:
        flags["leak"] = True
    return flags


def _summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    ms = [r["seconds"] * 1000 for r in rows]
    n = len(rows)
    return {"n": n, "accuracy": round(sum(r["correct"] for r in rows) / n, 4) if n else None,
            "stale_rate": round(sum(r["stale"] for r in rows) / n, 4) if n else None,
            "resurrection_rate": round(sum(r["resurrected"] for r in rows) / n, 4) if n else None,
            "leak_rate": round(sum(r["leak"] for r in rows) / n, 4) if n else None,
            "p50_ms": round(percentile(ms, 50), 3) if n else None,
            "p95_ms": round(percentile(ms, 95), 3) if n else None,
            "p99_ms": round(percentile(ms, 99), 3) if n else None}


# The tail the project holds SGAM's answers to (issue 19), for the process that loaded the world
# and asked every question once before (evaluate's warm-up), and for a process that has just
# started and asks every question once with nothing asked before: p95 and p99 over all questions,
# each at most this many times the p50.
TAIL_LIMITS = {"p95_ms": 3.0, "p99_ms": 5.0}
NEW_PROCESS = "sgam-new-process"
NEW_PROCESS_TIMEOUT_S = 600


def ask_in_new_process(questions: Sequence[Question], now: datetime, uri: str | None,
                       auth: tuple[str, str] | None) -> list[dict[str, Any]]:
    """Every question asked once, in order, by a process that has just started (``python -m
    sgam.bench.replay``): its own interpreter, imports, driver and connection pool, nothing asked
    before the first question; the server's plans are whatever the server holds. Each answer with
    its latency as that process timed it. The questions and the connection go over standard input
    (a password never appears in a process list)."""
    spec = {"now": now.isoformat(), "uri": uri, "auth": list(auth) if auth else None,
            "questions": [asdict(q) for q in questions]}
    done = subprocess.run([sys.executable, "-m", "sgam.bench.replay"], input=json.dumps(spec, default=str),
                          capture_output=True, text=True, timeout=NEW_PROCESS_TIMEOUT_S, check=False)
    if done.returncode != 0:
        raise SgamError(f"the new process asking the replay's questions failed (exit {done.returncode}): "
                        f"{done.stderr.strip()[-1500:]}")
    asked: list[dict[str, Any]] = json.loads(done.stdout)
    return asked


def _ask_from_stdin() -> None:
    """The new process of :func:`ask_in_new_process`: read the spec, ask, print the answers."""
    from sgam.api import MemoryGraph

    spec = json.loads(sys.stdin.read())
    instants = ("reference", "valid_at", "known_at")
    questions = [Question(**{k: (datetime.fromisoformat(v) if k in instants and v else v) for k, v in q.items()})
                 for q in spec["questions"]]
    graph = MemoryGraph.connect(spec["uri"], tuple(spec["auth"]) if spec["auth"] else None,
                                clock=SimClock(datetime.fromisoformat(spec["now"])))
    try:
        asked = ask(lambda q: answer_sgam(graph, q), questions)
    finally:
        graph.close()
    print(json.dumps(asked))


def ask(answer: Callable[[Question], str], questions: Sequence[Question]) -> list[dict[str, Any]]:
    """Each question asked once, in order: its id, the answer and the seconds it took."""
    asked = []
    for q in questions:
        t0 = time.perf_counter()
        got = answer(q)
        asked.append({"qid": q.qid, "answer": got, "seconds": time.perf_counter() - t0})
    return asked


def scored(world: World, asked: Sequence[dict[str, Any]]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The metrics of one system's answers (:func:`ask`: in :func:`evaluate`, or in
    :func:`ask_in_new_process`), per question type and over all, and its misses (at most ten)."""
    by_id = {q.qid: q for q in world.questions}
    per: dict[str, list[dict[str, Any]]] = defaultdict(list)
    misses: list[dict[str, Any]] = []
    for item in asked:
        q = by_id[item["qid"]]
        flags = score(world, q, item["answer"])
        per[q.qtype].append({**flags, "seconds": item["seconds"]})
        if not flags["correct"] and len(misses) < 10:
            misses.append({"qid": q.qid, "question": q.text, "gold": q.gold, "answer": item["answer"],
                           "note": q.note})
    table = {qt: _summary(per[qt]) for qt in QTYPES if per[qt]}
    table["all"] = _summary([r for qt in QTYPES for r in per[qt]])
    return table, misses


def tail_targets(result: dict[str, Any]) -> list[dict[str, Any]]:
    """SGAM's tail against :data:`TAIL_LIMITS`, for each SGAM column the run has."""
    rows = []
    for name in ("sgam", NEW_PROCESS):
        whole = result["metrics"].get(name, {}).get("all")
        if not whole or not whole["p50_ms"]:
            continue
        for key, limit in TAIL_LIMITS.items():
            ratio = whole[key] / whole["p50_ms"]
            rows.append({"system": name, "target": f"{key[:3]} / p50", "limit": limit,
                         "p50_ms": whole["p50_ms"], "measured_ms": whole[key], "ratio": round(ratio, 2),
                         "met": ratio <= limit})
    return rows


def evaluate(world: World, systems: dict[str, Callable[[Question], str]]) -> dict[str, Any]:
    metrics: dict[str, dict[str, Any]] = {}
    misses: dict[str, list[dict[str, Any]]] = {}
    # warm-up: every question once, untimed, so that the server has planned each query shape and
    # run it more than once (as for any process after the first: a text's first runs on a server
    # are slower while the JVM compiles the code generated for it; with one question of each type
    # asked first, one question of each type took 3.5-6.8 ms against a 0.9 ms p50, "Session 35")
    # and the model is loaded before anything is timed
    warm_up = world.questions
    for name, answer in systems.items():
        for q in warm_up:
            answer(q)
        metrics[name], missed = scored(world, ask(answer, world.questions))
        if missed:
            misses[name] = missed
    return {"metrics": metrics, "misses": misses}


# -- the run ---------------------------------------------------------------------------------------


def run(size: str = "smoke", seed: int = 7, out_dir: Path | str = Path("bench/results"),
        uri: str | None = None, auth: tuple[str, str] | None = None, dm: bool = True,
        graphiti: bool | None = None, log: Callable[[str], None] | None = None,
        threads: int = 1, new_process: bool = True) -> dict[str, Any]:
    """Generate, load SGAM (fresh tenants, deleted afterwards), build DM and (``graphiti``) the
    Graphiti graph in the same database (its own groups, deleted afterwards), ask, score, report.

    ``graphiti``: ``None`` runs Graphiti at the sizes in ``GRAPHITI_SIZES`` and at bigger sizes
    only loads a sample of ``GRAPHITI_PROBE_PERSONS`` persons to measure its load rate, which the
    result's skip reason extrapolates. ``threads``: torch threads for MiniLM (0 keeps torch's
    default; 1 is fastest on a busy 2-core machine). ``new_process``: SGAM's answers are also
    asked by a process that has just started (:func:`ask_in_new_process`), a column of its own."""

    if threads < 0:
        raise SgamError(f"threads must be 0 (torch's default) or a positive count, got {threads}")
    if size not in SIZES:
        raise SgamError(f"size {size!r} is not one of {', '.join(SIZES)}")
    with torch_threads(threads) as used:
        return _run(size, seed, Path(out_dir), uri, auth, dm, graphiti,
                    log or (lambda m: print(m, file=sys.stderr)), used, new_process)


def _run(size: str, seed: int, out_dir: Path, uri: str | None, auth: tuple[str, str] | None,
         dm: bool, graphiti: bool | None, log: Callable[[str], None], threads: int,
         new_process: bool) -> dict[str, Any]:
    from sgam.api import MemoryGraph

    started_at = datetime.now(timezone.utc)
    run_id = f"{seed}-{secrets.token_hex(3)}"
    t0 = time.perf_counter()
    world = generate(size, seed, run_id)
    erasures = sum(1 for e in world.events if e.op == "erase")
    log(f"generated {len(world.events):,} episodes ({len(world.events) - erasures:,} deltas, "
        f"{erasures} erasures), {len(world.slots):,} slots, {len(world.questions):,} questions "
        f"in {time.perf_counter() - t0:.1f}s")
    clock = SimClock(START)
    graph = MemoryGraph.connect(uri, auth, clock=clock)
    systems: dict[str, Callable[[Question], str]] = {}
    gsession: Any = None
    greplay: Any = None
    graphiti_info: dict[str, Any] = {}
    use_graphiti = graphiti if graphiti is not None else size in GRAPHITI_SIZES
    try:
        load = load_sgam(graph, clock, world)
        log(f"SGAM loaded in {load['seconds']}s: {load['outcomes']}, rejected {load['rejected']}")
        clock.now = datetime.now(timezone.utc)
        systems["sgam"] = lambda q: answer_sgam(graph, q)
        if use_graphiti:
            try:
                from sgam.bench import graphiti as bench_graphiti
            except (ImportError, GraphitiUnavailable) as exc:
                raise SgamError(f"{exc}; or leave Graphiti out with --no-graphiti") from None
            gsession, greplay = _graphiti_replay(bench_graphiti, uri, auth)
            graphiti_info = {"load": greplay.load(world), **bench_graphiti.RULES}
            log(f"Graphiti loaded in {graphiti_info['load']['seconds']}s: "
                f"{graphiti_info['load']['entity_edges']} edges, "
                f"indexes {graphiti_info['load']['graphiti_indexes']}")
            systems.update(greplay.systems())
        dm_info: dict[str, Any] = {}
        if dm:
            texts = [e.text for e in world.events]
            t0 = time.perf_counter()
            bm25 = TextMemory(texts, "bm25")
            dm_info["bm25_index_s"] = round(time.perf_counter() - t0, 3)
            from sgam.queries.embeddings import default_embedder

            t0 = time.perf_counter()
            minilm = TextMemory(texts, "minilm", default_embedder())
            dm_info["minilm_index_s"] = round(time.perf_counter() - t0, 3)
            dm_info["documents"] = len(texts)
            dm_info["scoping"] = "one shared text store; the tenant is a label in the text and query"
            dm_info["top_k"] = TOP_K
            for retriever, memory in (("bm25", bm25), ("minilm", minilm)):
                for reader in ("top1", "newest"):
                    systems[f"dm-{retriever}-{reader}"] = (
                        lambda q, m=memory, r=reader: answer_dm(m, r, q))
            log(f"DM indexes built: {dm_info}")
        if not use_graphiti:
            graphiti_info = {"skipped": "disabled (--no-graphiti)"} if graphiti is False else \
                _graphiti_probe(world, uri, auth, log)
        evaluation = evaluate(world, systems)
        if new_process:
            asked = ask_in_new_process(world.questions, clock.now, uri, auth)
            table, missed = scored(world, asked)
            metrics = evaluation["metrics"]
            evaluation["metrics"] = {"sgam": metrics.pop("sgam"), NEW_PROCESS: table, **metrics}
            if missed:
                evaluation["misses"][NEW_PROCESS] = missed
            log(f"a new process asked the {len(asked)} questions: p50 {table['all']['p50_ms']} ms, "
                f"p95 {table['all']['p95_ms']} ms, p99 {table['all']['p99_ms']} ms")
    finally:
        remaining = {}
        try:
            if greplay is not None:
                remaining.update(greplay.delete())
        finally:
            if gsession is not None:
                gsession.close()
            for tenant in world.tenants:
                graph.delete_tenant(tenant)
                remaining[tenant] = graph.store.read(
                    "MATCH (n {tenant_id: $t}) WHERE NOT n:Deletion RETURN count(n) AS n", {"t": tenant})[0]["n"]
            graph.close()
    result = {
        "benchmark": "sgam.bench.replay", "format": 1,
        "started_at": started_at.isoformat(), "finished_at": datetime.now(timezone.utc).isoformat(),
        "params": {"size": size, "seed": seed, **SIZES[size], "torch_threads": threads,
                   "tenants_written": world.tenants},
        "machine": machine_info(),
        "versions": {"python": sys.version.split()[0], "sgam": package_version("sgam"),
                     "bm25s": package_version("bm25s"),
                     "sentence_transformers": package_version("sentence-transformers"),
                     "graphiti_core": package_version("graphiti-core"), **git_state()},
        "dataset": {"episodes": len(world.events), "deltas": len(world.events) - erasures,
                    "erasures": erasures, "slots": len(world.slots),
                    "ops": dict(sorted(world.ops.items())),
                    "erased_subjects": sum(len(v) for v in world.erased.values()),
                    "questions": dict(Counter(q.qtype for q in world.questions)),
                    "abstain_reasons": dict(Counter(q.note for q in world.questions
                                                    if q.qtype == "abstain"))},
        "sgam_load": load, "dm": dm_info, "graphiti": graphiti_info, **evaluation,
        "latency_ratios": {},
        "cleanup": {"remaining_nodes": remaining},
        "not_covered": ["DM date-aware reader", "hybrid KG+MiniLM", "when_start/when_end",
                        "count_changes", "retrieval-only metrics (recall@k)"],
    }
    result["latency_ratios"] = latency_ratios(result)
    result["targets"] = tail_targets(result)
    write_report(result, Path(out_dir), started_at)
    return result


def _graphiti_replay(bench_graphiti: Any, uri: str | None, auth: tuple[str, str] | None) -> tuple[Any, Any]:
    """A Graphiti session on the benchmark's database (MiniLM embedder) and its replay driver."""
    from sgam.queries.embeddings import default_embedder
    from sgam.settings import Settings, connection

    settings = Settings()
    g_uri, g_auth = connection(uri, auth, settings)
    session = bench_graphiti.GraphitiSession(g_uri, g_auth, default_embedder(),
                                             database=settings.neo4j_database)
    return session, bench_graphiti.GraphitiReplay(session)


def _graphiti_probe(world: World, uri: str | None, auth: tuple[str, str] | None,
                    log: Callable[[str], None]) -> dict[str, Any]:
    """Graphiti left out at a size beyond ``GRAPHITI_SIZES``: load the first
    ``GRAPHITI_PROBE_PERSONS`` persons of the first tenant the same way (then delete them) and
    extrapolate that load rate linearly to the whole world, for the skip reason."""
    why = (f"not run at size {world.size} ({len(world.events):,} episodes; default: Graphiti at "
           f"sizes {', '.join(GRAPHITI_SIZES)}, --graphiti forces it)")
    try:
        from sgam.bench import graphiti as bench_graphiti
    except (ImportError, GraphitiUnavailable) as exc:
        return {"skipped": f"{why}; its load rate was not measured ({exc})"}
    tenant = world.tenants[0]
    chosen = set(sorted(world.persons)[:GRAPHITI_PROBE_PERSONS])
    sample = World(world.seed, world.size, [tenant], world.labels,
                   [e for e in world.events if e.tenant == tenant and e.subject in chosen],
                   world.slots, {tenant: world.erased[tenant] & chosen},
                   {s: p for s, p in world.persons.items() if s in chosen}, [], Counter())
    session, replay = _graphiti_replay(bench_graphiti, uri, auth)
    try:
        load = replay.load(sample)
    except Exception as exc:  # noqa: BLE001 - a failed probe must not cost the run
        return {"skipped": f"{why}; the load-rate probe failed: {type(exc).__name__}: {exc}"[:400]}
    finally:
        remaining = replay.delete()
        session.close()
    rate = round(len(sample.events) / load["seconds"], 1)
    estimate = len(world.events) / rate
    took = f"{estimate / 60:,.0f} min" if estimate >= 120 else f"{estimate:.0f} s"
    log(f"Graphiti probe: {len(sample.events)} episodes loaded in {load['seconds']}s "
        f"({rate}/s); all {len(world.events):,} would take ~{took}")
    return {"skipped": f"{why}: its load (graphiti-core's save functions, MiniLM embeddings of every "
                       f"node and edge) ran at {rate} episodes/s on a sample of "
                       f"{len(sample.events)} episodes in this run, so loading all "
                       f"{len(world.events):,} would take ~{took} (linear "
                       f"extrapolation) before any question",
            "probe": {"persons": len(chosen), "episodes": len(sample.events),
                      "episodes_per_s": rate, "extrapolated_load_s": round(estimate),
                      "load": load, "remaining_nodes": remaining}}


def markdown(result: dict[str, Any]) -> str:
    metrics = result["metrics"]
    systems = list(metrics)
    p = result["params"]
    lines = [f"# Replay benchmark: size {p['size']}, seed {p['seed']}",
             "",
             f"{result['dataset']['episodes']} episodes, {result['dataset']['slots']} slots, "
             f"{sum(result['dataset']['questions'].values())} questions; DM: top-{TOP_K}, "
             f"{result['dm'].get('scoping', 'not run')}.",
             "",
             "Accuracy (exact match) by question type:",
             "",
             "| type | n | " + " | ".join(systems) + " |",
             "|---|---:|" + "---:|" * len(systems)]
    for qt in (*QTYPES, "all"):
        if qt not in metrics[systems[0]]:
            continue
        n = metrics[systems[0]][qt]["n"]
        cells = [f"{metrics[s][qt]['accuracy']:.1%}" for s in systems]
        lines.append(f"| {qt} | {n} | " + " | ".join(cells) + " |")
    lines += ["", "Diagnostics and latency (rates over all questions; 'stale (current)' over current "
              "questions; per-type rates are in the JSON):", "",
              "| system | accuracy | stale | stale (current) | resurrection | leak | p50 ms | p95 ms | p99 ms |",
              "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for s in systems:
        a = metrics[s]["all"]
        cur = metrics[s].get("current", {}).get("stale_rate") or 0.0
        lines.append(f"| {s} | {a['accuracy']:.1%} | {a['stale_rate']:.1%} | {cur:.1%} | "
                     f"{a['resurrection_rate']:.1%} | {a['leak_rate']:.1%} | {a['p50_ms']:.2f} | "
                     f"{a['p95_ms']:.2f} | {a['p99_ms']:.2f} |")
    targets = result.get("targets") or tail_targets(result)
    if targets:
        lines += ["", f"SGAM's tail (targets: p95 at most {TAIL_LIMITS['p95_ms']:g}x and p99 at most "
                  f"{TAIL_LIMITS['p99_ms']:g}x the p50; `sgam` asked every question once before, "
                  f"`{NEW_PROCESS}` is a process that has just started, asking each question once):", "",
                  "| system | target | limit | p50 ms | measured ms | ratio | met |", "|---|---|---:|---:|---:|---:|---|"]
        for t in targets:
            lines.append(f"| {t['system']} | {t['target']} | {t['limit']:g}x | {t['p50_ms']:.2f} | "
                         f"{t['measured_ms']:.2f} | {t['ratio']:.2f}x | {'yes' if t['met'] else '**no**'} |")
    skipped = (result.get("graphiti") or {}).get("skipped")
    if skipped:
        lines += ["", f"Graphiti: {skipped}."]
    ratios = latency_ratios(result)
    if ratios:
        lines += ["", "Answer latency, Graphiti's search over SGAM's exact read (same questions, "
                  "same run; the machine may be shared):", "",
                  "| system | p50 ratio | p95 ratio |", "|---|---:|---:|"]
        for name, r in ratios.items():
            lines.append(f"| {name} / sgam | {r['p50']:.1f}x | {r['p95']:.1f}x |")
    return "\n".join(lines) + "\n"


def latency_ratios(result: dict[str, Any]) -> dict[str, dict[str, float]]:
    """p50/p95 latency of each Graphiti column divided by SGAM's, over all questions."""
    metrics = result["metrics"]
    if "sgam" not in metrics:
        return {}
    base = metrics["sgam"]["all"]
    out = {}
    for name in metrics:
        if name.startswith("graphiti") and base["p50_ms"] and base["p95_ms"]:
            a = metrics[name]["all"]
            out[name] = {"p50": round(a["p50_ms"] / base["p50_ms"], 2),
                         "p95": round(a["p95_ms"] / base["p95_ms"], 2)}
    return out


def write_report(result: dict[str, Any], out_dir: Path, started_at: datetime) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = out_dir / f"replay-{result['params']['size']}-{started_at.strftime('%Y%m%dT%H%M%SZ')}"
    stem = stem.with_name(f"{stem.name}-{secrets.token_hex(2)}") if stem.with_suffix(".json").exists() else stem
    result["result_files"] = {"json": str(stem.with_suffix(".json")), "markdown": str(stem.with_suffix(".md"))}
    try:
        _chart(result, stem.with_suffix(".png"))
        result["result_files"]["png"] = str(stem.with_suffix(".png"))
    except ImportError:
        result["result_files"]["png"] = None
        result["png_note"] = "matplotlib is not installed (pip install 'sgam[bench]'); no chart"
    stem.with_suffix(".md").write_text(markdown(result), encoding="utf-8")
    stem.with_suffix(".json").write_text(json.dumps(result, indent=2, default=str) + "\n",
                                         encoding="utf-8")


def _chart(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    metrics = result["metrics"]
    systems = list(metrics)
    types = [qt for qt in QTYPES if qt in metrics[systems[0]]]
    width = 0.8 / len(systems)
    fig, ax = plt.subplots(figsize=(11, 4.5))
    for i, s in enumerate(systems):
        ax.bar([x + i * width for x in range(len(types))],
               [metrics[s][qt]["accuracy"] * 100 for qt in types], width, label=s)
    ax.set_xticks([x + 0.4 - width / 2 for x in range(len(types))], types, rotation=20)
    ax.set_ylabel("exact-match accuracy (%)")
    ax.set_ylim(0, 105)
    p = result["params"]
    ax.set_title(f"Replay benchmark, size {p['size']}, seed {p['seed']}")
    ax.legend(fontsize=8, ncols=len(systems), loc="upper center", bbox_to_anchor=(0.5, -0.18))
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


if __name__ == "__main__":
    _ask_from_stdin()

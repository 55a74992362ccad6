"""Context assembly for agents: the smallest context that answers, exact state first.

:func:`context_steps` reads, in order (DESIGN.md, "Read path"):

1. the **exact** state: the facts valid at the asked instant (now, or ``valid_at``; without it, at
   some time in the window the question names, :mod:`sgam.queries.temporal`) and believed now,
   for the subjects (given, or found by name in the question) and the attributes in play (given, or
   the ones the question names; all of the subjects' attributes when it names none);
2. **expansion**, only for supplementary evidence: vector kNN from the question over episode text,
   entity names and fact statements (``knn-*`` queries: exact within a tenant of up to
   EXACT_LIMIT nodes of a kind, Neo4j's vector indexes beyond), full-text search of
   episode text (``search-episodes``) and bounded graph traversal from the anchors
   (``context-neighbourhood``), fused by reciprocal rank and deduplicated;
3. **labels**: every retrieved episode is checked against what holds now (``episode-facts``): one
   that states a value no longer held is ``history`` (with the memory ids that superseded it), one
   whose statements all hold is ``current``, one that stated no fact is ``related``. Expansion
   never changes the exact facts.

:func:`assemble` (pure) then writes the text for a prompt within ``budget_tokens``: the exact facts
first, each with its citation (memory id, episode, speaker, valid window), then as much evidence as
fits, saying how many items were left out. A budget too small for the exact facts raises
:class:`ContextBudgetExceeded`; nothing stored (an empty tenant) gives an empty context.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Callable, Generator, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta, timezone
from functools import partial
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from sgam.graph.errors import InvalidDelta, SgamError, checked
from sgam.graph.ddl import EMBEDDING_DIMENSIONS
from sgam.graph.models import Cardinality, Fact, check_tenant, require_aware
from sgam.graph.schema import Schema, default_schema
from sgam.graph.steps import Blocking, Operation, Read
from sgam.graph.codec import fact_from_properties

from .embeddings import (
    INSTALL_HINT,
    Embedder,
    EmbeddingsUnavailable,
    check_dimensions,
    embeddings_installed,
    require_embedder,
)
from .loader import FACT_COLUMNS, get_query
from .temporal import EPSILON, TimeIntent, time_intent

Label = Literal["current", "history", "related"]
TokenCounter = Callable[[str], int]

RRF_K = 60            # reciprocal rank fusion constant (Cormack et al.)
EXACT_LIMIT = 5000    # a tenant with at most this many nodes of a kind is searched exactly (scanned)
OVERFETCH = 10        # a larger one: vector kNN reads k * OVERFETCH neighbours of all tenants, filters
MAX_FETCH = 4096      # ... and widens up to this many while too few of them are the tenant's
MAX_QUOTE = 400       # characters of an episode's text quoted in one evidence line


class ContextBudgetExceeded(SgamError):
    """``budget_tokens`` cannot hold even the exact facts; nothing was truncated."""

    def __init__(self, message: str, needed: int, budget: int) -> None:
        super().__init__(message)
        self.needed = needed
        self.budget = budget


# -- structured output ------------------------------------------------------------------------

class _Out(BaseModel):
    model_config = ConfigDict(frozen=True)


class ContextFact(_Out):
    """One exact fact: valid at the asked instant, believed now."""

    ref: str
    subject: str
    attribute: str
    value: Any
    memory_id: str
    episode: str
    asserted_by: str
    valid_from: datetime
    valid_to: datetime | None = None
    confidence: float = 1.0
    line: str


class StatedValue(_Out):
    """A value an evidence episode stated, checked against what holds at the asked instant."""

    subject: str
    attribute: str
    value: Any
    memory_id: str
    valid_from: datetime
    valid_to: datetime | None = None
    label: Literal["current", "history"]
    superseded_by: tuple[str, ...] = ()
    holding_values: tuple[Any, ...] = ()


class Evidence(_Out):
    """Supplementary evidence from expansion; never overrides the exact facts."""

    ref: str
    kind: Literal["episode", "fact", "entity"]
    id: str
    label: Label
    superseded_by: tuple[str, ...] = ()
    sources: tuple[str, ...] = ()
    score: float = 0.0
    text: str
    episode: str | None = None
    asserted_by: str | None = None
    occurred_at: datetime | None = None
    memory_id: str | None = None
    valid_from: datetime | None = None
    valid_to: datetime | None = None
    states: tuple[StatedValue, ...] = ()
    line: str


class Context(_Out):
    """A context for a prompt (``text``) and the same content as data."""

    tenant: str
    question: str
    as_of: datetime
    current: bool
    subjects: tuple[str, ...]
    attributes: tuple[str, ...]
    facts: tuple[ContextFact, ...]
    evidence: tuple[Evidence, ...]
    omitted: int = 0
    tokens: int
    budget_tokens: int
    notes: tuple[str, ...] = ()
    text: str
    valid_window: tuple[datetime, datetime] | None = None
    time_phrase: str | None = None
    memory_types: tuple[str, ...] | None = None

    @property
    def empty(self) -> bool:
        return not self.facts and not self.evidence


# -- pure helpers ----------------------------------------------------------------------------

_PIECE = re.compile(r"\w+|[^\w\s]")
_WORD = re.compile(r"[A-Za-z0-9]+")
STOPWORDS = frozenset("""
a an and are as at be but by can could did do does for from had has have her his how i in is it
its me my of on or our she so that the their them then there these they this to was we were what
when where which who whom why will with would you your not no s t""".split())


def approx_tokens(text: str) -> int:
    """A model-free token estimate, meant to err high against common BPE tokenizers.

    A punctuation mark is one token; a word of letters one per 6 letters (at least one), a run
    with digits (dates, hex ids) one per 3 characters; the sum times 1.15, rounded up.
    """
    count = 0
    for piece in _PIECE.findall(text):   # (n + 5) // 6 is ceil(n / 6), at least 1 for a piece
        if piece.isalpha():
            count += (len(piece) + 5) // 6
        elif piece[0].isalnum() or piece[0] == "_":
            count += (len(piece) + 2) // 3
        else:
            count += 1
    return math.ceil(count * 1.15)


def question_terms(question: str) -> list[str]:
    """The question's content words, lower-cased, deduplicated, in order."""
    seen: dict[str, None] = {}
    for word in _WORD.findall(question.lower()):
        if len(word) > 1 and word not in STOPWORDS:
            seen.setdefault(word, None)
    return list(seen)


def lucene_query(question: str) -> str:
    """An OR query of the question's content words (only ``[a-z0-9]``, so never a syntax error)."""
    return " OR ".join(question_terms(question))


def _stem(word: str) -> str:
    """A crude plural stemmer: cities -> city, deadlines -> deadline (address stays addres both ways)."""
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    return word[:-1] if len(word) > 3 and word.endswith("s") else word


def attributes_in_play(question: str, attributes: Iterable[str]) -> list[str]:
    """The attributes whose name words appear in the question (``passport_deadline`` for
    "When is Mira's passport deadline?"); empty when the question names none."""
    words = {_stem(w) for w in question_terms(question)}
    return sorted(a for a in set(attributes)
                  if any(len(p) > 2 and _stem(p) in words for p in a.lower().split("_")))


def fuse(rankings: Mapping[str, Sequence[str]]) -> list[tuple[str, float, tuple[str, ...]]]:
    """Reciprocal rank fusion: ``(key, score, sources)``, best first; keys deduplicated."""
    scores: dict[str, float] = defaultdict(float)
    sources: dict[str, list[str]] = defaultdict(list)
    for source, keys in rankings.items():
        for rank, key in enumerate(dict.fromkeys(keys)):
            scores[key] += 1.0 / (RRF_K + rank + 1)
            sources[key].append(source)
    order = sorted(scores, key=lambda k: (-scores[k], k))
    return [(k, scores[k], tuple(sources[k])) for k in order]


def _instant(value: datetime | None) -> str:
    if value is None:
        return "open"
    value = value.astimezone(timezone.utc)
    if value.time() == datetime.min.time():
        return value.date().isoformat()
    spec = "minutes" if value.second == 0 and value.microsecond == 0 else "seconds"
    return value.isoformat(timespec=spec).replace("+00:00", "Z")


def _value(value: Any) -> str:
    if isinstance(value, datetime):
        return _instant(value)
    if isinstance(value, date):
        return value.isoformat()
    return str(value)


def _window(valid_from: datetime | None, valid_to: datetime | None) -> str:
    return f"valid {_instant(valid_from)}..{_instant(valid_to)}"


def _span(delta: timedelta) -> str:
    """A length of time, rounded down, in minutes under an hour, hours under a day, days under
    two weeks, weeks under nine, months (30 days) under two years, else years ("3 weeks")."""
    seconds = max(0, int(delta.total_seconds()))
    days = seconds // 86400
    if seconds < 60:
        return "under a minute"
    for size, unit, limit in ((seconds // 60, "minute", 60 * 60), (seconds // 3600, "hour", 86400),
                              (days, "day", 14 * 86400), (days // 7, "week", 63 * 86400),
                              (days // 30, "month", 730 * 86400)):
        if seconds < limit:
            return f"{size} {unit}{'' if size == 1 else 's'}"
    years = days // 365
    return f"{years} year{'' if years == 1 else 's'}"


def _ago(then: datetime, now: datetime) -> str:
    return "just now" if now - then < timedelta(minutes=1) else f"{_span(now - then)} ago"


def freshness(fact: Fact, now: datetime) -> str:
    """How old a fact is and when it was last confirmed, read against ``now``:
    ``(since 2026-06-10, 3 weeks; confirmed 2 days ago)``; a closed version says when it ended,
    a scheduled one when it starts. Confirmation falls back to ``recorded_at``."""
    start = fact.valid_from.astimezone(timezone.utc).date().isoformat()
    if fact.valid_from > now:
        age = f"from {start}, in {_span(fact.valid_from - now)}"
    elif fact.valid_to is not None and fact.valid_to <= now:
        age = f"{start} to {_instant(fact.valid_to)}, ended {_ago(fact.valid_to, now)}"
    else:
        age = f"since {start}, {_span(now - fact.valid_from)}"
    return f"({age}; confirmed {_ago(fact.last_confirmed_at or fact.recorded_at, now)})"


def _cite(fact: Fact, now: datetime | None = None) -> str:
    fresh = "" if now is None else f" {freshness(fact, now)}"
    return (f"{_window(fact.valid_from, fact.valid_to)}{fresh} | memory {fact.memory_id}, "
            f"episode {fact.source_episode_id}, asserted by {fact.asserted_by}")


def fact_line(ref: str, fact: Fact, now: datetime | None = None) -> str:
    """One exact fact's line; with ``now``, it says how old the fact is (:func:`freshness`)."""
    return f"[{ref}] {fact.subject}.{fact.attribute} = {_value(fact.value)} | {_cite(fact, now)}"


def _quote(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= MAX_QUOTE else text[:MAX_QUOTE - 1] + "…"


# -- candidates and labels -------------------------------------------------------------------

@dataclass
class EpisodeHit:
    id: str
    content: str
    actor: str | None = None
    occurred_at: datetime | None = None


@dataclass
class EntityHit:
    id: str
    name: str | None = None
    type: str | None = None


@dataclass
class Expansion:
    """What expansion found, per source, best first (keys: ``episode:ID``, ``fact:MEMORY_ID``,
    ``entity:ID``), and the payloads behind the keys."""

    rankings: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    episodes: dict[str, EpisodeHit] = field(default_factory=dict)
    facts: dict[str, Fact] = field(default_factory=dict)
    entities: dict[str, EntityHit] = field(default_factory=dict)
    stated: dict[str, list[StatedValue]] = field(default_factory=dict)

    def add_episode(self, source: str, hit: EpisodeHit) -> None:
        self.episodes.setdefault(hit.id, hit)
        self.rankings[source].append(f"episode:{hit.id}")

    def add_fact(self, source: str, fact: Fact) -> None:
        self.facts.setdefault(fact.memory_id, fact)
        self.rankings[source].append(f"fact:{fact.memory_id}")

    def add_entity(self, source: str, hit: EntityHit) -> None:
        self.entities.setdefault(hit.id, hit)
        self.rankings[source].append(f"entity:{hit.id}")


def classify_statements(rows: Iterable[dict[str, Any]],
                        single_valued: Iterable[str]) -> dict[str, list[StatedValue]]:
    """Per episode, the values it stated and whether each still holds (``episode-facts`` rows).

    A stated value is ``current`` when a version with the same value holds at the instant, else
    ``history``; for a single-valued attribute the versions that hold instead are its
    ``superseded_by``. Retired rows and closed copies of one statement collapse into one, cited by
    the row still believed (else the latest recorded).
    """
    single = set(single_valued)
    groups: dict[tuple[str, str, str, str], list[tuple[Fact, list[Fact]]]] = defaultdict(list)
    for row in rows:
        fact = fact_from_properties(row["fact"])
        holding = [fact_from_properties(h) for h in row["holding"] if h]
        groups[(row["episode"], fact.subject, fact.attribute, fact.value_key)].append((fact, holding))
    out: dict[str, list[StatedValue]] = defaultdict(list)
    for (episode, _, attribute, value_key), members in groups.items():
        members.sort(key=lambda m: (m[0].expired_at is None, m[0].recorded_at, m[0].valid_from))
        fact, holding = members[-1]
        holds = any(h.value_key == value_key for h in holding)
        out[episode].append(StatedValue(
            subject=fact.subject, attribute=attribute, value=fact.value, memory_id=fact.memory_id,
            valid_from=fact.valid_from, valid_to=fact.valid_to,
            label="current" if holds else "history",
            superseded_by=() if holds or attribute not in single else tuple(h.memory_id for h in holding),
            holding_values=tuple(h.value for h in holding),
        ))
    return dict(out)


def _states_text(states: Sequence[StatedValue]) -> str:
    """Each superseded statement in full (value, memory, window, what replaced it); the ones that
    still hold only by memory id."""
    parts = []
    for s in states:
        if s.label == "current":
            continue
        said = f"its {s.subject}.{s.attribute} = {_value(s.value)} (memory {s.memory_id}, {_window(s.valid_from, s.valid_to)})"
        if s.superseded_by:
            now = ", ".join(_value(v) for v in s.holding_values)
            parts.append(f"{said} is superseded by {', '.join(s.superseded_by)} (= {now})")
        else:
            parts.append(f"{said} no longer holds")
    holding = [s.memory_id for s in states if s.label == "current"]
    if holding and not parts:
        parts.append(f"supports memory {', '.join(holding)}")
    return "; ".join(parts)


def build_evidence(expansion: Expansion, exact_ids: set[str],
                   slots: Iterable[tuple[str, str]] = (), anchors: Iterable[str] = (),
                   now: datetime | None = None) -> list[Evidence]:
    """Fuse the rankings and label every candidate; exact facts are never repeated as evidence.

    Episodes that state something about a ``(subject, attribute)`` slot in play come first (in
    fused order): they are the ones whose old values an agent could otherwise mistake for the
    current state.
    """
    in_play = set(slots)
    anchors = set(anchors)
    evidence: list[Evidence] = []
    for key, score, sources in fuse(expansion.rankings):
        kind, _, ident = key.partition(":")
        if kind == "episode":
            hit = expansion.episodes[ident]
            states = tuple(sorted(expansion.stated.get(ident, ()),
                                  key=lambda s: (s.label != "history", s.subject, s.attribute)))
            label: Label = ("history" if any(s.label == "history" for s in states)
                            else "current" if states else "related")
            superseded = tuple(dict.fromkeys(m for s in states for m in s.superseded_by))
            when = f", {_instant(hit.occurred_at)}" if hit.occurred_at else ""
            line = f"{label} | episode {hit.id} ({hit.actor or 'unknown'}{when}): \"{_quote(hit.content)}\""
            if states:
                line += " | " + _states_text(states)
            evidence.append(Evidence(
                ref="", kind="episode", id=ident, label=label, superseded_by=superseded,
                sources=sources, score=score, text=hit.content, episode=hit.id,
                asserted_by=hit.actor, occurred_at=hit.occurred_at, states=states, line=line))
        elif kind == "fact":
            if ident in exact_ids:
                continue
            fact = expansion.facts[ident]
            evidence.append(Evidence(
                ref="", kind="fact", id=ident, label="current", sources=sources, score=score,
                text=f"{fact.subject}.{fact.attribute} = {_value(fact.value)}",
                episode=fact.source_episode_id, asserted_by=fact.asserted_by,
                memory_id=fact.memory_id, valid_from=fact.valid_from, valid_to=fact.valid_to,
                line=f"current | fact {fact.subject}.{fact.attribute} = {_value(fact.value)} | {_cite(fact, now)}"))
        else:
            if ident in anchors:
                continue
            entity = expansion.entities[ident]
            name = f" \"{entity.name}\"" if entity.name and entity.name != entity.id else ""
            kind_text = f" ({entity.type})" if entity.type else ""
            evidence.append(Evidence(
                ref="", kind="entity", id=ident, label="related", sources=sources, score=score,
                text=entity.name or entity.id,
                line=f"related | entity {entity.id}{name}{kind_text}"))
    evidence.sort(key=lambda e: not any((s.subject, s.attribute) in in_play for s in e.states))
    return evidence


# -- assembly (pure) -------------------------------------------------------------------------

def assemble(*, tenant: str, question: str, as_of: datetime, current: bool,
             subjects: Sequence[str], attributes: Sequence[str], facts: Sequence[Fact],
             evidence: Sequence[Evidence], budget_tokens: int, notes: Sequence[str] = (),
             count_tokens: TokenCounter = approx_tokens, now: datetime | None = None,
             intent: TimeIntent | None = None, memory_types: Sequence[str] | None = None) -> Context:
    """The context text within ``budget_tokens``: exact facts first (all of them, or an error),
    then evidence in the given order while it fits, then how many evidence items were left out.

    ``now``: each fact line says how old the fact is then. ``intent``: the window the question
    named (the exact facts are those valid at some time in it)."""
    if not isinstance(budget_tokens, int) or isinstance(budget_tokens, bool) or budget_tokens < 1:
        raise InvalidDelta(f"budget_tokens must be a positive whole number, got {budget_tokens!r}")
    window = None if intent is None or intent.start is None or intent.end is None else (intent.start, intent.end)
    base: dict[str, Any] = dict(tenant=tenant, question=question, as_of=as_of, current=current,
                subjects=tuple(subjects), attributes=tuple(attributes), budget_tokens=budget_tokens,
                valid_window=window, time_phrase=None if window is None else intent.phrase,  # type: ignore[union-attr]
                memory_types=None if memory_types is None else tuple(memory_types))
    if not facts and not evidence:
        return Context(**base, facts=(), evidence=(), tokens=0, text="",
                       notes=(*notes, "no stored memory matched: the context is empty"))

    when = f"now ({_instant(as_of)})" if current else f"as of {_instant(as_of)}"
    if window is not None:
        when = f"valid at some time in {_instant(window[0])}..{_instant(window[1])} (\"{intent.phrase}\")"  # type: ignore[union-attr]
    kinds = "" if memory_types is None else f", memory types {', '.join(memory_types)}"
    header = [f"Memory for: {question}",
              f"State {when}, tenant {tenant}{kinds}. Exact facts are authoritative; evidence never overrides them."]
    exact = [ContextFact(
        ref=f"F{i}", subject=f.subject, attribute=f.attribute, value=f.value, memory_id=f.memory_id,
        episode=f.source_episode_id, asserted_by=f.asserted_by, valid_from=f.valid_from,
        valid_to=f.valid_to, confidence=f.confidence, line=fact_line(f"F{i}", f, now),
    ) for i, f in enumerate(facts, 1)]
    fact_lines = (["Exact facts:", *(f.line for f in exact)] if exact
                  else [f"Exact facts: none stored for {', '.join(subjects) or 'the question'}."])
    lines = header + fact_lines
    used = sum(count_tokens(line) for line in lines)
    if used > budget_tokens:
        raise ContextBudgetExceeded(
            f"budget_tokens={budget_tokens} cannot hold the exact facts: the {len(exact)} fact(s) "
            f"with their citations need about {used} tokens; raise budget_tokens to at least {used} "
            "or narrow the subjects or attributes (nothing was truncated)", used, budget_tokens)

    chosen: list[Evidence] = []
    if evidence:
        section = "Evidence (labelled current, history or related):"
        costs = [count_tokens(f"[E{len(evidence)}] {e.line}") for e in evidence]
        room = budget_tokens - used - count_tokens(section)
        if sum(costs) <= room:
            picked = list(range(len(evidence)))
        else:
            room -= count_tokens(_omitted_note(len(evidence), budget_tokens))
            picked = []
            for i, cost in enumerate(costs):
                if cost <= room:
                    picked.append(i)
                    room -= cost
        if picked:
            chosen = [evidence[i].model_copy(update={
                "ref": f"E{n}", "line": f"[E{n}] {evidence[i].line}"}) for n, i in enumerate(picked, 1)]
            lines += [section, *(e.line for e in chosen)]
    omitted = len(evidence) - len(chosen)
    if omitted:
        lines.append(_omitted_note(omitted, budget_tokens))
    tokens = used + sum(count_tokens(line) for line in lines[len(header) + len(fact_lines):])
    return Context(**base, facts=tuple(exact), evidence=tuple(chosen), omitted=omitted,
                   tokens=tokens, text="\n".join(lines) + "\n", notes=tuple(notes))


def _omitted_note(count: int, budget: int) -> str:
    return f"({count} more evidence item(s) left out to fit budget_tokens={budget})"


# -- the read plan ---------------------------------------------------------------------------

def _named(name: str, columns: tuple[str, ...] | None = None, **params: Any) -> Read:
    query = get_query(name)
    return Read(query.statement(query.bind(params), columns))


def _nearest(name: str, k: int, exact_limit: int, **params: Any) -> Operation[tuple[list[Any], str | None]]:
    """The tenant's k nearest of one kind (``name`` is a ``knn-*`` query), and a note when the
    search had to scan a large tenant whole.

    A tenant of at most ``exact_limit`` nodes of the kind is scored whole (``*-exact``): its true
    top k, whoever else shares the index. A larger one reads the vector index, widening while the
    nearest of all tenants hold fewer than k of its own, and is scanned whole only when even
    MAX_FETCH of them do not (other tenants crowd it out).
    """
    [row] = yield _named(f"{name}-exact", k=k, exact_limit=exact_limit, **params)
    if row["exact"]:
        return row["hits"], None
    fetch = min(MAX_FETCH, k * OVERFETCH)
    while True:
        [row] = yield _named(name, fetch=fetch, k=k, **params)
        hits = row["hits"]
        if len(hits) >= k or row["fetched"] < fetch or (row["floor"] or 0.0) < params["min_score"]:
            return hits, None
        if fetch >= MAX_FETCH:
            break
        fetch = min(MAX_FETCH, fetch * 4)
    [row] = yield _named(f"{name}-exact", k=k, exact_limit=None, **params)
    return row["hits"], (f"{name}: the {fetch} nearest items of all tenants held {len(hits)} of this "
                         f"tenant's, so all its {row['scanned']} were scored")


def _parse_instant(text: str | None) -> datetime | None:
    return None if text is None else datetime.fromisoformat(text.replace("Z", "+00:00"))


def _episode(row: dict[str, Any]) -> EpisodeHit:
    return EpisodeHit(row["id"], row["content"], row.get("actor"), _parse_instant(row.get("occurred_at")))


def _check_vector(vector: Any) -> list[float]:
    """``vector`` (a sequence or a numpy array) as a list of floats, or :class:`InvalidDelta`
    naming what is wrong with it."""
    if hasattr(vector, "tolist"):   # numpy arrays and the like
        vector = vector.tolist()
    if isinstance(vector, (str, bytes)) or not isinstance(vector, Sequence):
        raise InvalidDelta(f"question_vector must be a sequence of {EMBEDDING_DIMENSIONS} numbers, "
                           f"got {type(vector).__name__}")
    if len(vector) != EMBEDDING_DIMENSIONS:
        raise InvalidDelta(f"question_vector has {len(vector)} numbers; the vector indexes hold "
                           f"{EMBEDDING_DIMENSIONS}-dimension embeddings")
    for i, x in enumerate(vector):
        if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x):
            raise InvalidDelta(f"question_vector[{i}] is {x!r}; every element must be a finite number")
    return [float(x) for x in vector]


def context_steps(tenant: str, question: str, *, subjects: str | Sequence[str] | None = None,
                  attributes: str | Sequence[str] | None = None, valid_at: datetime | None = None,
                  now: datetime, budget_tokens: int = 800, expand: bool | None = None,
                  embedder: Embedder | None = None, question_vector: Sequence[float] | None = None,
                  schema: Schema | None = None, k: int = 8, min_score: float = 0.6, principal: str | None = None,
                  count_tokens: TokenCounter = approx_tokens, asked_at: datetime | None = None,
                  memory_types: str | Sequence[str] | None = None,
                  exact_limit: int = EXACT_LIMIT) -> Operation[Context]:
    """Read what the context needs and assemble it (an operation of reads, see ``graph.steps``).

    ``expand``: ``None`` widens with everything available (vector kNN only with the embeddings
    extra, saying so in ``notes`` when it is missing); ``True`` requires vector expansion
    (:class:`EmbeddingsUnavailable` without the extra); ``False`` gives the exact facts only.
    ``question_vector``: the question's embedding when the caller already has it (from the model
    that embedded the stored nodes, e.g. to rank the same question elsewhere too): the kNN reads
    use it and the question is not embedded again (no embedder is then needed).
    ``principal``: the reader; every read below leaves out the private facts (and the episodes
    that stated them) it may not see (None: shared facts only; ``"*"``: everything).
    ``memory_types``: only facts of these memory types (exact facts and fact evidence; episodes
    are not typed). ``asked_at``: when the question was asked (default ``now``); without
    ``valid_at``, a time the question names (:func:`sgam.queries.temporal.time_intent`, read
    relative to ``asked_at``) sets the valid-time window, and a phrase it cannot pin down is
    reported in ``notes``. Every fact line says how old the fact is at ``now``.
    ``exact_limit``: vector kNN scores every node of a kind in a tenant holding at most this many
    (its exact top k); a larger tenant reads the vector index first (see :func:`_nearest`).
    """
    tenant = checked(check_tenant, tenant)
    reference = checked(require_aware, asked_at, "asked_at") if asked_at is not None else now
    instant = checked(require_aware, valid_at, "valid_at") if valid_at is not None else reference
    types = None if memory_types is None else (schema or default_schema()).check_memory_types(memory_types)
    if not isinstance(question, str) or not question.strip():
        raise InvalidDelta("question must be a non-empty string")
    if not isinstance(budget_tokens, int) or isinstance(budget_tokens, bool) or budget_tokens < 1:
        raise InvalidDelta(f"budget_tokens must be a positive whole number, got {budget_tokens!r}")
    if not isinstance(k, int) or isinstance(k, bool) or k < 1:
        raise InvalidDelta(f"k must be a whole number of at least 1, got {k!r:.40}")
    if not isinstance(min_score, (int, float)) or isinstance(min_score, bool) or not 0 <= min_score <= 1:
        raise InvalidDelta(f"min_score must be a number from 0 to 1, got {min_score!r:.40}")
    if not isinstance(exact_limit, int) or isinstance(exact_limit, bool) or exact_limit < 0:
        raise InvalidDelta(f"exact_limit must be a whole number of at least 0, got {exact_limit!r:.40}")
    subject_list = [subjects] if isinstance(subjects, str) else list(subjects or [])
    wanted = [attributes] if isinstance(attributes, str) else list(attributes or [])
    notes: list[str] = []
    intent = TimeIntent() if valid_at is not None else time_intent(question, reference)
    notes += [f"time in the question: {why}; answered for {_instant(reference)} (pass valid_at to choose)"
              for why in intent.unresolved]
    if intent.start is not None and intent.end is not None:
        # evidence is labelled against one instant: the asked time when the window holds it
        instant = min(max(reference, intent.start), intent.end - EPSILON)
        notes.append(f"valid time from the question: \"{intent.phrase}\" read as "
                     f"{_instant(intent.start)}..{_instant(intent.end)} (asked {_instant(reference)})")

    use_vectors = expand is not False
    vector = None if question_vector is None else _check_vector(question_vector)
    if use_vectors and vector is None:   # the question must be embedded here
        if embedder is None and not embeddings_installed():
            if expand:
                raise EmbeddingsUnavailable(f"expansion needs the embeddings extra: {INSTALL_HINT}")
            use_vectors = False
            notes.append(f"vector expansion skipped: the embeddings extra is not installed ({INSTALL_HINT})")
        else:
            embedder = require_embedder(embedder)
            check_dimensions(embedder)
    terms = lucene_query(question)

    # 1. anchors: the subjects given, or the entities the question names
    if not subject_list and terms:
        rows = yield _named("search-entities", tenant=tenant, text=terms, k=5)
        if rows:
            top = rows[0]["score"]
            subject_list = [r["id"] for r in rows if r["score"] >= 0.5 * top]
            notes.append(f"subjects found by name in the question: {', '.join(subject_list)}")

    # 2. exact state: valid at the instant, believed now
    # The stored maps of every fact valid at the instant; only the exact ones (and, when expanding,
    # the rest as graph evidence) are decoded into Facts.
    def exact_rows(attribute: str | None) -> Generator[Read, Any, list[dict[str, Any]]]:
        found: list[dict[str, Any]] = []
        for subject in dict.fromkeys(subject_list):
            if intent.start is not None:
                rows = yield _named("valid-during", FACT_COLUMNS, tenant=tenant, subject=subject,
                                    attribute=attribute, valid_from=intent.start, valid_to=intent.end,
                                    known_at=None, principal=principal, memory_types=types)
            else:
                rows = yield _named("as-of", FACT_COLUMNS, tenant=tenant, subject=subject, attribute=attribute,
                                    valid_at=instant, known_at=None, principal=principal, memory_types=types)
            found += [r["fact"] for r in rows]
        return found

    # Without expansion a subject's other facts would only be read to be dropped, so when one
    # attribute is in play (the one asked, or the only one of the schema's that the question names)
    # only its slot is read. If the subjects hold none of it, every fact is read after all: the
    # attributes in play are then all the subjects have, as without the shortcut.
    only = None
    if expand is False:
        named = wanted or ([] if schema is None else attributes_in_play(question, schema.attributes))
        only = named[0] if len(named) == 1 else None
    every = yield from exact_rows(only)
    if only is not None and not wanted and not any(props["attribute"] == only for props in every):
        every = yield from exact_rows(None)
    present = {props["attribute"] for props in every}
    in_play = wanted or attributes_in_play(question, present) or sorted(present)
    exact = [fact_from_properties(props) for props in every if props["attribute"] in in_play]
    exact_ids = {f.memory_id for f in exact}

    # 3. expansion: graph traversal, full text, vectors
    found = Expansion()
    if expand is not False:
        if subject_list:
            rows = yield _named("context-neighbourhood", tenant=tenant, subjects=subject_list,
                                valid_at=instant, limit=k, principal=principal, memory_types=types)
            for row in rows:
                if row["kind"] == "episode":
                    found.add_episode("graph", _episode(row["episode"]))
            for props in every:
                if props["memory_id"] not in exact_ids:
                    found.add_fact("graph", fact_from_properties(props))
            for row in sorted((r for r in rows if r["kind"] == "fact"), key=lambda r: r["distance"]):
                found.add_fact("graph", fact_from_properties(row["fact"]))
        if terms:
            rows = yield _named("search-episodes", tenant=tenant, text=terms, valid_at=instant, k=k,
                                principal=principal)
            for row in rows:
                found.add_episode("fulltext", _episode(row))
        if use_vectors:
            if vector is None:
                assert embedder is not None
                # Off the event loop of an async graph: a model's forward pass takes milliseconds of CPU.
                [vector] = yield Blocking(partial(embedder.embed, [question]))
            for name in ("knn-episodes", "knn-statements", "knn-entities"):
                typed = {"memory_types": types} if name == "knn-statements" else {}
                hits, note = yield from _nearest(name, k, exact_limit, tenant=tenant, vector=vector,
                                                 min_score=min_score, valid_at=instant, principal=principal,
                                                 **typed)
                notes += [note] if note else []
                for hit in hits:
                    if name == "knn-episodes":
                        found.add_episode("vector", _episode(hit))
                    elif name == "knn-statements":
                        found.add_fact("vector", fact_from_properties(hit["fact"]))
                    else:
                        found.add_entity("vector", EntityHit(hit["id"], hit.get("name"), hit.get("type")))

        # 4. labels: what each retrieved episode stated, against what holds at the instant
        if found.episodes:
            rows = yield _named("episode-facts", tenant=tenant, episodes=sorted(found.episodes),
                                valid_at=instant, principal=principal)
            single = [] if schema is None else [
                name for name, spec in schema.attributes.items() if spec.cardinality is Cardinality.ONE]
            found.stated = classify_statements(rows, single)

    evidence = build_evidence(found, exact_ids, {(f.subject, f.attribute) for f in exact}, subject_list, now)
    return assemble(tenant=tenant, question=question, as_of=instant,
                    current=valid_at is None and asked_at is None and intent.start is None,
                    subjects=subject_list, attributes=in_play if every else wanted, facts=exact,
                    evidence=evidence, budget_tokens=budget_tokens, notes=notes,
                    count_tokens=count_tokens, now=now, intent=intent, memory_types=types)

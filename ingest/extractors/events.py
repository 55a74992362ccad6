"""Deterministic mapping of structured business events to candidate writes (no model).

The rules live in YAML next to the schema (``graph/schemas/events.yaml``, format described in
its header): each event type lists delta templates filled from the event's fields. The rules are
checked against the schema when the mapping is built, so a rule can never name an attribute or
subject type the schema does not know. An event the rules cannot map (not a JSON object, no type,
an unknown type, a missing field) raises a terminal :class:`~sgam.graph.errors.ExtractionError`
that names the problem; the pipeline quarantines it and keeps the raw episode.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from collections.abc import Mapping, Sequence
from importlib.resources import files
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from sgam.graph.errors import ExtractionError, SchemaViolation, SgamError, validation_problems
from sgam.graph.models import Episode, EpisodeKind, Op
from sgam.graph.schema import Schema

from sgam.ingest.extract import CurrentState, RawCandidate

_WHOLE = re.compile(r"^\{([A-Za-z0-9_.]+)(\??)\}$")
_PLACEHOLDER = re.compile(r"\{([A-Za-z0-9_.]+)(\??)\}")
_OMIT = object()


class _Spec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class DeltaTemplate(_Spec):
    """One candidate write of a rule; strings may hold ``{field}`` / ``{field?}`` placeholders."""

    subject: str
    attribute: str
    value: Any = None
    op: Op = Op.ASSERT
    subject_type: str | None = None
    subject_name: str | None = None
    valid_from: str | None = None
    confidence: float | str | None = None
    optional: bool = False


class EventRule(_Spec):
    doc: str = ""
    deltas: tuple[DeltaTemplate, ...] = Field(min_length=1)


class EventRules(_Spec):
    """A versioned set of event rules: event type -> delta templates."""

    version: int = Field(default=1, ge=1)
    type_field: str = "type"
    events: dict[str, EventRule]

    def check(self, schema: Schema) -> EventRules:
        """Raise :class:`SchemaViolation` naming every rule that does not fit ``schema``."""
        problems = []
        for name, rule in self.events.items():
            for i, template in enumerate(rule.deltas):
                try:
                    schema.subject_type_for(template.attribute, template.subject_type)
                except SgamError as exc:
                    problems.append(f"{name}.deltas[{i}]: {exc}")
        if problems:
            raise SchemaViolation(
                f"event rules v{self.version} do not fit schema {schema.name!r} v{schema.version}: "
                + "; ".join(problems)
            )
        return self


def load_event_rules(path: str | Path | None = None) -> EventRules:
    """Rules from a YAML/JSON file, or the shipped ``graph/schemas/events.yaml`` (read once)."""
    return _shipped_rules() if path is None else _load_rules(path)


@lru_cache(maxsize=1)
def _shipped_rules() -> EventRules:
    return _load_rules(None)


def _load_rules(path: str | Path | None) -> EventRules:
    try:
        if path is None:
            origin = "graph/schemas/events.yaml"
            text = (files("sgam.graph") / "schemas" / "events.yaml").read_text(encoding="utf-8")
        else:
            origin = str(path)
            text = Path(path).read_text(encoding="utf-8")
        data = yaml.safe_load(text)
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise SchemaViolation(f"event rules {path} could not be read: {exc}") from exc
    try:
        return EventRules.model_validate(data)
    except ValidationError as exc:
        raise SchemaViolation(f"{origin} is not a valid set of event rules: {validation_problems(exc)}") from None


def _lookup(event: Mapping[str, Any], path: str) -> Any:
    value: Any = event
    for part in path.split("."):
        if not isinstance(value, Mapping) or value.get(part) is None:
            return _OMIT
        value = value[part]
    return value


def _fill(template: Any, event: Mapping[str, Any], missing: list[str]) -> Any:
    """A template value filled from ``event``; required fields that are absent go to ``missing``."""
    if not isinstance(template, str):
        return template
    whole = _WHOLE.match(template)
    if whole:
        value = _lookup(event, whole.group(1))
        if value is _OMIT and not whole.group(2):
            missing.append(whole.group(1))
        return value

    def one(match: re.Match[str]) -> str:
        value = _lookup(event, match.group(1))
        if value is _OMIT:
            if not match.group(2):
                missing.append(match.group(1))
            return ""
        return str(value)

    return _PLACEHOLDER.sub(one, template)


class EventMapper:
    """The :class:`~sgam.ingest.extract.Extractor` for business events (episodes of kind ``event``).

    Other episodes yield nothing. ``schema``, when given, checks the rules up front.
    """

    name = "events"

    def __init__(self, rules: EventRules | None = None, schema: Schema | None = None) -> None:
        self.rules = rules if rules is not None else load_event_rules()
        if schema is not None:
            self.rules.check(schema)

    @property
    def version(self) -> str:
        """The rules' version, as the extraction trail records it."""
        return f"rules-v{self.rules.version}"

    def extract(self, episode: Episode, current: CurrentState) -> Sequence[RawCandidate]:
        if episode.kind is not EpisodeKind.EVENT:
            return []
        event = self._event(episode)
        rule = self._rule(episode, event)
        candidates: list[RawCandidate] = []
        missing: list[str] = []
        for template in rule.deltas:
            needed: list[str] = []
            candidate = {}
            for key, raw in template.model_dump(exclude={"optional"}, exclude_none=True).items():
                value = _fill(raw.value if isinstance(raw, Op) else raw, event, needed)
                if value is not _OMIT:
                    candidate[key] = value
            if needed and template.optional:
                continue
            missing.extend(f for f in needed if f not in missing)
            candidates.append(candidate)
        if missing:
            kind = event[self.rules.type_field]
            raise ExtractionError(
                f"event {kind!r} (episode {episode.id!r}) is missing field"
                f"{'s' if len(missing) > 1 else ''} {', '.join(repr(m) for m in missing)} "
                f"needed by its rule in the event rules v{self.rules.version}"
            )
        return candidates

    def _event(self, episode: Episode) -> dict[str, Any]:
        try:
            event = json.loads(episode.content)
        except json.JSONDecodeError as exc:
            raise ExtractionError(
                f"event episode {episode.id!r} is not JSON ({exc.msg} at column {exc.colno})"
            ) from None
        if not isinstance(event, dict):
            raise ExtractionError(f"event episode {episode.id!r} is not a JSON object")
        return event

    def _rule(self, episode: Episode, event: dict[str, Any]) -> EventRule:
        field = self.rules.type_field
        kind = event.get(field)
        known = ", ".join(sorted(self.rules.events))
        if not isinstance(kind, str) or not kind:
            raise ExtractionError(
                f"event episode {episode.id!r} has no {field!r} field naming its type (one of {known})"
            )
        if kind not in self.rules.events:
            raise ExtractionError(
                f"no rule for event type {kind!r} (episode {episode.id!r}); the event rules "
                f"v{self.rules.version} know: {known}"
            )
        return self.rules.events[kind]


__all__ = ["DeltaTemplate", "EventMapper", "EventRule", "EventRules", "load_event_rules"]

"""The reasoning schema a model fills in to propose memory writes (schema-guided reasoning, SGR).

A model does not answer with deltas directly. For each thing in the episode it might remember, it
fills in a :class:`CandidateReasoning` *in field order*, so each step conditions the next:

1. ``evidence``: verbatim quotes from the episode (checked to be in the episode);
2. ``subject`` / ``subject_type``: the normalised entity the statement is about;
3. ``attribute``: one of the schema's attributes (a JSON-schema enum built from the schema);
4. ``compared_with``: the value SGAM currently stores for that (subject, attribute), copied from
   the state passed in (checked against it);
5. ``decision``: ``new``, ``change``, ``correction``, ``same`` or ``not_memorable``;
6. ``delta``: the proposed ``value``, the ``op`` the decision implies (``new``/``change`` ->
   ``assert``, ``correction`` -> ``correct``, ``same``/``not_memorable`` -> no write) and an
   optional ``valid_from``.

:func:`response_schema` is the strict JSON Schema that structured output enforces (OpenAI
``response_format={"type": "json_schema", "json_schema": {..., "strict": true}}``, vLLM with
XGrammar, Ollama). The grammar only guarantees the shape; :func:`parse_result` then checks what it
cannot: names against the schema, op against decision, quotes against the episode and the compared
value against the store. Any failure rejects the whole response with :class:`InvalidModelOutput`,
which carries the raw text for the quarantine. :func:`to_raw_candidates` turns a checked result
into the raw candidates of the :class:`~sgam.ingest.extract.Extractor` protocol; values are typed
and reconciled later by the pipeline, as for every extractor.
"""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Iterable, Mapping
from datetime import date, datetime
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from sgam.graph.errors import ExtractionError, SgamError
from sgam.graph.models import Episode, Op, parse_instant
from sgam.graph.schema import Schema

Decision = Literal["new", "change", "correction", "same", "not_memorable"]
DECISIONS: tuple[str, ...] = ("new", "change", "correction", "same", "not_memorable")

DECISION_OP: dict[str, Op | None] = {
    "new": Op.ASSERT,
    "change": Op.ASSERT,
    "correction": Op.CORRECT,
    "same": None,
    "not_memorable": None,
}
"""The op each decision implies; ``None`` means the candidate writes nothing."""

WRITING_DECISIONS = frozenset(d for d, op in DECISION_OP.items() if op is not None)

RESPONSE_NAME = "sgam_extraction"
SUBJECT_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:@\-]{0,127}$"  # the same rule as sgam.graph.models.check_id

JsonScalar = str | int | float | bool


class InvalidModelOutput(ExtractionError):
    """The model answered, but not with a usable extraction: malformed JSON, an object that breaks
    the reasoning schema, or reasoning that the episode and the store contradict.

    Terminal (asking again with the same input is not expected to help). ``raw`` is the model's
    text exactly as received, for the quarantine; ``problems`` lists every finding.
    """

    transient = False

    def __init__(self, message: str, *, raw: str, problems: Iterable[str] = ()) -> None:
        self.raw = raw
        self.problems = tuple(problems)
        detail = "; ".join(self.problems)
        super().__init__(f"{message}: {detail}" if detail else message)


# -- the reasoning schema -------------------------------------------------------------------


class _Strict(BaseModel):
    # Every field is required (nullable where optional), as in the strict JSON Schema.
    model_config = ConfigDict(extra="forbid", frozen=True)


def _schema_in(info: ValidationInfo) -> Schema | None:
    """The schema passed as validation context (``model_validate(data, context={"schema": ...})``)."""
    context = info.context
    return context.get("schema") if isinstance(context, dict) else None


class DeltaProposal(_Strict):
    """The write a candidate proposes: last, after the decision it follows from."""

    value: JsonScalar | None
    op: Literal["assert", "correct"] | None
    valid_from: str | None

    @field_validator("valid_from")
    @classmethod
    def _instant(cls, value: str | None) -> str | None:
        if value is not None:
            parse_instant(value, "valid_from")
        return value

    @property
    def valid_from_instant(self) -> datetime | None:
        """``valid_from`` as an aware datetime (a bare date is midnight UTC), or ``None``."""
        return None if self.valid_from is None else parse_instant(self.valid_from, "valid_from")


class CandidateReasoning(_Strict):
    """One thing the model considered remembering, reasoned about in field order."""

    evidence: list[str] = Field(min_length=1)
    subject: str = Field(pattern=SUBJECT_PATTERN)
    subject_type: str | None
    attribute: str
    compared_with: JsonScalar | list[JsonScalar] | None
    decision: Decision
    delta: DeltaProposal

    @field_validator("evidence")
    @classmethod
    def _quotes(cls, quotes: list[str]) -> list[str]:
        if any(not q.strip() for q in quotes):
            raise ValueError("evidence quotes must not be blank")
        return quotes

    @field_validator("attribute")
    @classmethod
    def _known_attribute(cls, name: str, info: ValidationInfo) -> str:
        schema = _schema_in(info)
        if schema is not None and name not in schema.attributes:
            raise ValueError(
                f"unknown attribute {name!r}; the schema knows {', '.join(sorted(schema.attributes))}"
            )
        return name

    @field_validator("subject_type")
    @classmethod
    def _known_type(cls, name: str | None, info: ValidationInfo) -> str | None:
        schema = _schema_in(info)
        if schema is not None and name is not None and name not in schema.entity_types:
            raise ValueError(f"unknown entity type {name!r}; known: {', '.join(schema.entity_types)}")
        return name

    @model_validator(mode="after")
    def _op_follows_decision(self) -> CandidateReasoning:
        expected = DECISION_OP[self.decision]
        given = None if self.delta.op is None else Op(self.delta.op)
        if given != expected:
            want = "null (no write)" if expected is None else repr(expected.value)
            raise ValueError(
                f"decision {self.decision!r} needs delta.op {want}, got "
                f"{'null' if given is None else repr(given.value)}"
            )
        if self.writes and self.delta.value is None:
            raise ValueError(f"decision {self.decision!r} writes, so delta.value must not be null")
        return self

    @property
    def writes(self) -> bool:
        """Whether this candidate proposes a write (``new``, ``change`` or ``correction``)."""
        return self.decision in WRITING_DECISIONS

    @property
    def op(self) -> Op | None:
        return DECISION_OP[self.decision]


class ExtractionResult(_Strict):
    """The whole answer: zero or more candidates."""

    candidates: list[CandidateReasoning]


# -- the JSON Schema that structured output enforces ---------------------------------------

_SCALAR = [{"type": "string"}, {"type": "number"}, {"type": "boolean"}]
_NULL = {"type": "null"}


def response_schema(schema: Schema) -> dict[str, Any]:
    """The strict JSON Schema of :class:`ExtractionResult` for ``schema``.

    Strict-mode rules (OpenAI structured outputs; vLLM/XGrammar and Ollama accept the same): every
    object lists all its properties as required and sets ``additionalProperties: false``; optional
    values are nullable through ``anyOf`` with ``{"type": "null"}``; no ``$ref``, no ``default``.
    Property order is the reasoning order. ``attribute`` and ``subject_type`` are enums of the
    schema's names, so a constrained decoder cannot produce an unknown attribute.
    """
    delta = {
        "type": "object",
        "description": "The proposed write, consistent with the decision.",
        "properties": {
            "value": {
                "anyOf": [*_SCALAR, _NULL],
                "description": "The new value in the attribute's type (dates YYYY-MM-DD, datetimes "
                "ISO 8601 with timezone, enum values as listed, relations the target entity id); "
                "null only for not_memorable.",
            },
            "op": {
                "anyOf": [{"type": "string", "enum": ["assert", "correct"]}, _NULL],
                "description": "new/change -> assert, correction -> correct, same/not_memorable -> null.",
            },
            "valid_from": {
                "anyOf": [{"type": "string"}, _NULL],
                "description": "When the value became true if the episode says so (YYYY-MM-DD or "
                "ISO 8601 datetime with timezone); null means when the episode happened.",
            },
        },
        "required": ["value", "op", "valid_from"],
        "additionalProperties": False,
    }
    candidate = {
        "type": "object",
        "properties": {
            "evidence": {
                "type": "array",
                "items": {"type": "string"},
                "minItems": 1,
                "description": "Quotes copied character for character from the episode text.",
            },
            "subject": {
                "type": "string",
                "pattern": SUBJECT_PATTERN,
                "description": "The entity id: reuse the id from the current state when it is the "
                "same entity, otherwise a short lowercase id such as 'mira'.",
            },
            "subject_type": {
                "anyOf": [{"type": "string", "enum": list(schema.entity_types)}, _NULL],
                "description": "The subject's entity type; null if the attribute allows only one.",
            },
            "attribute": {
                "type": "string",
                "enum": sorted(schema.attributes),
                "description": "The schema attribute the evidence is about.",
            },
            "compared_with": {
                "anyOf": [*_SCALAR, {"type": "array", "items": {"anyOf": _SCALAR}}, _NULL],
                "description": "The current value stored for (subject, attribute), copied from the "
                "current state; null if none is stored.",
            },
            "decision": {
                "type": "string",
                "enum": list(DECISIONS),
                "description": "new: nothing stored; change: the world changed; correction: the "
                "stored value was wrong all along; same: already stored; not_memorable.",
            },
            "delta": delta,
        },
        "required": list(CandidateReasoning.model_fields),
        "additionalProperties": False,
    }
    return {
        "type": "object",
        "properties": {"candidates": {"type": "array", "items": candidate}},
        "required": ["candidates"],
        "additionalProperties": False,
    }


def response_format(schema: Schema) -> dict[str, Any]:
    """The chat-completions ``response_format`` that enforces :func:`response_schema`."""
    return {
        "type": "json_schema",
        "json_schema": {"name": RESPONSE_NAME, "strict": True, "schema": response_schema(schema)},
    }


# -- checking a model's answer -------------------------------------------------------------


def _fold(text: str) -> str:
    """Compatibility-normalised text with runs of whitespace made one space."""
    return " ".join(unicodedata.normalize("NFKC", text).split())


def evidence_problems(candidate: CandidateReasoning, episode: Episode) -> list[str]:
    """Quotes of ``candidate`` that are not in ``episode.content``.

    A quote must appear verbatim; only Unicode compatibility forms and whitespace runs are
    normalised (a line break quoted as a space still matches). Paraphrases and invented quotes fail.
    """
    content = _fold(episode.content)
    return [
        f"evidence {quote!r} is not a quote from episode {episode.id!r}"
        for quote in candidate.evidence
        if _fold(quote) not in content
    ]


def _jsonable(value: Any) -> Any:
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    if isinstance(value, (list, tuple, set, frozenset)):
        items = [_jsonable(v) for v in value]
        return sorted(items, key=repr) if isinstance(value, (set, frozenset)) else items
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return str(value)


def _keys(schema: Schema, attribute: str, value: Any) -> frozenset[str] | None:
    """Comparable form of a stored or compared value: the set of schema value keys."""
    if value is None:
        return None
    items = value if isinstance(value, (list, tuple, set, frozenset)) else [value]
    keys = set()
    for item in items:
        try:
            keys.add(schema.coerce(attribute, item)[1])
        except (SgamError, TypeError, ValueError):
            keys.add(f"raw:{json.dumps(_jsonable(item), sort_keys=True)}")
    return frozenset(keys)


def comparison_problems(
    candidate: CandidateReasoning, current: Mapping[tuple[str, str], Any], schema: Schema
) -> list[str]:
    """Whether ``compared_with`` is the value stored for the candidate's (subject, attribute).

    Values compare as the store compares them (``"2026-07-15"`` equals ``date(2026, 7, 15)``); a
    set-valued attribute compares as a set.
    """
    stored = current.get((candidate.subject, candidate.attribute))
    if _keys(schema, candidate.attribute, candidate.compared_with) == _keys(
        schema, candidate.attribute, stored
    ):
        return []
    return [
        f"compared_with {json.dumps(_jsonable(candidate.compared_with))} for "
        f"({candidate.subject!r}, {candidate.attribute!r}) is not the stored value "
        f"{json.dumps(_jsonable(stored))}"
    ]


def result_problems(
    result: ExtractionResult,
    episode: Episode,
    current: Mapping[tuple[str, str], Any],
    schema: Schema,
) -> list[str]:
    """Everything wrong with ``result`` that a JSON-schema grammar cannot rule out.

    Names are checked for every candidate; evidence and the comparison with the store only for
    candidates that write (``same`` and ``not_memorable`` are dropped anyway).
    """
    problems: list[str] = []
    for i, candidate in enumerate(result.candidates):
        where = f"candidates[{i}]"
        if candidate.attribute not in schema.attributes:
            problems.append(
                f"{where}.attribute: unknown attribute {candidate.attribute!r}; the schema knows "
                f"{', '.join(sorted(schema.attributes))}"
            )
        if candidate.subject_type is not None and candidate.subject_type not in schema.entity_types:
            problems.append(
                f"{where}.subject_type: unknown entity type {candidate.subject_type!r}; known: "
                f"{', '.join(schema.entity_types)}"
            )
        if not candidate.writes:
            continue
        problems.extend(f"{where}: {p}" for p in evidence_problems(candidate, episode))
        if candidate.attribute in schema.attributes:
            problems.extend(f"{where}: {p}" for p in comparison_problems(candidate, current, schema))
    return problems


def _pydantic_problems(exc: ValidationError) -> list[str]:
    return [
        f"{'.'.join(str(p) for p in err['loc']) or '(top)'}: {err['msg']}" for err in exc.errors()
    ]


def parse_result(
    text: str,
    *,
    schema: Schema,
    episode: Episode,
    current: Mapping[tuple[str, str], Any],
) -> ExtractionResult:
    """Parse and check a model's answer; :class:`InvalidModelOutput` (with ``raw=text``) if unusable."""
    try:
        data = json.loads(text)
    except (TypeError, ValueError) as exc:
        raise InvalidModelOutput(
            "the model's answer is not valid JSON", raw=str(text), problems=[str(exc)]
        ) from None
    try:
        result = ExtractionResult.model_validate(data, context={"schema": schema})
    except ValidationError as exc:
        raise InvalidModelOutput(
            "the model's answer does not follow the reasoning schema",
            raw=text,
            problems=_pydantic_problems(exc),
        ) from None
    problems = result_problems(result, episode, current, schema)
    if problems:
        raise InvalidModelOutput(
            "the model's reasoning does not hold up against the episode and the store",
            raw=text,
            problems=problems,
        )
    return result


def to_raw_candidates(result: ExtractionResult, episode: Episode) -> list[dict[str, Any]]:
    """Raw candidates (see :mod:`sgam.ingest.extract`) for the candidates that write.

    ``same`` and ``not_memorable`` are skipped; the op comes from the decision. Each candidate keeps
    its ``evidence`` quotes, ``compared_with`` and ``decision`` for provenance (the quarantine, the
    extraction trail): the pipeline takes
    them off before validating a :class:`~sgam.graph.models.MemoryDelta`. ``valid_from`` is set only
    when the model gave one; otherwise the episode's time applies. Quotes are checked against the
    episode again, so no path yields an ungrounded candidate.
    """
    out: list[dict[str, Any]] = []
    for i, candidate in enumerate(result.candidates):
        if not candidate.writes:
            continue
        problems = evidence_problems(candidate, episode)
        if problems:
            raise InvalidModelOutput(
                "a candidate is not grounded in its episode",
                raw=result.model_dump_json(),
                problems=[f"candidates[{i}]: {p}" for p in problems],
            )
        raw: dict[str, Any] = {
            "subject": candidate.subject,
            "attribute": candidate.attribute,
            "value": candidate.delta.value,
            "op": candidate.op.value,  # type: ignore[union-attr]  # writes -> op is set
            "evidence": list(candidate.evidence),
            "compared_with": candidate.compared_with,
            "decision": candidate.decision,
        }
        if candidate.subject_type is not None:
            raw["subject_type"] = candidate.subject_type
        instant = candidate.delta.valid_from_instant
        if instant is not None:
            raw["valid_from"] = instant
        out.append(raw)
    return out


PROVENANCE_KEYS = ("evidence", "compared_with", "decision")
"""Keys of a raw candidate from this module that are provenance, not fields of a MemoryDelta."""


def describe_schema(schema: Schema) -> str:
    """The schema's attributes as prompt text: type, cardinality, subject types, description."""
    lines = [f"Entity types: {', '.join(schema.entity_types)}.", "Attributes:"]
    for name in sorted(schema.attributes):
        spec = schema.attributes[name]
        kind: str = spec.value_type
        if kind == "enum":
            kind = f"one of {', '.join(spec.values)}"
        elif kind == "entity":
            kind = f"relation to an entity of type {spec.target} (value: its entity id)"
        elif kind == "date":
            kind = "date (YYYY-MM-DD)"
        elif kind == "datetime":
            kind = "datetime (ISO 8601 with timezone)"
        card = "one value at a time" if spec.cardinality.value == "one" else "a set of values"
        on = ", ".join(spec.subject_types) if spec.subject_types else "any entity type"
        text = f"- {name}: {kind}; {card}; on {on}."
        if spec.description:
            text += f" {spec.description}"
        lines.append(text)
    return "\n".join(lines)


def current_state_json(current: Mapping[tuple[str, str], Any]) -> str:
    """The stored current values as a JSON list for the prompt, in a stable order."""
    rows = [
        {"subject": subject, "attribute": attribute, "current_value": _jsonable(value)}
        for (subject, attribute), value in sorted(current.items(), key=lambda kv: kv[0])
    ]
    if not rows:
        return "[]"
    return "[\n" + ",\n".join(json.dumps(row, ensure_ascii=False) for row in rows) + "\n]"

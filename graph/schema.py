"""The schema: which entity types and attributes exist, how values are typed, how they reconcile.

A schema is data (loadable from YAML or JSON). Labels, relationship types and property keys that
reach Cypher come only from here and pass :func:`quote_identifier`; values are always parameters.
"""

from __future__ import annotations

import json
import re
from datetime import date, datetime
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from .countries import iso_country
from .errors import InvalidDelta, SchemaViolation, checked, validation_problems
from .models import SUBJECT_READER, Cardinality, check_principal, check_value, require_aware, shown

ValueType = Literal["string", "int", "float", "bool", "date", "datetime", "enum", "entity"]
ConflictPolicy = Literal["latest", "confidence", "source_priority"]

# \Z, not $: "$" also matches before a trailing newline ("Person\n" is not a label).
_LABEL_RE = re.compile(r"^[A-Z][A-Za-z0-9]{0,63}\Z")
_REL_TYPE_RE = re.compile(r"^[A-Z][A-Z0-9_]{0,63}\Z")
_ATTRIBUTE_RE = re.compile(r"^[a-z][a-z0-9_]{0,63}\Z")
_RESERVED_LABELS = {"Entity", "Value", "Episode", "SchemaVersion", "Migration", "SchemaMigration"}
_RESERVED_REL_TYPES = {"MENTIONS"}


def quote_identifier(name: str) -> str:
    """Quote a label, relationship type or property key for Cypher.

    Only plain ASCII identifiers are accepted, so no backtick, quote or unicode look-alike can reach
    a query; anything else is refused rather than escaped.
    """
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,63}", name):
        raise SchemaViolation(
            f"identifier {name!r} cannot be used in Cypher: use 1-64 ASCII letters, digits or '_', "
            "starting with a letter"
        )
    return f"`{name}`"


class _Spec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class RetentionClass(_Spec):
    """How long facts of this class live, and what a purge removes with them.

    A fact expires ``ttl_days`` after it was last confirmed (or recorded); ``None`` is permanent.
    ``also_remove``: ``values`` drops value nodes (and their embeddings) no fact points at any
    more; ``episodes`` drops episodes (and their embeddings) no remaining fact cites.
    """

    ttl_days: int | None = Field(default=None, ge=1)
    also_remove: tuple[Literal["values", "episodes"], ...] = ("values",)


class AttributeSpec(_Spec):
    """One attribute (or relation, when ``value_type`` is ``entity``) of an entity type.

    Consolidation (see :mod:`sgam.graph.reconcile`): with ``requires: N`` (N > 1) a new value is
    stored as a ``candidate`` until N distinct episodes support it (or one explicit confirmation);
    a ``sensitive`` value stays a candidate until an actor matching ``confirmers`` confirms it
    (recurrence alone never promotes it). A confirmer is an actor id, ``{subject}`` standing for the
    fact's subject (the default ``user:{subject}`` is the subject itself), or a prefix ending in
    ``*`` (``agent:*``). ``confirmers`` only bind sensitive attributes: any actor may confirm a
    candidate that merely waits for recurrence.

    ``max_future_days``: how far after now a ``valid_from`` (a scheduled change) may lie before it
    is refused as absurd; unset, the store's setting (``SGAM_MAX_FUTURE_DAYS``, 36,500) applies.

    Conflict policy (``docs/temporal-semantics.md``, "Conflict policy"): ``conflict`` ranks the
    statements of a slot: ``latest`` (all equal: the latest change point wins), ``confidence``
    (a statement's confidence) or ``source_priority`` (the first of ``sources`` matching its actor,
    earlier is higher; patterns as for ``confirmers``; an actor matching none ranks below all). A
    statement never ends, changes or corrects a value set by a statement of higher rank.
    ``disagreement: candidate`` holds a single value stated by another source than the version in
    force as a candidate until a ``confirm``.
    """

    value_type: ValueType
    cardinality: Cardinality = Cardinality.ONE
    memory_type: str = "profile"
    retention: str = "permanent"
    subject_types: tuple[str, ...] = ()
    target: str | None = None
    values: tuple[str, ...] = ()
    rel_type: str | None = Field(default=None, min_length=1)
    normalise: Literal["lower", "strip", "upper", "iso_country"] | None = None
    visibility: Literal["shared", "private"] = "shared"
    readers: tuple[str, ...] = ()
    description: str = ""
    requires: int = Field(default=1, ge=1, le=100)
    sensitive: bool = False
    confirmers: tuple[str, ...] = ("user:{subject}",)
    max_future_days: int | None = Field(default=None, ge=0)
    conflict: ConflictPolicy = "latest"
    sources: tuple[str, ...] = ()
    disagreement: Literal["believe", "candidate"] = "believe"

    @property
    def gated(self) -> bool:
        """Whether new values of this attribute start as candidates."""
        return self.sensitive or self.requires > 1

    @property
    def holds_disagreement(self) -> bool:
        """Whether a value stated by another source than the version in force waits as a candidate."""
        return self.disagreement == "candidate"

    @property
    def ranked(self) -> bool:
        """Whether the conflict policy ranks statements (anything but latest-wins)."""
        return self.conflict != "latest"

    def rank(self, actor: str | None, confidence: float, subject: str) -> float:
        """A statement's rank under the conflict policy (higher wins; equal ranks: latest wins)."""
        if self.conflict == "confidence":
            return confidence
        if self.conflict == "source_priority":
            found = next((i for i, p in enumerate(self.sources) if _matches(p, actor, subject)),
                         len(self.sources))
            return float(-found)
        return 0.0

    def may_confirm(self, actor: str | None, subject: str) -> bool:
        """Whether ``actor`` may confirm a value of this attribute about ``subject``."""
        if not self.sensitive:
            return True
        return any(_matches(pattern, actor, subject) for pattern in self.confirmers)

    @model_validator(mode="after")
    def _check(self) -> AttributeSpec:
        if self.value_type == "entity" and not self.target:
            raise ValueError("an entity-valued attribute (a relation) needs a 'target' entity type")
        if self.value_type == "enum" and not self.values:
            raise ValueError("an enum attribute needs its allowed 'values'")
        if self.visibility == "private" and not self.readers:
            raise ValueError("a private attribute needs 'readers': 'subject' and/or principals like 'agent:hr'")
        if self.visibility == "shared" and self.readers:
            raise ValueError("'readers' only apply to an attribute with visibility: private")
        for reader in self.readers:
            if reader != SUBJECT_READER:
                check_principal(reader)
        for pattern in self.confirmers:
            if not _valid_pattern(pattern):
                raise ValueError(
                    f"confirmer {pattern!r} is not valid: use an actor id (e.g. agent:support), "
                    "'{subject}' for the fact's subject, or a prefix ending in '*' (e.g. agent:*)"
                )
        self._check_policy()
        return self

    def _check_policy(self) -> None:
        if self.conflict == "source_priority" and not self.sources:
            raise ValueError("conflict: source_priority needs 'sources': actor patterns, highest "
                             "priority first (e.g. [tool:crm, 'user:{subject}', 'agent:*'])")
        if self.conflict != "source_priority" and self.sources:
            raise ValueError(f"'sources' only apply to conflict: source_priority (this attribute has "
                             f"conflict: {self.conflict}); remove them or set conflict: source_priority")
        for pattern in self.sources:
            if not _valid_pattern(pattern):
                raise ValueError(
                    f"source {pattern!r} is not valid: use an actor id (e.g. tool:crm), "
                    "'{subject}' for the fact's subject, or a prefix ending in '*' (e.g. agent:*)"
                )
        if len(set(self.sources)) != len(self.sources):
            raise ValueError(f"'sources' name a pattern twice: {list(self.sources)}")
        if self.holds_disagreement and self.cardinality is Cardinality.MANY:
            raise ValueError("disagreement: candidate is for single-valued attributes: members of a "
                             "set do not disagree; remove it or use cardinality: one")
        if self.holds_disagreement and self.gated:
            raise ValueError("disagreement: candidate is implied by requires/sensitive (every new value "
                             "already waits as a candidate); declare one or the other")

    def visible_to(self, subject: str) -> tuple[str, ...] | None:
        """The principals that may read a fact of this attribute about ``subject``; ``None`` = all.

        ``subject`` in ``readers`` stands for the subject's own principal, ``user:<subject id>``.
        """
        if self.visibility == "shared":
            return None
        return tuple(dict.fromkeys(f"user:{subject}" if r == SUBJECT_READER else r for r in self.readers))


def _valid_pattern(pattern: str) -> bool:
    return bool(pattern) and "*" not in pattern[:-1] and len(pattern) <= 200


def _matches(pattern: str, actor: str | None, subject: str) -> bool:
    """Whether ``actor`` matches an actor pattern: an id, ``{subject}`` standing for the subject,
    or a prefix ending in ``*``."""
    if not actor:
        return False
    pattern = pattern.replace("{subject}", subject)
    return actor == pattern or (pattern.endswith("*") and actor.startswith(pattern[:-1]))


class RenameStep(_Spec):
    """Rename attribute ``attribute`` (of the old version) to ``to`` (a new attribute of this one)."""

    kind: Literal["rename"]
    attribute: str
    to: str


class RenameRelationStep(_Spec):
    """Move the facts of ``attribute`` to the relationship type ``to`` (its new ``rel_type``)."""

    kind: Literal["rename_relation"]
    attribute: str
    to: str


class RetypeStep(_Spec):
    """Convert every stored value of ``attribute`` with a registered upcaster (``graph.transforms``)."""

    kind: Literal["retype"]
    attribute: str
    upcaster: str


class SplitStep(_Spec):
    """Split each fact of ``attribute`` (old version) into two new attributes with a registered splitter."""

    kind: Literal["split"]
    attribute: str
    into: tuple[str, str]
    splitter: str


MigrationStep = Annotated[RenameStep | RenameRelationStep | RetypeStep | SplitStep,
                          Field(discriminator="kind")]


class SchemaMigrationSpec(_Spec):
    """How stored facts move from version ``from_version`` to the version that declares this.

    Until ``dual_read_until`` a read by an old attribute name also answers from the new one (and
    the other way round), so agents built against the old version keep working.
    """

    from_version: int = Field(ge=1)
    dual_read_until: datetime | None = None
    steps: tuple[MigrationStep, ...] = Field(min_length=1)

    @field_validator("dual_read_until")
    @classmethod
    def _aware(cls, value: datetime | None) -> datetime | None:
        return None if value is None else require_aware(value, "dual_read_until")


class Schema(_Spec):
    """A versioned schema. ``attributes`` maps attribute names to their specs.

    ``migrations`` declare how facts stored under an earlier version move to this one
    (``sgam schema apply``; see ``graph.evolution``).
    """

    name: str = "default"
    version: int = Field(default=1, ge=1)
    entity_types: tuple[str, ...]
    attributes: dict[str, AttributeSpec]
    retention: dict[str, RetentionClass] = Field(
        default_factory=lambda: {"permanent": RetentionClass()}
    )
    migrations: tuple[SchemaMigrationSpec, ...] = ()

    @field_validator("entity_types")
    @classmethod
    def _labels(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for label in value:
            if not _LABEL_RE.match(label) or label in _RESERVED_LABELS:
                raise ValueError(
                    f"entity type {label!r} must be CamelCase ASCII (e.g. Customer) and not one of "
                    f"{sorted(_RESERVED_LABELS)}"
                )
        return value

    @field_validator("retention")
    @classmethod
    def _retention_names(cls, value: dict[str, RetentionClass]) -> dict[str, RetentionClass]:
        for name in value:
            if not _ATTRIBUTE_RE.match(name):
                raise ValueError(f"retention class {name!r} must be snake_case ASCII, e.g. operational")
        return value

    @model_validator(mode="after")
    def _check(self) -> Schema:
        rel_types: dict[str, str] = {}
        for name, spec in self.attributes.items():
            if not _ATTRIBUTE_RE.match(name):
                raise ValueError(f"attribute {name!r} must be snake_case ASCII, e.g. passport_deadline")
            rel_type = spec.rel_type or name.upper()
            if not _REL_TYPE_RE.match(rel_type) or rel_type in _RESERVED_REL_TYPES:
                raise ValueError(f"attribute {name!r}: relationship type {rel_type!r} is not allowed")
            if rel_type in rel_types:
                raise ValueError(f"attributes {rel_types[rel_type]!r} and {name!r} share {rel_type}")
            rel_types[rel_type] = name
            for label in (*spec.subject_types, *([spec.target] if spec.target else [])):
                if label not in self.entity_types:
                    raise ValueError(
                        f"attribute {name!r} names entity type {label!r}, which is not one of "
                        f"{list(self.entity_types)}"
                    )
            if spec.retention not in self.retention:
                raise ValueError(
                    f"attribute {name!r} uses retention {spec.retention!r}; known: {sorted(self.retention)}"
                )
        seen: set[int] = set()
        for migration in self.migrations:
            if migration.from_version >= self.version or migration.from_version in seen:
                raise ValueError(
                    f"migration from_version {migration.from_version} must be below version "
                    f"{self.version} and declared once"
                )
            seen.add(migration.from_version)
        return self

    def migration_from(self, version: int) -> SchemaMigrationSpec | None:
        """The declared migration from stored version ``version``, if any."""
        return next((m for m in self.migrations if m.from_version == version), None)

    # -- loading ---------------------------------------------------------------------------

    @classmethod
    def from_file(cls, path: str | Path) -> Schema:
        """Load a schema from a ``.yaml``/``.yml`` or ``.json`` file."""
        path = Path(path)
        try:
            text = path.read_text(encoding="utf-8")
            data = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
        except (OSError, ValueError, yaml.YAMLError) as exc:
            raise SchemaViolation(f"schema file {path} could not be read: {exc}") from exc
        return cls.from_data(data, origin=str(path))

    @classmethod
    def from_data(cls, data: Any, origin: str = "schema") -> Schema:
        """Build a schema from parsed YAML/JSON, with errors that name the offending element."""
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            raise SchemaViolation(f"{origin} is not a valid SGAM schema: {validation_problems(exc)}") from exc

    def definition(self) -> str:
        """The schema as canonical JSON, as stored in ``(:SchemaVersion {definition})``."""
        return json.dumps(self.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))

    def readers_of(self, candidate: Any) -> tuple[str, ...] | None:
        """The principals that may read ``candidate`` (a refused candidate, or the deltas a queued
        episode carries): those every private attribute named in it allows, as an episode stating
        several private facts is stamped; ``None`` when it names none (everyone may).

        A candidate without a usable ``subject`` resolves no ``subject`` reader: only the attribute's
        other readers may see it.
        """
        found: list[tuple[str, ...]] = []
        self._private_in(candidate, found)
        if not found:
            return None
        return tuple(r for r in found[0] if all(r in more for more in found[1:]))

    def _private_in(self, data: Any, found: list[tuple[str, ...]]) -> None:
        # Nested: an extractor may hand a list of deltas where one candidate was expected.
        if isinstance(data, dict):
            attribute = data.get("attribute")
            spec = self.attributes.get(attribute) if isinstance(attribute, str) else None
            if spec is not None and spec.visibility == "private":
                subject = data.get("subject")
                found.append(spec.visible_to(subject if isinstance(subject, str) else "") or ())
            for value in data.values():
                self._private_in(value, found)
        elif isinstance(data, list):
            for value in data:
                self._private_in(value, found)

    def same_definition(self, stored: str) -> bool:
        """Whether a stored definition means this schema (options added later take their defaults)."""
        try:
            return Schema.model_validate_json(stored) == self
        except ValidationError:
            return False

    # -- lookups ---------------------------------------------------------------------------

    def attribute(self, name: str) -> AttributeSpec:
        """The spec of ``name``, or a :class:`SchemaViolation` listing the known attributes."""
        try:
            return self.attributes[name]
        except (KeyError, TypeError):
            raise SchemaViolation(
                f"unknown attribute {name!r}; schema {self.name!r} v{self.version} knows: "
                f"{', '.join(sorted(self.attributes))}"
            ) from None

    def reads(self, name: object) -> bool:
        """Whether a read may ask for ``name``: an attribute of this version, or an old name that
        one of its migrations renamed or split (it answers from the new names during the dual-read
        window, and nothing after)."""
        return isinstance(name, str) and name in self.attributes or any(
            name == step.attribute for m in self.migrations for step in m.steps if step.kind in ("rename", "split"))

    def rel_type(self, name: str) -> str:
        """The Neo4j relationship type that stores facts of attribute ``name``."""
        spec = self.attribute(name)
        return spec.rel_type or name.upper()

    def fact_types(self) -> tuple[str, ...]:
        """The relationship types this schema's facts are stored as, sorted."""
        return tuple(sorted({self.rel_type(name) for name in self.attributes}))

    def memory_types(self) -> tuple[str, ...]:
        """The memory types the attributes declare (``profile``, ``preference``, ...), sorted."""
        return tuple(sorted({spec.memory_type for spec in self.attributes.values()}))

    def check_memory_types(self, given: str | Any | None) -> list[str] | None:
        """A read's memory type filter: ``None`` (every type), one type, several (a sequence, or
        comma-separated text as the CLI passes it), checked against :meth:`memory_types`;
        :class:`SchemaViolation` names the unknown ones and lists the known."""
        if given is None:
            return None
        items = given.split(",") if isinstance(given, str) else given
        if not isinstance(items, (list, tuple, set, frozenset)) or \
                not all(isinstance(item, str) for item in items):
            raise SchemaViolation(f"memory_types must be a memory type or a list of them, got {given!r}; "
                                  f"schema {self.name!r} v{self.version} knows: {', '.join(self.memory_types())}")
        wanted = list(dict.fromkeys(item.strip() for item in items if item.strip()))
        unknown = [item for item in wanted if item not in self.memory_types()]
        if unknown or not wanted:
            raise SchemaViolation(
                (f"unknown memory type {', '.join(map(repr, unknown))}" if unknown else "no memory type given")
                + f"; schema {self.name!r} v{self.version} knows: {', '.join(self.memory_types())} "
                "(None reads every type)")
        return wanted

    def check_entity_type(self, label: str) -> str:
        if label not in self.entity_types:
            raise SchemaViolation(
                f"unknown entity type {label!r}; known: {', '.join(self.entity_types)}"
            )
        return label

    def subject_type_for(self, attribute: str, given: str | None) -> str:
        """The subject's entity type: the given one (checked) or the attribute's only allowed type."""
        spec = self.attribute(attribute)
        if given is not None:
            self.check_entity_type(given)
            if spec.subject_types and given not in spec.subject_types:
                raise SchemaViolation(
                    f"attribute {attribute!r} is not allowed on {given}; allowed on "
                    f"{', '.join(spec.subject_types)}"
                )
            return given
        if len(spec.subject_types) == 1:
            return spec.subject_types[0]
        raise SchemaViolation(
            f"attribute {attribute!r} needs subject_type (one of "
            f"{', '.join(spec.subject_types or self.entity_types)})"
        )

    def coerce(self, attribute: str, raw: Any) -> tuple[Any, str]:
        """Check and convert a proposed value; returns ``(value, value_key)``.

        ``value_key`` is a canonical string used to compare values (``"2026-06-30"`` equals a
        ``date(2026, 6, 30)``), after the attribute's normaliser ran.
        """
        spec = self.attribute(attribute)
        value = _coerce(spec, attribute, raw)
        return value, value_key(value)


def value_key(value: Any) -> str:
    """A canonical, type-tagged string for equality of stored values."""
    if isinstance(value, bool):
        return f"bool:{str(value).lower()}"
    if isinstance(value, datetime):
        return f"datetime:{value.isoformat()}"
    if isinstance(value, date):
        return f"date:{value.isoformat()}"
    if isinstance(value, (int, float)):
        return f"num:{float(value)!r}"
    return f"str:{value}"


def _fail(attribute: str, spec: AttributeSpec, raw: Any, hint: str = "") -> InvalidDelta:
    expected = spec.value_type if spec.value_type != "enum" else f"one of {list(spec.values)}"
    return InvalidDelta(
        f"value {shown(raw)} ({type(raw).__name__}) is not valid for attribute {attribute!r}: "
        f"expected {expected}{hint}"
    )


def _coerce(spec: AttributeSpec, attribute: str, raw: Any) -> Any:
    kind = spec.value_type
    if raw is None:
        raise _fail(attribute, spec, raw)
    # A delta built without validation (model_construct, model_copy) is checked here too.
    checked(check_value, raw, f"value for attribute {attribute!r}")
    if kind in ("string", "entity", "enum"):
        if not isinstance(raw, str) or not raw.strip():
            raise _fail(attribute, spec, raw)
        text = _normalise(raw, spec.normalise)
        if text is None:
            raise InvalidDelta(
                f"value {raw!r} is not valid for attribute {attribute!r}: it names no ISO 3166 country; "
                "give a country name (Germany, Deutschland), an alpha-2 (DE) or alpha-3 (DEU) code"
            )
        if kind == "enum" and text not in spec.values:
            raise _fail(attribute, spec, raw)
        return text
    if kind == "bool":
        if isinstance(raw, bool):
            return raw
        raise _fail(attribute, spec, raw)
    if kind == "int":
        if isinstance(raw, int) and not isinstance(raw, bool):
            return raw
        raise _fail(attribute, spec, raw)
    if kind == "float":
        if isinstance(raw, (int, float)) and not isinstance(raw, bool):
            return float(raw)
        raise _fail(attribute, spec, raw)
    if kind == "date":
        return _as_date(spec, attribute, raw)
    return _as_datetime(spec, attribute, raw)


def _normalise(text: str, how: str | None) -> str | None:
    text = text.strip()
    if how == "iso_country":
        return iso_country(text)
    if how == "lower":
        return text.lower()
    if how == "upper":
        return text.upper()
    return text


def _as_date(spec: AttributeSpec, attribute: str, raw: Any) -> date:
    if isinstance(raw, datetime):
        raise _fail(attribute, spec, raw, " (a date, not a datetime)")
    if isinstance(raw, date):
        return raw
    try:
        return date.fromisoformat(raw)
    except (TypeError, ValueError):
        raise _fail(attribute, spec, raw, " as YYYY-MM-DD") from None


def _as_datetime(spec: AttributeSpec, attribute: str, raw: Any) -> datetime:
    if isinstance(raw, str):
        try:
            raw = datetime.fromisoformat(raw)
        except ValueError:
            raise _fail(attribute, spec, raw, " as an ISO 8601 datetime with timezone") from None
    if not isinstance(raw, datetime):
        raise _fail(attribute, spec, raw)
    return checked(require_aware, raw, f"value of {attribute!r}")


SHIPPED = ("default", "personal-assistant", "customer-support", "customer-support-v3", "project-memory")


def load_schema(name_or_path: str | Path) -> Schema:
    """A shipped schema by name (``default``, ``personal-assistant``, ``customer-support``,
    ``project-memory``) or a file."""
    from importlib.resources import files

    if str(name_or_path) in SHIPPED:
        resource = files(__package__) / "schemas" / f"{name_or_path}.yaml"
        return Schema.from_data(yaml.safe_load(resource.read_text(encoding="utf-8")), origin=str(resource))
    path = Path(name_or_path)
    if not path.exists():
        raise SchemaViolation(
            f"no schema {str(name_or_path)!r}: give a YAML/JSON file or one of {', '.join(SHIPPED)}"
        )
    return Schema.from_file(path)


def default_schema() -> Schema:
    """The schema shipped with SGAM and used by the demo and tests (both examples in one)."""
    return load_schema("default")

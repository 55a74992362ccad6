"""Neo4j values to Python and back: the one mapping between stored properties and the models.

The write path stores a fact's instants as ISO strings converted in Cypher (the driver's per-value
temporal conversion dominated batch writes otherwise); reads get driver temporal types or ISO
strings back, and :func:`native` / :func:`fact_from_properties` turn either into Python's.
"""

from __future__ import annotations

from datetime import date, datetime, timezone
from enum import Enum
from typing import Any

from .models import Fact

# The fact properties that are instants.
INSTANTS = ("valid_from", "valid_to", "recorded_at", "expired_at", "last_confirmed_at")


def caption(value: Any) -> str:
    """A value as the text shown for it (instants in ISO 8601)."""
    return value.isoformat() if isinstance(value, (date, datetime)) else str(value)


def storable(props: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str | None]]:
    """Neo4j properties, and the instants apart as ISO strings (converted in Cypher).

    Enums become their values and tuples lists; a ``None`` property is not stored.
    """
    out: dict[str, Any] = {}
    instants: dict[str, str | None] = {}
    # A row's instants often repeat one datetime (recorded_at, last_confirmed_at): converted once.
    done: dict[datetime, str] = {}
    for key, value in props.items():
        if key in _INSTANT_KEYS:
            if value is None:
                instants[key] = None
            else:
                text = done.get(value)
                if text is None:
                    text = done[value] = value.astimezone(timezone.utc).isoformat()
                instants[key] = text
        elif value is None or type(value) in _PLAIN:
            out[key] = value
        elif isinstance(value, Enum):
            out[key] = value.value
        elif isinstance(value, tuple):
            out[key] = list(value)
        elif isinstance(value, datetime):
            out[key] = value.astimezone(timezone.utc)
        else:
            out[key] = value
    return out, instants


_INSTANT_KEYS = frozenset(INSTANTS)
_PLAIN = frozenset((str, int, float, bool, list, date))
_PLAIN_VALUES = frozenset((str, int, float, bool, list, type(None)))
_TEMPORAL = frozenset(("date", "datetime"))


def _plain_fact(props: dict[str, Any]) -> bool:
    """Whether ``props`` need no conversion before :class:`Fact` validates them (the general path
    would hand them on unchanged): every property a plain value (instants as text, no driver or
    ``date`` type), and the value not of a date or datetime attribute (text to parse)."""
    return _PLAIN_VALUES.issuperset(map(type, props.values())) and props.get("value_type") not in _TEMPORAL


def _to_native(value: Any) -> Any:
    return value.to_native() if hasattr(value, "to_native") else value


def fact_from_properties(props: dict[str, Any]) -> Fact:
    """A :class:`Fact` from relationship properties as the driver returns them.

    Instants may come typed or as ISO strings (the write path and the API queries read them as
    strings, which is much cheaper for the driver); a date or datetime ``value`` likewise.
    """
    if _plain_fact(props):
        # The API's reads (instants as text) of a value that is no date: validated as they are.
        return Fact.model_validate(props)
    data = {key: value if value is None or type(value) in _PLAIN else _to_native(value)
            for key, value in props.items()}
    value = data.get("value")
    if isinstance(value, str) and data.get("value_type") in ("date", "datetime"):
        data["value"] = (date.fromisoformat(value) if data["value_type"] == "date"
                         else datetime.fromisoformat(value))
    if isinstance(data.get("value"), datetime):
        data["value"] = data["value"].astimezone(timezone.utc)
    return Fact.model_validate(data)


def native(value: Any) -> Any:
    """Driver temporal types to Python's (``neo4j.time.DateTime`` -> ``datetime`` in UTC)."""
    to_native = getattr(value, "to_native", None)
    if to_native is not None:
        value = to_native()
    if isinstance(value, datetime) and value.tzinfo is not None:
        # The driver hands back a named "UTC" zone; Neo4j orders a named-zone DateTime apart
        # from an offset one at the same instant, so every stored instant uses the +00:00 offset.
        return value.astimezone(timezone.utc)
    if isinstance(value, list):
        return [native(v) for v in value]
    return value


__all__ = ["INSTANTS", "caption", "fact_from_properties", "native", "storable"]

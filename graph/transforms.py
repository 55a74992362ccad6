"""Named value transforms used by schema migrations: upcasters (retype) and splitters (split).

A migration file names them (``upcaster: str_to_int``, ``splitter: full_name``); only functions
registered here can run, so a schema file never carries code. Each receives a stored value (a
Python ``str``/``int``/``float``/``bool``/``date``/``datetime``) and returns the new value, which
the new schema then checks and normalises like any written value. A transform that cannot convert
a value raises ``ValueError``; ``sgam schema apply`` checks every stored value before it writes.

Register your own before applying a schema::

    @register_upcaster("cents_to_euros")
    def cents_to_euros(value): return value / 100
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import date, datetime, timezone
from typing import Any, TypeVar

from .errors import SchemaViolation

Upcaster = Callable[[Any], Any]
Splitter = Callable[[Any], tuple[Any, Any]]

UPCASTERS: dict[str, Upcaster] = {}
SPLITTERS: dict[str, Splitter] = {}


def register_upcaster(name: str) -> Callable[[Upcaster], Upcaster]:
    """Register ``function`` as the upcaster ``name`` (a decorator)."""
    def add(function: Upcaster) -> Upcaster:
        UPCASTERS[name] = function
        return function
    return add


def register_splitter(name: str) -> Callable[[Splitter], Splitter]:
    """Register ``function`` as the splitter ``name``; it returns two parts (``None`` = no value)."""
    def add(function: Splitter) -> Splitter:
        SPLITTERS[name] = function
        return function
    return add


def upcaster(name: str) -> Upcaster:
    """The upcaster ``name``, or a :class:`SchemaViolation` listing the registered ones."""
    return _registered(UPCASTERS, "upcaster", name)


def splitter(name: str) -> Splitter:
    """The splitter ``name``, or a :class:`SchemaViolation` listing the registered ones."""
    return _registered(SPLITTERS, "splitter", name)


T = TypeVar("T")


def _registered(table: dict[str, T], kind: str, name: str) -> T:
    try:
        return table[name]
    except KeyError:
        raise SchemaViolation(
            f"unknown {kind} {name!r}; registered: {', '.join(sorted(table))} "
            f"(register more with sgam.graph.transforms.register_{kind})"
        ) from None


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise ValueError(f"expected a string, got {type(value).__name__}")
    return value.strip()


@register_upcaster("str_to_int")
def str_to_int(value: Any) -> int:
    """``"42"`` -> ``42`` (whole numbers only; ``"4.2"`` is refused)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    return int(_text(value))


@register_upcaster("str_to_float")
def str_to_float(value: Any) -> float:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return float(_text(value))


@register_upcaster("to_str")
def to_str(value: Any) -> str:
    """Any scalar as text (dates in ISO 8601)."""
    return value.isoformat() if isinstance(value, (date, datetime)) else str(value)


@register_upcaster("date_to_datetime")
def date_to_datetime(value: Any) -> datetime:
    """A date becomes midnight UTC of that day."""
    if isinstance(value, datetime):
        return value
    if isinstance(value, str):
        value = date.fromisoformat(value.strip())
    return datetime(value.year, value.month, value.day, tzinfo=timezone.utc)


@register_upcaster("iso_country")
def iso_country(value: Any) -> str:
    """A country name or code (``"Germany"``, ``"deu"``, ``"de"``) -> ISO 3166-1 alpha-2 (``"DE"``)."""
    import pycountry

    text = _text(value)
    try:
        return pycountry.countries.lookup(text).alpha_2
    except LookupError:
        try:
            return pycountry.countries.search_fuzzy(text)[0].alpha_2
        except LookupError:
            raise ValueError(f"{text!r} is not a country name or ISO 3166 code") from None


@register_splitter("full_name")
def split_full_name(value: Any) -> tuple[str, str | None]:
    """``"Ada King Lovelace"`` -> (``"Ada King"``, ``"Lovelace"``); one word -> (word, None)."""
    parts = _text(value).split()
    if not parts:
        raise ValueError("empty name")
    if len(parts) == 1:
        return parts[0], None
    return " ".join(parts[:-1]), parts[-1]


@register_splitter("street_city")
def split_street_city(value: Any) -> tuple[str, str | None]:
    """``"12 Rue X, Paris"`` -> (``"12 Rue X"``, ``"Paris"``), split at the last comma."""
    text = _text(value)
    street, comma, city = text.rpartition(",")
    if not comma:
        return text, None
    if not street.strip() or not city.strip():
        raise ValueError(f"{text!r} is not 'street, city'")
    return street.strip(), city.strip()


@register_upcaster("lower")
def lower(value: Any) -> str:
    """``" Plus "`` -> ``"plus"`` (e.g. free text becoming an enum)."""
    return _text(value).lower()

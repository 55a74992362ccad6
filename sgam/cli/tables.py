"""What ``sgam query`` shows in a table: the few columns an analyst reads.

A named query returns every fact property (the ``fact`` and ``facts`` columns) so that ``--json``
and the Python API lose nothing; a terminal table of them is unreadable (one row ran to 80 lines).
A table shows, per fact, its value, its valid window (when it held in the world), its known window
(when the store believed it), the episode and who asserted it; the rest stays in ``--json``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import date, datetime, timezone
from typing import Any

from sgam.graph.schema import AttributeSpec, Schema
from sgam.graph.codec import native

Row = dict[str, Any]
# Interval ends are paired into one window column: valid_from + valid_to -> valid.
_WINDOWS = {"valid": ("valid_from", "valid_to"), "known": ("recorded_at", "expired_at"),
            "holds": ("holds_from", "holds_to"), "covered": ("covered_from", "covered_to")}
# Columns a table never shows: the full property maps and what Browser draws (all kept in --json).
_HIDDEN = {"fact", "path", "memory_ids", "nodes"}


def instant(value: Any) -> str:
    """An instant to the minute in UTC ('2026-05-20 09:00'); midnight UTC is the date alone."""
    value = native(value)
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value)
        except ValueError:
            return value
    if isinstance(value, datetime):
        value = value.astimezone(timezone.utc) if value.tzinfo else value
        if (value.hour, value.minute, value.second, value.microsecond) == (0, 0, 0, 0):
            return value.date().isoformat()
        return value.strftime("%Y-%m-%d %H:%M")
    if isinstance(value, date):
        return value.isoformat()
    return "" if value is None else str(value)


def window(start: Any, end: Any) -> str:
    """A half-open interval [start, end) as 'start → end'; an open end is 'start →'."""
    if start is None and end is None:
        return ""
    return f"{instant(start)} → {instant(end)}".rstrip()


def fact_line(fact: dict[str, Any]) -> str:
    """One fact (a property map) on one line: attribute = value, valid window, episode, speaker."""
    retired = "" if fact.get("expired_at") is None else f", retired {instant(fact['expired_at'])}"
    return (f"{fact.get('attribute')} = {cell(fact.get('value'))}, valid "
            f"{window(fact.get('valid_from'), fact.get('valid_to'))}{retired}, "
            f"{fact.get('source_episode_id')} by {fact.get('asserted_by')}")


def cell(value: Any) -> str:
    """A table cell: instants compact, facts one line each, lists joined, other maps as JSON."""
    value = native(value)
    if value is None:
        return ""
    if isinstance(value, (datetime, date)):
        return instant(value)
    if _is_fact(value):
        return fact_line(value)
    if isinstance(value, list):
        if any(_is_fact(v) for v in value):
            return "\n".join(fact_line(v) for v in value if v is not None)
        if all(not isinstance(v, dict) for v in value):
            return ", ".join(cell(v) for v in value)
    if isinstance(value, (dict, list)):
        return json.dumps(_plain(value))
    return str(value)


def _plain(value: Any) -> Any:
    value = native(value)
    if isinstance(value, (datetime, date)):
        return instant(value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _is_fact(value: Any) -> bool:
    return isinstance(value, dict) and "memory_id" in value and "attribute" in value


def generic(record: Row) -> Row:
    """Every query's table: window pairs merged, full property maps and paths left out."""
    shown: Row = {}
    paired = {end: name for name, ends in _WINDOWS.items() for end in ends}
    for key, value in record.items():
        if key in _HIDDEN:
            continue
        name = paired.get(key)
        if name is None:
            shown[key] = value
        elif name not in shown and all(end in record for end in _WINDOWS[name]):
            start, end = _WINDOWS[name]
            shown[name] = window(record[start], record[end])
        elif name not in shown:
            shown[key] = value
    return shown


def _pick(*columns: str) -> Callable[[Row], Row]:
    def view(record: Row) -> Row:
        shown = generic(record)
        return {c: shown[c] for c in columns if c in shown}
    return view


def _history_chain(record: Row) -> Row:
    shown = _pick("value", "valid", "known", "op", "episode", "memory_id")(record)
    # the values back to the first statement, newest first: how this version came to be
    shown["lineage"] = " ← ".join(cell(v) for v in record.get("chain_values") or [])
    return shown


def _path(record: Row) -> Row:
    return {"entities": " → ".join(record.get("entities") or []),
            "types": ", ".join(t or "" for t in record.get("types") or []),
            "hops": record.get("facts")}


def _neighbourhood(record: Row) -> Row:
    return {"entity": record.get("entity"), "type": record.get("type"), "name": record.get("name"),
            "distance": record.get("distance"), "hops": record.get("facts")}


def _provenance(record: Row) -> Row:
    fact = record.get("fact") or {}
    episode = record.get("episode") or {}
    said = episode.get("content")
    return {"attribute": fact.get("attribute"), "value": fact.get("value"),
            "valid": window(fact.get("valid_from"), fact.get("valid_to")),
            "known": window(fact.get("recorded_at"), fact.get("expired_at")),
            "op": fact.get("op"), "status": fact.get("status"), "asserted_by": fact.get("asserted_by"),
            "memory_id": fact.get("memory_id"),
            "episode": (f"{episode.get('id')} at {instant(episode.get('occurred_at'))} "
                        f"by {episode.get('actor')}") if episode else fact.get("source_episode_id"),
            "said": said, "superseded": record.get("superseded"),
            "superseded_by": record.get("superseded_by"), "revises": record.get("revises"),
            "revised_by": record.get("revised_by")}


# Queries whose rows need more than the generic view. Provenance is one wide row: shown transposed.
VIEWS: dict[str, Callable[[Row], Row]] = {
    "current": _pick("attribute", "value", "valid", "status", "episode", "asserted_by", "memory_id"),
    "as-of": _pick("attribute", "value", "valid", "status", "episode", "asserted_by", "memory_id"),
    "history": _pick("attribute", "value", "valid", "known", "op", "episode", "memory_id"),
    "history-chain": _history_chain,
    "changes": _pick("at", "change", "subject", "attribute", "value", "valid", "op", "episode"),
    "customer-policies": _pick("customer", "customer_name", "account", "policy", "plan", "holds",
                               "covered", "episodes"),
    "traverse": _path,
    "neighbourhood": _neighbourhood,
    "provenance": _provenance,
}
TRANSPOSED = {"provenance"}


def table_rows(name: str, records: list[Row]) -> tuple[list[str], list[list[str]]]:
    """The columns and cell texts of the table for query ``name`` (the generic view otherwise)."""
    view = VIEWS.get(name, generic)
    shown = [view(record) for record in records]
    columns = list(shown[0]) if shown else []
    return columns, [[cell(row.get(c)) for c in columns] for row in shown]


def unbroken(columns: list[str], rows: list[list[str]], width: int) -> list[bool]:
    """Which columns to keep unbroken (ids, dates: cells without spaces) in a table ``width`` wide.

    When they fit next to the other columns wrapped at their spaces, they are never folded (a
    memory id cut in two cannot be pasted); when they do not, every column folds as needed.
    """
    def longest_word(i: int) -> int:
        return max([len(word) for row in rows for word in row[i].split()] + [len(columns[i])])

    whole = [all(" " not in row[i] for row in rows) for i in range(len(columns))]
    need = sum(longest_word(i) for i in range(len(columns))) + 3 * len(columns) + 1
    return whole if need <= width else [False] * len(columns)


def attribute_table(schema: Schema) -> str:
    """The attributes each entity type of ``schema`` may carry, as a Markdown table (the README's
    table is this one for the shipped schema: ``sgam schema show --markdown``)."""
    lines = ["| entity type | attributes |", "|---|---|"]
    for entity_type in schema.entity_types:
        cells = [f"`{name}` {_kind(spec)}" for name, spec in sorted(schema.attributes.items())
                 if entity_type in spec.subject_types]
        lines.append(f"| {entity_type} | {', '.join(cells) or '(none)'} |")
    return "\n".join(lines)


def _kind(spec: AttributeSpec) -> str:
    """'date', 'enum: email/phone', '-> Account, many', 'date, private'."""
    kind = f"-> {spec.target}" if spec.value_type == "entity" else str(spec.value_type)
    if spec.values:
        kind += ": " + "/".join(spec.values)
    notes = [kind] + (["many"] if spec.cardinality.value == "many" else []) + (
        ["private"] if spec.visibility == "private" else []) + policy_notes(spec)
    return "(" + ", ".join(notes) + ")"


def policy_notes(spec: AttributeSpec) -> list[str]:
    """The attribute's conflict policy, when it declares one: 'sources tool:crm > agent:*',
    'highest confidence wins', 'disagreement held as candidate'."""
    notes = []
    if spec.conflict == "confidence":
        notes.append("highest confidence wins")
    elif spec.conflict == "source_priority":
        notes.append("sources " + " > ".join(spec.sources))
    if spec.holds_disagreement:
        notes.append("disagreement held as candidate")
    return notes

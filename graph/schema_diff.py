"""What changes between two schema versions (pure; ``sgam schema diff OLD NEW``)."""

from __future__ import annotations

from dataclasses import dataclass

from .schema import Schema


@dataclass(frozen=True)
class Change:
    """One difference: ``kind`` is added, removed or changed; ``breaking`` if stored data needs a migration."""

    kind: str
    element: str
    detail: str
    breaking: bool


# Changing these on an attribute means stored facts no longer fit without a migration.
_BREAKING_FIELDS = {"value_type", "cardinality", "target", "values", "rel_type", "subject_types"}
# Changing these changes which statements win (docs/temporal-semantics.md, "Conflict policy"): the
# stored statements stay, and each slot is derived again under the new policy on its next write.
_POLICY_FIELDS = {"conflict", "sources", "disagreement"}
_POLICY_NOTE = "; changes believed history: each slot is derived again under the new policy on its next write"


def diff(old: Schema, new: Schema) -> list[Change]:
    """Differences in entity types, attributes and retention classes, breaking ones flagged."""
    changes: list[Change] = []
    for label in sorted(set(old.entity_types) - set(new.entity_types)):
        changes.append(Change("removed", f"entity type {label}", "stored entities keep the label", True))
    for label in sorted(set(new.entity_types) - set(old.entity_types)):
        changes.append(Change("added", f"entity type {label}", "", False))
    for name in sorted(set(old.attributes) - set(new.attributes)):
        changes.append(Change("removed", f"attribute {name}", "its stored facts need a migration", True))
    for name in sorted(set(new.attributes) - set(old.attributes)):
        changes.append(Change("added", f"attribute {name}", new.attributes[name].value_type, False))
    for name in sorted(set(old.attributes) & set(new.attributes)):
        before = old.attributes[name].model_dump()
        after = new.attributes[name].model_dump()
        for field in sorted(k for k in before if before[k] != after[k]):
            note = _POLICY_NOTE if field in _POLICY_FIELDS else ""
            changes.append(Change("changed", f"attribute {name}.{field}",
                                  f"{before[field]!r} -> {after[field]!r}{note}", field in _BREAKING_FIELDS))
    for name in sorted(set(old.retention) | set(new.retention)):
        was, now = old.retention.get(name), new.retention.get(name)
        if was != now:
            kind = "added" if was is None else "removed" if now is None else "changed"
            changes.append(Change(kind, f"retention {name}",
                                  f"{was and was.model_dump()} -> {now and now.model_dump()}",
                                  kind == "removed"))
    return changes

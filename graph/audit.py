"""The read audit log: who read which subject's private attributes, and when (statements; ``store``
runs them).

A read that hands a private attribute's value to its caller leaves one
``(:ReadAudit {tenant_id, principal, subject, attributes, operation, created_at})`` per subject it
disclosed: the reader's principal (``"*"`` for an admin read), the attributes read (names only,
never values) and the operation (the named query, ``context`` or ``export_subject``).

Why only private attributes (``SGAM_READ_AUDIT=private``, the default): a shared fact is readable
by every principal of its tenant, so a read of it records no access decision and would cost a
write on every read; a private one is the personal data whose disclosures a subject may ask to
be accounted for. ``off`` records nothing. A read that discloses nothing (no private value among
its rows, or a reader the attribute hides it from: the query never returns the value) records
nothing either: the log says who *saw* a value, not who asked.

The record is a separate small write after the read (a READ transaction cannot write), one
statement for all the subjects one read disclosed. It is written before the read returns, so the
log is complete for every answer handed out; when that write fails the read is still answered,
and the failure is logged and counted (``sgam.audit.failures``) rather than raised.

Records expire with the ``audit`` retention class of the schema when it declares one, else after
:data:`DEFAULT_TTL_DAYS` (:func:`purge_audit_op`, run by every purge); forgetting a subject erases
the records about it, and deleting a tenant deletes its records.
"""

from __future__ import annotations

import logging
from collections.abc import Generator
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from . import telemetry
from .schema import Schema
from .steps import InTx, Operation, Records, Statement, Write

log = logging.getLogger(__name__)

AUDIT_CLASS = "audit"
"""The retention class (``retention: audit: {ttl_days: N}`` in the schema) of the records."""

DEFAULT_TTL_DAYS = 365
BATCH = 2000

RECORD_READS = """
UNWIND $rows AS row
CREATE (:ReadAudit {tenant_id: $tenant, principal: $principal, subject: row.subject,
                    attributes: row.attributes, operation: $operation, created_at: $now})
"""

# Newest first; the filters are optional.
READ_AUDIT = """
MATCH (a:ReadAudit {tenant_id: $tenant})
WHERE a.created_at IS NOT NULL
  AND ($subject IS NULL OR a.subject = $subject) AND ($principal IS NULL OR a.principal = $principal)
RETURN a.created_at AS at, a.principal AS principal, a.subject AS subject, a.attributes AS attributes,
       a.operation AS operation
ORDER BY at DESC, subject
LIMIT $limit
"""

EXPIRE_AUDIT = """
MATCH (a:ReadAudit {tenant_id: $tenant})
WHERE a.created_at < $cutoff
WITH a LIMIT $batch
DELETE a
RETURN count(*) AS removed
"""

RECORD_AUDIT_PURGE = """
CREATE (:PurgeRun {tenant_id: $tenant, at: $now, policy: $policy, cutoff: $cutoff, audits: $removed})
"""


def _private(schema: Schema, attribute: str, item: dict[str, Any]) -> bool:
    # A fact row carries its readers (visible_to); a context line only its attribute's name.
    if item.get("visible_to") is not None:
        return True
    spec = schema.attributes.get(attribute)
    return spec is not None and spec.visibility == "private"


def disclosed(data: Any, schema: Schema, subject: str | None) -> dict[str, list[str]]:
    """The private attributes whose values ``data`` (a read's rows, or a result dumped to plain
    data) holds, by subject. A row names its subject (``subject``), or is about the read's
    ``subject``; a traversal's facts are about the entities of its path, hop by hop."""
    found: dict[str, set[str]] = {}

    def walk(item: Any, about: str | None) -> None:
        if isinstance(item, dict):
            about = item["subject"] if isinstance(item.get("subject"), str) else about
            attribute = item.get("attribute")
            if (isinstance(attribute, str) and item.get("value") is not None and about is not None
                    and _private(schema, attribute, item)):
                found.setdefault(about, set()).add(attribute)
            entities, facts = item.get("entities"), item.get("facts")
            if isinstance(entities, list) and isinstance(facts, list) and len(entities) == len(facts) + 1:
                for source, fact in zip(entities, facts):
                    walk(fact, source if isinstance(source, str) else about)
            for key, value in item.items():
                if not (key == "facts" and isinstance(entities, list)):
                    walk(value, about)
        elif isinstance(item, (list, tuple)):
            for value in item:
                walk(value, about)

    walk(data, subject)
    return {s: sorted(attributes) for s, attributes in sorted(found.items())}


@dataclass(frozen=True)
class Disclosure:
    """What one read disclosed, to be recorded by :func:`audit_op`."""

    tenant: str
    principal: str
    operation: str
    subjects: dict[str, list[str]]


def disclosure(mode: str, schema: Schema, operation: str, tenant: Any, principal: str | None,
               subject: Any, data: Any) -> Disclosure | None:
    """The record a read owes, or ``None`` (audit off, a reader without a principal, who is only
    ever shown shared facts, or nothing private in the answer)."""
    if mode == "off" or principal is None or not isinstance(tenant, str):
        return None
    subjects = disclosed(data, schema, subject if isinstance(subject, str) else None)
    return Disclosure(tenant, principal, operation, subjects) if subjects else None


def audit_op(found: Disclosure, now: datetime) -> Operation[Records]:
    rows = [{"subject": s, "attributes": a} for s, a in found.subjects.items()]
    records: Records = yield Write(Statement(RECORD_READS, {
        "tenant": found.tenant, "principal": found.principal, "operation": found.operation,
        "rows": rows, "now": now}))
    return records


def failed(found: Disclosure, exc: BaseException) -> None:
    """An audit record that could not be written: the read is answered, the loss is visible."""
    log.warning("read audit of %s in tenant %r not recorded (%s): the read was answered",
                found.operation, found.tenant, type(exc).__name__)
    telemetry.audit_failed(type(exc).__name__)


def read_audit_params(tenant: str, subject: str | None, principal: str | None, limit: int) -> dict[str, Any]:
    return {"tenant": tenant, "subject": subject, "principal": principal, "limit": limit}


def ttl_days(schema: Schema) -> int | None:
    """How long records are kept: the schema's ``audit`` class, else :data:`DEFAULT_TTL_DAYS`
    (``None``: the class is permanent)."""
    spec = schema.retention.get(AUDIT_CLASS)
    return DEFAULT_TTL_DAYS if spec is None else spec.ttl_days


def purge_audit_batch(tenant: str, now: datetime, days: int,
                      batch: int = BATCH) -> Generator[Statement, Records, int]:
    """One bounded batch of expired records, as one transaction; returns how many it removed."""
    params: dict[str, Any] = {"tenant": tenant, "cutoff": now - timedelta(days=days), "batch": batch}
    [expired] = yield Statement(EXPIRE_AUDIT, params)
    if expired["removed"]:
        yield Statement(RECORD_AUDIT_PURGE, {**params, "now": now, "policy": AUDIT_CLASS,
                                             "removed": expired["removed"]})
    return int(expired["removed"])


def purge_audit_op(tenant: str, now: datetime, schema: Schema) -> Operation[int]:
    """Remove the records older than the audit retention, in bounded transactions."""
    days = ttl_days(schema)
    if days is None:
        return 0
    kept = days  # bound for the closure below
    removed = 0
    while True:
        n: int = yield InTx(lambda: purge_audit_batch(tenant, now, kept))
        removed += n
        if n < BATCH:
            return removed

"""``sgam rebuild``: re-extract a tenant's stored episodes into a fresh tenant (or a dry run) and
report how the rebuilt memory differs from the current one (:mod:`sgam.ingest.rebuild`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer

from sgam.graph.schema import Schema, default_schema, load_schema
from sgam.ingest.rebuild import RebuildReport, SlotChange

from sgam.api import MemoryGraph
from sgam.cli.common import app, console, friendly, jsonable
from sgam.cli.ingest import EventsOpt, ExtractorOpt, ReaderOpt, SchemaOpt, load_extractor

HIDDEN = "(private)"
"""What a report shows instead of the rows of a private slot the reader may not read."""


def _rows(change: SlotChange, schema: Schema, principal: str | None) -> dict[str, Any]:
    readers = schema.readers_of({"subject": change.subject, "attribute": change.attribute})
    shown = readers is None or principal == "*" or principal in readers
    rows = {k: [dict(zip(("value", "valid_from", "valid_to", "status"), r)) for r in getattr(change, k)]
            for k in ("before", "after")}
    return {"subject": change.subject, "attribute": change.attribute,
            **(jsonable(rows) if shown else {"before": HIDDEN, "after": HIDDEN})}


def _line(row: dict[str, Any]) -> str:
    def values(side: Any) -> str:
        return side if isinstance(side, str) else ", ".join(json.dumps(r["value"]) for r in side) or "nothing"

    return f"  {row['subject']}.{row['attribute']}: {values(row['before'])} -> {values(row['after'])}"


@app.command("rebuild")
@friendly
def rebuild(
    tenant: str = typer.Option(..., "--tenant", "-t", help="The tenant whose episodes are re-extracted"),
    into: str = typer.Option(None, "--into", help="A fresh tenant to rebuild into (required unless --dry-run)"),
    dry_run: bool = typer.Option(False, "--dry-run", help="Rebuild in a transaction that is rolled back: "
                                 "report the difference, write nothing"),
    schema: str = SchemaOpt, extractor: list[str] = ExtractorOpt, events: Path = EventsOpt,
    principal: str = ReaderOpt,
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON"),
) -> None:
    """Re-run extraction over a tenant's stored episodes, in the order they occurred, and report the
    slots added, changed and missing compared with the tenant now.

    Evaluates a better extractor, new event rules or a changed schema; applied by rebuilding
    into a fresh tenant. Values of private slots are shown only to their readers (--as).
    """
    loaded = load_schema(schema) if schema else default_schema()
    chosen = [load_extractor(spec, loaded, events) for spec in (extractor or ["events"])]
    if into is None and not dry_run:
        raise typer.BadParameter("give --into TENANT (a fresh tenant to rebuild into) or --dry-run")
    with MemoryGraph.connect(schema=loaded) as graph:
        report = graph.rebuild(tenant, chosen, into=into, dry_run=dry_run)
    _print(report, loaded, principal, as_json)


def _print(report: RebuildReport, schema: Schema, principal: str | None, as_json: bool) -> None:
    kinds = {k: [_rows(c, schema, principal) for c in getattr(report, k)] for k in ("added", "changed", "missing")}
    if as_json:
        console.print_json(json.dumps({
            "tenant": report.tenant_id, "into": None if report.dry_run else report.into, "dry_run": report.dry_run,
            "extractors": list(report.extractors), "episodes": report.episodes, "written": report.written,
            "quarantined": report.quarantined, "same": report.same, **kinds}))
        return
    where = "dry run (nothing written)" if report.dry_run else f"into tenant {report.into!r}"
    console.print(f"rebuilt {report.tenant_id!r} {where} with {', '.join(report.extractors)}: "
                  f"{report.episodes} episodes, {report.written} writes, {report.quarantined} quarantined; "
                  f"{report.same} slots the same", highlight=False, markup=False)
    if not report.differs:
        console.print("no difference from the current memory", highlight=False)
    for kind, rows in kinds.items():
        if rows:
            console.print(f"{kind} ({len(rows)}):", highlight=False)
            for row in rows:
                console.print(_line(row), highlight=False, markup=False)


__all__ = ["rebuild"]

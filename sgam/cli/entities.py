"""``sgam entities alias|candidates|merge|split|merges``: entity resolution on the CLI.

A merge or split first runs as a dry run and shows what would change (conflicts included);
without ``--dry-run`` it asks for confirmation (``--yes`` skips the question). Candidates are only
listed: nothing is merged unless asked. See :mod:`sgam.graph.merge`.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import typer

from sgam.api import MemoryGraph
from sgam.cli.common import app, console, friendly, jsonable, print_table, run_planned
from sgam.graph.merge import MergeReport

entities_app = typer.Typer(no_args_is_help=True,
                           help="Aliases, candidate merges, merge and split of entities (with a dry run).")
app.add_typer(entities_app, name="entities")

TenantOpt = typer.Option(..., "--tenant", "-t", help="The tenant")
DryRunOpt = typer.Option(False, "--dry-run", help="Show what would change and change nothing")
ActorOpt = typer.Option(None, "--actor", help="Who does it, kept in the merge record (e.g. user:ops-anna)")
ReasonOpt = typer.Option(None, "--reason", help="Why, kept in the merge record")
YesOpt = typer.Option(False, "--yes", help="Do not ask for confirmation")
JsonOpt = typer.Option(False, "--json", help="Print the report as JSON")
KeptArg = typer.Argument(..., help="The entity that stays (its id)")
DroppedArg = typer.Argument(..., help="The entity merged into it (its id)")


def _describe(report: MergeReport) -> str:
    verb = ("would split" if report.dry_run else "split") if report.split else (
        "would merge" if report.dry_run else "merged")
    lines = [f"{verb} {report.dropped!r} {'from' if report.split else 'into'} {report.kept!r} "
             f"(tenant {report.tenant_id!r}): {report.retired} rows retired, {report.created} recorded"]
    if report.slots:
        lines.append(f"  slots derived again: {', '.join(report.slots)}")
    for c in report.conflicts:
        lines.append(f"  conflict on {c['attribute']}: {c['kept']!r} (kept) vs {c['dropped']!r} (dropped); "
                     f"the union holds {c['result']!r} now")
    if report.aliases:
        lines.append(f"  aliases: {', '.join(report.aliases)}")
    if report.episodes:
        lines.append(f"  episode links: {', '.join(report.episodes)}")
    if report.merge_id and not report.dry_run:
        lines.append(f"recorded as (:Merge {{id: {report.merge_id!r}}}) by {report.actor}")
    return "\n".join(lines)


def _run(change: Callable[[MemoryGraph, bool], MergeReport], dry_run: bool, yes: bool, as_json: bool) -> None:
    run_planned(change, _describe, "Go ahead?", dry_run, yes, as_json)


@entities_app.command("merge")
@friendly
def merge(tenant: str = TenantOpt, kept: str = KeptArg, dropped: str = DroppedArg, dry_run: bool = DryRunOpt,
          actor: str = ActorOpt, reason: str = ReasonOpt, yes: bool = YesOpt, as_json: bool = JsonOpt) -> None:
    """Merge DROPPED into KEPT: facts, relations pointing at it, aliases and episode links move."""
    _run(lambda graph, dry: graph.merge_entities(tenant, kept, dropped, dry_run=dry, actor=actor, reason=reason),
         dry_run, yes, as_json)


@entities_app.command("split")
@friendly
def split(tenant: str = TenantOpt, kept: str = KeptArg, dropped: str = DroppedArg, dry_run: bool = DryRunOpt,
          actor: str = ActorOpt, reason: str = ReasonOpt, yes: bool = YesOpt, as_json: bool = JsonOpt) -> None:
    """Undo the last merge of DROPPED into KEPT: both get their own statements back."""
    _run(lambda graph, dry: graph.split_entities(tenant, kept, dropped, dry_run=dry, actor=actor, reason=reason),
         dry_run, yes, as_json)


@entities_app.command("alias")
@friendly
def alias(tenant: str = TenantOpt, subject: str = typer.Option(..., "--subject", "-s", help="The entity id"),
          names: list[str] = typer.Argument(..., help="The other names it goes by"),
          actor: str = ActorOpt) -> None:
    """Give an entity aliases (searched by search-entities, used by ingest to find it)."""
    with MemoryGraph.connect(bootstrap=False) as graph:
        shared = graph.add_alias(tenant, subject, *names, actor=actor)
    console.print(f"aliases of {subject!r}: {', '.join(shared)}", highlight=False, markup=False)
    for key, others in shared.items():
        if others:
            console.print(f"  {key!r} also names {', '.join(others)}: a merge candidate "
                          "(sgam entities candidates)", highlight=False, markup=False)


@entities_app.command("candidates")
@friendly
def candidates(tenant: str = TenantOpt, limit: int = typer.Option(50, "--limit", "-n", help="At most this many"),
               as_json: bool = JsonOpt) -> None:
    """Pairs of entities that may be one, best first, with the evidence. Nothing is merged."""
    with MemoryGraph.connect(bootstrap=False) as graph:
        found = graph.merge_candidates(tenant, limit=limit)
    rows = [{"a": c.a, "b": c.b, "type": c.type, "score": c.score,
             "reasons": ", ".join(f"{name} {score}" for name, score in c.reasons)} for c in found]
    if as_json:
        console.print_json(json.dumps(rows))
    else:
        print_table("candidates", rows)


@entities_app.command("merges")
@friendly
def merges(tenant: str = TenantOpt, as_json: bool = JsonOpt) -> None:
    """The tenant's merge records: who merged what, when and why, and whether it was split."""
    with MemoryGraph.connect(bootstrap=False) as graph:
        rows = graph.merges(tenant)
    if as_json:
        console.print_json(json.dumps(jsonable(rows)))
    else:
        print_table("merges", rows)

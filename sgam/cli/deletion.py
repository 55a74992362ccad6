"""``sgam delete memory|episode|tenant`` and ``sgam export-subject``: data protection on the CLI.

Each deletion first runs as a dry run and shows what would go; without ``--dry-run`` it asks for
confirmation (``--yes`` skips the question), deletes in one go and names the ``(:Deletion)``
record it left. See :mod:`sgam.graph.deletion` for what each grain removes.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import typer

from sgam.graph.deletion import DeletionReport
from sgam.graph.errors import NotFound

from sgam.api import MemoryGraph
from sgam.cli.common import app, err, friendly, run_planned

delete_app = typer.Typer(no_args_is_help=True,
                         help="Delete one memory, one episode or a tenant, with a dry run and an audit record.")

DryRunOpt = typer.Option(False, "--dry-run", help="List what would be deleted and change nothing")
ActorOpt = typer.Option(None, "--actor", help="Who deletes, kept in the deletion record (e.g. user:ops-anna)")
ReasonOpt = typer.Option(None, "--reason", help="Why, kept in the deletion record (not what was deleted)")
YesOpt = typer.Option(False, "--yes", help="Do not ask for confirmation")
JsonOpt = typer.Option(False, "--json", help="Print the report as JSON")
TenantOpt = typer.Option(..., "--tenant", "-t", help="The tenant")

# What a report lists, in print order: (count name, the report's field of ids, label).
_LINES = (("facts", "memory_ids", "fact versions"), ("candidates", "candidates", "of them pending candidates"),
          ("updated_facts", "updated", "facts that keep other support and lose the episode"),
          ("values", None, "value nodes"), ("ledgers", "ledgers", "slot ledgers (rebuilt from the remaining rows)"),
          ("quarantine", "quarantine", "quarantine entries"), ("episodes", "episodes", "episodes"),
          ("entities", "entities", "entities"))


def _describe(report: DeletionReport) -> str:
    target = ", ".join(f"{k} {v!r}" for k, v in report.target.items())
    head = (f"{'would delete' if report.dry_run else 'deleted'} from tenant {report.tenant_id!r} "
            f"({report.grain}: {target}):")
    lines = [head]
    if report.grain == "tenant":
        lines += [f"  {name}: {count}" for name, count in report.counts.items() if count]
    for name, ids_field, label in _LINES if report.grain != "tenant" else ():
        count = report.counts.get(name, 0)
        if count:
            ids = getattr(report, ids_field) if ids_field else ()
            lines.append(f"  {label}: {count}" + (f" ({', '.join(ids)})" if ids else ""))
    if report.record_id:
        lines.append(f"recorded as (:Deletion {{id: {report.record_id!r}}}) by {report.actor}")
    return "\n".join(lines)


app.add_typer(delete_app, name="delete")


def _refuse_empty(report: DeletionReport) -> None:
    if report.grain == "tenant" and report.empty:
        raise NotFound(f"tenant {report.tenant_id!r} holds nothing: nothing to delete (check the name)")


def _run(delete: Callable[[MemoryGraph, bool], DeletionReport], dry_run: bool, yes: bool, as_json: bool) -> None:
    run_planned(delete, _describe, "Delete these for good?", dry_run, yes, as_json, _refuse_empty)


@delete_app.command("memory")
@friendly
def delete_memory(
    tenant: str = TenantOpt,
    memory_id: str = typer.Option(None, "--memory-id", "-m", help="One fact version (from history or current)"),
    subject: str = typer.Option(None, "--subject", "-s", help="With --attribute: the slot's whole history"),
    attribute: str = typer.Option(None, "--attribute", "-a", help="With --subject: the slot's attribute"),
    dry_run: bool = DryRunOpt, actor: str = ActorOpt, reason: str = ReasonOpt, yes: bool = YesOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Delete one fact version (--memory-id) or a slot's whole history (-s and -a)."""
    _run(lambda graph, dry: graph.delete_memory(tenant, memory_id, subject=subject, attribute=attribute,
                                               dry_run=dry, actor=actor, reason=reason),
        dry_run, yes, as_json)


@delete_app.command("episode")
@friendly
def delete_episode(
    tenant: str = TenantOpt,
    episode: str = typer.Option(..., "--episode", "-e", help="The episode id"),
    dry_run: bool = DryRunOpt, actor: str = ActorOpt, reason: str = ReasonOpt, yes: bool = YesOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Delete an episode and what only it supports (facts, candidates, quarantine entries)."""
    _run(lambda graph, dry: graph.delete_episode(tenant, episode, dry_run=dry, actor=actor, reason=reason),
        dry_run, yes, as_json)


@delete_app.command("tenant")
@friendly
def delete_tenant(
    tenant: str = TenantOpt,
    dry_run: bool = DryRunOpt, actor: str = ActorOpt, reason: str = ReasonOpt, yes: bool = YesOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Delete everything a tenant holds; its deletion record stays."""
    _run(lambda graph, dry: graph.delete_tenant(tenant, dry_run=dry, actor=actor, reason=reason),
        dry_run, yes, as_json)


@app.command("export-subject")
@friendly
def export_subject(
    tenant: str = TenantOpt,
    subject: str = typer.Option(..., "--subject", "-s", help="The entity id"),
    out: Path = typer.Option(None, "--out", "-o", help="File to write; default stdout"),
    principal: str = typer.Option(None, "--principal", "--as",
                                  help="The reader: user:<id> (what the subject may read), '*' (all, "
                                       "for operators); default: shared facts only"),
) -> None:
    """Everything the store holds about a subject, as JSON (a subject access request)."""
    with MemoryGraph.connect(bootstrap=False) as graph:
        data = graph.export_subject(tenant, subject, principal=principal)
    text = json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    if out is None:
        typer.echo(text, nl=False)
        return
    out.write_text(text, encoding="utf-8")
    err.print(f"wrote {out}: {len(data['facts'])} fact versions, {len(data['facts_pointing_here'])} "
              f"pointing here, {len(data['episodes'])} episodes, {len(data['quarantine'])} quarantine "
              "entries", highlight=False)

"""``sgam audit``: the read audit log of a tenant (who read which subject's private attributes,
when; see :mod:`sgam.graph.audit`)."""

from __future__ import annotations

import json

import typer

from sgam.api import MemoryGraph
from sgam.cli.common import app, console, friendly, jsonable, print_table


@app.command()
@friendly
def audit(
    tenant: str = typer.Option(..., "--tenant", "-t", help="The tenant"),
    subject: str = typer.Option(None, "--subject", "-s", help="Only reads of this subject's private attributes"),
    principal: str = typer.Option(None, "--principal", "-p", help="Only reads by this reader (e.g. agent:kyc; * for admin reads)"),
    limit: int = typer.Option(1000, "--limit", min=1, help="At most this many records, newest first"),
    as_json: bool = typer.Option(False, "--json", help="Print the records as JSON"),
) -> None:
    """Who read which subject's private attributes, and when (newest first; names, never values)."""
    with MemoryGraph.connect(bootstrap=False) as graph:
        rows = [jsonable(r) for r in graph.read_audit(tenant, subject=subject, principal=principal, limit=limit)]
    if as_json:
        console.print_json(json.dumps(rows))
        return
    print_table("audit", rows)

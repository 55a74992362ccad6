"""``sgam tenants place|list|move``: which server and database each tenant lives on.

``place`` and ``move`` write the placement file (``SGAM_PLACEMENT_FILE``, default
``~/.sgam/placement.json``) that every command, the worker and the library read. ``place`` only
changes the map (for a tenant not stored yet, or one copied by other means); ``move`` copies the
tenant's data to the new target, verifies it, re-places the tenant and then deletes the old copy
(:func:`sgam.placement.move_tenant`).
"""

from __future__ import annotations

import json
from dataclasses import asdict

import typer

from sgam.api import MemoryGraph
from sgam.cli.common import app, console, friendly
from pydantic import ValidationError

from sgam.graph.errors import InvalidSetting, validation_problems
from sgam.graph.models import check_tenant
from sgam.placement import MoveReport, move_tenant
from sgam.settings import DEFAULT_TARGET, Settings, Target, save_placement

tenants_app = typer.Typer(no_args_is_help=True,
                          help="Where tenants live (server, database): place, list, move.")
app.add_typer(tenants_app, name="tenants")

TenantArg = typer.Argument(..., help="The tenant")
UriOpt = typer.Option(None, "--uri", help="The server's Bolt address [default: NEO4J_URI's]")
DatabaseOpt = typer.Option(None, "--database", help="The database on it [default: NEO4J_DATABASE's]")
UserOpt = typer.Option(None, "--user", help="The user on that server [default: NEO4J_USER's]")
PasswordEnvOpt = typer.Option(None, "--password-env",
                              help="The environment variable holding that server's password "
                                   "[default: NEO4J_PASSWORD's value]")
JsonOpt = typer.Option(False, "--json", help="Print as JSON")


def _target(uri: str | None, database: str | None, user: str | None, password_env: str | None) -> Target:
    try:
        return Target(uri=uri, database=database, user=user, password_env=password_env)
    except ValidationError as exc:
        raise InvalidSetting(validation_problems(exc, "target")) from None


def _tenant(tenant: str) -> str:
    try:
        return check_tenant(tenant)
    except ValueError as exc:
        raise InvalidSetting(str(exc)) from None


@tenants_app.command("place")
@friendly
def place(tenant: str = TenantArg, uri: str = UriOpt, database: str = DatabaseOpt, user: str = UserOpt,
          password_env: str = PasswordEnvOpt) -> None:
    """Place a tenant on a server and database (no option: back on the default one). Moves no data:
    use `sgam tenants move` for a tenant that holds some."""
    settings = Settings()
    placement = settings.placement_map().placed(_tenant(tenant), _target(uri, database, user, password_env))
    save_placement(settings.placement_file.expanduser(), placement)
    console.print(f"tenant {tenant!r} placed on {placement.target(tenant).describe()} "
                  f"({settings.placement_file})", highlight=False, markup=False)


@tenants_app.command("list")
@friendly
def list_(as_json: bool = JsonOpt) -> None:
    """The placement map: each placed tenant's server and database (others live on the default)."""
    settings = Settings()
    placement = settings.placement_map()
    if as_json:
        console.print_json(placement.model_dump_json(exclude_defaults=True))
        return
    console.print(f"{len(placement.tenants)} tenant(s) placed ({settings.placement_file}); "
                  f"every other tenant lives on {DEFAULT_TARGET.describe()}", highlight=False, markup=False)
    for name, target in placement.tenants.items():
        console.print(f"  {name}  {target.describe()}", highlight=False, markup=False)


@tenants_app.command("move")
@friendly
def move(tenant: str = TenantArg, to: str = typer.Option(None, "--to", help="The new server's Bolt address "
                                                            "[default: NEO4J_URI's]"),
         database: str = DatabaseOpt, user: str = UserOpt, password_env: str = PasswordEnvOpt,
         as_json: bool = JsonOpt) -> None:
    """Move a tenant: copy its whole graph to the new server/database, verify the copy (counts and
    a content digest), place it there, then delete it from the old one. Stop writes to it meanwhile."""
    settings = Settings()
    target = _target(to, database, user, password_env)
    with MemoryGraph.connect(bootstrap=False, settings=settings) as graph:
        report = move_tenant(graph, _tenant(tenant), target, settings.placement_file.expanduser())
    if as_json:
        console.print_json(json.dumps(asdict(report)))
    else:
        console.print(_describe(report), highlight=False, markup=False)


def _describe(report: MoveReport) -> str:
    counted = ", ".join(f"{n} {kind}" for kind, n in report.counts.items())
    return (f"moved tenant {report.tenant!r} from {report.source} to {report.target}: {counted}; "
            f"digest {report.digest[:16]} on both sides; the old copy is deleted "
            f"(deletion record {report.deletion_id})")

"""The core ``sgam`` commands: the local server, schemas, the Browser, and reading and writing a
tenant's memory (replay, query, export, timeline, doctor, purge, forget, confirm, context, embed,
demo, stats)."""

from __future__ import annotations

import json
from dataclasses import asdict
from datetime import datetime
from pathlib import Path
from typing import Any

import typer
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from sgam.api import MemoryGraph
from sgam.cli.common import app, console, err, friendly, instant, jsonable, print_table, retried_line
from sgam.graph.forget import ForgetReport
from sgam.queries.loader import get_query, load_queries
from sgam.settings import Settings

neo4j_app = typer.Typer(no_args_is_help=True, help="Run the local Neo4j server (no Docker needed).")
app.add_typer(neo4j_app, name="neo4j")
browser_app = typer.Typer(no_args_is_help=True, help="Neo4j Browser: style, favourites and guide.")
schema_app = typer.Typer(no_args_is_help=True, help="Schemas: show one, compare two, apply a new version.")
app.add_typer(schema_app, name="schema")
app.add_typer(browser_app, name="browser")


def _settings(home: Path | None = None, bolt_port: int | None = None,
              http_port: int | None = None) -> Settings:
    overrides = {k: v for k, v in {"home": home, "bolt_port": bolt_port,
                                   "http_port": http_port}.items() if v is not None}
    return Settings(**overrides)


HomeOpt = typer.Option(None, "--home", help="Server home folder [env SGAM_HOME; default ~/.sgam/neo4j]")
BoltOpt = typer.Option(None, "--bolt-port", help="Bolt port [env SGAM_BOLT_PORT; default 7687]")
HttpOpt = typer.Option(None, "--http-port", help="HTTP/Browser port [env SGAM_HTTP_PORT; default 7474]")
VALID_AT_HELP = "Valid time: the instant the facts must hold at (ISO 8601; a date alone is midnight UTC); default now"
MEMORY_TYPE_HELP = ("Only facts of this memory type (repeatable), e.g. preference or task_state; "
                    "default: every type (sgam schema show lists them)")
AS_HELP = ("The reader principal, e.g. user:mira: private facts reach only their readers; "
           "default: shared facts only; '*' = every fact (admin)")


@neo4j_app.command("up")
@friendly
def neo4j_up(home: Path = HomeOpt, bolt_port: int = BoltOpt, http_port: int = HttpOpt) -> None:
    """Provision Neo4j 5.26 from Maven Central (first time), start it, wait until it answers."""
    from sgam.local.server import LocalServer

    settings = _settings(home, bolt_port, http_port)
    server = LocalServer(settings)
    with console.status("Starting Neo4j (the first run resolves the server from Maven Central)..."):
        info = server.up()
        graph = MemoryGraph.connect(info.uri, _local_auth(settings), settings=settings)
        graph.close()
    console.print(f"Neo4j is running (pid {info.pid}) and the SGAM schema is applied.")
    console.print(f"  Bolt:        {info.uri}")
    console.print(f"  Browser:     {info.browser_url}")
    console.print(f"  Credentials: {info.credentials_path} (user {info.user})")
    console.print(f"  Logs:        {info.logs_dir}")
    heap, pagecache = server.configured_memory()
    console.print(f"  Memory:      heap {heap}, page cache {pagecache} (SGAM_HEAP_SIZE, SGAM_PAGECACHE_SIZE)",
                  soft_wrap=True)


def _local_auth(settings: Settings) -> tuple[str, str]:
    from sgam.settings import resolve_connection

    _, user, password = resolve_connection(settings)
    return user, password


@neo4j_app.command("down")
@friendly
def neo4j_down(home: Path = HomeOpt) -> None:
    """Stop the server that `sgam neo4j up` started (and nothing else)."""
    from sgam.local.server import LocalServer

    stopped = LocalServer(_settings(home)).down()
    console.print("Neo4j stopped." if stopped else "Neo4j was not running.")


@neo4j_app.command("status")
@friendly
def neo4j_status(home: Path = HomeOpt, bolt_port: int = BoltOpt, http_port: int = HttpOpt) -> None:
    """Say whether the local server runs, where, and where its logs and credentials are."""
    from sgam.local.server import LocalServer

    status = LocalServer(_settings(home, bolt_port, http_port)).status()
    state = f"running (pid {status.pid})" if status.running else "not running"
    console.print(f"Neo4j: {state}")
    console.print(f"  Bolt:        {status.uri}")
    console.print(f"  Browser:     {status.browser_url}")
    console.print(f"  Home:        {status.home}")
    console.print(f"  Logs:        {status.logs_dir}")
    console.print(f"  Credentials: {status.credentials_path}")
    if not status.running:
        raise typer.Exit(3)


@schema_app.command("show")
@friendly
def schema_show(schema: str = typer.Argument("default", help="A shipped schema name or a YAML/JSON file"),
                markdown: bool = typer.Option(False, "--markdown",
                                              help="Print only the attributes of each entity type, "
                                                   "as a Markdown table")) -> None:
    """List a schema's entity types, attributes and retention classes."""
    from sgam.graph.schema import load_schema
    from sgam.cli.tables import attribute_table, policy_notes

    loaded = load_schema(schema)
    if markdown:
        typer.echo(attribute_table(loaded))
        return
    console.print(f"{loaded.name} v{loaded.version}: entity types {', '.join(loaded.entity_types)}")
    table = Table(title="attributes", title_justify="left")
    for column in ("name", "value type", "cardinality", "subjects", "memory type", "retention"):
        table.add_column(column)
    for name, spec in sorted(loaded.attributes.items()):
        kind = f"-> {spec.target}" if spec.value_type == "entity" else spec.value_type
        table.add_row(name, kind, spec.cardinality.value, ", ".join(spec.subject_types),
                      spec.memory_type, spec.retention)
    console.print(table)
    for name, spec in sorted(loaded.attributes.items()):
        if policy_notes(spec):
            console.print(f"conflict policy of {name}: {', '.join(policy_notes(spec))}", highlight=False)
    for name, policy in loaded.retention.items():
        console.print(f"retention {name}: " + (f"{policy.ttl_days} days" if policy.ttl_days else "permanent"))
    for migration in loaded.migrations:
        until = f", old names readable until {migration.dual_read_until.isoformat()}" if migration.dual_read_until else ""
        console.print(f"migration from v{migration.from_version}{until}:")
        for step in migration.steps:
            target = getattr(step, "into", None) or (getattr(step, "to", None),)
            how = getattr(step, "upcaster", None) or getattr(step, "splitter", None)
            console.print(f"  {step.kind} {step.attribute}"
                          + (f" -> {', '.join(t for t in target if t)}" if any(target) else "")
                          + (f" ({how})" if how else ""), highlight=False)


@schema_app.command("diff")
@friendly
def schema_diff(old: str = typer.Argument(...), new: str = typer.Argument(...)) -> None:
    """What changes from OLD to NEW (names or files); exit 1 if a change needs a migration."""
    from sgam.graph.schema import load_schema
    from sgam.graph.schema_diff import diff

    changes = diff(load_schema(old), load_schema(new))
    if not changes:
        console.print("no differences")
        return
    table = Table(title=f"{old} -> {new}", title_justify="left")
    for column in ("change", "element", "detail", "needs migration"):
        table.add_column(column, overflow="fold")
    for change in changes:
        table.add_row(change.kind, change.element, change.detail, "yes" if change.breaking else "")
    console.print(table)
    if any(change.breaking for change in changes):
        raise typer.Exit(1)


@schema_app.command("apply")
@friendly
def schema_apply(
    file: str = typer.Argument(..., help="The new schema version (YAML/JSON, or a shipped name)"),
    dry_run: bool = typer.Option(False, "--dry-run", help="Count and check what would change; write nothing"),
    batch_size: int = typer.Option(1000, "--batch-size", min=1, help="Facts per transaction"),
) -> None:
    """Apply a new schema version with its declared migrations (every tenant, history included)."""
    from sgam.graph.schema import load_schema

    new = load_schema(file)
    with MemoryGraph.connect(schema=new, bootstrap=False) as graph, Progress(
        TextColumn("{task.description}"), MofNCompleteColumn(), TimeElapsedColumn(),
        console=err, transient=True,
    ) as progress:
        task = progress.add_task("migrating", total=None)
        report = graph.apply_schema(new, dry_run=dry_run, batch_size=batch_size, on_progress=lambda step, done:
                                    progress.update(task, description=f"{step.kind} {step.attribute}",
                                                    completed=done))
    source = "nothing stored" if report.from_version is None else f"v{report.from_version}"
    if report.status == "unchanged":
        console.print(f"{report.name} v{report.to_version} is already applied: nothing to do")
        return
    table = Table(title=f"{report.name}: {source} -> v{report.to_version}"
                  + (" (dry run: nothing written)" if dry_run else ""), title_justify="left")
    for column in ("step", "attribute", "to", "function", "facts"):
        table.add_column(column)
    for step in report.steps:
        table.add_row(step.kind, step.attribute, ", ".join(step.to), step.function or "", str(step.facts))
    if report.steps:
        console.print(table)
    if report.new_rel_types:
        console.print(f"indexes for new relationship types: {', '.join(report.new_rel_types)}")
    if report.dual_read_until:
        console.print(f"old names stay readable until {report.dual_read_until.isoformat()}")
    verb = "would move" if dry_run else "moved"
    console.print(f"{report.status}: {verb} {report.facts} facts in {len(report.steps)} steps"
                  + ("" if dry_run else f", {report.batches} batches"))


@browser_app.command("help")
@friendly
def browser_help_command(home: Path = HomeOpt, http_port: int = HttpOpt,
                         directory: Path = typer.Option(Path("browser"), "--dir",
                                                        help="Where to write sgam.grass")) -> None:
    """Write the style to DIR/sgam.grass and say how to load it, the favourites and the guide."""
    from sgam.local.browser import STYLE_FILE, browser_help, style
    from sgam.local.server import LocalServer

    directory.mkdir(parents=True, exist_ok=True)
    style_path = directory / STYLE_FILE
    style_path.write_text(style(), encoding="utf-8")
    console.print(browser_help(LocalServer(_settings(home, None, http_port)).browser_url, style_path),
                  highlight=False, markup=False, soft_wrap=True)


@browser_app.command("export")
@friendly
def browser_export(directory: Path = typer.Argument(Path("browser"), help="Where to write the files")) -> None:
    """Write sgam.grass, the favourites zip and the guide for Neo4j Browser."""
    from sgam.local.browser import export

    for path in export(directory):
        console.print(f"wrote {path}", highlight=False, markup=False)


@browser_app.command("guide")
@friendly
def browser_guide(port: int = typer.Option(0, help="Port on localhost (0 = any free one)")) -> None:
    """Serve the SGAM Browser guide and style on localhost: `:play URL`, `:style URL` (Ctrl-C stops)."""
    import time

    from sgam.local.browser import serve_guide, style_url

    with serve_guide(port) as url:
        console.print(f"In Neo4j Browser, run:  :play {url}", highlight=False, soft_wrap=True)
        console.print(f"The SGAM style:         :style {style_url(url)}", highlight=False, soft_wrap=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass


@app.command()
@friendly
def replay(
    file: Path = typer.Argument(..., exists=True, dir_okay=False, help="JSONL: one episode with its deltas a line"),
    atomic: bool = typer.Option(False, "--atomic", help="Apply nothing if any line is bad"),
    as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON"),
) -> None:
    """Replay episodes with their structured deltas (format in the README). Refused deltas are
    recorded, so replaying the same file again changes nothing and reports them refused as before."""
    from sgam.ingest.replay import replay as run_replay, split_lines

    lines = split_lines(file.read_bytes())
    with MemoryGraph.connect() as graph, Progress(
        TextColumn("replaying"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
        console=err, transient=True,
    ) as progress:
        task = progress.add_task("replay", total=sum(1 for line in lines if line.strip()
                                                      and not line.lstrip().startswith(b"#")))
        summary = run_replay(_replay_store(graph, lines), lines, atomic=atomic,
                             on_progress=lambda n: progress.advance(task, n))
        retries = graph.retries
    report = {
        "lines": summary.lines, "episodes": summary.episodes, "written": summary.written,
        "unchanged": summary.unchanged, "refused": summary.refused,
        "refused_as_before": summary.refused_as_before, "invalid": summary.invalid,
        "rejected": summary.rejected, "outcomes": dict(summary.outcomes),
        "line_status": dict(summary.statuses()),
        "errors": [{"line": e.number, "status": e.status, "error": e.message,
                    **({"first_line": e.first_line} if e.first_line is not None else {})}
                   for e in summary.errors],
        "retries": asdict(retries),
    }
    if as_json:
        console.print_json(json.dumps(report))
    else:
        console.print(f"{summary.lines} lines, {summary.episodes} episodes: {summary.written} written, "
                      f"{summary.unchanged} unchanged, {summary.refused} refused, "
                      f"{summary.refused_as_before} refused (as before), {summary.invalid} invalid",
                      highlight=False)
        for name, count in sorted(summary.outcomes.items()):
            console.print(f"  {name}: {count}", highlight=False)
        if retries.transactions:
            console.print(retried_line(retries), highlight=False)
        for error in summary.errors:
            label = error.status
            if error.first_line not in (None, error.number):
                label = f"refused (as before, first at line {error.first_line})"
            err.print(f"[red]line {error.number} {label}:[/] {escape(error.message)}", highlight=False)
    if summary.errors:
        raise typer.Exit(2)


@app.command()
@friendly
def query(
    name: str = typer.Argument(None, help="Query name; see --list"),
    param: list[str] = typer.Option([], "--param", "-p", help="key=value (repeatable)"),
    tenant: str = typer.Option(None, "--tenant", "-t", help="The tenant (a query's $tenant)"),
    subject: str = typer.Option(None, "--subject", "-s", help="The entity id (a query's $subject)"),
    attribute: str = typer.Option(None, "--attribute", "-a", help="The attribute (a query's $attribute)"),
    valid_at: str = typer.Option(None, "--valid-at", help="ISO instant; a date alone is midnight UTC"),
    known_at: str = typer.Option(None, "--known-at", help="ISO instant: what we believed then"),
    memory_id: str = typer.Option(None, "--memory-id", help="A fact version's id (provenance's $memory_id)"),
    relations: str = typer.Option(None, "--relations", help="comma-separated, e.g. holds,covered_by"),
    current_only: bool = typer.Option(False, "--current-only",
                                      help="history: only the rows believed now (expired_at is null)"),
    memory_type: list[str] = typer.Option([], "--memory-type", help=MEMORY_TYPE_HELP),
    principal: str = typer.Option(None, "--as", help=AS_HELP),
    as_json: bool = typer.Option(False, "--json", help="Print rows as JSON"),
    list_queries: bool = typer.Option(False, "--list", help="List the named queries"),
    show: bool = typer.Option(False, "--print", help="Print the Cypher and its :param lines, do not run"),
    readme: bool = typer.Option(False, "--readme", help="Print queries/README.md, generated from the headers"),
) -> None:
    """Run a named query in READ mode and print a table (or JSON)."""
    if readme:
        from sgam.queries.docs import render_readme

        typer.echo(render_readme(), nl=False)
        return
    if list_queries or name is None:
        for known in load_queries().values():
            console.print(f"[bold]{known.name}[/]  {known.doc}")
            console.print("    params: " + ", ".join(known.signature()), highlight=False)
        return
    named = get_query(name)
    if show:
        console.print(named.param_script(), highlight=False, markup=False, soft_wrap=True)
        console.print(named.text, highlight=False, markup=False, soft_wrap=True)
        return
    values: dict[str, Any] = {}
    for item in param:
        key, sep, value = item.partition("=")
        if not sep:
            raise typer.BadParameter(f"--param {item!r} must look like key=value")
        values[key.strip()] = value
    shorthand = {"tenant": tenant, "subject": subject, "attribute": attribute, "valid_at": valid_at,
                 "known_at": known_at, "memory_id": memory_id, "relations": relations,
                 "principal": principal, "current_only": current_only or None,
                 "memory_types": memory_type or None}
    # An option the query does not take is an error (from bind), not silently dropped: --valid-at
    # on `current` must not answer for now as if it had been heard.
    values.update({k: v for k, v in shorthand.items() if v is not None})
    with MemoryGraph.connect(bootstrap=False) as graph:
        records = graph.query(name, **values)
    if as_json:
        console.print_json(json.dumps([{k: jsonable(v) for k, v in r.items()} for r in records]))
    else:
        print_table(name, records)


def _renamed(new: str | None, old: str | None, new_flag: str, old_flag: str = "--as-of") -> datetime | None:
    """An instant option that was renamed: the new flag, or the old one with a note on stderr."""
    if old is None:
        return instant(new, new_flag)
    if new is not None:
        raise typer.BadParameter(f"give {new_flag} only ({old_flag} is its deprecated old name)")
    err.print(f"note: {old_flag} is deprecated; use {new_flag}", highlight=False)
    return instant(old, old_flag)


@app.command()
@friendly
def export(
    tenant: str = typer.Option(..., "--tenant", "-t", help="The tenant to export"),
    valid_at: str = typer.Option(None, "--valid-at", help=VALID_AT_HELP),
    as_of: str = typer.Option(None, "--as-of", hidden=True, help="Deprecated: use --valid-at"),
    known_at: str = typer.Option(None, "--known-at", help="What we believed then (ISO instant); default now"),
    subject: list[str] = typer.Option([], "--subject", "-s", help="Start entity (repeatable); none = the whole tenant"),
    hops: int = typer.Option(1, "--hops", help="With --subject: relation hops around the subjects (0-4)"),
    fmt: str = typer.Option(..., "--format", "-f", help="graphml or json (node-link)"),
    out: Path = typer.Option(None, "--output", "-o", help="File to write; default stdout"),
    principal: str = typer.Option(None, "--as", help=AS_HELP),
) -> None:
    """Export a point-in-time subgraph (facts valid at --valid-at) as GraphML or node-link JSON."""
    from sgam.export import FORMATS, dumps, write

    if fmt not in FORMATS:
        raise typer.BadParameter(f"--format must be one of {', '.join(FORMATS)}, not {fmt!r}")
    when, believed = _renamed(valid_at, as_of, "--valid-at"), instant(known_at, "--known-at")
    with MemoryGraph.connect(bootstrap=False) as graph:
        nx_graph = graph.to_networkx(tenant, valid_at=when, known_at=believed,
                                     subjects=subject or None, hops=hops, principal=principal)
    if out is None:
        typer.echo(dumps(nx_graph, fmt), nl=False)  # type: ignore[arg-type]
        return
    write(nx_graph, out, fmt)  # type: ignore[arg-type]
    err.print(f"wrote {out}: {nx_graph.number_of_nodes()} nodes, {nx_graph.number_of_edges()} facts "
              f"({fmt})", highlight=False)


@app.command()
@friendly
def timeline(
    tenant: str = typer.Option(..., "--tenant", "-t", help="The tenant"),
    subject: str = typer.Option(..., "--subject", "-s", help="The entity whose history to draw"),
    attribute: str = typer.Option(None, "--attribute", "-a", help="Only this attribute; default: all"),
    out: Path = typer.Option(..., "--out", "-o", help="The picture to write: FILE.png or FILE.svg"),
    principal: str = typer.Option(None, "--as", help=AS_HELP),
) -> None:
    """Draw a subject's history: versions over valid time, layered by when the store believed them."""
    from sgam.timeline import figure, save

    with MemoryGraph.connect(bootstrap=False) as graph:
        rows = graph.history(tenant, subject, attribute, principal=principal)
        now = graph.clock()
    if not rows:
        raise typer.BadParameter(f"no stored facts of {subject!r} in tenant {tenant!r}"
                                 + (f" for {attribute!r}" if attribute else ""), param_hint="--subject")
    save(figure(rows, subject, now=now), out)
    console.print(f"wrote {out}: {len(rows)} stored versions of {subject!r}", highlight=False)


@app.command()
@friendly
def doctor(
    tenant: str = typer.Option(..., "--tenant", "-t", help="The tenant to check"),
    forgotten: str = typer.Option(None, "--forgotten", help="Also prove this forgotten subject left no residue"),
) -> None:
    """Check a tenant's invariants (no overlapping versions, empty intervals, rows retired before they were recorded, orphan facts or cross-tenant edges)."""
    with MemoryGraph.connect(bootstrap=False) as graph:
        problems = graph.doctor(tenant)
        residue = graph.residue(tenant, forgotten, forgotten=True) if forgotten else []
    if residue:
        print_table(f"residue of {forgotten}", residue)
    if problems:
        print_table("doctor", problems)
    if problems or residue:
        raise typer.Exit(1)
    console.print(f"tenant {tenant!r}: no invariant violations"
                  + (f"; nothing left of {forgotten!r}" if forgotten else ""))


@app.command()
@friendly
def purge(
    tenant: str = typer.Option(..., "--tenant", "-t", help="The tenant"),
    now: str = typer.Option(None, "--now", help="Purge as if at this instant (ISO; default now)"),
) -> None:
    """Remove facts whose retention expired, in bounded batches, and report what went."""
    at = instant(now, "--now")
    with MemoryGraph.connect() as graph, Progress(
        TextColumn("purging"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
        console=err, transient=True,
    ) as progress:
        task = progress.add_task("purge", total=None)
        report = graph.purge(tenant, now=at,
                             on_progress=lambda done, total: progress.update(task, completed=done, total=total))
    for policy, count in sorted(report.facts.items()):
        console.print(f"  {policy}: {count} facts removed")
    console.print(f"purged {report.total_facts} facts, {report.values} value nodes, "
                  f"{report.episodes} episodes, {report.refusals} replay refusals, "
                  f"{report.audits} read audit records from tenant {tenant!r}")


@app.command()
@friendly
def forget(
    tenant: str = typer.Option(..., "--tenant", "-t", help="The tenant"),
    subject: str = typer.Option(..., "--subject", "-s", help="The entity id to erase"),
    yes: bool = typer.Option(False, "--yes", help="Do not ask for confirmation"),
    dry_run: bool = typer.Option(False, "--dry-run", help="List what would be erased and change nothing"),
    actor: str = typer.Option(None, "--actor", help="Who erases, kept in the tombstone (e.g. user:ops-anna)"),
    reason: str = typer.Option(None, "--reason", help="Why (e.g. a request number), kept in the tombstone"),
) -> None:
    """Erase a subject completely (facts, values, entity, episodes, every text naming it), leave a
    tombstone, and prove nothing is left (exit 1 if anything is)."""
    with MemoryGraph.connect(bootstrap=False) as graph:
        if dry_run or not yes:   # the plan to show; with --yes nothing is shown, so none is made
            console.print(_forgotten(graph.forget_subject(tenant, subject, dry_run=True)),
                          highlight=False, markup=False)
        if dry_run:
            return
        if not yes and not typer.confirm(f"Erase {subject!r} from tenant {tenant!r} for good?"):
            raise typer.Exit(1)
        report = graph.forget_subject(tenant, subject, actor=actor, reason=reason)
        residue = graph.residue(tenant, subject, forgotten=True)
    console.print(_forgotten(report), highlight=False, markup=False)
    if residue:
        print_table(f"residue of {subject}", residue)
        err.print(f"{len(residue)} traces of {subject!r} are left (see above): the erasure is not "
                  "complete; report this as a bug", highlight=False)
        raise typer.Exit(1)
    console.print(f"residue check: nothing left of {subject!r}", highlight=False)


def _forgotten(report: ForgetReport) -> str:
    def ids(found: tuple[str, ...]) -> str:
        return f" ({', '.join(found[:8])}{', ...' if len(found) > 8 else ''})" if found else ""

    verb = "would erase" if report.dry_run else "forgot"
    return (f"{verb} {report.subject!r} in tenant {report.tenant_id!r}: {report.facts} facts, "
            f"{len(report.episodes_deleted)} episodes deleted{ids(report.episodes_deleted)}, "
            f"{len(report.episodes_redacted)} redacted{ids(report.episodes_redacted)}, "
            f"{report.facts_deleted} facts of others deleted, {report.redacted} other records redacted")


def _literal(text: str | None) -> Any:
    """A value from the command line: JSON where it parses (42, true), otherwise the text itself."""
    if text is None:
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return text
    return value if isinstance(value, (int, float, bool)) else text


@app.command()
@friendly
def confirm(
    tenant: str = typer.Option(..., "--tenant", "-t", help="The tenant"),
    subject: str = typer.Option(..., "--subject", "-s", help="The entity the candidate is about"),
    attribute: str = typer.Option(..., "--attribute", "-a", help="The attribute of the candidate"),
    value: str = typer.Argument(None, help="The candidate value; may be left out when only one is pending"),
    actor: str = typer.Option(..., "--actor", help="Who confirms, e.g. user:mira or agent:support"),
    episode: str = typer.Option(None, "--episode", help="A recorded episode in which it was confirmed; "
                                "default: record one now"),
) -> None:
    """Confirm a pending candidate: it becomes a confirmed fact at its own valid_from."""
    with MemoryGraph.connect(bootstrap=False) as graph:
        if episode is None:
            said = f"{actor} confirmed {attribute} of {subject}" + (f": {value}" if value else "")
            episode = graph.record_episode(tenant_id=tenant, content=said, actor=actor,
                                           occurred_at=graph.clock()).id
        result = graph.confirm(tenant, subject, attribute, _literal(value), actor=actor, episode=episode)
    console.print(f"{result.outcome}: {result.message} (episode {episode})", highlight=False)


@app.command()
@friendly
def context(
    question: str = typer.Argument(..., help="The question the context is for"),
    tenant: str = typer.Option(..., "--tenant", "-t", help="The tenant"),
    subject: list[str] = typer.Option([], "--subject", "-s", help="Entity id (repeatable); default: found by name in the question"),
    attribute: list[str] = typer.Option([], "--attribute", "-a", help="Attribute in play (repeatable); default: named in the question"),
    valid_at: str = typer.Option(None, "--valid-at", help=VALID_AT_HELP + "; default: a time the question names, else now"),
    as_of: str = typer.Option(None, "--as-of", hidden=True, help="Deprecated: use --valid-at"),
    asked_at: str = typer.Option(None, "--asked-at", help="When the question was asked (ISO instant): "
                                 "'last June' is read relative to it; default now"),
    memory_type: list[str] = typer.Option([], "--memory-type", help=MEMORY_TYPE_HELP),
    budget: int = typer.Option(800, "--budget", help="Token budget; the exact facts must fit"),
    expand: bool = typer.Option(None, "--expand/--no-expand", help="Require / skip vector expansion; default: use it when installed"),
    as_json: bool = typer.Option(False, "--json", help="Print the structured context as JSON"),
    principal: str = typer.Option(None, "--as", help=AS_HELP),
) -> None:
    """The smallest context that answers a question: exact facts first, then labelled evidence."""
    when = _renamed(valid_at, as_of, "--valid-at")
    with MemoryGraph.connect(bootstrap=False) as graph:
        result = graph.context(tenant, question, subjects=subject or None, attributes=attribute or None,
                               valid_at=when, budget_tokens=budget, expand=expand, principal=principal,
                               asked_at=instant(asked_at, "--asked-at"), memory_types=memory_type or None)
    if as_json:
        console.print_json(result.model_dump_json())
        return
    if result.empty:
        console.print(f"no stored memory for this question in tenant {tenant!r}", highlight=False)
    else:
        console.print(result.text, highlight=False, markup=False, soft_wrap=True, end="")
    for note in result.notes:
        err.print(f"note: {note}", highlight=False, markup=False)


@app.command()
@friendly
def embed(
    tenant: str = typer.Option(..., "--tenant", "-t", help="The tenant"),
    batch: int = typer.Option(64, "--batch", help="Nodes embedded and written per transaction"),
    model: str = typer.Option(None, "--model", help="Model name or folder [env SGAM_EMBEDDING_MODEL; default all-MiniLM-L6-v2]"),
) -> None:
    """Backfill embeddings (episodes, entity names, fact statements) for vector expansion."""
    from sgam.queries.embeddings import require_embedder, default_embedder

    embedder = default_embedder(model) if model else require_embedder(None)
    with MemoryGraph.connect() as graph, Progress(
        TextColumn("embedding {task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
        console=err, transient=True,
    ) as progress:
        task = progress.add_task("(loading the model)", total=None)

        def on_progress(kind: str, done: int, total: int) -> None:
            progress.update(task, description=kind or "", completed=done, total=total)

        report = graph.embed(tenant, embedder=embedder, batch_size=batch, on_progress=on_progress)
    counts = ", ".join(f"{n} {kind}" for kind, n in report.embedded.items())
    console.print(f"tenant {tenant!r}: embedded {counts} with {report.model}")


@app.command()
@friendly
def demo(project: bool = typer.Option(False, "--project", help="Project memory instead: replay a small "
                                       "project history into tenant `demo-project` (schema project-memory)")) -> None:
    """Wipe tenant `demo`, replay the demo episodes into it and compare SGAM with a naive text memory."""
    from sgam import demo as demo_module

    if project:
        from sgam.graph.schema import load_schema

        with MemoryGraph.connect(schema=load_schema(demo_module.PROJECT_SCHEMA)) as graph:
            demo_module.run_project(graph, console, demo_module.PROJECT_TENANT)
        return
    console.print(f"Tenant {demo_module.TENANT!r} is wiped and replayed (anything else stored in it is deleted).",
                  highlight=False)
    with MemoryGraph.connect() as graph:
        demo_module.run(graph, console)
        uri = graph.store.uri
    console.print(f"Neo4j is still running at {uri}. Paste this into Neo4j Browser:")
    console.print(demo_module.BROWSER_QUERY, highlight=False, markup=False, soft_wrap=True)


@app.command()
@friendly
def stats(
    tenant: str = typer.Option(..., "--tenant", "-t", help="The tenant to summarise"),
    as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON"),
) -> None:
    """Summarise a tenant: entities, facts by status, candidates, quarantine, queue, last write (counts only)."""
    with MemoryGraph.connect(bootstrap=False) as graph:
        rows = graph.query("tenant-stats", tenant=tenant)
    if not rows:   # known (a deletion record says so) but empty
        console.print(f"tenant {tenant!r} holds nothing now (it was deleted)", highlight=False, markup=False)
        return
    row = {k: jsonable(v) for k, v in rows[0].items()}
    if as_json:
        console.print_json(json.dumps(row))
        return
    both = lambda items, key: ", ".join(f"{r[key]} {r['status']}" for r in items) or "none"  # noqa: E731
    console.print(f"tenant {tenant!r}\n"
                  f"  entities         {row['entities']}\n"
                  f"  facts            {both(row['facts'], 'facts')}\n"
                  f"  candidates       {row['candidates']} pending\n"
                  f"  quarantine       {row['quarantine_open']} open of {row['quarantine_total']}\n"
                  f"  queue            {both(row['queue'], 'episodes')}\n"
                  f"  last write       {row['last_write'] or 'never'}", highlight=False)


def _replay_store(graph: MemoryGraph, lines: list[bytes]) -> Any:
    """The store of the tenants a replay file names (one target: a placement may not split it)."""
    if not graph.targets.placement.tenants:
        return graph.store
    from sgam.ingest.replay import ReplayLine, parse_lines

    return graph.targets.of([p.episode.tenant_id for p in parse_lines(lines) if isinstance(p, ReplayLine)])

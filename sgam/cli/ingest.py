"""The ingest commands of the ``sgam`` CLI.

    sgam ingest FILE... -t T [--kind K] [--atomic]   record episodes; process now or queue them
    sgam worker [-t T ...] [--until-idle]  process the queue (safe to run several at once)
    sgam queue status|retry -t T [--as P]  the queue's state; requeue dead-lettered episodes
    sgam quarantine list|replay -t T [--as P]  refused candidates; re-validate them after a schema change
"""

from __future__ import annotations

import importlib
import inspect
import json
import logging
import signal
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import typer

from sgam.graph.errors import InvalidDelta, SgamError
from sgam.graph.models import EpisodeKind
from sgam.graph.schema import Schema, default_schema, load_schema
from sgam.graph.store import Retries
from sgam.ingest.extract import Extractor
from sgam.ingest.files import Defaults, Item, ItemError, read_items

from sgam.api import MemoryGraph
from sgam.cli.common import app, console, err, friendly, instant, print_table, retried_line

EXTRACTOR_ALIASES = {
    "events": "sgam.ingest.extractors.events:EventMapper",
    "llm": "sgam.ingest.extractors.llm:OpenAICompatibleExtractor.from_settings",
    "graphiti": "sgam.ingest.graphiti.extractor:GraphitiExtractor.from_settings",
}

queue_app = typer.Typer(no_args_is_help=True, help="The background queue of episodes (kept in Neo4j).")
quarantine_app = typer.Typer(no_args_is_help=True, help="Candidates the write path refused.")

SchemaOpt = typer.Option(None, "--schema", help="Schema name or YAML/JSON file [default: the shipped default]")
ExtractorOpt = typer.Option(
    [], "--extractor", "-x",
    help="events (default), llm, graphiti (graphiti-core's extraction), or MODULE:ATTR (an extractor, or a factory taking schema=); repeatable")
EventsOpt = typer.Option(None, "--events", help="Event rules file [default: graph/schemas/events.yaml]")
ReaderOpt = typer.Option(
    None, "--as",
    help="The reader principal, e.g. user:mira: what carries a private attribute's value reaches only "
         "its readers; default: shared ones only; '*' = everything (admin)")


def _schema(name: str | None) -> Schema:
    return load_schema(name) if name else default_schema()


def load_extractor(spec: str, schema: Schema, events: Path | None = None) -> Extractor:
    """An extractor from ``events``, ``llm`` or ``module:attr`` (attr may be dotted)."""
    if spec == "events" and events is not None:
        from sgam.ingest.extractors.events import EventMapper, load_event_rules

        return EventMapper(load_event_rules(events), schema=schema)
    target = EXTRACTOR_ALIASES.get(spec, spec)
    module_name, sep, attr = target.partition(":")
    if not sep or not attr:
        raise typer.BadParameter(f"--extractor {spec!r}: use events, llm or MODULE:ATTR")
    try:
        obj: Any = importlib.import_module(module_name)
        for part in attr.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as exc:
        raise typer.BadParameter(f"--extractor {spec!r} cannot be loaded: {exc}") from None
    if inspect.isclass(obj) or not hasattr(obj, "extract"):
        accepts_schema = "schema" in inspect.signature(obj).parameters
        obj = obj(schema=schema) if accepts_schema else obj()
    return obj  # type: ignore[no-any-return]


def _extractors(specs: list[str], schema: Schema, events: Path | None) -> list[Extractor]:
    return [load_extractor(spec, schema, events) for spec in (specs or ["events"])]


app.add_typer(queue_app, name="queue")
app.add_typer(quarantine_app, name="quarantine")


@app.command("ingest")
@friendly
def ingest_command(
    files: list[Path] = typer.Argument(..., help="Documents, or JSONL files of episodes (see the README)"),
    tenant: str = typer.Option(..., "--tenant", "-t", help="The tenant"),
    kind: EpisodeKind = typer.Option(EpisodeKind.MESSAGE, "--kind", "-k",
                                     help="message, tool_result or event (JSONL), or document (whole files)"),
    actor: str = typer.Option(None, "--actor", help="Speaker/source for episodes that name none"),
    session: str = typer.Option(None, "--session", help="Session id for episodes that name none"),
    occurred_at: str = typer.Option(None, "--occurred-at",
                                    help="ISO instant for episodes that name none (documents need it)"),
    mode: str = typer.Option("auto", "--mode",
                             help="auto: deltas and 'remember' now, the rest queued; now: everything "
                                  "now; queue: everything without deltas queued"),
    schema: str = SchemaOpt, extractor: list[str] = ExtractorOpt, events: Path = EventsOpt,
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON"),
    atomic: bool = typer.Option(False, "--atomic",
                                help="Store nothing if any line, or any delta of one, is bad"),
) -> None:
    """Record episodes (deduplicated by content), then process them now or queue them for `sgam worker`."""
    from sgam.ingest.pipeline import ingest, record, submit

    if mode not in ("auto", "now", "queue"):
        raise typer.BadParameter(f"--mode must be auto, now or queue, not {mode!r}")
    defaults = Defaults(tenant, kind, actor, session, instant(occurred_at, "--occurred-at"))
    parsed = [x for path in files for x in read_items(path, defaults)]
    errors = [x for x in parsed if isinstance(x, ItemError)]
    rows: list[dict[str, Any]] = []
    loaded = _schema(schema)
    if atomic:
        first = next(iter(errors), None) or _unready([x for x in parsed if isinstance(x, Item)], loaded)
        if first is not None:
            raise InvalidDelta(f"{first.source}: {first.message} (atomic ingest: nothing was stored)")
    with MemoryGraph.connect(schema=loaded) as graph:
        chosen = _extractors(extractor, loaded, events)
        for item in (x for x in parsed if isinstance(x, Item)):
            try:
                store = graph.targets.of([item.episode.tenant_id])   # its tenant's server (placement)
                if mode == "now":
                    report = ingest(store, item.episode, chosen, deltas=item.deltas)
                elif mode == "queue" and not item.deltas:
                    stored, recorded = record(store, item.episode, queue=True)
                    rows.append({"source": item.source, "episode": stored.id,
                                 "recorded": recorded.outcome, "queued": True})
                    continue
                else:
                    report = submit(store, item.episode, chosen, deltas=item.deltas,
                                    remember=item.remember)
            except SgamError as exc:
                if exc.transient:
                    raise
                errors.append(ItemError(item.source, str(exc)))
                continue
            rows.append(_row(item.source, report))
        retries = graph.retries
    _print_ingest(rows, errors, as_json, retries)
    if errors:
        raise typer.Exit(2)


@app.command("import-graphiti")
@friendly
def import_graphiti_command(
    mapping: Path = typer.Option(..., "--mapping", "-m", exists=True, dir_okay=False,
                                 help="Mapping YAML (see graph/schemas/graphiti-mapping.yaml)"),
    tenant: str = typer.Option(..., "--tenant", "-t", help="The tenant"),
    group_id: list[str] = typer.Option([], "--group-id", "-g",
                                       help="Graphiti group_id to import (repeatable) [default: all]"),
    dry_run: bool = typer.Option(False, "--dry-run", help="Read and map, write nothing"),
    schema: str = SchemaOpt,
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON"),
) -> None:
    """Import a Graphiti graph from this Neo4j (RELATES_TO facts, Episodic episodes) as SGAM facts."""
    from sgam.ingest.graphiti.importer import GraphitiMapping

    rules = GraphitiMapping.from_file(mapping)
    with MemoryGraph.connect(schema=_schema(schema)) as graph:
        report = graph.import_graphiti(rules, tenant, group_ids=group_id, dry_run=dry_run)
    if as_json:
        console.print_json(json.dumps(report.as_dict()))
        return
    console.print(f"{'dry run: ' if dry_run else ''}read {report.episodes_read} episodes and "
                  f"{report.edges_read} edges; episodes {dict(report.episodes)}; {report.deltas} deltas "
                  f"-> {dict(report.outcomes)}", highlight=False)
    if report.unmapped:
        print_table("unmapped edge names", [{"name": k, "edges": n}
                                            for k, n in report.unmapped.most_common()])
    if report.problems:
        print_table("not imported", report.problems)


@app.command("worker")
@friendly
def worker_command(
    tenant: list[str] = typer.Option(None, "--tenant", "-t",
                                     help="Only this tenant (repeat for several) [default: all]"),
    batch: int = typer.Option(10, "--batch", min=1, help="Episodes claimed per transaction"),
    lease: float = typer.Option(60.0, "--lease", min=0.1, help="Seconds a claim holds before others may take it"),
    max_attempts: int = typer.Option(5, "--max-attempts", min=1, help="Claims before an episode is dead-lettered"),
    backoff: float = typer.Option(2.0, "--backoff", min=0, help="First retry delay in seconds (doubles)"),
    poll: float = typer.Option(1.0, "--poll", min=0.01, help="Seconds to wait when nothing is due"),
    until_idle: bool = typer.Option(False, "--until-idle", help="Exit when nothing is pending or claimed"),
    max_batches: int = typer.Option(None, "--max-batches", min=1, help="Exit after this many batches"),
    name: str = typer.Option(None, "--name", help="Worker name in claims [default: host:pid:random]"),
    schema: str = SchemaOpt, extractor: list[str] = ExtractorOpt, events: Path = EventsOpt,
) -> None:
    """Process queued episodes: claim with a lease, extract, write, quarantine; retry or dead-letter."""
    from sgam.ingest.worker import Worker, WorkerOptions, combined

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    options = WorkerOptions(batch_size=batch, lease=timedelta(seconds=lease), max_attempts=max_attempts,
                            backoff=timedelta(seconds=backoff), poll=poll, tenant=tenant or None)
    loaded = _schema(schema)
    # SIGTERM / Ctrl-C: finish the episode at hand, hand the rest of the batch back, exit.
    stopping: list[int] = []
    previous = {sig: signal.signal(sig, lambda number, _frame: stopping.append(number))
                for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        with MemoryGraph.connect(schema=loaded) as graph:
            # One worker per target of the placement (each server holds its own tenants' queue).
            workers = [Worker(store, _extractors(extractor, loaded, events), replace(options, tenant=scope),
                              name=name)
                       for store, scope in graph.targets.scopes(options.tenants)]
            err.print(f"worker {workers[0].name} started (batch {batch}, lease {lease:g}s"
                      f"{', tenants ' + ', '.join(tenant) if tenant else ''}"
                      f"{f', {len(workers)} servers' if len(workers) > 1 else ''})", highlight=False)
            with ThreadPoolExecutor(max_workers=len(workers)) as pool:
                done = list(pool.map(lambda w: w.run(until_idle=until_idle, max_batches=max_batches,
                                                     should_stop=lambda: bool(stopping)), workers))
            stats = done[0] if len(done) == 1 else combined(done)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    summary = {k: v for k, v in asdict(stats).items() if k != "errors"}
    console.print(" ".join(f"{k}={v}" for k, v in summary.items()), highlight=False)
    for error in stats.errors:
        err.print(f"dead-lettered {error}", highlight=False, markup=False)


@queue_app.command("status")
@friendly
def queue_status(tenant: str = typer.Option(..., "--tenant", "-t", help="The tenant"),
                 principal: str = ReaderOpt,
                 as_json: bool = typer.Option(False, "--json", help="Print as JSON")) -> None:
    """Episodes by status, the oldest waiting one, and dead-letter errors (query `queue`)."""
    with MemoryGraph.connect(bootstrap=False) as graph:
        records = graph.query("queue", tenant=tenant, principal=principal)
    if as_json:
        console.print_json(json.dumps(records, default=str))
    else:
        print_table("queue", records)


@queue_app.command("retry")
@friendly
def queue_retry(tenant: str = typer.Option(..., "--tenant", "-t", help="The tenant")) -> None:
    """Put every dead-lettered (failed) episode of the tenant back in the queue."""
    from sgam.ingest.queue import requeue_failed_steps

    with MemoryGraph.connect() as graph:
        n = graph.targets.of([tenant]).transact(lambda: requeue_failed_steps(tenant, graph.clock()))
    console.print(f"requeued {n} failed episode(s) of tenant {tenant!r}", highlight=False, markup=False)


@quarantine_app.command("list")
@friendly
def quarantine_list(
    tenant: str = typer.Option(..., "--tenant", "-t", help="The tenant"),
    status: str = typer.Option("open", "--status", help="open, resolved or all"),
    principal: str = ReaderOpt,
    as_json: bool = typer.Option(False, "--json", help="Print as JSON"),
) -> None:
    """Refused candidates with the reason, the stage that refused them and their episode."""
    with MemoryGraph.connect(bootstrap=False) as graph:
        entries = graph.quarantine(tenant, status=None if status == "all" else status,
                                   principal=principal)
    rows = [{"id": e.id, "status": e.status, "episode": e.episode_id, "extractor": e.extractor,
             "stage": e.stage, "line": e.line, "reason": e.reason, "candidate": e.candidate}
            for e in entries]
    if as_json:
        console.print_json(json.dumps(rows))
    else:
        print_table("quarantine", rows)


@quarantine_app.command("replay")
@friendly
def quarantine_replay(
    tenant: str = typer.Option(..., "--tenant", "-t", help="The tenant"),
    schema: str = SchemaOpt, extractor: list[str] = ExtractorOpt, events: Path = EventsOpt,
    principal: str = ReaderOpt,
    as_json: bool = typer.Option(False, "--json", help="Print as JSON"),
) -> None:
    """Re-validate open entries against the (new) schema and rules; write and resolve those that pass.

    Every open entry is replayed; the reasons printed are those of entries the reader may read.
    """
    loaded = _schema(schema)
    with MemoryGraph.connect(schema=loaded) as graph:
        report = graph.replay_quarantine(tenant, _extractors(extractor, loaded, events))
        # A still-failing reason may quote the refused value: shown only to who may read its entry.
        readable = {e.id for e in graph.quarantine(tenant, status=None, principal=principal)}
    shown = [f for f in report.failing if f["id"] in readable]
    data = {"resolved": report.resolved, "failing": shown, "hidden": len(report.failing) - len(shown),
            "skipped": report.skipped, "new_entries": [e.id for e in report.new_entries]}
    if as_json:
        console.print_json(json.dumps(data))
        return
    console.print(f"{len(report.resolved)} resolved, {len(report.failing)} still failing, "
                  f"{len(report.skipped)} skipped, {len(report.new_entries)} new entries", highlight=False)
    for failing in shown:
        err.print(f"{failing['id']}: {failing['reason']}", highlight=False, markup=False)
    if data["hidden"]:
        err.print(f"{data['hidden']} still-failing entries are not readable as "
                  f"{principal or 'no principal'}", highlight=False, markup=False)


def _unready(items: list[Item], schema: Schema) -> ItemError | None:
    """The first item an atomic ingest cannot take, judged before anything is stored: an episode id
    an earlier item gives with other content, or a delta that is not valid for ``schema``. (What
    depends on the stored state, e.g. an id stored with other content, is found only on writing.)"""
    from sgam.graph.writes import prepare
    from sgam.ingest.pipeline import validate

    seen: dict[tuple[str, str], Item] = {}
    for item in items:
        earlier = seen.setdefault((item.episode.tenant_id, item.episode.id), item)
        if earlier.episode.content_hash != item.episode.content_hash:
            return ItemError(item.source, f"episode {item.episode.id!r} is given by {earlier.source} with "
                                          "other content: episode ids are permanent")
        valid, refused = validate(item.episode, [("structured", d) for d in item.deltas])
        _, rejected = prepare([delta for _, _, delta in valid], schema)
        if refused or rejected:
            return ItemError(item.source, refused[0].reason if refused else rejected[0].message)
    return None


def _row(source: str, report: Any) -> dict[str, Any]:
    return {"source": source, "episode": report.episode_id, "recorded": report.recorded,
            "queued": report.queued, "deferred": report.deferred, "written": report.written, "unchanged": report.unchanged,
            "quarantined": [{"id": e.id, "stage": e.stage, "reason": e.reason} for e in report.quarantined]}


def _print_ingest(rows: list[dict[str, Any]], errors: list[ItemError], as_json: bool,
                  retries: Retries) -> None:
    if as_json:
        console.print_json(json.dumps({"episodes": rows, "errors": [asdict(e) for e in errors],
                                       "retries": asdict(retries)}))
        return
    recorded = {k: sum(1 for r in rows if r["recorded"] == k) for k in ("created", "existing", "duplicate")}
    queued = sum(1 for r in rows if r["queued"])
    written = sum(r.get("written", 0) for r in rows)
    quarantined = [(r["source"], q) for r in rows for q in r.get("quarantined", [])]
    console.print(f"{len(rows)} episodes ({recorded['created']} new, {recorded['existing']} already stored, "
                  f"{recorded['duplicate']} duplicates): {queued} queued, {written} facts written, "
                  f"{len(quarantined)} quarantined, {len(errors)} rejected", highlight=False)
    if retries.transactions:
        console.print(retried_line(retries), highlight=False)
    for row in rows:
        if row.get("deferred"):
            err.print(f"queued instead of written now {row['source']}: {row['deferred']}", highlight=False,
                      markup=False)
    for source, entry in quarantined:
        err.print(f"quarantined {source} ({entry['stage']}): {entry['reason']}", highlight=False, markup=False)
    for error in errors:
        err.print(f"rejected {error.source}: {error.message}", highlight=False, markup=False)


__all__ = ["EXTRACTOR_ALIASES", "load_extractor"]

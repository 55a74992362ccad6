"""Scale benchmark (``sgam bench scale``): how SGAM's costs grow from 10k to 1M facts (10M optional).

One seeded stream of deltas is generated in arrival order; the graph at size ``S`` is its first
``S`` deltas. Sizes run in ascending order, each in a fresh tenant (the previous one is deleted):

1. the first ``S - window`` deltas are loaded with :meth:`MemoryGraph.import_history` (the bulk
   path for a whole history into an empty tenant: same reconciliation, larger transactions);
2. the last ``window`` deltas (20k by default) go through ``write_many`` and are timed, next to a
   plain ``UNWIND ... CREATE`` of the same deltas as raw relationships (``sgam.bench.RAW_WRITE``)
   into a scratch tenant;
3. the query plans are re-made for the loaded graph (``db.clearQueryCaches``), then ``current``,
   ``as_of``, ``history``, a 3-hop ``traverse`` (knows -> works_at -> located_in) and ``context``
   (exact facts, no vector expansion) are timed on random slots, each interleaved with its raw
   baseline: the same indexed lookup without temporal logic;
4. Neo4j's store size (bytes of the database directory, local server only), its heap in use
   (JMX) and this process's RSS are recorded; ``current`` / ``as_of`` answers are checked against
   an independent model of the semantics (``sgam.bench.Slot``).

The stream: a person pool that grows with the stream (about ten facts per person), 1% of the
pool "hot" and receiving 15% of the facts (long histories), companies located in cities, and the
operation mix of ``sgam.bench`` (changes, re-asserts, backdated asserts, corrections, retractions,
replays). It runs under its own schema (``sgam-bench-scale``), which adds the relations the 3-hop
traversal needs. Results: ``scale-<timestamp>.json``, ``.md`` and ``.png`` under ``out_dir``.
"""

from __future__ import annotations

import json
import logging
import os
import random
import resource
import secrets
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from sgam.bench import (
    CITIES, EPOCH, HORIZON, RAW_LOOKUP, Slot, _Values, _choose, _compare, _git_state, _latency,
    _loadavg, _machine, _neo4j_info, _next_delta, _observed, _raw_write, _RetryCounter, _version,
    _write_tenant_cleanup,
)
from sgam.graph.models import Cardinality, Episode, EpisodeKind, MemoryDelta
from sgam.graph.schema import Schema

DEFAULT_SIZES = (10_000, 100_000, 1_000_000)
HUGE_SIZE = 10_000_000
WINDOW = 20_000
LOOKUPS = 300
WARMUP = 50
GRAPHITI_MAX = 10_000  # embedding every edge (and searching them) of a bigger graph takes too long on CPU
EPISODE_BATCH = 5_000
FACTS_PER_PERSON = 10
HOT_SHARE, HOT_FACTS = 0.01, 0.15
COMPANY_SHARE = 0.04  # of the facts, about companies (where they are)
PERSONS_PER_COMPANY = 20
ACTORS = (("user:self", EpisodeKind.MESSAGE), ("agent:support", EpisodeKind.MESSAGE),
          ("tool:crm", EpisodeKind.TOOL_RESULT))
OPERATIONS = ("current", "as_of", "history", "traverse", "context")
PATH = ("knows", "works_at", "located_in")

PERSON_WEIGHTS = {"home_city": 18, "email": 14, "response_style": 12, "passport_deadline": 8,
                  "last_contacted_at": 12, "contact": 12, "knows": 16, "works_at": 8}

SCHEMA = Schema.from_data({
    "name": "sgam-bench-scale", "version": 1,
    "entity_types": ["Person", "Company", "City"],
    "attributes": {
        "home_city": {"value_type": "string", "memory_type": "profile", "subject_types": ["Person"]},
        "email": {"value_type": "string", "normalise": "lower", "memory_type": "profile",
                  "subject_types": ["Person"]},
        "response_style": {"value_type": "string", "memory_type": "preference", "subject_types": ["Person"]},
        "passport_deadline": {"value_type": "date", "memory_type": "task_state", "subject_types": ["Person"]},
        "last_contacted_at": {"value_type": "datetime", "memory_type": "profile", "subject_types": ["Person"]},
        "contact": {"value_type": "string", "cardinality": "many", "memory_type": "profile",
                    "subject_types": ["Person"]},
        "knows": {"value_type": "entity", "target": "Person", "cardinality": "many",
                  "memory_type": "relation", "subject_types": ["Person"]},
        "works_at": {"value_type": "entity", "target": "Company", "memory_type": "relation",
                     "subject_types": ["Person"]},
        "located_in": {"value_type": "entity", "target": "City", "memory_type": "relation",
                       "subject_types": ["Company"]},
    },
}, origin="sgam.bench_scale")

# Raw baselines: the same indexed entry point, no temporal predicate.
RAW_HISTORY = """
MATCH (s:Entity {tenant_id: $tenant, id: $subject})-[f]->(o)
WHERE f.attribute = $attribute
RETURN f.value AS value, f.valid_from AS valid_from
"""
RAW_TRAVERSE = """
MATCH (s:Entity {tenant_id: $tenant, id: $subject})-[:KNOWS]->(a)-[:WORKS_AT]->(b)-[:LOCATED_IN]->(c)
RETURN a.id AS a, b.id AS b, c.id AS c
"""
RAW_CONTEXT = """
MATCH (s:Entity {tenant_id: $tenant, id: $subject})-[f]->(o)
WHERE f.expired_at IS NULL
RETURN f.attribute AS attribute, f.value AS value, f.source_episode_id AS episode
"""
STORE_COUNTS = """
CALL () { MATCH (n:Entity {tenant_id: $tenant}) RETURN count(n) AS entities }
CALL () { MATCH (:Entity {tenant_id: $tenant})-[f]->() WHERE f.memory_id IS NOT NULL
          RETURN count(f) AS facts, count(CASE WHEN f.expired_at IS NULL THEN 1 END) AS believed }
RETURN entities, facts, believed
"""


# -- the stream ------------------------------------------------------------------------------------


class _ScaleValues(_Values):
    def __init__(self, rng: random.Random, stream: Stream) -> None:
        super().__init__(rng, SCHEMA)
        self.stream = stream

    def draw(self, attribute: str, subject: str, at: datetime) -> Any:
        if attribute == "knows":
            return self.stream.person(self.rng.randrange(self.stream.pool))
        if attribute == "works_at":
            return self.stream.company(self.rng.randrange(self.stream.companies))
        if attribute == "located_in":
            return f"city-{self.rng.choice(CITIES).lower()}"
        return super().draw(attribute, subject, at)


@dataclass
class Stream:
    """The deterministic delta stream; ``take(n)`` extends it, ``slots`` is the expected state."""

    seed: int
    final_size: int
    tenant: str = "bench-scale"
    deltas: list[MemoryDelta] = field(default_factory=list)
    episodes: list[Episode] = field(default_factory=list)
    slots: dict[tuple[str, str], Slot] = field(default_factory=dict)
    ops: Counter = field(default_factory=Counter)
    positions: dict[tuple[str, str], list[int]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        self.values = _ScaleValues(self.rng, self)
        self.attributes = list(PERSON_WEIGHTS)
        self.weights = list(PERSON_WEIGHTS.values())
        self.pool = 50
        self.companies = 5
        self._left = 0
        self._actor = ACTORS[0]

    @staticmethod
    def person(index: int) -> str:
        return f"p-{index:07d}"

    @staticmethod
    def company(index: int) -> str:
        return f"co-{index:06d}"

    def _subject(self) -> tuple[str, str, str]:
        rng = self.rng
        if rng.random() < COMPANY_SHARE:
            return self.company(rng.randrange(self.companies)), "Company", "located_in"
        attribute = rng.choices(self.attributes, self.weights)[0]
        if rng.random() < HOT_FACTS:
            hot = max(1, int(self.pool * HOT_SHARE))
            return self.person(int(hot * rng.random() ** 2)), "Person", attribute
        return self.person(rng.randrange(self.pool)), "Person", attribute

    def take(self, n: int) -> None:
        """Append the next ``n`` deltas (and the episodes they cite) to the stream."""
        span = (HORIZON - EPOCH).total_seconds()
        rng = self.rng
        for _ in range(n):
            i = len(self.deltas)
            self.pool = max(50, i // FACTS_PER_PERSON + 1)
            self.companies = max(5, self.pool // PERSONS_PER_COMPANY)
            base = EPOCH + timedelta(seconds=span * i / self.final_size + rng.uniform(0, 3600))
            if self._left == 0:
                self._actor = rng.choice(ACTORS)
                self._left = rng.randint(5, 15)
                self.episodes.append(Episode(
                    tenant_id=self.tenant, id=f"ep-{len(self.episodes):08d}", occurred_at=base,
                    kind=self._actor[1], actor=self._actor[0],
                    content=f"scale episode {len(self.episodes)} (seed {self.seed})"))
            self._left -= 1
            subject, subject_type, attribute = self._subject()
            many = SCHEMA.attribute(attribute).cardinality is Cardinality.MANY
            slot = self.slots.setdefault((subject, attribute), Slot(many=many))
            kind, delta = _next_delta(rng, self.values, slot, self.tenant, subject, attribute, base,
                                      self.episodes[-1].id, self._actor[0])
            if delta.subject_type != subject_type:
                delta = delta.model_copy(update={"subject_type": subject_type})
            vkey = None if delta.value is None else SCHEMA.coerce(attribute, delta.value)[1]
            slot.apply(delta, vkey)
            self.positions.setdefault((subject, attribute), []).append(i)
            self.deltas.append(delta)
            self.ops[kind] += 1


# -- measuring ---------------------------------------------------------------------------------------


def _rss_mb() -> dict[str, float | None]:
    current = None
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                current = round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # kB on Linux
    return {"rss_mb": current, "peak_rss_mb": round(peak, 1)}


def _heap(graph: Any) -> dict[str, Any]:
    try:
        rows = graph.store.read("CALL dbms.queryJmx('java.lang:type=Memory') YIELD attributes "
                                "RETURN attributes.HeapMemoryUsage.value.properties AS heap", {})
        heap = rows[0]["heap"]
        return {"heap_used_mb": round(heap["used"] / 2**20, 1),
                "heap_committed_mb": round(heap["committed"] / 2**20, 1),
                "heap_max_mb": round(heap["max"] / 2**20, 1), "source": "dbms.queryJmx java.lang:type=Memory"}
    except Exception as exc:  # noqa: BLE001 - informational; say why it is missing
        return {"heap_used_mb": None, "error": str(exc)[:200]}


def _store_dir(graph: Any) -> Path | None:
    """The database directory of the local server (None for a server elsewhere)."""
    from .settings import Settings

    settings = Settings()
    if not str(graph.store.uri).endswith(f":{settings.bolt_port}"):
        return None
    path = settings.home.expanduser().resolve() / "data" / "databases" / graph.store.database
    return path if path.is_dir() else None


def _dir_bytes(path: Path | None) -> int | None:
    if path is None:
        return None
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.path.getsize(os.path.join(root, name))
            except OSError:
                pass
    return total


def _timed(call: Callable[[], Any]) -> tuple[float, Any]:
    started = time.perf_counter()
    answer = call()
    return time.perf_counter() - started, answer


def _lookups(graph: Any, stream: Stream, size: int, tenant: str, lookups: int,
             seed: int) -> tuple[dict[str, Any], dict[str, Any], list[dict[str, Any]]]:
    """Timed reads with their raw baselines, and the correctness check of current/as_of."""
    rng = random.Random(seed * 7919 + size)
    deltas = stream.deltas[:size]
    seen = sorted({(d.subject, d.attribute) for d in deltas})
    slots = [k for k in seen if k[1] != "located_in"] or seen
    travellers = sorted({d.subject for d in deltas if d.attribute == "knows"}) or [slots[0][0]]
    horizon = deltas[-1].valid_from
    pairs = [rng.choice(slots) for _ in range(lookups)]
    starts = [rng.choice(travellers) for _ in range(lookups)]
    instants = [EPOCH + (horizon - EPOCH) * rng.random() for _ in range(lookups)]
    store = graph.store

    def raw(query: str, **params: Any) -> Callable[[int], Any]:
        return lambda i: store.read(query, {"tenant": tenant, **{k: v(i) for k, v in params.items()}})

    subject = lambda i: pairs[i][0]  # noqa: E731
    attribute = lambda i: pairs[i][1]  # noqa: E731
    variants: dict[str, Callable[[int], Any]] = {
        "current": lambda i: graph.current(tenant, *pairs[i]),
        "as_of": lambda i: graph.as_of(tenant, *pairs[i], valid_at=instants[i]),
        "history": lambda i: graph.history(tenant, *pairs[i]),
        "traverse": lambda i: graph.traverse(tenant, starts[i], PATH),
        "context": lambda i: graph.context(tenant, f"what is the {pairs[i][1]} of {pairs[i][0]}?",
                                           subjects=pairs[i][0], expand=False, budget_tokens=4000),
        "raw_lookup": raw(RAW_LOOKUP, subject=subject, attribute=attribute),
        "raw_history": raw(RAW_HISTORY, subject=subject, attribute=attribute),
        "raw_traverse": raw(RAW_TRAVERSE, subject=lambda i: starts[i]),
        "raw_context": raw(RAW_CONTEXT, subject=subject),
    }
    for _ in range(min(WARMUP, lookups)):
        j = rng.randrange(lookups)
        for call in variants.values():
            call(j)
    names = list(variants)
    samples: dict[str, list[float]] = {name: [] for name in names}
    answers: dict[str, list[Any]] = {"current": [None] * lookups, "as_of": [None] * lookups}
    for i in range(lookups):
        for name in names[i % len(names):] + names[:i % len(names)]:  # rotate to spread drift
            seconds, answer = _timed(lambda: variants[name](i))
            samples[name].append(seconds)
            if name in answers:
                answers[name][i] = answer

    now = datetime.now(timezone.utc)
    bad = Counter()
    examples: list[dict[str, Any]] = []
    for i, key in enumerate(pairs):
        model = _prefix_slot(stream, key, size)
        for name, instant in (("current", now), ("as_of", instants[i])):
            expected, observed = model.expected(instant), _observed(answers[name][i])
            if expected != observed:
                bad[name] += 1
                if len(examples) < 10:
                    examples.append({"query": name, "subject": key[0], "attribute": key[1],
                                     "at": instant.isoformat(), "expected": list(expected),
                                     "observed": list(observed)})
    stats = {name: _latency(values) for name, values in samples.items()}
    baseline = {"current": "raw_lookup", "as_of": "raw_lookup", "history": "raw_history",
                "traverse": "raw_traverse", "context": "raw_context"}
    result = {op: _compare(stats[op], stats[baseline[op]]) for op in OPERATIONS}
    correctness = {"checked": lookups, "current_mismatches": bad["current"],
                   "as_of_mismatches": bad["as_of"], "examples": examples}
    questions = [{"subject": s, "attribute": a, "as_of": t.isoformat()} for (s, a), t in zip(pairs, instants)]
    return result, correctness, questions


def _prefix_slot(stream: Stream, key: tuple[str, str], size: int) -> Slot:
    """The expected state of ``key`` after the first ``size`` deltas (replayed into a fresh model)."""
    model = Slot(many=stream.slots[key].many)
    for index in stream.positions[key]:
        if index >= size:
            break
        delta = stream.deltas[index]
        model.apply(delta, None if delta.value is None else SCHEMA.coerce(delta.attribute, delta.value)[1])
    return model


# -- Graphiti (optional: sgam.bench_graphiti comes with the Graphiti comparison) -------------------


def _graphiti_probe(graph: Any, uri: str, auth: Any, tenant: str, size: int,
                    questions: list[dict[str, Any]], log: Callable[[str], None]) -> dict[str, Any]:
    try:
        from sgam.bench_graphiti import scale_probe  # type: ignore[import-not-found]
    except ImportError as exc:
        return {"skipped": f"sgam.bench_graphiti is not available ({exc})"}
    rows = [{"subject": r["subject"], "attribute": r["attribute"], "value": r["value"],
             "valid_from": r["valid_from"], "valid_to": r["valid_to"]}
            for r in graph.store.read(BELIEVED_ROWS, {"tenant": tenant})]
    log(f"Graphiti probe: {len(rows):,} believed rows, {len(questions)} questions")
    try:
        return scale_probe(uri, auth, rows, questions, group_id=f"{tenant}-graphiti-{size}")
    except Exception as exc:  # noqa: BLE001 - the probe is optional; record why it failed
        return {"skipped": f"Graphiti probe failed: {type(exc).__name__}: {exc}"[:300]}


BELIEVED_ROWS = """
MATCH (:Entity {tenant_id: $tenant})-[f]->()
WHERE f.memory_id IS NOT NULL AND f.expired_at IS NULL
RETURN f.subject AS subject, f.attribute AS attribute, toString(f.value) AS value,
       toString(f.valid_from) AS valid_from, toString(f.valid_to) AS valid_to
"""


# -- the benchmark -----------------------------------------------------------------------------------


def run(sizes: Sequence[int] = DEFAULT_SIZES, *, seed: int = 7, window: int = WINDOW,
        lookups: int = LOOKUPS, graphiti: bool | None = None, out_dir: Path | str = Path("bench/results"),
        uri: str | None = None, auth: tuple[str, str] | None = None,
        log: Callable[[str], None] | None = None, keep: bool = False) -> dict[str, Any]:
    """Run the scale benchmark over ``sizes`` (ascending), write JSON/Markdown/PNG, return the result.

    ``graphiti``: ``None`` probes Graphiti's search at sizes up to 10k (if its module is there);
    ``True`` at every size; ``False`` never.
    """
    from sgam.api import MemoryGraph

    sizes = sorted(set(int(s) for s in sizes))
    if not sizes or sizes[0] < 2 or window < 1 or lookups < 1:
        raise ValueError("sizes must be at least 2 facts, window and lookups positive")
    log = log or (lambda message: print(message, file=sys.stderr))
    started_at = datetime.now(timezone.utc)
    load_start = _loadavg()
    suffix = secrets.token_hex(3)
    tenant, raw_tenant = f"scale-{seed}-{suffix}", f"scale-{seed}-{suffix}-raw"
    stream = Stream(seed=seed, final_size=sizes[-1], tenant=tenant)
    from sgam.api import _connection
    from sgam.settings import Settings

    connection = _connection(uri, auth, Settings())  # Graphiti's probe connects on its own
    graph = MemoryGraph.connect(*connection, schema=SCHEMA)
    retries = _RetryCounter()
    logging.getLogger("neo4j").addHandler(retries)
    store_dir = _store_dir(graph)
    rows: list[dict[str, Any]] = []
    generate_s = 0.0
    try:
        for size in sizes:
            t0 = time.perf_counter()
            stream.take(size - len(stream.deltas))
            generate_s += time.perf_counter() - t0
            w = min(window, max(1, size // 2))
            log(f"size {size:,}: {len(stream.episodes):,} episodes so far; loading {size - w:,} in bulk, "
                f"then {w:,} through write_many")
            graph.delete_tenant(tenant)
            graph.delete_tenant(raw_tenant)
            deltas = stream.deltas[:size]
            cited = {d.source_episode_id for d in deltas}
            episodes = [e for e in stream.episodes if e.id in cited]
            t0 = time.perf_counter()
            for i in range(0, len(episodes), EPISODE_BATCH):
                graph.record_episodes(episodes[i:i + EPISODE_BATCH])
            episodes_s = time.perf_counter() - t0

            t0 = time.perf_counter()
            imported = graph.import_history(deltas[:size - w])
            bulk_s = time.perf_counter() - t0
            log(f"  bulk import {size - w:,} in {bulk_s:.1f}s")

            retries.take()
            raw_s = _raw_write(graph, deltas[size - w:], raw_tenant, 2_000)
            t0 = time.perf_counter()
            batch = graph.write_many(deltas[size - w:])
            write_s = time.perf_counter() - t0
            log(f"  write_many {w:,} in {write_s:.1f}s (raw {raw_s:.1f}s)")
            _write_tenant_cleanup(graph, raw_tenant)
            rejected = len(imported.rejected) + len(batch.rejected)

            graph.store.run_write("CALL db.clearQueryCaches()", {})
            lookup, correctness, questions = _lookups(graph, stream, size, tenant, lookups, seed)
            log(f"  lookups: {correctness['current_mismatches']} current / "
                f"{correctness['as_of_mismatches']} as_of mismatches")
            counts = graph.store.read(STORE_COUNTS, {"tenant": tenant})[0]
            row = {
                "size": size, "window": w, "episodes": len(episodes),
                "stored": {"entities": counts["entities"], "fact_rows": counts["facts"],
                           "believed_rows": counts["believed"]},
                "bulk_import": {"deltas": size - w, "seconds": round(bulk_s, 3),
                                "facts_per_s": round((size - w) / bulk_s, 1),
                                "episodes_seconds": round(episodes_s, 3)},
                "writes": {"sgam_facts_per_s": round(w / write_s, 1), "raw_facts_per_s": round(w / raw_s, 1),
                           "sgam_seconds": round(write_s, 3), "raw_seconds": round(raw_s, 3),
                           "ratio": round(write_s / raw_s, 3),
                           "outcomes": dict(sorted(Counter(r.outcome for r in batch.results).items())),
                           "rejected": rejected, "driver_retries": retries.take()},
                "lookups": lookup,
                "correctness": correctness,
                "store_bytes": _dir_bytes(store_dir),
                "neo4j_heap": _heap(graph),
                "python": _rss_mb(),
            }
            probe = graphiti if graphiti is not None else size <= GRAPHITI_MAX
            if probe:
                row["graphiti"] = _graphiti_probe(graph, *connection, tenant, size, questions, log)
                _graphiti_ratios(row)
            else:
                row["graphiti"] = {"skipped": f"not run at {size:,} facts (Graphiti embeds every edge; "
                                              f"on CPU that is not feasible beyond {GRAPHITI_MAX:,})"
                                   if graphiti is None else "disabled (--no-graphiti)"}
            rows.append(row)
        result = {
            "benchmark": "sgam.bench_scale", "format": 1,
            "started_at": started_at.isoformat(),
            "machine": {**_machine(), "loadavg_1_5_15_start": load_start},
            "versions": {"python": sys.version.split()[0], "sgam": _version("sgam"),
                         "neo4j_driver": _version("neo4j"), **_git_state()},
            "neo4j": _neo4j_info(graph),
            "params": {"sizes": sizes, "seed": seed, "window": window, "lookups": lookups,
                       "warmup": WARMUP, "schema": f"{SCHEMA.name} v{SCHEMA.version}",
                       "traversal": list(PATH), "context": "exact facts only (expand=False)",
                       "store_dir": None if store_dir is None else str(store_dir), "tenant": tenant},
            "dataset": {"deltas": len(stream.deltas), "episodes": len(stream.episodes),
                        "slots": len(stream.slots), "ops": dict(sorted(stream.ops.items())),
                        "generate_seconds": round(generate_s, 3),
                        "max_deltas_per_slot": max(len(v) for v in stream.positions.values())},
            "sizes": rows,
        }
    finally:
        logging.getLogger("neo4j").removeHandler(retries)
        if not keep:
            for t in (tenant, raw_tenant):
                try:
                    graph.delete_tenant(t)
                except Exception as exc:  # noqa: BLE001 - report, do not mask the real error
                    log(f"cleanup of {t} failed: {exc}")
        graph.close()
    result["finished_at"] = datetime.now(timezone.utc).isoformat()
    result["machine"]["loadavg_1_5_15_end"] = _loadavg()
    return _save(result, Path(out_dir), started_at, suffix)


def _graphiti_ratios(row: dict[str, Any]) -> None:
    probe = row["graphiti"]
    if "search_p50_ms" not in probe:
        return
    for op in ("current", "as_of"):
        ours = row["lookups"][op]["sgam"]["p50_ms"]
        probe[f"ratio_search_p50_over_{op}_p50"] = round(probe["search_p50_ms"] / ours, 2)


def _save(result: dict[str, Any], out_dir: Path, started_at: datetime, suffix: str) -> dict[str, Any]:
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = out_dir / f"scale-{started_at.strftime('%Y%m%dT%H%M%SZ')}"
    if stem.with_suffix(".json").exists():
        stem = stem.with_name(f"{stem.name}-{suffix}")
    files = {"json": str(stem.with_suffix(".json")), "markdown": str(stem.with_suffix(".md")),
             "png": str(stem.with_suffix(".png"))}
    result["result_files"] = files
    Path(files["markdown"]).write_text(markdown(result), encoding="utf-8")
    _plot(result, Path(files["png"]))
    Path(files["json"]).write_text(json.dumps(result, indent=2, default=str) + "\n", encoding="utf-8")
    return result


def _ms(entry: dict[str, Any], side: str, q: str) -> str:
    return f"{entry[side][f'{q}_ms']:.2f}"


def markdown(result: dict[str, Any]) -> str:
    """The result as Markdown tables: one row per size and measure, SGAM next to raw."""
    p, m = result["params"], result["machine"]
    lines = [f"# SGAM scale benchmark ({result['started_at'][:19]}Z)", "",
             f"Seed {p['seed']}, sizes {', '.join(f'{s:,}' for s in p['sizes'])}, write window "
             f"{p['window']:,}, {p['lookups']} timed lookups per operation; {m['cpu']} "
             f"({m['cpu_count']} CPUs), load average {m.get('loadavg_1_5_15_start')} at start, "
             f"{m.get('loadavg_1_5_15_end')} at end; Neo4j {result['neo4j'].get('version')}. "
             "Ratios are SGAM / raw (latency) from the same run.", "",
             "| facts | operation | SGAM p50 ms | raw p50 ms | ratio p50 | SGAM p99 ms | raw p99 ms | ratio p99 |",
             "|---:|---|---:|---:|---:|---:|---:|---:|"]
    for row in result["sizes"]:
        for op in OPERATIONS:
            e = row["lookups"][op]
            lines.append(f"| {row['size']:,} | {op} | {_ms(e, 'sgam', 'p50')} | {_ms(e, 'raw', 'p50')} | "
                         f"{e['ratio_p50']:.2f}x | {_ms(e, 'sgam', 'p99')} | {_ms(e, 'raw', 'p99')} | "
                         f"{e['ratio_p99']:.2f}x |")
    lines += ["", "| facts | write_many facts/s | raw facts/s | time ratio | bulk import facts/s | "
              "fact rows | store MB | heap used MB | Python RSS MB | mismatches | Graphiti search p50 ms | "
              "Graphiti p50 / current p50 |",
              "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for row in result["sizes"]:
        w, g = row["writes"], row["graphiti"]
        store = "n/a" if row["store_bytes"] is None else f"{row['store_bytes'] / 2**20:,.0f}"
        bad = row["correctness"]["current_mismatches"] + row["correctness"]["as_of_mismatches"]
        search = f"{g['search_p50_ms']:.1f}" if "search_p50_ms" in g else "skipped"
        ratio = f"{g['ratio_search_p50_over_current_p50']:.0f}x" if "ratio_search_p50_over_current_p50" in g else ""
        lines.append(f"| {row['size']:,} | {w['sgam_facts_per_s']:,.0f} | {w['raw_facts_per_s']:,.0f} | "
                     f"{w['ratio']:.2f}x | {row['bulk_import']['facts_per_s']:,.0f} | "
                     f"{row['stored']['fact_rows']:,} | {store} | {row['neo4j_heap'].get('heap_used_mb')} | "
                     f"{row['python']['rss_mb']} | {bad} | {search} | {ratio} |")
    skipped = [f"{r['size']:,}: {r['graphiti']['skipped']}" for r in result["sizes"] if "skipped" in r["graphiti"]]
    if skipped:
        lines += ["", "Graphiti: " + "; ".join(skipped)]
    return "\n".join(lines) + "\n"


def _plot(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = [r["size"] for r in result["sizes"]]
    fig, ax = plt.subplots(figsize=(8, 5))
    for i, op in enumerate(OPERATIONS):
        color = f"C{i}"
        ax.plot(sizes, [r["lookups"][op]["sgam"]["p50_ms"] for r in result["sizes"]], "o-",
                color=color, label=f"{op} (SGAM)")
        ax.plot(sizes, [r["lookups"][op]["raw"]["p50_ms"] for r in result["sizes"]], "s--",
                color=color, alpha=0.6, label=f"{op} (raw)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("facts in the graph")
    ax.set_ylabel("p50 latency (ms)")
    ax.set_title(f"SGAM vs raw Cypher: p50 latency by graph size (seed {result['params']['seed']})")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def print_summary(result: dict[str, Any], console: Any) -> None:
    """Print the Markdown tables, the Graphiti ratios and the result files."""
    console.print(markdown(result), markup=False, highlight=False)
    for row in result["sizes"]:
        g = row["graphiti"]
        if "ratio_search_p50_over_current_p50" in g:
            console.print(f"SGAM exact vs Graphiti search at {row['size']:,} facts: Graphiti p50 "
                          f"{g['search_p50_ms']:.1f} ms = {g['ratio_search_p50_over_current_p50']:.0f}x "
                          f"SGAM current p50, {g['ratio_search_p50_over_as_of_p50']:.0f}x as_of p50",
                          markup=False, highlight=False)
    console.print(f"results: {result['result_files']}", markup=False, highlight=False)


__all__ = ["DEFAULT_SIZES", "HUGE_SIZE", "SCHEMA", "Stream", "markdown", "print_summary", "run"]

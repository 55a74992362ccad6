"""Benchmark: batched writes with reconciliation, and ``current`` / ``as_of`` lookup latency.

Every SGAM number is printed next to a raw Cypher baseline measured in the same run:

* **writes**: ``MemoryGraph.write_many`` over a generated stream of deltas (validation, episode
  checks, subject locks, reconciliation, closed copies, ``MENTIONS``), against a plain
  ``UNWIND ... MERGE entity ... MERGE value ... CREATE (e)-[:RAW_FACT]->(v)`` of one relationship per
  fact with the same properties into a separate tenant (no reconciliation, no indexes on the
  relationship type);
* **lookups**: ``current`` and ``as_of`` (individual calls, ``time.perf_counter``, after a warm-up)
  against the same indexed lookup without temporal logic, run through the same store / session path,
  so the ratio isolates the temporal filter and the result conversion.

The stream is generated from a seeded :class:`random.Random`: a few hot subjects with long
histories and many with a handful of facts; changes, re-asserts, backdated asserts, corrections,
retractions and exact replays; every ``valid_from`` in the past. :mod:`sgam.bench.oracle` (the temporal
semantics written from docs/temporal-semantics.md, independent of ``reconcile``) keeps the expected
value of every slot, and a sample of ``current`` and ``as_of`` answers is checked against it.

Results are printed as a table and written to ``<out_dir>/baseline-<timestamp>.json`` with the
machine, versions, sizes and seed. The benchmark's tenants are deleted at the end.

    python -m sgam.bench --facts 100000 --subjects 10000
"""

from __future__ import annotations

import argparse
import bisect
import inspect
import json
import logging
import platform
import random
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

from sgam.bench import oracle
from sgam.bench.common import (
    RAW_LOOKUP, RAW_WRITE, RetryCounter, compare_latency, git_state, latency_summary, loadavg, machine_info, neo4j_info,
    observed_keys, package_version, percentile, raw_write, write_tenant_cleanup,
)
from sgam.bench.workload import ACTORS, EPOCH, HORIZON, MANY_OPS, ONE_OPS, Values, choose
from sgam.graph.models import Cardinality, Episode, MemoryDelta, Op
from sgam.graph.schema import Schema, default_schema

SUBJECT_TYPE = "Person"
HOT_SUBJECT_SHARE = 0.01  # 1% of the subjects ...
HOT_FACT_SHARE = 0.15  # ... receive 15% of the facts
FACTS_PER_EPISODE = (5, 15)  # about 10 facts cite one episode
EPISODE_BATCH = 1_000
WARMUP_LOOKUPS = 200
TARGET_WRITE_FACTS_PER_S = 5_000
TARGET_CURRENT_P50_RATIO = 1.5
MAX_PRINTED_MISMATCHES = 20

# How often each Person attribute is written (unknown attributes get weight 1).
ATTRIBUTE_WEIGHTS = {
    "home_city": 20, "contact": 18, "email": 15, "response_style": 15,
    "passport_deadline": 16, "last_contacted_at": 16,
}
COUNT_FACTS = """
MATCH (:Entity {tenant_id: $tenant})-[f]->()
WHERE f.memory_id IS NOT NULL
RETURN count(f) AS facts, count(CASE WHEN f.expired_at IS NULL THEN 1 END) AS believed
"""


# -- the expected state: an in-memory model of the temporal semantics ------------------------------


@dataclass
class Slot:
    """The expected state of one (subject, attribute): its statements, in :mod:`sgam.bench.oracle`.

    Values are the schema's value keys (members, for a set). Only valid time is checked, so every
    statement is believed from one transaction time.
    """

    many: bool
    model: oracle.Slot = field(init=False)
    deltas: list[MemoryDelta] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.model = oracle.Slot(many=self.many)

    def apply(self, delta: MemoryDelta, vkey: str | None) -> None:
        self.model.apply(oracle.Statement(delta.op.value, vkey, delta.valid_from,
                                          episode=delta.source_episode_id, confidence=delta.confidence),
                         EPOCH)
        self.deltas.append(delta)

    def held(self, instant: datetime) -> frozenset[str] | str | None:
        """The value key (or, for a set, the member keys) at ``instant``."""
        return self.model.value_at(instant)

    def expected(self, instant: datetime) -> tuple[str, ...]:
        """Sorted value keys expected at ``instant`` (empty: nothing holds)."""
        held = self.held(instant)
        if self.many:
            return tuple(sorted(held))
        return () if held is None else (held,)


@dataclass
class Workload:
    """The generated stream: episodes, deltas in arrival order, and the expected state."""

    tenant: str
    episodes: list[Episode]
    deltas: list[MemoryDelta]
    slots: dict[tuple[str, str], Slot]
    ops: Counter
    hot_subjects: int
    facts_per_subject: Counter


# -- the generator ---------------------------------------------------------------------------------


def _person_attributes(schema: Schema) -> list[str]:
    # Candidate attributes (requires/sensitive) are left out: whether a statement opens a candidate
    # depends on arrival order, so the stream's gold answers cover confirmed writes only.
    return [name for name, spec in schema.attributes.items()
            if SUBJECT_TYPE in spec.subject_types and spec.value_type != "entity" and not spec.gated]


def _subject_weights(rng: random.Random, subjects: int) -> list[float]:
    """A few hot subjects share HOT_FACT_SHARE of the facts (1/sqrt(rank)); the rest share the
    remainder with a spread (most have a handful of facts, some none)."""
    hot = max(1, int(subjects * HOT_SUBJECT_SHARE)) if subjects > 1 else 1
    hot_raw = [1 / (rank ** 0.5) for rank in range(1, hot + 1)]
    cold_raw = [rng.expovariate(1.0) for _ in range(subjects - hot)]
    hot_sum, cold_sum = sum(hot_raw), sum(cold_raw) or 1.0
    share = HOT_FACT_SHARE if cold_raw else 1.0
    weights = [share * w / hot_sum for w in hot_raw]
    weights += [(1 - share) * w / cold_sum for w in cold_raw]
    return weights


def generate(facts: int, subjects: int, seed: int, tenant: str,
             schema: Schema | None = None) -> Workload:
    """The deterministic delta stream for ``seed`` (the tenant only names where it is written)."""
    schema = schema or default_schema()
    rng = random.Random(seed)
    attributes = _person_attributes(schema)
    attribute_weights = [ATTRIBUTE_WEIGHTS.get(a, 1) for a in attributes]
    subject_ids = [f"p-{i:06d}" for i in range(subjects)]
    weights = _subject_weights(rng, subjects)
    cumulative = list(_accumulate(weights))
    values = Values(rng, schema)
    span = (HORIZON - EPOCH).total_seconds()

    slots: dict[tuple[str, str], Slot] = {}
    deltas: list[MemoryDelta] = []
    episodes: list[Episode] = []
    ops: Counter = Counter()
    per_subject: Counter = Counter()
    episode_id, actor, left = "", ACTORS[0], 0

    for i in range(facts):
        # Arrival order follows valid time, with jitter: most statements are about "now".
        base = EPOCH + timedelta(seconds=span * i / facts + rng.uniform(0, 6 * 3600))
        if left == 0:
            actor = rng.choice(ACTORS)
            episode_id = f"ep-{len(episodes):07d}"
            left = rng.randint(*FACTS_PER_EPISODE)
            episodes.append(Episode(
                tenant_id=tenant, id=episode_id, occurred_at=base, kind=actor[1], actor=actor[0],
                content=f"bench episode {len(episodes)} ({actor[0]}, seed {seed})",
                session_id=f"s-{len(episodes) // 20:06d}",
            ))
        left -= 1
        subject = subject_ids[bisect.bisect_left(cumulative, rng.random() * cumulative[-1])
                              if len(subject_ids) > 1 else 0]
        attribute = rng.choices(attributes, attribute_weights)[0]
        many = schema.attribute(attribute).cardinality is Cardinality.MANY
        slot = slots.setdefault((subject, attribute), Slot(many=many))
        kind, delta = _next_delta(rng, values, slot, tenant, subject, attribute, base,
                                  episode_id, actor[0])
        vkey = None if delta.value is None else schema.coerce(attribute, delta.value)[1]
        slot.apply(delta, vkey)
        deltas.append(delta)
        ops[kind] += 1
        per_subject[subject] += 1

    hot = max(1, int(subjects * HOT_SUBJECT_SHARE)) if subjects > 1 else 1
    return Workload(tenant, episodes, deltas, slots, ops, hot, per_subject)


def _accumulate(weights: Sequence[float]):
    total = 0.0
    for w in weights:
        total += w
        yield total


def _next_delta(rng: random.Random, values: Values, slot: Slot, tenant: str, subject: str,
                attribute: str, base: datetime, episode: str, actor: str) -> tuple[str, MemoryDelta]:
    def delta(op: Op, value: Any, at: datetime, **extra: Any) -> MemoryDelta:
        return MemoryDelta(
            tenant_id=tenant, subject=subject, attribute=attribute, value=value,
            valid_from=at.replace(microsecond=0), source_episode_id=episode, op=op,
            asserted_by=actor, confidence=round(rng.uniform(0.6, 1.0), 2),
            subject_type=SUBJECT_TYPE, **extra,
        )

    def backdated() -> datetime:
        return max(EPOCH, base - timedelta(days=rng.uniform(1, 400)))

    if not slot.deltas:
        return "create", delta(Op.ASSERT, values.draw(attribute, subject, base), base)
    kind = choose(rng, MANY_OPS if slot.many else ONE_OPS)
    if kind == "replay":
        return "replay", rng.choice(slot.deltas)
    if slot.many:
        members = slot.held(base)
        held = [d for d in slot.deltas if d.value is not None and _member_key(values, d) in members]
        if kind == "retract" and held:
            return "retract", delta(Op.RETRACT, rng.choice(held).value, base)
        if kind == "reassert" and held:
            return "reassert", delta(Op.ASSERT, rng.choice(held).value, base)
        if kind == "backdated":
            return "backdated", delta(Op.ASSERT, values.draw(attribute, subject, base), backdated())
        return "add", delta(Op.ASSERT, values.draw(attribute, subject, base), base)
    if kind == "reassert":
        current = slot.held(base)
        same = next((d.value for d in reversed(slot.deltas)
                     if d.value is not None and _member_key(values, d) == current), None)
        if same is not None:
            return "reassert", delta(Op.ASSERT, same, base)
        kind = "change"
    if kind == "retract":
        return "retract", delta(Op.RETRACT, None, base)
    if kind == "correct":
        return "correct", delta(Op.CORRECT, values.draw(attribute, subject, base), base)
    if kind == "backdated":
        at = backdated()
        return "backdated", delta(Op.ASSERT, values.draw(attribute, subject, at), at)
    return "change", delta(Op.ASSERT, values.draw(attribute, subject, base), base)


def _member_key(values: Values, d: MemoryDelta) -> str:
    return values.schema.coerce(d.attribute, d.value)[1]


# -- measuring ---------------------------------------------------------------------------------------


def _timed(call: Callable[[], Any]) -> tuple[float, Any]:
    started = time.perf_counter()
    result = call()
    return time.perf_counter() - started, result


# -- environment -------------------------------------------------------------------------------------


def _write_many_workers(graph: Any) -> Any:
    parameter = inspect.signature(graph.write_many).parameters.get("workers")
    return 1 if parameter is None else parameter.default


# -- the benchmark -----------------------------------------------------------------------------------


def main(facts: int = 100_000, subjects: int = 10_000, lookups: int = 2_000, seed: int = 7,
         batch_size: int = 2_000, out_dir: Path = Path("bench/results"), uri: str | None = None,
         auth: tuple[str, str] | None = None) -> dict[str, Any]:
    """Run the benchmark, print a table, write ``<out_dir>/baseline-<timestamp>.json``, return it."""
    from sgam.api import MemoryGraph

    if facts < 1 or subjects < 1 or lookups < 1 or batch_size < 1:
        raise ValueError("facts, subjects, lookups and batch_size must be positive")
    started_at = datetime.now(timezone.utc)
    load_start = loadavg()
    suffix = secrets.token_hex(4)
    tenant = f"bench-{seed}-{suffix}"
    raw_tenant = f"{tenant}-raw"
    warm_tenant = f"{tenant}-warm"
    log = _log()

    t0 = time.perf_counter()
    workload = generate(facts, subjects, seed, tenant)
    generate_s = time.perf_counter() - t0
    log(f"generated {len(workload.deltas):,} deltas, {len(workload.episodes):,} episodes, "
        f"{len(workload.slots):,} slots in {generate_s:.1f}s (tenant {tenant})")

    graph = MemoryGraph.connect(uri, auth)
    result: dict[str, Any] = {}
    retries = RetryCounter()
    driver_log = logging.getLogger("neo4j")
    driver_log.addHandler(retries)
    try:
        _warm_up_writes(graph, seed, warm_tenant, batch_size)

        t0 = time.perf_counter()
        for i in range(0, len(workload.episodes), EPISODE_BATCH):
            graph.record_episodes(workload.episodes[i:i + EPISODE_BATCH])
        episodes_s = time.perf_counter() - t0
        log(f"recorded episodes in {episodes_s:.1f}s")

        retries.take()
        raw_s = raw_write(graph, workload.deltas, raw_tenant, batch_size)
        raw_retries = retries.take()
        log(f"raw baseline write: {raw_s:.1f}s")
        t0 = time.perf_counter()
        batch = graph.write_many(workload.deltas, batch_size=batch_size)
        write_s = time.perf_counter() - t0
        sgam_retries = retries.take()
        log(f"SGAM write_many: {write_s:.1f}s")
        if raw_retries or sgam_retries:
            log(f"[yellow]driver retried transactions (raw {raw_retries}, SGAM {sgam_retries}): "
                "another client is probably writing to this server; timings include the backoff")
        outcomes = Counter(r.outcome for r in batch.results)
        rejected = [{"index": r.index, "message": r.message} for r in batch.rejected]
        stored = graph.store.read(COUNT_FACTS, {"tenant": tenant})[0]

        lookup_result, correctness = _lookups(graph, workload, lookups, seed)
        log(f"lookups done: {correctness['current_mismatches']} current / "
            f"{correctness['as_of_mismatches']} as_of mismatches")

        n = len(workload.deltas)
        sgam_fps, raw_fps = n / write_s, n / raw_s
        result = {
            "benchmark": "sgam.bench",
            "format": 1,
            "started_at": started_at.isoformat(),
            "finished_at": None,
            "machine": {**machine_info(), "loadavg_1_5_15_start": load_start},
            "versions": {
                "python": sys.version.split()[0], "python_implementation": platform.python_implementation(),
                "sgam": package_version("sgam"), "neo4j_driver": package_version("neo4j"),
                "neo4j_rust_ext": package_version("neo4j-rust-ext"), "pydantic": package_version("pydantic"),
                **git_state(),
            },
            "neo4j": neo4j_info(graph),
            "params": {"facts": facts, "subjects": subjects, "lookups": lookups, "seed": seed,
                       "batch_size": batch_size, "episode_batch": EPISODE_BATCH,
                       "write_many_workers": _write_many_workers(graph), "raw_write_workers": 1,
                       "tenant": tenant, "raw_tenant": raw_tenant},
            "dataset": _dataset(workload, generate_s),
            "writes": {
                "sgam": {"seconds": round(write_s, 3), "facts_per_s": round(sgam_fps, 1),
                         "outcomes": dict(sorted(outcomes.items())), "rejected": len(rejected),
                         "rejected_examples": rejected[:10],
                         "driver_retries": sgam_retries,
                         "relationships_stored": stored["facts"],
                         "relationships_believed": stored["believed"]},
                "raw": {"seconds": round(raw_s, 3), "facts_per_s": round(raw_fps, 1),
                        "relationships_stored": n, "driver_retries": raw_retries,
                        "query": RAW_WRITE.strip()},
                "ratio": round(write_s / raw_s, 3),
                "ratio_meaning": "SGAM seconds / raw seconds (cost ratio; >1 = SGAM slower)",
                "episodes": {"count": len(workload.episodes), "seconds": round(episodes_s, 3),
                             "per_s": round(len(workload.episodes) / episodes_s, 1)},
                "target_facts_per_s": TARGET_WRITE_FACTS_PER_S,
                "meets_target": sgam_fps >= TARGET_WRITE_FACTS_PER_S,
            },
            "lookups": lookup_result,
            "correctness": correctness,
        }
        result["lookups"]["target_current_p50_ratio"] = TARGET_CURRENT_P50_RATIO
        result["lookups"]["meets_target"] = (
            result["lookups"]["current"]["ratio_p50"] <= TARGET_CURRENT_P50_RATIO)
    finally:
        driver_log.removeHandler(retries)
        remaining = {}
        for t in (tenant, raw_tenant, warm_tenant):
            try:
                remaining[t] = write_tenant_cleanup(graph, t)
            except Exception as exc:  # noqa: BLE001 - report, do not mask the real error
                remaining[t] = f"cleanup failed: {exc}"
        graph.close()
        log(f"cleaned up: {remaining}")
    result["cleanup"] = {"remaining_nodes": remaining}
    result["finished_at"] = datetime.now(timezone.utc).isoformat()
    result["machine"]["loadavg_1_5_15_end"] = loadavg()

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"baseline-{started_at.strftime('%Y%m%dT%H%M%SZ')}.json"
    if path.exists():
        path = path.with_name(f"{path.stem}-{suffix}.json")
    result["result_file"] = str(path)
    path.write_text(json.dumps(result, indent=2, default=str) + "\n", encoding="utf-8")
    _print(result)
    return result


def _log() -> Callable[[str], None]:
    from rich.console import Console

    console = Console(stderr=True)
    return lambda message: console.log(message)


def _warm_up_writes(graph: Any, seed: int, tenant: str, batch_size: int) -> None:
    """Compile the write statements and open the connection pool before anything is timed."""
    warm = generate(min(400, batch_size * 2), 40, seed + 1, tenant)
    graph.record_episodes(warm.episodes)
    graph.write_many(warm.deltas, batch_size=max(1, len(warm.deltas) // 2))
    raw_write(graph, warm.deltas, tenant, max(1, len(warm.deltas) // 2))


def _dataset(workload: Workload, generate_s: float) -> dict[str, Any]:
    per_subject = sorted(workload.facts_per_subject.values())
    histories = sorted(len(s.deltas) for s in workload.slots.values())
    return {
        "deltas": len(workload.deltas), "episodes": len(workload.episodes),
        "subjects_with_facts": len(per_subject), "slots": len(workload.slots),
        "hot_subjects": workload.hot_subjects,
        "facts_per_subject": {"median": statistics.median(per_subject), "p99": percentile(per_subject, 99),
                              "max": per_subject[-1]},
        "deltas_per_slot": {"median": statistics.median(histories), "p99": percentile(histories, 99),
                            "max": histories[-1]},
        "ops": dict(sorted(workload.ops.items())),
        "valid_from_range": [EPOCH.isoformat(), HORIZON.isoformat()],
        "generate_seconds": round(generate_s, 3),
    }


def _lookups(graph: Any, workload: Workload, lookups: int,
             seed: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """Timed current / as_of / raw lookups on random slots, and the correctness check."""
    rng = random.Random(seed * 7919 + 1)
    tenant = workload.tenant
    keys = sorted(workload.slots)
    pairs = [rng.choice(keys) for _ in range(lookups)]
    instants = [EPOCH + timedelta(seconds=rng.uniform(0, (HORIZON - EPOCH).total_seconds()))
                for _ in range(lookups)]
    raw = lambda s, a: graph.store.read(RAW_LOOKUP, {"tenant": tenant, "subject": s, "attribute": a})  # noqa: E731
    variants: dict[str, Callable[[int], Any]] = {
        "raw": lambda i: raw(*pairs[i]),
        "current": lambda i: graph.current(tenant, *pairs[i]),
        "current_cypher": lambda i: graph.query("current", tenant=tenant, subject=pairs[i][0],
                                                attribute=pairs[i][1]),
        "as_of": lambda i: graph.as_of(tenant, *pairs[i], valid_at=instants[i]),
        "as_of_cypher": lambda i: graph.query("as-of", tenant=tenant, subject=pairs[i][0],
                                              attribute=pairs[i][1], valid_at=instants[i],
                                              known_at=None),
    }
    for i in range(min(WARMUP_LOOKUPS, lookups)):
        for call in variants.values():
            call(rng.randrange(lookups))

    names = list(variants)
    samples: dict[str, list[float]] = {name: [] for name in names}
    answers: dict[str, list[Any]] = {"current": [None] * lookups, "as_of": [None] * lookups}
    for i in range(lookups):
        order = names[i % len(names):] + names[:i % len(names)]  # rotate to spread drift
        for name in order:
            seconds, answer = _timed(lambda: variants[name](i))
            samples[name].append(seconds)
            if name in answers:
                answers[name][i] = answer

    now = datetime.now(timezone.utc)
    mismatches: list[dict[str, Any]] = []
    current_bad = as_of_bad = 0
    for i, (subject, attribute) in enumerate(pairs):
        slot = workload.slots[(subject, attribute)]
        for name, instant in (("current", now), ("as_of", instants[i])):
            expected, observed = slot.expected(instant), observed_keys(answers[name][i])
            if expected != observed:
                if name == "current":
                    current_bad += 1
                else:
                    as_of_bad += 1
                mismatches.append({"query": name, "subject": subject, "attribute": attribute,
                                   "at": instant.isoformat(), "expected": list(expected),
                                   "observed": list(observed), "deltas": len(slot.deltas)})

    stats = {name: latency_summary(values) for name, values in samples.items()}
    result = {
        "current": compare_latency(stats["current"], stats["raw"]),
        "as_of": compare_latency(stats["as_of"], stats["raw"]),
        "current_cypher_only": compare_latency(stats["current_cypher"], stats["raw"]),
        "as_of_cypher_only": compare_latency(stats["as_of_cypher"], stats["raw"]),
        "raw_query": RAW_LOOKUP.strip(),
        "ratio_meaning": "SGAM latency / raw latency; *_cypher_only = the named query without Fact conversion",
        "pairs": lookups, "distinct_pairs": len(set(pairs)), "warmup_calls_per_variant": min(WARMUP_LOOKUPS, lookups),
    }
    correctness = {"checked": lookups, "current_mismatches": current_bad,
                   "as_of_mismatches": as_of_bad, "examples": mismatches[:MAX_PRINTED_MISMATCHES]}
    return result, correctness


def _print(result: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(width=None if sys.stdout.isatty() else 110)
    p, w, lk = result["params"], result["writes"], result["lookups"]
    table = Table(title=f"SGAM bench: {p['facts']:,} facts / {p['subjects']:,} subjects, "
                        f"seed {p['seed']}, batch {p['batch_size']:,} "
                        f"(Neo4j {result['neo4j']['version']}, {result['machine']['cpu_count']} CPUs)")
    for column in ("measure", "SGAM", "raw Cypher", "ratio SGAM/raw", "target"):
        table.add_column(column, justify="right" if column != "measure" else "left")
    table.add_row("batched writes (facts/s)", f"{w['sgam']['facts_per_s']:,.0f}",
                  f"{w['raw']['facts_per_s']:,.0f}", f"{w['ratio']:.2f}x (time)",
                  _target(w["meets_target"], f">= {TARGET_WRITE_FACTS_PER_S:,}/s"))
    for label, key in (("current", "current"), ("as_of", "as_of"),
                       ("current, Cypher only", "current_cypher_only"),
                       ("as_of, Cypher only", "as_of_cypher_only")):
        entry = lk[key]
        for q in ("p50", "p99"):
            target = ""
            if key == "current" and q == "p50":
                target = _target(lk["meets_target"], f"<= {TARGET_CURRENT_P50_RATIO}x")
            table.add_row(f"{label} {q} (ms)", f"{entry['sgam'][f'{q}_ms']:.3f}",
                          f"{entry['raw'][f'{q}_ms']:.3f}", f"{entry[f'ratio_{q}']:.2f}x", target)
    console.print(table)
    c = result["correctness"]
    console.print(f"outcomes: {w['sgam']['outcomes']}; rejected: {w['sgam']['rejected']}; "
                  f"stored rows: {w['sgam']['relationships_stored']:,} "
                  f"({w['sgam']['relationships_believed']:,} believed)")
    if w["sgam"]["driver_retries"] or w["raw"]["driver_retries"]:
        console.print(f"[yellow]driver transaction retries during writes: SGAM "
                      f"{w['sgam']['driver_retries']}, raw {w['raw']['driver_retries']} "
                      "(concurrent load on the server; write timings include the backoff)[/yellow]")
    console.print(f"correctness on {c['checked']:,} lookups: {c['current_mismatches']} current and "
                  f"{c['as_of_mismatches']} as_of mismatches")
    for m in c["examples"]:
        console.print(f"  [red]mismatch[/red] {m}")
    console.print(f"result: {result['result_file']}")


def _target(ok: bool, text: str) -> str:
    return f"[green]{text} ok[/green]" if ok else f"[red]{text} missed[/red]"


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m sgam.bench", description=__doc__.split("\n")[0])
    parser.add_argument("--facts", type=int, default=100_000)
    parser.add_argument("--subjects", type=int, default=10_000)
    parser.add_argument("--lookups", type=int, default=2_000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--batch-size", type=int, default=2_000)
    parser.add_argument("--out-dir", type=Path, default=Path("bench/results"))
    parser.add_argument("--uri", default=None, help="Neo4j URI (default: NEO4J_URI or the local server)")
    parser.add_argument("--user", default=None)
    parser.add_argument("--password", default=None)
    return parser.parse_args(argv)


def cli(argv: Sequence[str] | None = None) -> int:
    args = _parse(argv)
    auth = (args.user or "neo4j", args.password) if args.password is not None else None
    result = main(args.facts, args.subjects, args.lookups, args.seed, args.batch_size,
                  args.out_dir, args.uri, auth)
    bad = result["correctness"]["current_mismatches"] + result["correctness"]["as_of_mismatches"]
    return 1 if bad or result["writes"]["sgam"]["rejected"] else 0


if __name__ == "__main__":
    raise SystemExit(cli())

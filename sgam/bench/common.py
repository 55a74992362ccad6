"""The benchmarks' shared toolkit: measuring, text-memory retrieval, the raw-Cypher baselines, and
the machine and versions a result file records.
"""

from __future__ import annotations

import logging
import os
import platform
import statistics
import subprocess
import time
import uuid
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import date, datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any

from sgam.graph.models import MemoryDelta
from sgam.graph.steps import UnloggedList
from sgam.graph.schema import Schema, value_key

# -- raw Cypher: the same work without SGAM's temporal logic ----------------------------------------

RAW_WRITE = """
UNWIND $rows AS r
MERGE (e:Entity {tenant_id: r.tenant_id, id: r.subject})
  ON CREATE SET e:Person, e.type = 'Person', e.name = r.subject, e.created_at = $now
MERGE (v:Value {tenant_id: r.tenant_id, key: r.node_key})
  ON CREATE SET v.value = %(value)s, v.value_type = r.props.value_type,
                v.attribute = r.props.attribute
WITH e, v, r, r.props AS props
CREATE (e)-[f:RAW_FACT]->(v)
SET f = props {.*, value: %(value)s, valid_from: datetime(props.valid_from),
               recorded_at: datetime(props.recorded_at), last_confirmed_at: datetime(props.last_confirmed_at)}
""" % {"value": "CASE r.props.value_type WHEN 'datetime' THEN datetime(r.props.value) "
                "WHEN 'date' THEN date(r.props.value) ELSE r.props.value END"}

# Sent as SGAM's write path sends a fact: instants, and a date or datetime value, as ISO strings
# converted in Cypher (the driver's per-value temporal conversion is several times slower, about
# 0.15 ms a value), no null property, and the rows as an UnloggedList (the driver formats every
# statement's parameters for its debug log otherwise, on or off).

# The same indexed lookup as current/as-of (entity by (tenant_id, id), then its relationships),
# without any temporal predicate.
RAW_LOOKUP = """
MATCH (s:Entity {tenant_id: $tenant, id: $subject})-[f]->(o)
WHERE f.attribute = $attribute
RETURN f.value AS value LIMIT 1
"""

CLEANUP = (
    "MATCH (:Entity {tenant_id: $tenant})-[r]->() CALL (r) { DELETE r } IN TRANSACTIONS OF 10000 ROWS",
    "MATCH (n:Episode {tenant_id: $tenant}) CALL (n) { DETACH DELETE n } IN TRANSACTIONS OF 5000 ROWS",
    "MATCH (n:Value {tenant_id: $tenant}) CALL (n) { DETACH DELETE n } IN TRANSACTIONS OF 5000 ROWS",
    "MATCH (n:Entity {tenant_id: $tenant}) CALL (n) { DETACH DELETE n } IN TRANSACTIONS OF 5000 ROWS",
)
REMAINING = """
CALL () { MATCH (n:Entity {tenant_id: $tenant}) RETURN count(n) AS a }
CALL () { MATCH (n:Episode {tenant_id: $tenant}) RETURN count(n) AS b }
CALL () { MATCH (n:Value {tenant_id: $tenant}) RETURN count(n) AS c }
RETURN a + b + c AS remaining
"""


# -- measuring ---------------------------------------------------------------------------------------


def percentile(samples: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100)."""
    ordered = sorted(samples)
    if not ordered:
        return float("nan")
    rank = max(1, min(len(ordered), int(-(-q * len(ordered) // 100))))
    return ordered[rank - 1]


class BM25:
    """Okapi BM25 over tokenized documents, for the text-memory baselines (``bench_replay``,
    ``bench_locomo``), on ``bm25s`` (a sparse matrix of precomputed term scores; extra ``bench``).

    The scores are rank-bm25's ``BM25Okapi`` (which these benchmarks used before): k1=1.5, b=0.75,
    term frequency ``tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl / avgdl))`` (bm25s ``method="atire"``)
    and the Robertson idf ``log((N - df + 0.5) / (df + 0.5))`` (``idf_method="robertson"``), in
    float64. One difference: a term in more than half of the documents gets idf 0 here, where
    BM25Okapi gave it 0.25 x the mean idf. Query tokens outside the vocabulary score nothing.
    """

    def __init__(self, documents: Sequence[Sequence[str]]) -> None:
        import bm25s
        import numpy as np

        self.np = np
        self.size = len(documents)
        self.index = bm25s.BM25(k1=1.5, b=0.75, method="atire", idf_method="robertson",
                                dtype="float64")
        self.index.index([list(d) for d in documents], show_progress=False)

    def scores(self, tokens: Sequence[str]) -> Any:
        """The score of every document for the query ``tokens`` (numpy array, index order)."""
        ids = self.index.get_tokens_ids(list(tokens))
        if not ids:
            return self.np.zeros(self.size, dtype=self.np.float64)
        return self.index.get_scores_from_ids(ids)

    def top(self, tokens: Sequence[str], k: int) -> list[int]:
        """Indices of the ``k`` best documents, by score descending, ties by index ascending."""
        return top_k(self.scores(tokens), k)


def top_k(scores: Any, k: int) -> list[int]:
    """Indices of the ``k`` highest ``scores`` (a 1-d numpy array), by score descending and ties by
    index ascending, without sorting the whole array."""
    import numpy as np

    n = len(scores)
    k = min(k, n)
    if k <= 0:
        return []
    kth = np.partition(scores, n - k)[n - k]                      # the k-th best score
    above = np.flatnonzero(scores > kth)
    tied = np.flatnonzero(scores == kth)[:k - len(above)]         # lowest indices first
    chosen = np.concatenate([above, tied])
    return chosen[np.lexsort((chosen, -scores[chosen]))].tolist()


def latency_summary(samples: Sequence[float]) -> dict[str, float]:
    ms = [s * 1000 for s in samples]
    return {"n": len(ms), "p50_ms": round(statistics.median(ms), 4),
            "p99_ms": round(percentile(ms, 99), 4), "mean_ms": round(statistics.fmean(ms), 4),
            "min_ms": round(min(ms), 4), "max_ms": round(max(ms), 4)}


def compare_latency(sgam: dict[str, float], raw: dict[str, float]) -> dict[str, Any]:
    return {"sgam": sgam, "raw": raw,
            "ratio_p50": round(sgam["p50_ms"] / raw["p50_ms"], 3),
            "ratio_p99": round(sgam["p99_ms"] / raw["p99_ms"], 3)}


def _raw_rows(deltas: Sequence[MemoryDelta], tenant: str, schema: Schema,
              now: datetime) -> list[dict[str, Any]]:
    """One RAW_FACT per delta with the properties an SGAM fact carries (no reconciliation)."""
    rows = []
    for d in deltas:
        spec = schema.attribute(d.attribute)
        value, vkey = (None, "") if d.value is None else schema.coerce(d.attribute, d.value)
        if isinstance(value, (date, datetime)):
            value = value.isoformat()
        props = {
            "memory_id": f"m-{uuid.uuid4().hex}", "tenant_id": tenant, "subject": d.subject,
            "attribute": d.attribute, "value": value, "value_key": vkey,
            "value_type": spec.value_type, "kind": "attribute", "memory_type": spec.memory_type,
            "schema_version": schema.version, "valid_from": d.valid_from.isoformat(), "valid_to": None,
            "recorded_at": now.isoformat(), "expired_at": None, "supersedes_memory_id": None,
            "revises_memory_id": None, "source_episode_id": d.source_episode_id,
            "asserted_by": d.asserted_by or "unknown", "confidence": d.confidence,
            "retention_policy": spec.retention, "status": "confirmed", "op": d.op.value,
            "support_count": 1, "support_episodes": [d.source_episode_id],
            "delta_keys": [uuid.uuid4().hex], "last_confirmed_at": now.isoformat(),
        }
        rows.append({"tenant_id": tenant, "subject": d.subject, "node_key": f"{d.attribute}|{vkey}",
                     "props": {k: v for k, v in props.items() if v is not None}})
    return rows


def raw_write(graph: Any, deltas: Sequence[MemoryDelta], tenant: str, batch_size: int) -> float:
    """Seconds to write ``deltas`` as plain relationships, batched like SGAM's writes."""
    schema, driver, database = graph.schema, graph.store.driver, graph.store.database
    started = time.perf_counter()
    with driver.session(database=database) as session:
        for i in range(0, len(deltas), batch_size):
            now = datetime.now(timezone.utc)
            rows = _raw_rows(deltas[i:i + batch_size], tenant, schema, now)
            session.execute_write(lambda tx: tx.run(RAW_WRITE, rows=UnloggedList(rows), now=now).consume())
    return time.perf_counter() - started


def observed_keys(facts: Sequence[Any]) -> tuple[str, ...]:
    return tuple(sorted(value_key(_as_utc(f.value)) for f in facts))


def _as_utc(value: Any) -> Any:
    if isinstance(value, datetime) and value.tzinfo is not None:
        return value.astimezone(timezone.utc)
    return value


def write_tenant_cleanup(graph: Any, tenant: str) -> int:
    with graph.store.driver.session(database=graph.store.database) as session:
        for statement in CLEANUP:
            session.run(statement, tenant=tenant).consume()
        return session.run(REMAINING, tenant=tenant).single()["remaining"]


class RetryCounter(logging.Handler):
    """Counts the driver's transaction retries (deadlocks, transient errors) during a phase.

    A retry means backoff sleeps inside the measured time, typically because another client
    wrote to the same server at the same time; the result file records how many there were.
    """

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.retries: Counter = Counter()

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if "will be retried" in message:
            code = "Deadlock" if "Deadlock" in message else "other"
            self.retries[code] += 1

    def take(self) -> dict[str, int]:
        taken, self.retries = dict(self.retries), Counter()
        return taken


@contextmanager
def torch_threads(threads: int) -> Iterator[int]:
    """torch's intra-op thread count set to ``threads`` (0: left as is) for the block; yields it."""
    try:
        import torch
    except ImportError:
        yield 0
        return
    before = torch.get_num_threads()
    if threads:
        torch.set_num_threads(threads)
    try:
        yield torch.get_num_threads()
    finally:
        torch.set_num_threads(before)



# -- environment -------------------------------------------------------------------------------------


def _ram_bytes() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def package_version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def _git(*args: str) -> str | None:
    """Read-only git facts about the source tree the benchmark ran from (None outside a checkout)."""
    try:
        root = Path(__file__).resolve().parents[2]
        out = subprocess.run(["git", "-C", str(root), *args], capture_output=True,
                             text=True, timeout=5, check=False)
        return out.stdout.rstrip() if out.returncode == 0 else None
    except (OSError, subprocess.SubprocessError):
        return None


def git_state() -> dict[str, Any]:
    status = _git("status", "--porcelain", "--untracked-files=no")
    return {"git_commit": _git("rev-parse", "HEAD"),
            "git_modified": None if status is None else [line[3:] for line in status.splitlines()]}


def loadavg() -> list[float] | None:
    """Load averages (other processes on the machine skew every number; recorded for that)."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def machine_info() -> dict[str, Any]:
    ram = _ram_bytes()
    return {"platform": platform.platform(), "machine": platform.machine(), "cpu": _cpu_model(),
            "cpu_count": os.cpu_count(),
            "cpu_affinity": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
            "ram_gb": round(ram / 2**30, 2) if ram else None, "hostname": platform.node()}


def neo4j_info(graph: Any) -> dict[str, Any]:
    info: dict[str, Any] = {"uri": graph.store.uri, "database": graph.store.database}
    rows = graph.store.read("CALL dbms.components() YIELD name, versions, edition "
                            "RETURN name, versions, edition", {})
    info["components"] = [{"name": r["name"], "versions": r["versions"], "edition": r["edition"]}
                          for r in rows]
    info["version"] = rows[0]["versions"][0] if rows else None
    try:
        settings = graph.store.read(
            "SHOW SETTINGS YIELD name, value WHERE name IN $names RETURN name, value",
            {"names": ["server.memory.heap.max_size", "server.memory.heap.initial_size",
                       "server.memory.pagecache.size", "db.tx_log.rotation.retention_policy"]})
        info["settings"] = {r["name"]: r["value"] for r in settings}
    except Exception:  # noqa: BLE001 - informational only
        info["settings"] = None
    return info

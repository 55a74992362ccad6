"""LoCoMo evidence-retrieval probe (``sgam bench locomo PATH``): recall@5 and recall@10.

LoCoMo (Maharana et al., ACL 2024; ``locomo10.json`` from the snap-research/locomo repository,
CC BY-NC 4.0, not shipped with SGAM) holds ten long conversations and questions whose
``evidence`` names the dialogue turns (``dia_id``, e.g. ``D1:3``) that answer them.

Every turn becomes one episode (``"<speaker> (<session date>): <text>"``, the image caption
appended when there is one), each conversation its own tenant. The same texts are ranked three
ways for every question (categories 1-4; the adversarial category 5, whose questions have no
answer in the conversation, is reported apart):

* **sgam-context**: the episodes in :meth:`MemoryGraph.context`'s evidence, in its order. No
  extractor runs on LoCoMo, so the graph holds no facts and this measures SGAM's retrieval path
  only: entity anchors by name (none here), the full-text index over episode text and vector kNN
  over episode embeddings (MiniLM), fused by reciprocal rank;
* **bm25**: plain BM25 over the turns of the conversation (:class:`sgam.bench.BM25` on ``bm25s``:
  Okapi, k1=1.5, b=0.75, Robertson idf; ties by turn order);
* **minilm**: plain cosine similarity of the same MiniLM embeddings.

recall@k is the share of a question's evidence turns among the top k (averaged over questions);
``any@k`` counts a question as found when at least one evidence turn is in the top k.

Every text is embedded once: the turns in one batch per conversation, whose vectors serve both
the graph's backfill (:meth:`MemoryGraph.embed`) and the MiniLM baseline, and each question on its
own, as an agent would embed it when it asks, its vector passed to ``context`` as
``question_vector`` and used by the baseline. Latency per question is what an agent waits for
once the memory is indexed: embedding the question (counted in both sgam-context and minilm) plus
that system's ranking; bm25 tokenizes and scores. The embedding's own p50 is reported apart.
MiniLM runs on ``threads`` torch threads (1 by default: on a loaded 2-core machine two threads
wait on each other and embedding one question took ~13x longer).
"""

from __future__ import annotations

import json
import re
import secrets
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from sgam.bench.common import BM25, git_state, machine_info, package_version, torch_threads
from sgam.graph.errors import InvalidDelta
from sgam.graph.models import Episode, EpisodeKind

KS = (5, 10)
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
ADVERSARIAL = 5
SYSTEMS = ("sgam-context", "bm25", "minilm")
DATE_FORMATS = ("%I:%M %p on %d %B, %Y", "%I:%M %p on %d %b, %Y")


class _Embedded:
    """An :class:`~sgam.queries.embeddings.Embedder` that answers from vectors computed already
    (the turns, embedded once for both the backfill and the MiniLM baseline) and passes any other
    text on to ``inner``."""

    def __init__(self, inner: Any, known: dict[str, list[float]]) -> None:
        self.inner = inner
        self.known = known
        self.model_name = inner.model_name

    @property
    def dimensions(self) -> int:
        return int(self.inner.dimensions)

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        missing = list(dict.fromkeys(t for t in texts if t not in self.known))
        self.known.update(zip(missing, self.inner.embed(missing)))
        return [self.known[t] for t in texts]


@dataclass(frozen=True)
class Turn:
    dia_id: str
    speaker: str
    text: str
    at: datetime


@dataclass(frozen=True)
class Question:
    text: str
    evidence: tuple[str, ...]
    category: int


@dataclass(frozen=True)
class Conversation:
    sample_id: str
    turns: tuple[Turn, ...]
    questions: tuple[Question, ...]


def _when(text: str, where: str) -> datetime:
    for fmt in DATE_FORMATS:
        try:
            return datetime.strptime(text.strip(), fmt).replace(tzinfo=timezone.utc)
        except ValueError:
            continue
    raise InvalidDelta(f"{where}: session date {text!r} is not like '1:56 pm on 8 May, 2023'")


def load(path: Path | str, limit: int | None = None) -> list[Conversation]:
    """Conversations from a LoCoMo-format JSON file (raises :class:`InvalidDelta` naming what is wrong)."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InvalidDelta(f"{path}: not a readable LoCoMo JSON file ({exc})") from None
    if not isinstance(data, list):
        raise InvalidDelta(f"{path}: the top level must be a list of samples with 'conversation' and 'qa'")
    out = []
    for n, sample in enumerate(data[:limit] if limit else data):
        if not isinstance(sample, dict) or "conversation" not in sample or "qa" not in sample:
            raise InvalidDelta(f"{path}: sample {n} needs 'conversation' and 'qa'")
        sample_id = str(sample.get("sample_id", f"sample-{n}"))
        conv = sample["conversation"]
        turns: list[Turn] = []
        sessions = sorted((int(m.group(1)), key) for key in conv
                          if (m := re.fullmatch(r"session_(\d+)", key)))
        for number, key in sessions:
            start = _when(conv.get(f"{key}_date_time", ""), f"{sample_id} {key}")
            for i, turn in enumerate(conv[key] or []):
                text = str(turn.get("text", ""))
                if turn.get("blip_caption"):
                    text += f" [image: {turn['blip_caption']}]"
                turns.append(Turn(str(turn["dia_id"]), str(turn.get("speaker", "unknown")), text,
                                  start + timedelta(seconds=30 * i)))
        questions = [Question(str(q["question"]), tuple(str(e) for e in q.get("evidence") or ()),
                              int(q.get("category", 0))) for q in sample["qa"]]
        out.append(Conversation(sample_id, tuple(turns), tuple(questions)))
    return out


def _text(turn: Turn) -> str:
    return f"{turn.speaker} ({turn.at.strftime('%d %B %Y')}): {turn.text}"


def _tokens(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", text.lower())


def _recall(ranked: Sequence[str], evidence: Sequence[str], k: int) -> tuple[float, bool]:
    top = set(ranked[:k])
    hits = sum(1 for e in set(evidence) if e in top)
    return hits / len(set(evidence)), hits > 0


def _episode_id(dia_id: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.:-]", "-", dia_id)


def run(path: Path | str, *, out_dir: Path | str = Path("bench/results"), limit: int | None = None,
        uri: str | None = None, auth: tuple[str, str] | None = None, embedder: Any = None,
        log: Callable[[str], None] | None = None, keep: bool = False, threads: int = 1) -> dict[str, Any]:
    """Run the probe on the LoCoMo file at ``path``; write JSON and Markdown; return the result.

    ``threads``: torch threads for MiniLM while it runs (0 keeps torch's default)."""
    if threads < 0:
        raise InvalidDelta(f"threads must be 0 (torch's default) or a positive count, got {threads}")
    with torch_threads(threads) as used:
        return _run(path, out_dir=Path(out_dir), limit=limit, uri=uri, auth=auth, embedder=embedder,
                    log=log, keep=keep, threads=used)


def _run(path: Path | str, *, out_dir: Path, limit: int | None, uri: str | None,
         auth: tuple[str, str] | None, embedder: Any, log: Callable[[str], None] | None, keep: bool,
         threads: int) -> dict[str, Any]:
    import numpy as np

    from sgam.api import MemoryGraph
    from sgam.queries.embeddings import check_dimensions, default_embedder

    log = log or (lambda message: print(message, file=sys.stderr))
    started_at = datetime.now(timezone.utc)
    conversations = load(path, limit)
    embedder = embedder or default_embedder()
    suffix = secrets.token_hex(3)
    per: dict[str, dict[int, list[tuple[float, bool, float, bool]]]] = {s: defaultdict(list) for s in SYSTEMS}
    latency: dict[str, list[float]] = {s: [] for s in SYSTEMS}
    embedding: list[float] = []
    timings: dict[str, float] = defaultdict(float)
    missing_evidence = duplicates = 0
    t = time.perf_counter()
    check_dimensions(embedder)   # loads the model now, so that no phase below counts its loading
    timings["load_model_s"] = time.perf_counter() - t
    graph = MemoryGraph.connect(uri, auth)
    tenants = []
    try:
        for conv in conversations:
            tenant = f"locomo-{suffix}-{re.sub(r'[^A-Za-z0-9_-]', '-', conv.sample_id)}"
            tenants.append(tenant)
            episodes = [Episode(tenant_id=tenant, id=_episode_id(t.dia_id), content=_text(t), occurred_at=t.at,
                                kind=EpisodeKind.MESSAGE, actor=t.speaker, session_id=t.dia_id.split(":")[0])
                        for t in conv.turns]
            t0 = time.perf_counter()
            outcomes = graph.record_episodes(episodes)
            duplicates += sum(1 for o in outcomes.values() if o == "duplicate")
            t1 = time.perf_counter()
            ids = [_episode_id(t.dia_id) for t in conv.turns]
            texts = [_text(t) for t in conv.turns]
            vectors = embedder.embed(texts)
            t2 = time.perf_counter()
            graph.embed(tenant, embedder=_Embedded(embedder, dict(zip(texts, vectors))))
            t3 = time.perf_counter()
            bm25 = BM25([_tokens(t) for t in texts])
            matrix = np.asarray(vectors, dtype=np.float32)
            matrix /= np.linalg.norm(matrix, axis=1, keepdims=True) + 1e-12
            timings["record_episodes_s"] += t1 - t0
            timings["embed_turns_s"] += t2 - t1
            timings["store_vectors_s"] += t3 - t2
            log(f"{conv.sample_id}: {len(texts)} turns, {len(conv.questions)} questions "
                f"(recorded in {t1 - t0:.1f}s, embedded in {t2 - t1:.1f}s, vectors stored in {t3 - t2:.1f}s)")
            t_questions = time.perf_counter()
            known = set(ids)
            k_max = max(KS)
            for q in conv.questions:
                evidence = [_episode_id(e) for e in q.evidence]
                evidence = [e for e in evidence if e in known]
                if not evidence:
                    missing_evidence += 1
                    continue
                rankings: dict[str, list[str]] = {}
                t = time.perf_counter()
                [question_vector] = embedder.embed([q.text])
                embedded = time.perf_counter() - t
                embedding.append(embedded)
                t = time.perf_counter()
                ctx = graph.context(tenant, q.text, k=k_max, budget_tokens=100_000, embedder=embedder,
                                    question_vector=question_vector)
                latency["sgam-context"].append(embedded + time.perf_counter() - t)
                rankings["sgam-context"] = [e.id for e in ctx.evidence if e.kind == "episode"]
                t = time.perf_counter()
                rankings["bm25"] = [ids[i] for i in bm25.top(_tokens(q.text), k_max)]
                latency["bm25"].append(time.perf_counter() - t)
                t = time.perf_counter()
                vector = np.asarray(question_vector, dtype=np.float32)
                sims = matrix @ (vector / (np.linalg.norm(vector) + 1e-12))
                rankings["minilm"] = [ids[i] for i in np.argsort(-sims, kind="stable")[:k_max]]
                latency["minilm"].append(embedded + time.perf_counter() - t)
                for system, ranked in rankings.items():
                    r5, a5 = _recall(ranked, evidence, 5)
                    r10, a10 = _recall(ranked, evidence, 10)
                    per[system][q.category].append((r5, a5, r10, a10))
            timings["questions_s"] += time.perf_counter() - t_questions
    finally:
        if not keep:
            for tenant in tenants:
                try:
                    graph.delete_tenant(tenant)
                except Exception as exc:  # noqa: BLE001 - report, do not mask the real error
                    log(f"cleanup of {tenant} failed: {exc}")
        graph.close()

    def summary(rows: list[tuple[float, bool, float, bool]]) -> dict[str, Any]:
        if not rows:
            return {"questions": 0}
        return {"questions": len(rows),
                "recall@5": round(100 * statistics.fmean(r[0] for r in rows), 1),
                "any@5": round(100 * statistics.fmean(r[1] for r in rows), 1),
                "recall@10": round(100 * statistics.fmean(r[2] for r in rows), 1),
                "any@10": round(100 * statistics.fmean(r[3] for r in rows), 1)}

    results: dict[str, Any] = {}
    for system in SYSTEMS:
        by_cat = per[system]
        answerable = [r for c, rows in by_cat.items() if c != ADVERSARIAL for r in rows]
        ms = sorted(1000 * s for s in latency[system])
        results[system] = {
            "overall_categories_1_4": summary(answerable),
            "by_category": {f"{c} {CATEGORIES.get(c, '?')}": summary(by_cat[c]) for c in sorted(by_cat)},
            "latency_p50_ms": round(statistics.median(ms), 2) if ms else None,
        }
    result = {
        "benchmark": "sgam.bench.locomo", "format": 2, "started_at": started_at.isoformat(),
        "finished_at": datetime.now(timezone.utc).isoformat(),
        "machine": machine_info(),
        "versions": {"python": sys.version.split()[0], "sgam": package_version("sgam"),
                     "bm25s": package_version("bm25s"),
                     "sentence_transformers": package_version("sentence-transformers"), **git_state()},
        "params": {"file": str(path), "conversations": len(conversations), "ks": list(KS),
                   "embedder": getattr(embedder, "model_name", type(embedder).__name__),
                   "turns": sum(len(c.turns) for c in conversations),
                   "questions": sum(len(c.questions) for c in conversations),
                   "questions_without_known_evidence": missing_evidence,
                   "duplicate_turns_not_stored": duplicates,
                   "sgam_path": "context(): full-text + vector kNN over episodes, fused; no facts "
                                "(no extractor run on LoCoMo)",
                   "torch_threads": threads,
                   "latency": "per question, index built: embedding the question once (counted in "
                              "sgam-context and minilm) + the system's ranking; bm25: tokenize + score"},
        "question_embedding_p50_ms": round(1000 * statistics.median(embedding), 2) if embedding else None,
        "timings_s": {"total": round((datetime.now(timezone.utc) - started_at).total_seconds(), 1),
                      **{name: round(value, 1) for name, value in timings.items()}},
        "systems": results,
    }
    return _save(result, Path(out_dir), started_at, suffix)


def _save(result: dict[str, Any], out_dir: Path, started_at: datetime, suffix: str) -> dict[str, Any]:
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = out_dir / f"locomo-{started_at.strftime('%Y%m%dT%H%M%SZ')}-{suffix}"
    files = {"json": str(stem.with_suffix(".json")), "markdown": str(stem.with_suffix(".md"))}
    result["result_files"] = files
    Path(files["markdown"]).write_text(markdown(result), encoding="utf-8")
    Path(files["json"]).write_text(json.dumps(result, indent=2, default=str) + "\n", encoding="utf-8")
    return result


def markdown(result: dict[str, Any]) -> str:
    """Recall table: one row per category (and overall), one column pair per system."""
    p = result["params"]
    head = "| category | questions | " + " | ".join(f"{s} R@5 | {s} R@10" for s in SYSTEMS) + " |"
    lines = [f"# LoCoMo evidence recall ({result['started_at'][:19]}Z)", "",
             f"{p['conversations']} conversations, {p['turns']:,} turns, {p['questions']:,} questions; "
             f"embedder {p['embedder']}. SGAM's path here: {p['sgam_path']}. "
             "Recall = share of evidence turns in the top k, in %.", "",
             head, "|---|---:|" + "---:|" * (2 * len(SYSTEMS))]
    first = result["systems"][SYSTEMS[0]]
    rows = [("overall (1-4)", "overall_categories_1_4", None)] + \
        [(name, None, name) for name in first["by_category"]]
    for label, key, cat in rows:
        cells = []
        count = 0
        for system in SYSTEMS:
            entry = result["systems"][system]
            entry = entry[key] if key else entry["by_category"].get(cat, {"questions": 0})
            count = entry["questions"]
            cells += [f"{entry.get('recall@5', 0):.1f}", f"{entry.get('recall@10', 0):.1f}"]
        lines.append(f"| {label} | {count} | " + " | ".join(cells) + " |")
    lines += ["", "p50 latency per question (ms): " + ", ".join(
        f"{s} {result['systems'][s]['latency_p50_ms']}" for s in SYSTEMS)
        + f"; of which embedding the question (sgam-context, minilm): {result['question_embedding_p50_ms']}"
        + f" ({p['torch_threads']} torch thread(s)). Run time {result['timings_s']['total']:.0f} s."]
    return "\n".join(lines) + "\n"


__all__ = ["Conversation", "Question", "Turn", "load", "markdown", "run"]

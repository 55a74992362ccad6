"""The scale benchmark's targets table: every target judged at the sizes it applies to."""

from __future__ import annotations

from typing import Any

from sgam.bench.scale import OPERATIONS, _by_cardinality, markdown, targets


def _row(size: int, *, write_ratio: float = 1.2, write_fps: float = 6_000, import_fps: float = 12_000,
         read_ratio: float = 1.1, mismatches: int = 0, retries: dict[str, int] | None = None) -> dict[str, Any]:
    lookups = {op: {"sgam": {"p50_ms": 1.0, "p99_ms": 2.0}, "raw": {"p50_ms": 1.0, "p99_ms": 2.0},
                    "ratio_p50": read_ratio, "ratio_p99": read_ratio} for op in OPERATIONS}
    return {"size": size, "writes": {"ratio": write_ratio, "sgam_facts_per_s": write_fps, "raw_facts_per_s": 9_000,
                                     "driver_retries": retries or {}},
            "bulk_import": {"facts_per_s": import_fps}, "lookups": lookups,
            "correctness": {"current_mismatches": mismatches, "as_of_mismatches": 0}}


def _split_row(size: int, groups: dict[str, Any]) -> dict[str, Any]:
    row = _row(size)
    row.update(stored={"fact_rows": 1}, store_bytes=None, neo4j_heap={}, python={"rss_mb": 1},
               graphiti={"skipped": "disabled"})
    row["writes"].update(raw_facts_per_s=1.0)
    row["bulk_import"].update(facts_per_s=1.0)
    for op in ("current", "as_of"):
        row["lookups"][op]["by_cardinality"] = groups
    return row


def _met(result: dict[str, Any]) -> dict[str, bool | None]:
    return {t["target"]: t["met"] for t in targets(result)}


def test_a_run_within_every_limit_meets_every_target() -> None:
    met = _met({"sizes": [_row(10_000), _row(100_000), _row(1_000_000)]})
    assert met and all(v is True for v in met.values()), met


def test_one_size_over_a_limit_misses_that_target_only() -> None:
    rows = [_row(10_000), _row(100_000, read_ratio=1.25), _row(1_000_000)]
    met = _met({"sizes": rows})
    missed = {name for name, ok in met.items() if ok is False}
    # 1.25x is over current/as_of's 1.2x, within traverse/context's 1.5x and 2x.
    assert missed == {"`current` p50 vs raw", "`as_of` p50 vs raw"}


def test_a_target_is_judged_only_at_the_sizes_it_names() -> None:
    # Slow writes and a slow import at 10k do not count against the 100k and 1M targets ...
    met = _met({"sizes": [_row(10_000, write_fps=100, import_fps=100), _row(100_000), _row(1_000_000)]})
    assert met["`write_many` facts/s"] is True and met["bulk import facts/s"] is True
    # ... and a run without a 1M size does not judge the 1M import at all.
    table = targets({"sizes": [_row(10_000), _row(100_000, import_fps=10)]})
    (bulk,) = [t for t in table if t["target"] == "bulk import facts/s"]
    assert bulk["met"] is None and bulk["measured"] == {}
    assert "| bulk import facts/s | >= 10,000 at 1M | no size of this run | n/a |" in \
        markdown_tail({"sizes": [_row(10_000), _row(100_000, import_fps=10)]})


def test_wrong_answers_and_retried_deadlocks_miss() -> None:
    met = _met({"sizes": [_row(100_000, mismatches=1, retries={"Neo.TransientError.Transaction.DeadlockDetected": 2})]})
    assert met["wrong `current` / `as_of` answers"] is False
    assert met["transactions the driver retried (deadlocks)"] is False


def markdown_tail(result: dict[str, Any]) -> str:
    """The targets table of ``markdown``, for a result that has only what the table reads."""
    full = {"params": {"seed": 7, "sizes": [r["size"] for r in result["sizes"]], "window": 1, "lookups": 1},
            "machine": {"cpu": "cpu", "cpu_count": 2}, "neo4j": {}, "started_at": "2026-12-05T00:00:00",
            "sizes": [{**r, "graphiti": {"skipped": "test"}, "store_bytes": None, "stored": {"fact_rows": 0},
                       "neo4j_heap": {}, "python": {"rss_mb": 0}} for r in result["sizes"]]}
    text = markdown(full)
    return text[text.index("Targets"):]


def test_reads_split_by_the_cardinality_the_schema_declares() -> None:
    # contact and knows are declared "many" in the benchmark's schema, home_city and email "one";
    # each read's SGAM time is its raw time times a factor that only its group shares
    pairs = [("p-1", "contact"), ("p-2", "email"), ("p-3", "knows"), ("p-4", "home_city"), ("p-5", "email")]
    raw = [0.001, 0.002, 0.003, 0.004, 0.005]
    factor = {"contact": 1.5, "knows": 1.5, "email": 1.1, "home_city": 1.1}
    sgam = [r * factor[a] for r, (_, a) in zip(raw, pairs)]
    groups = _by_cardinality(sgam, raw, pairs)
    assert set(groups) == {"one", "many"}
    assert groups["many"]["sgam"]["n"] == 2 and groups["one"]["sgam"]["n"] == 3
    assert groups["many"]["raw"]["p50_ms"] == 2.0 and groups["one"]["raw"]["p50_ms"] == 4.0  # medians of 1,3 / 2,4,5
    assert groups["many"]["ratio_p50"] == 1.5 and groups["one"]["ratio_p50"] == 1.1
    # a run that asked only single-valued slots has that group alone, and the Markdown says "none"
    only = _by_cardinality(sgam[1:2], raw[1:2], pairs[1:2])
    assert set(only) == {"one"}
    lines = markdown({"started_at": "2026-12-06T00:00:00", "params": {"seed": 7, "sizes": [10_000], "window": 1,
                                                                      "lookups": 1},
                      "machine": {"cpu": "x", "cpu_count": 2}, "neo4j": {},
                      "sizes": [_split_row(10_000, only)]}).splitlines()
    assert "| 10,000 | current | 1.10x (2.20 / 2.00, 1) | none |" in lines

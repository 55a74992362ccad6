"""The replay benchmark at smoke size: it runs end to end and SGAM answers every question exactly."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sgam.bench import replay as bench_replay
from sgam.bench.replay import QTYPES, generate


def test_generator_is_deterministic() -> None:
    a, b = generate("smoke", 11, "a"), generate("smoke", 11, "b")
    assert [e.text for e in a.events] == [e.text for e in b.events]
    assert [(q.text, q.gold) for q in a.questions] == [(q.text, q.gold) for q in b.questions]
    assert {q.qtype for q in a.questions} == set(QTYPES)


# Smoke's two tenants with three persons each instead of six: 80 episodes at seed 7 instead of 177
# (Graphiti's load, SGAM's and the questions take half the time), and still every question type,
# erasures, and current questions that text memory answers with superseded values. The full smoke
# size is loaded and answered by test_replay_beyond_graphiti_sizes_probes_its_load_rate below.
FEWER_PERSONS = {**bench_replay.SIZES["smoke"], "persons": 3}


def test_replay_smoke(neo4j_connection: tuple[str, tuple[str, str]], tmp_path: Path,
                      monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("bm25s")
    pytest.importorskip("graphiti_core")
    uri, auth = neo4j_connection
    monkeypatch.setitem(bench_replay.SIZES, "smoke", FEWER_PERSONS)
    result = bench_replay.run(size="smoke", seed=7, out_dir=tmp_path, uri=uri, auth=auth)

    assert result["sgam_load"]["rejected"] == 0
    sgam = result["metrics"]["sgam"]
    for qtype in QTYPES:
        assert sgam[qtype]["n"] > 0, qtype
        assert sgam[qtype]["accuracy"] == 1.0, (qtype, result["misses"].get("sgam"))
    assert sgam["all"]["stale_rate"] == 0
    assert sgam["all"]["resurrection_rate"] == 0
    assert sgam["all"]["leak_rate"] == 0
    # The same questions asked by a process that has just started: the same answers, and SGAM's
    # tail against its targets for both (each ratio from the column's own figures).
    fresh = result["metrics"][bench_replay.NEW_PROCESS]
    for qtype in QTYPES:
        assert fresh[qtype]["n"] == sgam[qtype]["n"], qtype
        assert fresh[qtype]["accuracy"] == 1.0, (qtype, result["misses"].get(bench_replay.NEW_PROCESS))
    targets = {(t["system"], t["target"]): t for t in result["targets"]}
    assert set(targets) == {(s, t) for s in ("sgam", bench_replay.NEW_PROCESS) for t in ("p95 / p50", "p99 / p50")}
    for (system, target), row in targets.items():
        whole = result["metrics"][system]["all"]
        assert row["ratio"] == round(whole[f"{target[:3]}_ms"] / whole["p50_ms"], 2), row
        assert row["met"] is (row["ratio"] <= bench_replay.TAIL_LIMITS[f"{target[:3]}_ms"]), row
    # the seed paper's claim: text memory answers current questions with superseded values
    dm_current_stale = [m["current"]["stale_rate"] for name, m in result["metrics"].items()
                        if name.startswith("dm-")]
    assert dm_current_stale and max(dm_current_stale) > 0
    # Graphiti's two columns exist with numbers (no accuracy target: it is the baseline)
    for name in ("graphiti", "graphiti-datefilter"):
        column = result["metrics"][name]
        for qtype in QTYPES:
            assert column[qtype]["n"] == sgam[qtype]["n"], (name, qtype)
            assert 0.0 <= column[qtype]["accuracy"] <= 1.0, (name, qtype)
        assert column["all"]["p50_ms"] > 0 and column["all"]["p95_ms"] >= column["all"]["p50_ms"]
        assert result["latency_ratios"][name]["p50"] > 0
    assert result["graphiti"]["load"]["entity_edges"] > 0
    assert result["graphiti"]["load"]["graphiti_indexes"]["fulltext"] == 4
    # every tenant and every Graphiti group was deleted afterwards
    assert set(result["cleanup"]["remaining_nodes"]) >= {f"graphiti-{t}" for t in
                                                          result["params"]["tenants_written"]}
    assert all(n == 0 for n in result["cleanup"]["remaining_nodes"].values())

    files = result["result_files"]
    saved = json.loads(Path(files["json"]).read_text())
    assert saved["params"]["size"] == "smoke"
    assert "| current |" in Path(files["markdown"]).read_text()
    assert "| graphiti-datefilter / sgam |" in Path(files["markdown"]).read_text()
    assert f"| {bench_replay.NEW_PROCESS} | p99 / p50 | 5x |" in Path(files["markdown"]).read_text()
    if files.get("png"):
        assert Path(files["png"]).stat().st_size > 0


def test_replay_beyond_graphiti_sizes_probes_its_load_rate(
        neo4j_connection: tuple[str, tuple[str, str]], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("graphiti_core")
    uri, auth = neo4j_connection
    monkeypatch.setattr(bench_replay, "GRAPHITI_SIZES", ("small",))    # smoke is now "too big"
    monkeypatch.setattr(bench_replay, "GRAPHITI_PROBE_PERSONS", 2)
    result = bench_replay.run(size="smoke", seed=7, out_dir=tmp_path, uri=uri, auth=auth, dm=False)

    assert set(result["metrics"]) == {"sgam", bench_replay.NEW_PROCESS}
    assert result["metrics"]["sgam"]["all"]["accuracy"] == 1.0, result["misses"]
    assert result["metrics"][bench_replay.NEW_PROCESS]["all"]["accuracy"] == 1.0, result["misses"]
    data = result["dataset"]
    assert data["deltas"] + data["erasures"] == data["episodes"] == 177
    probe = result["graphiti"]["probe"]
    assert probe["persons"] == 2 and 0 < probe["episodes"] < data["episodes"], probe
    assert probe["load"]["entity_edges"] > 0, probe
    assert all(n == 0 for n in probe["remaining_nodes"].values()), probe
    assert probe["extrapolated_load_s"] == round(data["episodes"] / probe["episodes_per_s"]), probe
    skipped = result["graphiti"]["skipped"]
    assert skipped.startswith("not run at size smoke (177 episodes"), skipped
    assert f"ran at {probe['episodes_per_s']} episodes/s on a sample of {probe['episodes']}" in skipped
    assert "Graphiti: not run at size smoke" in Path(result["result_files"]["markdown"]).read_text()
    # Only what --no-graphiti records is asked of this run: one tenant of two persons will do.
    monkeypatch.setitem(bench_replay.SIZES, "smoke", {"tenants": 1, "persons": 2, "per_type": 12})
    off = bench_replay.run(size="smoke", seed=7, out_dir=tmp_path, uri=uri, auth=auth, dm=False,
                           graphiti=False)
    assert off["graphiti"] == {"skipped": "disabled (--no-graphiti)"}

"""Smoke run of the benchmark (``sgam.bench.baseline``) at a small size against the real Neo4j.

Checks that it produces every number, writes its JSON result, answers correctly on its sample and
cleans up after itself. Timings are never asserted: they depend on the machine.
"""

from __future__ import annotations

import json
import math
import os
import socket
from pathlib import Path

import pytest

from sgam.bench import baseline as bench


def _positive(value: object) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value) and value > 0


def test_bench_smoke(neo4j_connection: tuple[str, tuple[str, str]], tmp_path: Path) -> None:
    uri, auth = neo4j_connection
    result = bench.main(facts=2_000, subjects=200, lookups=200, seed=11, batch_size=500,
                        out_dir=tmp_path, uri=uri, auth=auth)

    # writes: both sides measured, every delta accepted
    writes = result["writes"]
    assert _positive(writes["sgam"]["facts_per_s"])
    assert _positive(writes["raw"]["facts_per_s"])
    assert _positive(writes["ratio"])
    assert writes["sgam"]["rejected"] == 0, writes["sgam"]["rejected_examples"]
    assert sum(writes["sgam"]["outcomes"].values()) == 2_000
    assert writes["sgam"]["relationships_stored"] >= writes["sgam"]["outcomes"].get("created", 0)

    # lookups: medians and tails next to the raw baseline, with ratios
    lookups = result["lookups"]
    for key in ("current", "as_of", "current_cypher_only", "as_of_cypher_only"):
        entry = lookups[key]
        for side in ("sgam", "raw"):
            assert entry[side]["n"] == 200
            assert _positive(entry[side]["p50_ms"])
            assert entry[side]["p50_ms"] <= entry[side]["p99_ms"]
        assert _positive(entry["ratio_p50"]) and _positive(entry["ratio_p99"])

    # the generated stream exercises every kind of operation
    ops = result["dataset"]["ops"]
    for kind in ("create", "change", "reassert", "backdated", "correct", "retract", "replay", "add"):
        assert ops.get(kind, 0) > 0, ops

    # SGAM agrees with the independent model of the semantics
    correctness = result["correctness"]
    assert correctness["checked"] == 200
    assert correctness["current_mismatches"] == 0, correctness["examples"]
    assert correctness["as_of_mismatches"] == 0, correctness["examples"]

    # the run is recorded and its tenants are gone
    assert all(left == 0 for left in result["cleanup"]["remaining_nodes"].values())
    path = Path(result["result_file"])
    assert path.parent == tmp_path and path.name.startswith("baseline-")
    saved = json.loads(path.read_text(encoding="utf-8"))
    assert saved["params"]["seed"] == 11 and saved["params"]["facts"] == 2_000
    assert saved["machine"]["cpu_count"] and saved["neo4j"]["version"].startswith("5.")
    assert saved["versions"]["python"] and saved["versions"]["neo4j_driver"]


def test_generator_is_deterministic() -> None:
    first = bench.generate(500, 50, seed=3, tenant="bench-a")
    second = bench.generate(500, 50, seed=3, tenant="bench-b")
    strip = lambda w: [d.model_dump(exclude={"tenant_id"}) for d in w.deltas]  # noqa: E731
    assert strip(first) == strip(second)
    assert first.ops == second.ops


def test_service_bench_measures_both_paths_and_leaves_nothing(neo4j_connection: tuple[str, tuple[str, str]],
                                                              monkeypatch) -> None:
    """``sgam bench service`` at a tiny size, flat out with one worker and paced with two: every
    number present, and its tenant and key gone afterwards."""
    from sgam.api import MemoryGraph
    from sgam.bench import service
    from sgam.service.keys import list_keys

    uri, (user, password) = neo4j_connection
    for name, value in (("NEO4J_URI", uri), ("NEO4J_USER", user), ("NEO4J_PASSWORD", password)):
        monkeypatch.setenv(name, value)
    graph = MemoryGraph.connect(uri, (user, password))
    try:
        active_before = {k["id"] for k in list_keys(graph.store) if k["revoked_at"] is None}
        for workers, rate in ((1, None), (2, 40.0)):
            result = service.run(subjects=6, clients=3, requests=15, workers=workers, rate=rate,
                                 operations=("current",), load="aiohttp", log=lambda line: None)
            ways = result["results"]["current"]
            for way in ("http", "in_process"):
                assert ways[way]["requests"] == 15
                assert _positive(ways[way]["p50_ms"]) and _positive(ways[way]["rps"])
                assert ways[way]["p99_ms"] >= ways[way]["p50_ms"]
            table = service.markdown(result)
            assert "p50 overhead of the service for current" in table
            assert ("paced at 40 requests/s" in table) == (rate is not None)
            # What stays is the deletion's own record and the revoked key: audit, no memory.
            left = graph.store.read("MATCH (n {tenant_id: $tenant}) UNWIND labels(n) AS label "
                                    "RETURN collect(DISTINCT label) AS labels", {"tenant": result["tenant"]})
            assert set(left[0]["labels"]) <= {"Deletion", "ApiKey"}
        assert {k["id"] for k in list_keys(graph.store) if k["revoked_at"] is None} <= active_before
    finally:
        graph.close()


def test_service_bench_with_wrk_measures_both_paths(neo4j_connection: tuple[str, tuple[str, str]],
                                                    monkeypatch) -> None:
    """The wrk load generator (Debian's ``wrk``, which .ci/run installs), flat out and paced: every
    number present, the server's CPU counted for the HTTP path, nothing left behind; without wrk
    on the PATH the run is refused before anything is seeded, naming the fix."""
    import shutil

    from sgam.api import MemoryGraph
    from sgam.bench import service
    from sgam.graph.errors import InvalidSetting

    assert shutil.which("wrk"), "wrk is not installed: apt-get install -y wrk (.ci/run does)"
    uri, (user, password) = neo4j_connection
    for name, value in (("NEO4J_URI", uri), ("NEO4J_USER", user), ("NEO4J_PASSWORD", password)):
        monkeypatch.setenv(name, value)
    assert service.default_load() == "wrk"
    for rate in (None, 40.0):
        result = service.run(subjects=6, clients=3, requests=15, rate=rate, operations=("current",),
                             load="wrk", log=lambda line: None)
        assert result["load"] == "wrk"
        ways = result["results"]["current"]
        # wrk stops once the plan is answered; answers already on their way are counted too.
        assert ways["http"]["requests"] >= 15 and ways["in_process"]["requests"] == 15
        for way in ("http", "in_process"):
            assert _positive(ways[way]["p50_ms"]) and _positive(ways[way]["rps"])
            assert ways[way]["p99_ms"] >= ways[way]["p50_ms"]
        assert _positive(ways["http"]["server_cpu_ms"]) and _positive(ways["in_process"]["client_cpu_ms"])
        assert ways["http"]["sent_late"] >= 0
        assert "wrk over HTTP" in service.markdown(result)
        graph = MemoryGraph.connect(uri, (user, password))
        try:
            left = graph.store.read("MATCH (n {tenant_id: $tenant}) UNWIND labels(n) AS label "
                                    "RETURN collect(DISTINCT label) AS labels", {"tenant": result["tenant"]})
        finally:
            graph.close()
        assert set(left[0]["labels"]) <= {"Deletion", "ApiKey"}
    monkeypatch.setenv("PATH", "/nonexistent")
    assert service.default_load() == "aiohttp"
    with pytest.raises(InvalidSetting, match="apt-get install wrk"):
        service.run(subjects=1, load="wrk", log=lambda line: None)


def test_make_bench_runs_on_a_throwaway_server_it_removes(monkeypatch: pytest.MonkeyPatch) -> None:
    """``sgam bench`` without a subcommand: a server of its own, reached through the ordinary
    connection settings by what runs inside, then stopped and its directory removed."""
    from sgam.api import MemoryGraph
    from sgam.cli.bench import _bench_server

    for name in ("NEO4J_URI", "SGAM_HOME", "SGAM_BOLT_PORT", "SGAM_HTTP_PORT"):
        monkeypatch.delenv(name, raising=False)
    with _bench_server(True):
        home = Path(os.environ["SGAM_HOME"])
        port = int(os.environ["SGAM_BOLT_PORT"])
        assert home.name.startswith("sgam-bench-") and port != 7687
        graph = MemoryGraph.connect()
        try:
            assert graph.store.uri == f"bolt://127.0.0.1:{port}"
            assert graph.store.read("MATCH (e:Entity) RETURN count(e) AS n", {})[0]["n"] == 0  # an empty store
        finally:
            graph.close()
    assert not home.exists()
    assert "SGAM_HOME" not in os.environ and "SGAM_BOLT_PORT" not in os.environ
    with socket.socket() as probe:  # the server is stopped: nothing listens on its port
        assert probe.connect_ex(("127.0.0.1", port)) != 0

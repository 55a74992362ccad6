"""Smoke runs of ``sgam bench scale`` and ``sgam bench locomo`` at tiny sizes, and the bulk import.

The scale run checks that every figure is produced, the result files are written and SGAM agrees
with the independent model on every sampled lookup; the LoCoMo probe runs on a small synthetic
file in LoCoMo's format (never the real one). Timings are never asserted.
"""

from __future__ import annotations

import asyncio
import json
import math
import weakref
from collections import Counter
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from sgam.bench import baseline as bench, locomo as bench_locomo, scale as bench_scale
from sgam.api import AsyncMemoryGraph, MemoryGraph
from sgam.graph import Conflict, InvalidDelta, MemoryDelta, SchemaViolation
from sgam.graph.writes import BatchResult
from sgam.queries.embeddings import default_embedder


def _positive(value: object) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value) and value > 0


def test_scale_smoke(neo4j_connection: tuple[str, tuple[str, str]], tmp_path: Path) -> None:
    uri, auth = neo4j_connection
    result = bench_scale.run([600, 1_500], seed=5, window=300, lookups=30, graphiti=False,
                             out_dir=tmp_path, uri=uri, auth=auth, log=lambda _: None)
    assert [row["size"] for row in result["sizes"]] == [600, 1_500]
    for row in result["sizes"]:
        assert row["correctness"]["current_mismatches"] == 0, row["correctness"]["examples"]
        assert row["correctness"]["as_of_mismatches"] == 0, row["correctness"]["examples"]
        assert row["writes"]["rejected"] == 0
        assert sum(row["writes"]["outcomes"].values()) == 300
        assert _positive(row["writes"]["sgam_facts_per_s"]) and _positive(row["writes"]["raw_facts_per_s"])
        assert _positive(row["bulk_import"]["facts_per_s"])
        cpu = row["bulk_import"]["cpu"]
        assert _positive(cpu["wall_s"]) and cpu["python_cpu_s"] >= 0, cpu
        assert row["bulk_import"]["cpu_floor_s"] is None or row["bulk_import"]["cpu_floor_s"] >= cpu["python_cpu_s"]
        written = row["writes"]["cpu"]
        for side in ("sgam", "raw"):
            # the harness's CPU is read in 10 ms ticks: a 300-delta raw write can read 0
            assert _positive(written[side]["wall_s"]) and written[side]["python_cpu_s"] >= 0, written
        floor = written["sgam_floor_s"]
        assert floor is None or floor >= written["sgam"]["python_cpu_s"], written
        assert row["stored"]["fact_rows"] >= row["stored"]["believed_rows"] > 0
        for op in bench_scale.OPERATIONS:
            entry = row["lookups"][op]
            assert entry["sgam"]["n"] == entry["raw"]["n"] == 30
            assert _positive(entry["ratio_p50"]) and entry["sgam"]["p50_ms"] <= entry["sgam"]["p99_ms"]
        for op in ("current", "as_of"):
            # every lookup in one of the two groups, by its attribute's cardinality in the schema
            groups = row["lookups"][op]["by_cardinality"]
            assert set(groups) <= {"one", "many"} and sum(g["sgam"]["n"] for g in groups.values()) == 30
            assert all(g["sgam"]["n"] == g["raw"]["n"] and _positive(g["ratio_p50"]) for g in groups.values())
        assert _positive(row["python"]["peak_rss_mb"])
        grown = row["python"]["sgam_peak_growth_mb"]
        assert set(grown) == {"bulk_import", "write_many", "lookups"}
        assert all(isinstance(v, float) and v >= 0 for v in grown.values()), grown
        assert "disabled" in row["graphiti"]["skipped"]
        single = row["single_writes"]
        assert single["sgam"]["n"] == single["raw"]["n"] == 30 and _positive(single["ratio_p50"])
        assert single["mismatches"] == 0
    assert {t["target"]: t["met"] for t in result["targets"]}["wrong `current` / `as_of` answers"] is True
    files = result["result_files"]
    saved = json.loads(Path(files["json"]).read_text(encoding="utf-8"))
    assert saved["params"]["seed"] == 5 and saved["params"]["sizes"] == [600, 1_500]
    assert saved["params"]["warm_up_deltas"] == 300 and _positive(saved["params"]["warm_up_seconds"])
    # rounds until one is no longer clearly faster than the one before, or the most allowed
    rounds = saved["params"]["warm_up_rounds"]
    assert 2 <= len(rounds) <= bench_scale.WARM_UP_ROUNDS, rounds
    settled = [later >= bench_scale.WARM_UP_SETTLED * earlier for earlier, later in zip(rounds, rounds[1:])]
    assert not any(settled[:-1]) and (settled[-1] or len(rounds) == bench_scale.WARM_UP_ROUNDS), rounds
    assert Path(files["png"]).read_bytes()[:4] == b"\x89PNG"
    markdown = Path(files["markdown"]).read_text(encoding="utf-8")
    assert "| 1,500 | traverse |" in markdown and "| 1,500 | `write`, one delta |" in markdown
    assert "| 1,500 | as_of | " in markdown.split("by the attribute's cardinality")[1]
    assert "| wrong `current` / `as_of` answers | 0 | 0 at 600, 0 at 1,500 | yes |" in markdown
    with MemoryGraph.connect(uri, auth, schema=bench_scale.SCHEMA) as graph:  # tenants are gone (but their deletion records)
        for t in ("", "-raw", "-warm", "-warm-raw"):  # the warm-up's tenants too
            assert graph.store.read("MATCH (n {tenant_id: $t}) WHERE NOT n:Deletion RETURN count(n) AS n",
                                    {"t": result["params"]["tenant"] + t})[0]["n"] == 0, t


def test_scale_stream_has_long_histories_and_a_three_hop_path() -> None:
    stream = bench_scale.Stream(seed=3, final_size=5_000)
    stream.take(5_000)
    assert {"create", "change", "backdated", "correct", "retract", "replay", "add"} <= set(stream.ops)
    deltas = list(stream.deltas())
    per_subject: dict[str, int] = {}
    for d in deltas:
        per_subject[d.subject] = per_subject.get(d.subject, 0) + 1
    counts = sorted(per_subject.values())
    assert counts[-1] >= 10 * counts[len(counts) // 2]  # hot subjects with long histories
    assert {d.attribute for d in deltas} >= set(bench_scale.PATH)
    again = bench_scale.Stream(seed=3, final_size=5_000)
    again.take(5_000)
    assert [d.model_dump() for d in again.deltas(0, 200)] == [d.model_dump() for d in deltas[:200]]


@pytest.fixture()
def graph(neo4j_connection: tuple[str, tuple[str, str]]):
    uri, auth = neo4j_connection
    with MemoryGraph.connect(uri, auth) as g:
        yield g


def test_import_history_matches_write_many_and_the_model(graph: MemoryGraph) -> None:
    """The same stream through import_history and write_many: same outcomes, same answers as the model."""
    bulk_w = bench.generate(3_000, 150, 13, "import-bulk")
    many_w = bench.generate(3_000, 150, 13, "import-many")
    for t in ("import-bulk", "import-many"):
        graph.delete_tenant(t)
    try:
        graph.record_episodes(bulk_w.episodes)
        graph.record_episodes(many_w.episodes)
        done: list[tuple[int, int]] = []
        imported = graph.import_history(bulk_w.deltas, chunk_size=700,
                                        on_progress=lambda d, n: done.append((d, n)))
        written = graph.write_many(many_w.deltas, batch_size=500)
        assert [r.outcome for r in imported.results] == [r.outcome for r in written.results]
        assert not imported.rejected and done[-1] == (3_000, 3_000) and len(done) > 1
        now = datetime.now(timezone.utc)
        for (subject, attribute), slot in bulk_w.slots.items():
            assert bench.observed_keys(graph.current("import-bulk", subject, attribute)) == slot.expected(now)
            for delta in slot.deltas[::3]:
                at = delta.valid_from
                assert bench.observed_keys(graph.as_of("import-bulk", subject, attribute, valid_at=at)) \
                    == slot.expected(at), (subject, attribute, at)
            # the same versions believed now; a version retired by the batch that wrote it is not
            # stored, and the import writes a subject's whole history in one chunk, so it stores fewer
            believed = [sorted((r.valid_from, r.valid_to, bench.observed_keys([r]))
                               for r in graph.history(t, subject, attribute, current_only=True))
                        for t in ("import-bulk", "import-many")]
            assert believed[0] == believed[1], (subject, attribute)
            assert len(graph.history("import-bulk", subject, attribute)) <= \
                len(graph.history("import-many", subject, attribute))
        assert graph.doctor("import-bulk") == []
        count = "MATCH (:Episode {tenant_id: $t})-[m:MENTIONS]->() RETURN count(m) AS n"
        assert graph.store.read(count, {"t": "import-bulk"}) == graph.store.read(count, {"t": "import-many"})

        # a tenant that already holds entities is refused, and nothing changes
        before = len(graph.history("import-bulk", bulk_w.deltas[0].subject))
        with pytest.raises(Conflict, match="import-bulk.*write_many"):
            graph.import_history(bulk_w.deltas[:10])
        assert len(graph.history("import-bulk", bulk_w.deltas[0].subject)) == before
    finally:
        for t in ("import-bulk", "import-many"):
            graph.delete_tenant(t)


def test_import_history_rejects_bad_streams_before_writing(graph: MemoryGraph) -> None:
    tenant = "import-bad"
    graph.delete_tenant(tenant)
    w = bench.generate(200, 20, 17, tenant)
    try:
        graph.record_episodes(w.episodes[1:])  # the first episode is missing
        with pytest.raises(InvalidDelta, match="ep-0000000.*record the episodes first"):
            graph.import_history(w.deltas)
        graph.record_episodes(w.episodes[:1])
        bad = MemoryDelta(tenant_id=tenant, subject="p-000001", attribute="no_such_attribute", value="x",
                          valid_from=w.deltas[0].valid_from, source_episode_id=w.deltas[0].source_episode_id)
        with pytest.raises(SchemaViolation, match="delta 200"):
            graph.import_history([*w.deltas, bad])
        clash = w.deltas[0].model_copy(update={"attribute": "holds", "subject": "p-000001",
                                                "value": "acc-1", "subject_type": "Customer"})
        with pytest.raises(SchemaViolation, match="p-000001"):
            graph.import_history([*w.deltas, clash])
        assert graph.store.read("MATCH (e:Entity {tenant_id: $t}) RETURN count(e) AS n", {"t": tenant})[0]["n"] == 0
        with pytest.raises(InvalidDelta, match="chunk_size"):
            graph.import_history(w.deltas, chunk_size=0)
    finally:
        graph.delete_tenant(tenant)


def _locomo_file(path: Path) -> Path:
    """A tiny file in LoCoMo's shape (two conversations), written by the test."""
    def session(n: int, lines: list[tuple[str, str]]) -> list[dict]:
        return [{"speaker": s, "dia_id": f"D{n}:{i + 1}", "text": t} for i, (s, t) in enumerate(lines)]

    samples = [
        {"sample_id": "conv-a",
         "conversation": {
             "speaker_a": "Mira", "speaker_b": "Jon",
             "session_1_date_time": "1:56 pm on 8 May, 2023",
             "session_1": session(1, [("Mira", "I adopted a grey cat called Pixel last week."),
                                      ("Jon", "Lovely! I started learning the violin."),
                                      ("Mira", "My sister lives in Lisbon now.")]),
             "session_2_date_time": "10:00 am on 20 June, 2023",
             "session_2": session(2, [("Jon", "I played my first violin concert on Saturday."),
                                      ("Mira", "Pixel knocked over my coffee again."),
                                      ("Jon", "Did you visit your sister in Lisbon?")])},
         "qa": [{"question": "What is the name of Mira's cat?", "answer": "Pixel", "evidence": ["D1:1"],
                 "category": 4},
                {"question": "Which instrument does Jon play in concerts?", "answer": "violin",
                 "evidence": ["D1:2", "D2:1"], "category": 1},
                {"question": "Where does Mira's sister live?", "answer": "Lisbon", "evidence": ["D1:3"],
                 "category": 4},
                {"question": "What is Jon's dog called?", "adversarial_answer": "Rex",
                 "evidence": ["D1:2"], "category": 5}]},
        {"sample_id": "conv-b",
         "conversation": {
             "speaker_a": "Ana", "speaker_b": "Bo",
             "session_1_date_time": "9:15 pm on 3 March, 2023",
             "session_1": session(1, [("Ana", "We moved the garden party to Sunday."),
                                      ("Bo", "Great, I will bake a lemon cake."),
                                      ("Ana", "The party starts at noon.")])},
         "qa": [{"question": "When did Ana plan the garden party?", "answer": "Sunday",
                 "evidence": ["D1:1"], "category": 2}]},
    ]
    path.write_text(json.dumps(samples), encoding="utf-8")
    return path


class CountingEmbedder:
    """The real model, recording every text it is asked to embed."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.model_name = inner.model_name
        self.texts: list[str] = []

    @property
    def dimensions(self) -> int:
        return int(self.inner.dimensions)

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.texts += texts
        return self.inner.embed(texts)


def test_locomo_smoke(neo4j_connection: tuple[str, tuple[str, str]], tmp_path: Path) -> None:
    uri, auth = neo4j_connection
    source = _locomo_file(tmp_path / "locomo-shaped.json")
    conversations = bench_locomo.load(source)
    assert [len(c.turns) for c in conversations] == [6, 3]
    assert conversations[0].turns[3].at > conversations[0].turns[2].at
    torch = pytest.importorskip("torch")
    threads_before = torch.get_num_threads()
    embedder = CountingEmbedder(default_embedder())
    result = bench_locomo.run(source, out_dir=tmp_path, uri=uri, auth=auth, log=lambda _: None,
                              embedder=embedder, threads=1, keep=True)
    assert torch.get_num_threads() == threads_before and result["params"]["torch_threads"] == 1
    # every text is embedded once: the turns for the backfill and the MiniLM baseline alike,
    # each question for the context's kNN and the baseline alike
    turns = [bench_locomo._text(t) for c in conversations for t in c.turns]
    questions = [q.text for c in conversations for q in c.questions]
    assert sorted(embedder.texts) == sorted(turns + questions)
    assert result["question_embedding_p50_ms"] > 0
    assert result["systems"]["minilm"]["latency_p50_ms"] >= result["question_embedding_p50_ms"]
    assert result["timings_s"]["total"] >= result["timings_s"]["questions_s"] > 0
    # the graph holds, for every turn, the vector the baseline ranked with (kept, then deleted here)
    vectors = dict(zip(turns, default_embedder().embed(turns)))
    with MemoryGraph.connect(uri, auth) as graph:
        stored = graph.store.read("MATCH (n:Episode) WHERE n.tenant_id STARTS WITH 'locomo-' "
                                  "RETURN n.tenant_id AS tenant, n.content AS content, "
                                  "n.embedding AS vector, n.embedding_model AS model", {})
        assert sorted(r["content"] for r in stored) == sorted(turns)
        for row in stored:
            assert row["model"] == embedder.model_name
            assert row["vector"] == pytest.approx(vectors[row["content"]], abs=1e-5)
        for tenant in {r["tenant"] for r in stored}:
            graph.delete_tenant(tenant)
    for system in bench_locomo.SYSTEMS:
        entry = result["systems"][system]
        overall = entry["overall_categories_1_4"]
        assert overall["questions"] == 4  # the adversarial question is reported apart
        assert entry["by_category"]["5 adversarial"]["questions"] == 1
        assert 0 <= overall["recall@5"] <= overall["recall@10"] <= 100
    # with six turns, the top 10 holds every turn: recall@10 is complete for the plain rankers
    assert result["systems"]["bm25"]["overall_categories_1_4"]["recall@10"] == 100.0
    assert result["systems"]["sgam-context"]["overall_categories_1_4"]["recall@10"] > 0
    text = Path(result["result_files"]["markdown"]).read_text(encoding="utf-8")
    assert "| overall (1-4) | 4 |" in text
    # without keep, a run deletes its tenants; the same data ranks the same way again
    again = bench_locomo.run(source, out_dir=tmp_path, uri=uri, auth=auth, log=lambda _: None)
    for system in bench_locomo.SYSTEMS:
        assert again["systems"][system]["by_category"] == result["systems"][system]["by_category"]
    with MemoryGraph.connect(uri, auth) as graph:
        left = graph.store.read("MATCH (n:Episode) WHERE n.tenant_id STARTS WITH 'locomo-' "
                                "RETURN count(n) AS n", {})[0]["n"]
    assert left == 0


def test_locomo_bad_file(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"not": "a list"}), encoding="utf-8")
    with pytest.raises(InvalidDelta, match="list of samples"):
        bench_locomo.load(path)
    path.write_text(json.dumps([{"conversation": {"session_1_date_time": "yesterday", "session_1": []},
                                 "qa": []}]), encoding="utf-8")
    with pytest.raises(InvalidDelta, match="session date 'yesterday'"):
        bench_locomo.load(path)


class _LazyDeltas(Sequence):  # type: ignore[type-arg]
    """Builds each delta on access (as a 10M-delta backlog would) and counts the models alive at once."""

    def __init__(self, deltas: Sequence[MemoryDelta]) -> None:
        self.rows = [d.model_dump() for d in deltas]
        self.builds = self.alive = self.peak = 0

    def _gone(self) -> None:
        self.alive -= 1

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, index: int) -> MemoryDelta:  # type: ignore[override]
        delta = MemoryDelta.model_validate(self.rows[index])
        self.builds += 1
        self.alive += 1
        self.peak = max(self.peak, self.alive)
        weakref.finalize(delta, self._gone)
        return delta


def test_import_history_builds_a_lazy_sequence_chunk_by_chunk(graph: MemoryGraph) -> None:
    """A lazy stream is read twice by index and never held whole; the result is write_many's."""
    lazy_w = bench.generate(2_400, 120, 23, "import-lazy")
    many_w = bench.generate(2_400, 120, 23, "import-lazy-many")
    for t in ("import-lazy", "import-lazy-many"):
        graph.delete_tenant(t)
    try:
        graph.record_episodes(lazy_w.episodes)
        graph.record_episodes(many_w.episodes)
        lazy = _LazyDeltas(lazy_w.deltas)
        imported = graph.import_history(lazy, chunk_size=300)
        assert lazy.builds == 2 * len(lazy)  # checked, then written: each model built twice, none copied
        # a few chunks at a time, never the history: the chunk written, the next one prepared
        # ahead (bulk.prepared_ahead), and what is left of the one before while that starts. A
        # chunk holds whole subjects: 300 deltas at most, or one subject's when it has more (this
        # stream's busiest subject has 386), so three chunks can be up to 386 + 2 * 300 deltas.
        largest = max(300, max(Counter(d.subject for d in lazy_w.deltas).values()))
        assert lazy.peak <= 3 * largest < len(lazy)
        assert lazy.alive == 0
        written = graph.write_many(many_w.deltas, batch_size=500)
        assert [r.outcome for r in imported.results] == [r.outcome for r in written.results]
        assert [r.index for r in imported.results] == list(range(len(lazy)))
        for outcome in ("created", "unchanged", "superseded"):
            assert imported.count(outcome) == written.count(outcome)
        assert imported.written == written.written and imported.rejected == ()
        count = ("MATCH (:Episode {tenant_id: $t})-[m:MENTIONS]->() "
                 "RETURN count(m) AS n, count(DISTINCT [elementId(startNode(m)), elementId(endNode(m))]) AS pairs")
        stored = graph.store.read(count, {"t": "import-lazy"})[0]
        assert stored["n"] == stored["pairs"] == graph.store.read(count, {"t": "import-lazy-many"})[0]["n"]
        assert graph.doctor("import-lazy") == []
    finally:
        for t in ("import-lazy", "import-lazy-many"):
            graph.delete_tenant(t)


def test_async_import_history_matches_the_sync_one(neo4j_connection: tuple[str, tuple[str, str]],
                                                   graph: MemoryGraph) -> None:
    uri, auth = neo4j_connection
    sync_w = bench.generate(600, 40, 29, "import-sync")
    async_w = bench.generate(600, 40, 29, "import-async")
    for t in ("import-sync", "import-async"):
        graph.delete_tenant(t)

    async def scenario() -> BatchResult:
        async with await AsyncMemoryGraph.connect(uri, auth) as agraph:
            await agraph.record_episodes(async_w.episodes)
            result = await agraph.import_history(iter(async_w.deltas), chunk_size=150)
            with pytest.raises(Conflict, match="import-async"):  # no longer empty
                await agraph.import_history(async_w.deltas[:5])
            return result

    try:
        graph.record_episodes(sync_w.episodes)
        expected = graph.import_history(sync_w.deltas, chunk_size=150)
        got = asyncio.run(scenario())
        assert [r.outcome for r in got.results] == [r.outcome for r in expected.results]
        for subject, attribute in list(sync_w.slots)[::5]:
            assert len(graph.history("import-async", subject, attribute)) == \
                len(graph.history("import-sync", subject, attribute))
    finally:
        for t in ("import-sync", "import-async"):
            graph.delete_tenant(t)


class _FailingDeltas(_LazyDeltas):
    """Fails on a read of the second pass, after ``after`` deltas were read there: a crash midway."""

    def __init__(self, deltas: Sequence[MemoryDelta], after: int) -> None:
        super().__init__(deltas)
        self.after = after

    def __getitem__(self, index: int) -> MemoryDelta:  # type: ignore[override]
        if self.builds >= len(self.rows) + self.after:
            raise RuntimeError(f"the source went away at delta {index}")
        return super().__getitem__(index)


def test_import_history_that_fails_midway_leaves_the_tenant_empty(
        neo4j_connection: tuple[str, tuple[str, str]], graph: MemoryGraph) -> None:
    uri, auth = neo4j_connection
    tenants = ("import-fail", "import-fail-async")
    worlds = [bench.generate(1_200, 60, 31, t) for t in tenants]
    count = ("MATCH (n {tenant_id: $t}) RETURN sum(CASE WHEN n:Episode THEN 1 ELSE 0 END) AS episodes, "
             "sum(CASE WHEN n:Entity OR n:Value THEN 1 ELSE 0 END) AS others")

    async def run_async() -> None:
        async with await AsyncMemoryGraph.connect(uri, auth) as agraph:
            await agraph.import_history(_FailingDeltas(worlds[1].deltas, after=700), chunk_size=300)

    for t in tenants:
        graph.delete_tenant(t)
    try:
        for world in worlds:
            graph.record_episodes(world.episodes)
        with pytest.raises(RuntimeError, match="went away"):  # two chunks of 300 were written by then
            graph.import_history(_FailingDeltas(worlds[0].deltas, after=700), chunk_size=300)
        with pytest.raises(RuntimeError, match="went away"):
            asyncio.run(run_async())
        for t, world in zip(tenants, worlds):
            stored = graph.store.read(count, {"t": t})[0]
            assert stored == {"episodes": len(world.episodes), "others": 0}, t
        again = graph.import_history(worlds[0].deltas, chunk_size=300)  # empty again, so it may start over
        assert again.written > 0 and graph.doctor("import-fail") == []
    finally:
        for t in tenants:
            graph.delete_tenant(t)

"""An ``import_history`` stopped by a crash: the next call resumes it, refuses a different stream or
undoes it, and says which (graph/bulk.py, the ``ImportRun`` marker).

The crash is real: a child process runs the import and is SIGKILLed once the marker shows a few
committed chunks (or while it waits after its last chunk, before the run is marked done). The
re-run happens here, sync or async, and its end state is compared with an uninterrupted import
of the same stream into another tenant: the believed rows (subject, attribute, value, valid
interval, status), the node counts and the ``MENTIONS`` links.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from sgam.bench import baseline as bench
from sgam.api import AsyncMemoryGraph, MemoryGraph
from sgam.graph import Conflict, InvalidDelta, MemoryDelta
from sgam.graph.bulk import (
    ADVANCE_RUN,
    EARLIER,
    FINISH_RUN,
    MARK_UNDOING,
    START_RUN,
    TENANT_STATE,
    UNDO,
    ImportResult,
    RunTakenOver,
    import_op,
)
from sgam.graph.steps import InTx, Request, Write

SIZE, SUBJECTS, SEED, CHUNK = 900, 45, 41, 60

KILLED_IMPORT = f"""
import asyncio, os, sys, time
from sgam.bench import baseline as bench
from sgam.api import AsyncMemoryGraph, MemoryGraph

mode, tenant, pause = sys.argv[1:4]
deltas = bench.generate({SIZE}, {SUBJECTS}, {SEED}, tenant).deltas
auth = (os.environ["IMP_USER"], os.environ["IMP_PASSWORD"])

def progress(done, total):
    print(done, total, flush=True)
    if pause == "each":
        time.sleep(0.3)  # room for the kill to land between chunks
    elif done == total:
        time.sleep(600)  # every chunk is committed, the run is not yet marked done

if mode == "sync":
    with MemoryGraph.connect(os.environ["IMP_URI"], auth) as graph:
        graph.import_history(deltas, chunk_size={CHUNK}, on_progress=progress)
else:
    async def main():
        async with await AsyncMemoryGraph.connect(os.environ["IMP_URI"], auth) as graph:
            await graph.import_history(deltas, chunk_size={CHUNK}, on_progress=progress)
    asyncio.run(main())
print("finished", flush=True)
"""

BELIEVED = """
MATCH (s:Entity {tenant_id: $t})-[f]->()
WHERE f.memory_id IS NOT NULL AND f.expired_at IS NULL
RETURN s.id AS subject, f.attribute AS attribute, f.value AS value, toString(f.valid_from) AS valid_from,
       toString(f.valid_to) AS valid_to, f.status AS status
"""
COUNTS = """
CALL () { MATCH (n:Entity {tenant_id: $t}) RETURN count(n) AS entities }
CALL () { MATCH (n:Value {tenant_id: $t}) RETURN count(n) AS values }
CALL () { MATCH (n:Episode {tenant_id: $t}) RETURN count(n) AS episodes }
CALL () { MATCH (n:Ledger {tenant_id: $t}) RETURN count(n) AS ledgers }
CALL () { MATCH (:Entity {tenant_id: $t})-[f]->() WHERE f.memory_id IS NOT NULL RETURN count(f) AS facts }
CALL () { MATCH (:Episode {tenant_id: $t})-[m:MENTIONS]->() RETURN count(m) AS mentions }
RETURN entities, values, episodes, ledgers, facts, mentions
"""
RUNS = """
MATCH (r:ImportRun {tenant_id: $t})
RETURN r.id AS id, r.status AS status, r.chunks AS chunks, r.chunks_done AS chunks_done,
       r.deltas_done AS deltas_done, r.fingerprint AS fingerprint, r.chunk_size AS chunk_size
ORDER BY r.started_at
"""


def believed(graph: MemoryGraph, tenant: str) -> list[tuple]:
    return sorted((r["subject"], r["attribute"], repr(r["value"]), r["valid_from"], r["valid_to"], r["status"])
                  for r in graph.store.read(BELIEVED, {"t": tenant}))


def counts(graph: MemoryGraph, tenant: str) -> dict[str, int]:
    return graph.store.read(COUNTS, {"t": tenant})[0]


def runs(graph: MemoryGraph, tenant: str) -> list[dict[str, Any]]:
    return graph.store.read(RUNS, {"t": tenant})


def assert_same_import(graph: MemoryGraph, got: str, expected: str) -> None:
    assert believed(graph, got) == believed(graph, expected)
    assert counts(graph, got) == counts(graph, expected)
    assert graph.doctor(got) == []


@pytest.fixture()
def tenants(graph: MemoryGraph) -> Iterator[list[str]]:
    """Fresh tenants, named on demand (``tenants.append``), deleted afterwards."""
    made: list[str] = []
    yield made
    for t in made:
        graph.delete_tenant(t)


def fresh(tenants: list[str], graph: MemoryGraph) -> tuple[str, Sequence[MemoryDelta]]:
    """A new tenant with the episodes of the test stream recorded, and the stream's deltas for it."""
    tenant = f"imp-{uuid.uuid4().hex[:10]}"
    tenants.append(tenant)
    world = bench.generate(SIZE, SUBJECTS, SEED, tenant)
    graph.record_episodes(world.episodes)
    return tenant, world.deltas


def import_in(mode: str, connection: tuple[str, tuple[str, str]], graph: MemoryGraph,
              deltas: Sequence[MemoryDelta], **options: Any) -> ImportResult:
    """``import_history`` through the sync or the async API."""
    if mode == "sync":
        return graph.import_history(deltas, **options)

    async def run() -> ImportResult:
        async with await AsyncMemoryGraph.connect(*connection, bootstrap=False) as agraph:
            return await agraph.import_history(deltas, **options)

    return asyncio.run(run())


def crash(mode: str, connection: tuple[str, tuple[str, str]], graph: MemoryGraph, tenant: str, *,
          after_chunks: int | None) -> dict[str, Any]:
    """Run the import of ``tenant``'s stream in a child and SIGKILL it once ``after_chunks`` chunks
    are committed (polling the run marker), or, with ``None``, once it waits after its last chunk.
    Returns the run marker as the kill left it."""
    uri, (user, password) = connection
    pause = "each" if after_chunks is not None else "last"
    with subprocess.Popen([sys.executable, "-c", KILLED_IMPORT, mode, tenant, pause],
                          stdout=subprocess.PIPE, text=True,
                          env={**os.environ, "IMP_URI": uri, "IMP_USER": user, "IMP_PASSWORD": password}) as child:
        assert child.stdout is not None
        deadline = time.monotonic() + 180
        while True:
            assert child.poll() is None, "the import ended before it could be killed"
            assert time.monotonic() < deadline, "the import made no progress"
            if after_chunks is None:
                line = child.stdout.readline()  # the child prints after each chunk; the last is "N N"
                done, total = (int(x) for x in line.split())
                if done == total:
                    break
            else:
                marker = runs(graph, tenant)
                if marker and marker[0]["chunks_done"] >= after_chunks:
                    break
                time.sleep(0.05)
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=60)
    assert child.returncode == -signal.SIGKILL
    [marker] = runs(graph, tenant)
    assert marker["status"] == "running"
    return marker


MODES = pytest.mark.parametrize("mode", ["sync", "async"])


@MODES
def test_a_killed_import_resumes_and_ends_like_an_uninterrupted_one(
        mode: str, neo4j_connection: tuple[str, tuple[str, str]], graph: MemoryGraph, tenants: list[str]) -> None:
    killed, deltas = fresh(tenants, graph)
    calm, calm_deltas = fresh(tenants, graph)
    reference = graph.import_history(calm_deltas, chunk_size=CHUNK)

    marker = crash(mode, neo4j_connection, graph, killed, after_chunks=3)
    assert 3 <= marker["chunks_done"] < marker["chunks"] == reference.chunks
    assert counts(graph, killed)["entities"] > 0  # the committed chunks are there

    seen: list[tuple[int, int]] = []
    # another chunk size: a resume packs by the run's, or chunk k would not be the run's chunk k
    resumed = import_in(mode, neo4j_connection, graph, deltas, chunk_size=7 * CHUNK,
                        on_progress=lambda done, total: seen.append((done, total)))
    assert resumed.resumed_from == marker["chunks_done"] and resumed.undone == ()
    assert resumed.chunks == marker["chunks"] and resumed.run == marker["id"]
    assert len(seen) == marker["chunks"] - marker["chunks_done"]
    assert seen[0][0] > marker["deltas_done"] and seen[-1] == (SIZE, SIZE)
    assert_same_import(graph, killed, calm)

    # the earlier run's deltas say so; the others, and every tally, are the uninterrupted import's
    outcomes = [r.outcome for r in resumed.results]
    assert outcomes.count(EARLIER) == marker["deltas_done"]
    assert all(got in (EARLIER, want.outcome) for got, want in zip(outcomes, reference.results))
    assert resumed.tallies() == reference.tallies() == reference.results.counts()
    assert resumed.written == reference.written and resumed.count("created") == reference.count("created")
    [done] = runs(graph, killed)
    assert done["status"] == "done" and done["chunks_done"] == done["chunks"] and done["chunk_size"] == CHUNK
    assert done["fingerprint"] == marker["fingerprint"] and done["fingerprint"].startswith(f"{SIZE}:")

    with pytest.raises(Conflict, match=f"{killed}.*already hold entities"):  # finished: an ordinary tenant
        import_in(mode, neo4j_connection, graph, deltas, chunk_size=CHUNK)


@MODES
def test_a_different_stream_after_a_crash_is_refused_or_undoes_the_unfinished_import(
        mode: str, neo4j_connection: tuple[str, tuple[str, str]], graph: MemoryGraph, tenants: list[str]) -> None:
    killed, deltas = fresh(tenants, graph)
    calm, calm_deltas = fresh(tenants, graph)
    other, shorter = deltas[: SIZE // 2], calm_deltas[: SIZE // 2]  # a different stream: half of it
    graph.import_history(shorter, chunk_size=CHUNK)

    marker = crash(mode, neo4j_connection, graph, killed, after_chunks=2)
    # a planted ledger node, which an undo must remove too
    graph.store.run_write("CREATE (:Ledger {tenant_id: $t, subject: 'p-000001', attribute: 'email'})",
                          {"t": killed})
    before = counts(graph, killed)

    with pytest.raises(Conflict) as refused:
        import_in(mode, neo4j_connection, graph, other, chunk_size=CHUNK)
    message = str(refused.value)
    for part in (repr(killed), repr(marker["id"]), "different stream", f"{marker['chunks_done']} of",
                 "on_unfinished='undo'", "re-run import_history with that run's stream"):
        assert part in message, (part, message)
    assert counts(graph, killed) == before and runs(graph, killed) == [marker]  # nothing changed

    with pytest.raises(InvalidDelta, match="on_unfinished must be 'resume' or 'undo', got 'restart'"):
        import_in(mode, neo4j_connection, graph, other, on_unfinished="restart")

    result = import_in(mode, neo4j_connection, graph, other, chunk_size=CHUNK, on_unfinished="undo")
    assert result.undone == (marker["id"],) and result.resumed_from is None and result.run != marker["id"]
    assert EARLIER not in result.results.counts()
    [new] = runs(graph, killed)  # the unfinished marker went with what it wrote
    assert new["id"] == result.run and new["status"] == "done"
    assert_same_import(graph, killed, calm)  # nothing of the first stream is left, the episodes stayed
    # the planted ledger went with the undo: the ledgers left are the second stream's own
    assert counts(graph, killed)["ledgers"] == counts(graph, calm)["ledgers"] > 0
    assert counts(graph, killed)["episodes"] == before["episodes"]


@MODES
def test_a_crash_after_the_last_chunk_before_done_finishes_on_the_rerun(
        mode: str, neo4j_connection: tuple[str, tuple[str, str]], graph: MemoryGraph, tenants: list[str]) -> None:
    killed, deltas = fresh(tenants, graph)
    calm, calm_deltas = fresh(tenants, graph)
    reference = graph.import_history(calm_deltas, chunk_size=CHUNK)

    marker = crash(mode, neo4j_connection, graph, killed, after_chunks=None)
    assert marker["chunks_done"] == marker["chunks"] and marker["deltas_done"] == SIZE
    before = counts(graph, killed)
    assert_same_import(graph, killed, calm)  # all there, only not marked done

    resumed = import_in(mode, neo4j_connection, graph, deltas, chunk_size=CHUNK)
    assert resumed.resumed_from == resumed.chunks == marker["chunks"]
    assert resumed.results.counts() == {EARLIER: SIZE}  # no chunk written again
    assert resumed.tallies() == reference.tallies()
    assert counts(graph, killed) == before
    assert [r["status"] for r in runs(graph, killed)] == ["done"]


def _stop_after(graph: MemoryGraph, deltas: Sequence[MemoryDelta], chunks: int) -> None:
    """Drive an import by hand and drop it after ``chunks`` chunks: no undo runs, as in a kill."""
    requests = import_op(deltas, graph.store.schema, graph.store.clock, CHUNK)
    request, written = next(requests), 0
    while written < chunks:
        answer = graph.store._answer(request)  # noqa: SLF001 - the driver's side, by hand
        written += isinstance(request, InTx) and isinstance(answer, tuple)
        request = requests.send(answer)
    requests.close()


def test_a_tenant_written_to_after_the_crash_is_neither_resumed_nor_undone(
        graph: MemoryGraph, tenants: list[str]) -> None:
    tenant, deltas = fresh(tenants, graph)
    _stop_after(graph, deltas, chunks=2)
    [marker] = runs(graph, tenant)
    assert marker["status"] == "running" and marker["chunks_done"] == 2
    graph.write_many([deltas[0].model_copy(update={"subject": "p-late"})])
    before = counts(graph, tenant)
    for option in ("resume", "undo"):
        with pytest.raises(Conflict, match=f"{tenant}.*{marker['id']}.*'p-late' were written later.*delete_tenant"):
            graph.import_history(deltas, chunk_size=CHUNK, on_unfinished=option)  # type: ignore[arg-type]
    assert counts(graph, tenant) == before and runs(graph, tenant) == [marker]


def test_an_interrupted_undo_is_finished_by_the_next_import(graph: MemoryGraph, tenants: list[str]) -> None:
    tenant, deltas = fresh(tenants, graph)
    calm, calm_deltas = fresh(tenants, graph)
    graph.import_history(calm_deltas, chunk_size=CHUNK)
    _stop_after(graph, deltas, chunks=3)
    [marker] = runs(graph, tenant)
    # the undo marked the run and deleted the values, then stopped before the entities
    graph.store.run_write(MARK_UNDOING, {"tenants": [tenant], "run": marker["id"], "now": graph.store.clock()})
    with graph.store.driver.session(database=graph.store.database) as session:  # IN TRANSACTIONS: implicit
        session.run(UNDO[0], tenant=tenant).consume()
    assert counts(graph, tenant)["values"] == 0 and counts(graph, tenant)["entities"] > 0
    result = graph.import_history(deltas, chunk_size=CHUNK)  # the same stream: never resumed half-undone
    assert result.undone == (marker["id"],) and result.resumed_from is None
    assert_same_import(graph, tenant, calm)


def test_an_import_failing_midway_leaves_no_run_behind(graph: MemoryGraph, tenants: list[str]) -> None:
    tenant, deltas = fresh(tenants, graph)

    def stop(done: int, total: int) -> None:
        if done > 2 * CHUNK:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        graph.import_history(deltas, chunk_size=CHUNK, on_progress=stop)
    assert runs(graph, tenant) == []
    assert {k: v for k, v in counts(graph, tenant).items() if k != "episodes"} == dict.fromkeys(
        ("entities", "values", "ledgers", "facts", "mentions"), 0)


def _serve_until(graph: MemoryGraph, requests: Iterator[Request], query: str | None) -> Request:
    """Serve an import's requests until the next write is ``START_RUN`` (``query``) or, with None,
    any other write (a chunk); return that request unserved."""
    request = next(requests)
    while True:
        if isinstance(request, (InTx, Write)):
            first = request.statement.query if isinstance(request, Write) else next(request.make_steps()).query
            if first == query or (query is None and first not in (START_RUN, FINISH_RUN)):
                return request
        request = requests.send(graph.store._answer(request))  # noqa: SLF001


def test_two_imports_at_once_into_one_tenant_do_not_mix(graph: MemoryGraph, tenants: list[str]) -> None:
    tenant, deltas = fresh(tenants, graph)
    calm, calm_deltas = fresh(tenants, graph)
    graph.import_history(calm_deltas, chunk_size=CHUNK)

    # both find the tenant empty; the second to write its marker is refused before any chunk
    late = import_op(deltas, graph.store.schema, graph.store.clock, CHUNK)
    start = _serve_until(graph, late, START_RUN)
    _stop_after(graph, deltas, chunks=1)
    with pytest.raises(Conflict) as clash:
        graph.store._answer(start)  # noqa: SLF001
    with pytest.raises(Conflict, match=f"another import_history into tenant\\(s\\) '{tenant}' started at the same time"):
        late.throw(clash.value)

    # both resume the run; the slower one's chunk is rolled back and it stops without an undo
    slow = import_op(deltas, graph.store.schema, graph.store.clock, CHUNK)
    chunk = _serve_until(graph, slow, None)
    assert graph.import_history(deltas, chunk_size=CHUNK).resumed_from == 1
    with pytest.raises(RunTakenOver) as taken:
        graph.store._answer(chunk)  # noqa: SLF001
    assert "moved on by another process while this one wrote chunk 1" in str(taken.value)
    with pytest.raises(RunTakenOver):
        slow.throw(taken.value)  # raised again, not answered with an undo request
    assert [r["status"] for r in runs(graph, tenant)] == ["done"]
    assert_same_import(graph, tenant, calm)


def _operators(plan: dict[str, Any]) -> Iterator[tuple[str, str]]:
    yield plan.get("operatorType", ""), str(plan.get("args", {}).get("Details", ""))
    for child in plan.get("children", []):
        yield from _operators(child)


def test_import_run_statements_plan_on_the_server(graph: MemoryGraph) -> None:
    for query in (TENANT_STATE, START_RUN, ADVANCE_RUN, FINISH_RUN, MARK_UNDOING, *UNDO):
        assert graph.store.explain(query) is not None
    for query in (TENANT_STATE, ADVANCE_RUN, FINISH_RUN):  # a tenant's runs are a seek, not a label scan
        operators = list(_operators(graph.store.explain(query)))
        assert any(op.startswith("NodeIndexSeek") and "ImportRun" in details for op, details in operators), operators

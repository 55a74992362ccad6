"""Contract tests of the OpenAI-compatible extractor against a loopback server replaying responses.

The server (http.server in a thread, on 127.0.0.1 only) answers each POST with the next response of
a script built from tests/fixtures/llm/*.json and records what the client sent. No database, no
network beyond loopback; time-outs use a sub-second client timeout and backoff sleeps are recorded
instead of slept, so the file runs in about a second.
"""

from __future__ import annotations

import json
import socket
from datetime import date, datetime, timezone
from typing import Any

import pytest

from sgam.graph.errors import ExtractionError
from sgam.graph.models import Episode, MemoryDelta
from sgam.graph.schema import default_schema
from sgam.ingest.extract import implied_fields
from sgam.ingest.extractors.llm import (
    EndpointError,
    EndpointUnavailable,
    ModelRefusal,
    OpenAICompatibleExtractor,
    TransientExtractionError,
)
from sgam.ingest.extractors.sgr import PROVENANCE_KEYS, InvalidModelOutput
from sgam.settings import Settings
from tests.llm_replay import Replay, fixture, server  # noqa: F401 (a fixture)

EPISODE = Episode(
    tenant_id="demo",
    id="e2",
    occurred_at=datetime(2026, 6, 2, 9, 30, tzinfo=timezone.utc),
    actor="user:mira",
    content=(
        "Quick update: my passport deadline moved from July 15 to June 30, 2026, the consulate "
        "brought it forward. And please keep your answers concise."
    ),
)
CURRENT = {("mira", "passport_deadline"): date(2026, 7, 15), ("mira", "home_city"): "Porto"}


class Sleeps(list[float]):
    def __call__(self, seconds: float) -> None:
        self.append(seconds)


@pytest.fixture
def sleeps() -> Sleeps:
    return Sleeps()


def extractor(url: str, sleeps: Sleeps, **kwargs: Any) -> OpenAICompatibleExtractor:
    kwargs.setdefault("api_key", "sk-test")
    kwargs.setdefault("timeout", 5.0)
    return OpenAICompatibleExtractor(url, "gpt-4o-mini", sleep=sleeps, backoff=0.25, **kwargs)


def test_good_response_gives_validated_candidates_and_sends_the_contract(
    server: Replay, sleeps: Sleeps
) -> None:
    server.play("good")
    with extractor(server.url, sleeps) as ex:
        candidates = ex.extract(EPISODE, CURRENT)
        assert ex.attempts == 1
    assert sleeps == []

    # What was sent: model, the strict response_format, the episode and the stored value.
    (request,) = server.requests
    assert request["path"] == "/v1/chat/completions"
    assert request["headers"]["Authorization"] == "Bearer sk-test"
    body = request["body"]
    assert body["model"] == "gpt-4o-mini"
    assert body["temperature"] == 0
    fmt = body["response_format"]
    assert fmt["type"] == "json_schema"
    assert fmt["json_schema"]["strict"] is True and fmt["json_schema"]["name"] == "sgam_extraction"
    item = fmt["json_schema"]["schema"]["properties"]["candidates"]["items"]
    assert item["additionalProperties"] is False
    assert list(item["properties"]) == item["required"]
    assert "passport_deadline" in item["properties"]["attribute"]["enum"]
    system, user = body["messages"]
    assert system["role"] == "system" and "passport_deadline" in system["content"]
    assert user["role"] == "user" and EPISODE.content in user["content"]
    state = json.loads(user["content"].split("compare against these):\n", 1)[1])
    assert {"subject": "mira", "attribute": "passport_deadline", "current_value": "2026-07-15"} in state

    # What came back: two raw candidates that, with the episode's implied fields, are valid deltas.
    assert [(c["attribute"], c["value"], c["op"], c["decision"]) for c in candidates] == [
        ("passport_deadline", "2026-06-30", "assert", "change"),
        ("response_style", "concise", "assert", "new"),
    ]
    assert candidates[0]["evidence"] == ["my passport deadline moved from July 15 to June 30, 2026"]
    for raw in candidates:
        fields = {k: v for k, v in raw.items() if k not in PROVENANCE_KEYS}
        delta = MemoryDelta.model_validate({**implied_fields(EPISODE), **fields})
        assert delta.subject == "mira" and delta.valid_from == EPISODE.occurred_at
        default_schema().coerce(delta.attribute, delta.value)


def test_no_key_sends_no_authorization(server: Replay, sleeps: Sleeps) -> None:
    server.play("good")
    with extractor(server.url, sleeps, api_key=None) as ex:
        ex.extract(EPISODE, CURRENT)
    assert "Authorization" not in server.requests[0]["headers"]


@pytest.mark.parametrize(
    ("name", "needles"),
    [
        ("malformed_json", ["not valid JSON"]),
        ("schema_violation", ["decision", "passport_expiry"]),
        ("invented_evidence", ["my passport expires at the end of June", "not a quote"]),
    ],
)
def test_unusable_answers_are_terminal_and_carry_the_raw_text(
    server: Replay, sleeps: Sleeps, name: str, needles: list[str]
) -> None:
    server.play(name)
    with extractor(server.url, sleeps) as ex, pytest.raises(InvalidModelOutput) as caught:
        ex.extract(EPISODE, CURRENT)
    error = caught.value
    assert isinstance(error, ExtractionError) and error.transient is False
    assert error.raw == fixture(name)["body"]["choices"][0]["message"]["content"]
    for needle in needles:
        assert needle in str(error)
    assert len(server.requests) == 1  # not retried


def test_schema_violation_names_each_problem(server: Replay, sleeps: Sleeps) -> None:
    server.play("schema_violation")
    with extractor(server.url, sleeps) as ex, pytest.raises(InvalidModelOutput) as caught:
        ex.extract(EPISODE, CURRENT)
    problems = caught.value.problems
    assert any(p.startswith("candidates.0.decision") for p in problems)
    assert any("passport_expiry" in p for p in problems)


def test_refusal_is_terminal_and_names_the_refusal(server: Replay, sleeps: Sleeps) -> None:
    server.play("refusal")
    with extractor(server.url, sleeps) as ex, pytest.raises(ModelRefusal) as caught:
        ex.extract(EPISODE, CURRENT)
    assert caught.value.transient is False
    assert "I'm sorry, but I can't assist with that request." in str(caught.value)
    assert caught.value.refusal == "I'm sorry, but I can't assist with that request."
    assert len(server.requests) == 1


def test_500_then_success_is_retried_with_backoff(server: Replay, sleeps: Sleeps) -> None:
    server.play("error_500", "error_500", "good")
    with extractor(server.url, sleeps) as ex:
        candidates = ex.extract(EPISODE, CURRENT)
        assert ex.attempts == 3
    assert len(candidates) == 2 and len(server.requests) == 3
    assert sleeps == [0.25, 0.5]  # exponential backoff
    assert server.requests[0]["body"] == server.requests[2]["body"]  # the same request again


def test_429_honours_retry_after(server: Replay, sleeps: Sleeps) -> None:
    server.play("rate_limited_429", "good")
    with extractor(server.url, sleeps) as ex:
        assert len(ex.extract(EPISODE, CURRENT)) == 2
        assert ex.attempts == 2
    assert sleeps == [1.0]


def test_persistent_5xx_gives_up_as_transient(server: Replay, sleeps: Sleeps) -> None:
    server.play("error_500", "error_500", "error_500")
    with extractor(server.url, sleeps, max_retries=2) as ex, pytest.raises(
        TransientExtractionError
    ) as caught:
        ex.extract(EPISODE, CURRENT)
    assert caught.value.transient is True and not isinstance(caught.value, EndpointUnavailable)
    assert "HTTP 500" in str(caught.value) and "gave up after 3 attempts" in str(caught.value)
    assert len(server.requests) == 3


def test_other_4xx_is_not_retried(server: Replay, sleeps: Sleeps) -> None:
    server.play("bad_request_400", "good")
    with extractor(server.url, sleeps) as ex, pytest.raises(EndpointError) as caught:
        ex.extract(EPISODE, CURRENT)
    assert caught.value.transient is False and caught.value.status == 400
    assert "Invalid schema for response_format" in str(caught.value)
    assert len(server.requests) == 1 and sleeps == []


def test_an_answer_that_is_not_a_chat_completion_is_terminal(server: Replay, sleeps: Sleeps) -> None:
    server.play("not_chat_completion")
    with extractor(server.url, sleeps) as ex, pytest.raises(EndpointError) as caught:
        ex.extract(EPISODE, CURRENT)
    assert caught.value.transient is False and "did not answer with a chat completion" in str(caught.value)


def test_timeout_is_retried_then_transient(server: Replay, sleeps: Sleeps) -> None:
    server.play("good", "good", delay=3.0)
    with extractor(server.url, sleeps, timeout=0.2, max_retries=1) as ex, pytest.raises(
        TransientExtractionError
    ) as caught:
        ex.extract(EPISODE, CURRENT)
    assert caught.value.transient is True
    assert "did not answer within 0.2 s" in str(caught.value)
    assert len(server.requests) == 2 and sleeps == [0.25]


def test_timeout_then_success(server: Replay, sleeps: Sleeps) -> None:
    server.play("good", delay=3.0)
    server.play("good")
    with extractor(server.url, sleeps, timeout=0.2) as ex:
        assert len(ex.extract(EPISODE, CURRENT)) == 2
        assert ex.attempts == 2


def _closed_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_connection_refused_is_a_clear_transient_error(sleeps: Sleeps) -> None:
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    with extractor(url, sleeps, max_retries=2) as ex, pytest.raises(EndpointUnavailable) as caught:
        ex.extract(EPISODE, CURRENT)
    message = str(caught.value)
    assert message.startswith(f"no OpenAI-compatible endpoint at {url}: start it or set SGAM_LLM_BASE_URL")
    assert caught.value.transient is True and isinstance(caught.value, ExtractionError)
    assert ex.attempts == 3 and sleeps == [0.25, 0.5]


def test_configuration_from_environment(monkeypatch: pytest.MonkeyPatch, server: Replay) -> None:
    monkeypatch.setenv("SGAM_LLM_BASE_URL", server.url + "/")
    monkeypatch.setenv("SGAM_LLM_MODEL", "qwen2.5:7b-instruct")
    monkeypatch.setenv("SGAM_LLM_API_KEY", "sk-env")
    settings = Settings()
    assert "sk-env" not in repr(settings)  # the key is a secret
    server.play("good")
    with OpenAICompatibleExtractor.from_settings(settings) as ex:
        assert ex.url == server.url + "/chat/completions" and ex.max_retries == 3 and ex.timeout == 30
        assert len(ex.extract(EPISODE, CURRENT)) == 2
    assert server.requests[0]["body"]["model"] == "qwen2.5:7b-instruct"
    assert server.requests[0]["headers"]["Authorization"] == "Bearer sk-env"


def test_missing_configuration_says_what_to_set(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("SGAM_LLM_BASE_URL", "SGAM_LLM_MODEL", "SGAM_LLM_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    with pytest.raises(ExtractionError, match="set SGAM_LLM_BASE_URL"):
        OpenAICompatibleExtractor.from_settings(Settings())
    with pytest.raises(ExtractionError, match="set SGAM_LLM_MODEL"):
        OpenAICompatibleExtractor("http://127.0.0.1:1/v1", "")

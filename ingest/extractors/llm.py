"""An extractor for free text through any OpenAI-compatible chat-completions endpoint.

Works with every server that speaks ``POST {base_url}/chat/completions`` with a JSON-schema
``response_format``: OpenAI, vLLM (XGrammar), Ollama (``http://127.0.0.1:11434/v1``), llama.cpp,
LiteLLM... The model is given the rules, the schema's attributes, the episode and the values SGAM
currently stores, and must answer with the strict reasoning schema of :mod:`sgam.ingest.extractors.sgr`.

Errors, each an :class:`~sgam.graph.errors.ExtractionError` whose ``transient`` tells a worker what
to do:

* :class:`EndpointUnavailable` (transient): nothing listens at the base URL (after the retries);
* :class:`TransientExtractionError` (transient): 429, 5xx, time-outs or dropped connections that
  outlasted the retries;
* :class:`EndpointError` (terminal): any other HTTP error (400, 401, 404...) or an answer that is
  not a chat completion; not retried;
* :class:`ModelRefusal` (terminal): the model refused;
* :class:`~sgam.ingest.extractors.sgr.InvalidModelOutput` (terminal): malformed JSON, a schema-violating
  object, or reasoning that the episode or the store contradicts; ``raw`` holds the model's text.

Configuration: ``SGAM_LLM_BASE_URL``, ``SGAM_LLM_MODEL``, ``SGAM_LLM_API_KEY`` (see
:class:`sgam.settings.Settings` and :meth:`OpenAICompatibleExtractor.from_settings`).
"""

from __future__ import annotations

import email.utils
import json
import time
from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from typing import Any

import httpx

from sgam.graph.errors import ExtractionError
from sgam.graph.models import Episode
from sgam.graph.schema import Schema, default_schema

from sgam.ingest.extract import CurrentState, RawCandidate
from sgam.ingest.extractors.sgr import (
    InvalidModelOutput,
    current_state_json,
    describe_schema,
    parse_result,
    response_format,
    to_raw_candidates,
)

RETRY_STATUS = frozenset({429}) | frozenset(range(500, 600))
"""HTTP statuses worth retrying: 429 (rate limit) and 5xx. Other 4xx are the request's fault."""


class TransientExtractionError(ExtractionError):
    """An extraction that failed for a reason that may pass: retry the episode later."""

    transient = True


class EndpointUnavailable(TransientExtractionError):
    """No server answers at the configured base URL (connection refused, unknown host)."""

    def __init__(self, base_url: str, cause: Exception | None = None) -> None:
        self.base_url = base_url
        detail = f" ({type(cause).__name__}: {cause})" if cause is not None else ""
        super().__init__(
            f"no OpenAI-compatible endpoint at {base_url}: start it or set SGAM_LLM_BASE_URL{detail}"
        )


class EndpointError(ExtractionError):
    """The endpoint answered with an error that retrying will not fix (bad request, key, model)."""

    transient = False

    def __init__(self, message: str, *, status: int | None = None, body: str = "") -> None:
        self.status = status
        self.body = body
        super().__init__(message)


class ModelRefusal(ExtractionError):
    """The model refused to answer (``message.refusal``); terminal, ``refusal`` holds its words."""

    transient = False

    def __init__(self, refusal: str) -> None:
        self.refusal = refusal
        self.raw = refusal
        super().__init__(f"the model refused to extract from this episode: {refusal}")


SYSTEM_PROMPT = """\
You extract durable facts for an AI agent's memory from one episode (a message, tool result, \
event or document). Only facts that fit the schema below can be stored.

For every statement in the episode that sets, changes, corrects or repeats the value of a schema \
attribute, add one candidate, filling its fields in this order:
1. evidence: the exact words from the episode that state the fact, copied character for \
character (no paraphrase, no added words). Quotes that are not in the episode reject the answer.
2. subject: the id of the entity the fact is about. If the current state lists the same entity, \
use its id exactly; otherwise a short lowercase id (letters, digits, '_', '-', '.', ':', '@'), \
e.g. "mira". subject_type: its entity type, or null when the attribute allows only one type.
3. attribute: the schema attribute the evidence is about.
4. compared_with: the current_value listed in the current state for this subject and attribute, \
copied exactly; null if none is listed.
5. decision:
   - "new": nothing is stored yet (or, for a set of values, this value is not in the set);
   - "change": the stored value was true but the world changed, the new value holds from now \
(or from the time the episode gives);
   - "correction": the stored value was wrong all along and the new value replaces it (only \
for attributes that hold one value at a time);
   - "same": the episode repeats what is stored;
   - "not_memorable": nothing worth remembering.
6. delta: value in the attribute's type; op "assert" for new and change, "correct" for \
correction, null for same and not_memorable; valid_from only if the episode says when the value \
became true (YYYY-MM-DD or an ISO 8601 datetime with timezone), otherwise null.

Do not invent facts, attributes or entities. If nothing in the episode fits the schema, answer \
{"candidates": []}.

"""


def _user_message(episode: Episode, current: CurrentState) -> str:
    return (
        f"Episode {episode.id} ({episode.kind.value} by {episode.actor}, at "
        f"{episode.occurred_at.isoformat()}):\n"
        f"<<<\n{episode.content}\n>>>\n\n"
        "Current state (values SGAM stores now; compare against these):\n"
        f"{current_state_json(current)}"
    )


def _retry_after(response: httpx.Response) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (seconds or an HTTP date), if any."""
    header = response.headers.get("retry-after")
    if not header:
        return None
    try:
        return max(0.0, float(header))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(header)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return max(0.0, (when - datetime.now(timezone.utc)).total_seconds())


def _snippet(text: str, limit: int = 500) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


class OpenAICompatibleExtractor:
    """The :class:`~sgam.ingest.extract.Extractor` for free text through structured output.

    ``base_url`` is the API root (``https://api.openai.com/v1``, ``http://127.0.0.1:8000/v1`` for
    vLLM, ``http://127.0.0.1:11434/v1`` for Ollama). ``timeout`` bounds each phase of one request
    (connect, send, each read) in seconds; transient failures are retried up to ``max_retries``
    times with exponential backoff from ``backoff`` seconds (doubling, capped at ``max_backoff``), or
    after the server's ``Retry-After``. ``temperature=None`` leaves it out of the request (for models
    that accept only their default). Use it as a context manager or call :meth:`close`.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        timeout: float = 30.0,
        max_retries: int = 3,
        schema: Schema | None = None,
        *,
        temperature: float | None = 0.0,
        backoff: float = 0.5,
        max_backoff: float = 30.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if not base_url:
            raise ExtractionError(
                "no OpenAI-compatible endpoint configured: set SGAM_LLM_BASE_URL "
                "(e.g. http://127.0.0.1:11434/v1 for Ollama)"
            )
        if not model:
            raise ExtractionError("no model configured: set SGAM_LLM_MODEL (e.g. gpt-4o-mini)")
        if max_retries < 0 or timeout <= 0:
            raise ValueError("max_retries must be >= 0 and timeout > 0")
        self.base_url = base_url.rstrip("/")
        self.url = f"{self.base_url}/chat/completions"
        self.model = model
        self.name = f"openai-compatible:{model}"
        self.schema = schema if schema is not None else default_schema()
        self.timeout = timeout
        self.max_retries = max_retries
        self.temperature = temperature
        self.backoff = backoff
        self.max_backoff = max_backoff
        self._sleep = sleep
        self.attempts = 0
        """HTTP requests made by the last :meth:`extract` call (1 + retries)."""
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        self._client = httpx.Client(headers=headers, timeout=httpx.Timeout(timeout))
        self._response_format = response_format(self.schema)

    @classmethod
    def from_settings(cls, settings: Any = None, schema: Schema | None = None,
                      **kwargs: Any) -> OpenAICompatibleExtractor:
        """Build from :class:`sgam.settings.Settings` (``SGAM_LLM_*`` environment variables)."""
        if settings is None:
            from sgam.settings import Settings

            settings = Settings()
        key = settings.llm_api_key
        return cls(
            base_url=settings.llm_base_url or "",
            model=settings.llm_model or "",
            api_key=key.get_secret_value() if key is not None else None,
            timeout=settings.llm_timeout,
            max_retries=settings.llm_max_retries,
            schema=schema,
            **kwargs,
        )

    # -- lifecycle ----------------------------------------------------------------------------

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> OpenAICompatibleExtractor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the Extractor protocol ---------------------------------------------------------------

    def request_body(self, episode: Episode, current: CurrentState) -> dict[str, Any]:
        """The chat-completions request for ``episode`` (what :meth:`extract` sends)."""
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [
                {"role": "system", "content": SYSTEM_PROMPT + describe_schema(self.schema)},
                {"role": "user", "content": _user_message(episode, current)},
            ],
            "response_format": self._response_format,
        }
        if self.temperature is not None:
            body["temperature"] = self.temperature
        return body

    def extract(self, episode: Episode, current: CurrentState) -> Sequence[RawCandidate]:
        """Raw candidates for ``episode``, compared against ``current``; see the module for errors."""
        content = self._complete(self.request_body(episode, current))
        result = parse_result(content, schema=self.schema, episode=episode, current=current)
        return to_raw_candidates(result, episode)

    # -- HTTP ---------------------------------------------------------------------------------

    def _delay(self, attempt: int, response: httpx.Response | None) -> float:
        wait = self.backoff * (2 ** attempt)
        if response is not None:
            hinted = _retry_after(response)
            if hinted is not None:
                wait = hinted
        return min(wait, self.max_backoff)

    def _complete(self, body: dict[str, Any]) -> str:
        """POST ``body`` with retries; the assistant message's content."""
        self.attempts = 0
        last: ExtractionError | None = None
        last_response: httpx.Response | None = None
        for attempt in range(self.max_retries + 1):
            if attempt:
                self._sleep(self._delay(attempt - 1, last_response))
            last_response = None
            self.attempts += 1
            try:
                response = self._client.post(self.url, json=body)
            except httpx.ConnectError as exc:
                last = EndpointUnavailable(self.base_url, exc)
                continue
            except httpx.TimeoutException as exc:
                last = TransientExtractionError(
                    f"{self.url} did not answer within {self.timeout:g} s ({type(exc).__name__})"
                )
                continue
            except httpx.TransportError as exc:
                last = TransientExtractionError(
                    f"the connection to {self.url} failed ({type(exc).__name__}: {exc})"
                )
                continue
            if response.status_code in RETRY_STATUS:
                last_response = response
                last = TransientExtractionError(
                    f"{self.url} answered HTTP {response.status_code}: {_snippet(response.text)}"
                )
                continue
            if response.status_code >= 400:
                raise EndpointError(
                    f"{self.url} answered HTTP {response.status_code} for model {self.model!r}: "
                    f"{_snippet(response.text)}",
                    status=response.status_code,
                    body=response.text,
                )
            return self._content(response)
        assert last is not None
        if self.max_retries:
            last.args = (f"{last.args[0]} (gave up after {self.attempts} attempts)",)
        raise last

    def _content(self, response: httpx.Response) -> str:
        """``choices[0].message.content``, or the refusal / envelope error."""
        try:
            payload = response.json()
            choice = payload["choices"][0]
            message = choice["message"]
        except (ValueError, KeyError, IndexError, TypeError):
            raise EndpointError(
                f"{self.url} did not answer with a chat completion: {_snippet(response.text)}",
                status=response.status_code,
                body=response.text,
            ) from None
        if not isinstance(message, dict):
            raise EndpointError(f"{self.url}: choices[0].message is not an object",
                                status=response.status_code, body=response.text)
        refusal = message.get("refusal")
        if refusal:
            raise ModelRefusal(str(refusal))
        content = message.get("content")
        if not isinstance(content, str) or not content.strip():
            raise InvalidModelOutput(
                "the model returned no content",
                raw=json.dumps(message, ensure_ascii=False),
                problems=[f"finish_reason {choice.get('finish_reason')!r}"],
            )
        if choice.get("finish_reason") == "length":
            # Cut off by the token limit: the JSON is almost surely incomplete; say why if so.
            try:
                json.loads(content)
            except ValueError as exc:
                raise InvalidModelOutput(
                    "the model's answer was cut off by its token limit (finish_reason 'length')",
                    raw=content,
                    problems=[str(exc)],
                ) from None
        return content

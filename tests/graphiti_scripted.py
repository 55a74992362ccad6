"""A scripted graphiti-core LLM client for contract tests: recorded answers, no network.

Answers are looked up by the name of the response model graphiti asks for (``ExtractedEntities``,
``ExtractedEdges``) in a fixture file of ``tests/fixtures/graphiti/``; an answer given as
``{"raise": "RefusalError"}`` raises graphiti's error of that name instead (``httpx.<Name>`` an
httpx one; graphiti itself retries rate limits for minutes, so tests use a dropped connection).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sgam.ingest.graphiti.env import load_graphiti

load_graphiti()

import httpx  # noqa: E402
from graphiti_core.llm_client import LLMClient, errors  # noqa: E402

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "graphiti"


def fixture(name: str) -> dict[str, Any]:
    return json.loads((FIXTURES / f"{name}.json").read_text(encoding="utf-8"))


class ScriptedLLM(LLMClient):
    """Returns the recorded answer for each response model; records the prompts it was given."""

    def __init__(self, script: dict[str, Any]) -> None:
        super().__init__(None)
        self.script = script
        self.prompts: dict[str, str] = {}

    async def _generate_response(self, messages, response_model=None, max_tokens=0,  # type: ignore[no-untyped-def]
                                 model_size=None, **kwargs):
        name = response_model.__name__ if response_model is not None else "none"
        self.prompts[name] = "\n".join(m.content for m in messages)
        answer = self.script[name]
        if isinstance(answer, dict) and "raise" in answer:
            module, _, error = answer["raise"].rpartition(".")
            raise getattr(httpx if module == "httpx" else errors, error)(answer.get("message", "scripted"))
        return answer

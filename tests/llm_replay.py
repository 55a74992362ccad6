"""A loopback chat-completions server that replays a script of recorded responses.

Used by the extractor's contract tests (tests/unit/test_llm_extractor.py) and by the end-to-end
ingest tests. It listens on 127.0.0.1 only, answers each POST with the next response of its script
(tests/fixtures/llm/*.json, or bodies built by a test) and records what the client sent.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "llm"


def fixture(name: str) -> dict[str, Any]:
    return json.loads((FIXTURES / f"{name}.json").read_text(encoding="utf-8"))


class Replay:
    """A loopback chat-completions server that plays back a script of recorded responses."""

    def __init__(self) -> None:
        self.script: list[dict[str, Any]] = []
        self.requests: list[dict[str, Any]] = []
        self.released = threading.Event()
        replay = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                try:
                    length = int(self.headers.get("Content-Length", "0"))
                    raw = self.rfile.read(length)
                    replay.requests.append(
                        {"path": self.path, "headers": dict(self.headers), "body": json.loads(raw)}
                    )
                    step = replay.script.pop(0) if replay.script else {"status": 599, "body": {}}
                    if step.get("delay"):
                        replay.released.wait(step["delay"])
                    text = step.get("body_text")
                    data = (text if text is not None else json.dumps(step["body"])).encode()
                    self.send_response(step["status"])
                    for key, value in step.get("headers", {}).items():
                        self.send_header(key, value)
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (time-out test)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    def play(self, *names: str, **overrides: Any) -> None:
        for name in names:
            self.script.append({**fixture(name), **overrides})

    def close(self) -> None:
        self.released.set()
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[Replay]:
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(var, raising=False)
    replay = Replay()
    replay.thread.start()
    try:
        yield replay
    finally:
        replay.close()

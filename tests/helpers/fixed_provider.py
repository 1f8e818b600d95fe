"""A real OpenAI-compatible chat endpoint whose replies a test chooses (real model text, on a thread)."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from tests.helpers.paths import TESTS

REAL = TESTS / "reply_corpus" / "authoring-v1"
SEEDS = [0, 1]


def real_reply(slot: int) -> str:
    """A real model's reply to authoring prompt version 1 (tests/reply_corpus/authoring-v1/)."""
    return (REAL / f"slot_{slot}.txt").read_text()


def http_registry(tmp_path: Path, base: str, name: str = "real") -> Path:
    path = tmp_path / "models.yaml"
    path.write_text(f"models:\n  - name: {name}\n    model: openai/{name}\n    api_base: {base}\n    client: fast\n")
    return path


@contextmanager
def provider(answer: Callable[[str], str]) -> Iterator[tuple[str, list[dict]]]:
    """An OpenAI-compatible chat endpoint on a thread: ``answer(user message) -> reply``; yields (api_base,
    the request bodies it received)."""
    with provider_of(lambda body: (answer(body["messages"][-1]["content"]),
                                   {"prompt_tokens": 10, "completion_tokens": 20})) as served:
        yield served


@contextmanager
def provider_of(respond: Callable[[dict], tuple[str, dict]]) -> Iterator[tuple[str, list[dict]]]:
    """The endpoint behind :func:`provider`: ``respond(request body) -> (reply text, usage)``, called on the
    server's threads after the body is recorded; yields (api_base, the request bodies it received)."""
    bodies: list[dict] = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            bodies.append(body)
            text, usage = respond(body)
            data = json.dumps({"id": "x", "object": "chat.completion", "model": body["model"],
                               "choices": [{"index": 0, "finish_reason": "stop",
                                            "message": {"role": "assistant", "content": text}}],
                               "usage": usage}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1", bodies
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def http_registry(tmp_path: Path, base: str, name: str = "real") -> Path:
    path = tmp_path / "models.yaml"
    path.write_text(f"models:\n  - name: {name}\n    model: openai/{name}\n    api_base: {base}\n    client: fast\n")
    return path

"""A scripted OpenAI-compatible completions server: it returns exactly the tokens of the scripted
replies (the reply for a prompt is chosen by how many assistant turns the prompt already has), and
`GET /v1/models` names the model as `vllm serve` does. Subclasses choose replies another way (`reply`)."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Sequence


def send_json(handler: BaseHTTPRequestHandler, payload: dict) -> None:
    data = json.dumps(payload).encode()
    handler.send_response(200)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)


class LoopbackServer:
    """An HTTP server on a free loopback port, serving from a thread while in its `with` block."""

    def _serve(self, handler: type[BaseHTTPRequestHandler]) -> None:
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()


class ScriptedCompletionsServer(LoopbackServer):
    def __init__(self, tokenizer, end_of_turn_id: int, replies: Sequence[str] = (),
                 assistant_marker: str = "<|im_start|>assistant", model: str = "scripted"):
        self.tok = tokenizer
        self.eot = end_of_turn_id
        self.replies = [self.encode(r) for r in replies]
        self.marker = tokenizer.encode(assistant_marker, add_special_tokens=False)
        self.requests: list[dict] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def _send(self, payload: dict):
                send_json(self, payload)

            def do_GET(self):  # noqa: N802 - http.server's naming
                if self.path != "/v1/models":
                    self.send_error(404)
                    return
                self._send({"object": "list", "data": [{"id": model, "object": "model"}]})

            def do_POST(self):  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.requests.append(body)
                if self.path != "/v1/completions":
                    self.send_error(404)
                    return
                ids = server.reply(self.headers.get("X-Request-Id", ""), body)[: body["max_tokens"]]
                reason = "stop" if ids and ids[-1] == server.eot else "length"
                self._send({"choices": [{"index": 0, "text": server.tok.decode(ids), "token_ids": ids,
                                         "logprobs": {"token_logprobs": [-0.25] * len(ids)},
                                         "finish_reason": reason}]})

            def log_message(self, *args):
                pass

        self._serve(Handler)

    def encode(self, text: str) -> list[int]:
        """A reply's tokens: exactly the text's, then the end of the turn."""
        return self.tok.encode(text, add_special_tokens=False) + [self.eot]

    def reply(self, request_id: str, body: dict) -> list[int]:
        return self.reply_for(body["prompt"])

    def reply_for(self, prompt: list[int]) -> list[int]:
        m, n = self.marker, 0
        for i in range(len(prompt) - len(m) + 1):
            if prompt[i: i + len(m)] == m:
                n += 1
        return self.replies[min(n - 1, len(self.replies) - 1)]

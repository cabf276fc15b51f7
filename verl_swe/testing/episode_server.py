"""An OpenAI-compatible completions server scripted per episode: `script(episode_id)` gives that episode's
replies, and turn t gets the t-th (the agent names each request `<episode_id>-<turn>` in X-Request-Id).
Like ScriptedCompletionsServer it answers with exactly the tokens of the scripted text, and `GET /v1/models`
names the model as `vllm serve` does."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable, Sequence


class EpisodeScriptedServer:
    def __init__(self, tokenizer, end_of_turn_id: int, script: Callable[[str], Sequence[str]], model: str = "scripted"):
        self.requests: list[tuple[str, dict]] = []  # (X-Request-Id, body)
        server = self

        def reply(request_id: str, max_tokens: int) -> list[int]:
            episode, _, turn = request_id.rpartition("-")
            replies = script(episode)
            text = replies[min(int(turn), len(replies) - 1)]
            return (tokenizer.encode(text, add_special_tokens=False) + [end_of_turn_id])[:max_tokens]

        class Handler(BaseHTTPRequestHandler):
            def _send(self, payload: dict):
                data = json.dumps(payload).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):  # noqa: N802 - http.server's naming
                if self.path != "/v1/models":
                    self.send_error(404)
                    return
                self._send({"object": "list", "data": [{"id": model, "object": "model"}]})

            def do_POST(self):  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                request_id = self.headers.get("X-Request-Id", "")
                server.requests.append((request_id, body))
                if self.path != "/v1/completions":
                    self.send_error(404)
                    return
                ids = reply(request_id, body["max_tokens"])
                self._send({"choices": [{"index": 0, "text": tokenizer.decode(ids), "token_ids": ids,
                                         "logprobs": {"token_logprobs": [-0.25] * len(ids)},
                                         "finish_reason": "stop" if ids and ids[-1] == end_of_turn_id else "length"}]})

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
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

"""A scripted OpenAI-compatible chat server: `POST /v1/chat/completions` answers with the next scripted text,
as given (an int in the script answers with that HTTP status instead), and records every request."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler
from typing import Sequence

from verl_swe.testing.openai_server import LoopbackServer, send_json


class ScriptedChatServer(LoopbackServer):
    def __init__(self, answers: Sequence[str | int], model: str = "scripted-judge"):
        self.answers = list(answers)
        self.requests: list[dict] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 - http.server's naming
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                if self.path != "/v1/chat/completions":
                    self.send_error(404)
                    return
                with server.lock:
                    server.requests.append(body)
                    answer = server.answers[min(len(server.requests), len(server.answers)) - 1]
                if isinstance(answer, int):
                    self.send_error(answer)
                    return
                send_json(self, {"model": model, "choices": [{"index": 0, "finish_reason": "stop",
                                 "message": {"role": "assistant", "content": answer}}]})

            def log_message(self, *args):
                pass

        self.lock = threading.Lock()
        self._serve(Handler)

    @property
    def url(self) -> str:
        return super().url + "/v1"

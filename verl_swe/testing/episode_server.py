"""An OpenAI-compatible completions server scripted per episode: `script(episode_id)` gives that episode's
replies, and turn t gets the t-th (the agent names each request `<episode_id>-<turn>` in X-Request-Id).
Like ScriptedCompletionsServer, whose serving it shares, it answers with exactly the tokens of the scripted
text."""

from __future__ import annotations

from typing import Callable, Sequence

from verl_swe.testing.openai_server import ScriptedCompletionsServer


class EpisodeScriptedServer(ScriptedCompletionsServer):
    def __init__(self, tokenizer, end_of_turn_id: int, script: Callable[[str], Sequence[str]], model: str = "scripted"):
        super().__init__(tokenizer, end_of_turn_id, model=model)
        self.script = script

    def reply(self, request_id: str, body: dict) -> list[int]:
        episode, _, turn = request_id.rpartition("-")
        replies = self.script(episode)
        return self.encode(replies[min(int(turn), len(replies) - 1)])

"""An oracle policy: it reaches a task's gold patch with the agent's own commands, then submits.

Used to collect demonstration trajectories (the CPU pipeline's RFT data, tests): for each changed file
it opens the file at the change, makes each change with `edit START:END` (bottom-up, so line numbers
stay valid), runs the tests and submits. It is an `LLMClient`: it answers with exactly the tokens of
its scripted replies, one per turn, like any model would.

`hasty_replies` is the same agent making the mistake a weak model makes: it opens the right file, skips the
edit, runs the tests and submits anyway (a well-formed episode the grader fails). The learning run's start
policy imitates both (bench/learning.py), so it has a real choice for RL to learn.
"""

from __future__ import annotations

import re
from typing import Callable

from verl_swe.agent.llm import Generation, Sampling
from verl_swe.tasks import Task
from verl_swe.tasks.patches import split_patch

_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+\d+(?:,\d+)? @@")


def _changes(diff_text: str) -> list[tuple[int, int, list[str]]]:
    """(first old line, old lines replaced, new lines) for each run of changed lines of one file diff."""
    changes, old_line, run = [], 0, None
    for line in diff_text.splitlines():
        m = _HUNK.match(line)
        if m:
            old_line, run = int(m.group(1)), None
            continue
        if not old_line or line.startswith(("\\", "---", "+++")):
            continue
        if not line.startswith(("-", "+")):  # context (a blank context line may have lost its space)
            run = None
            old_line += 1
            continue
        if run is None:
            run = [old_line, 0, []]
            changes.append(run)
        if line.startswith("-"):
            run[1] += 1
            old_line += 1
        else:
            run[2].append(line[1:])
    return [(start, n, new) for start, n, new in changes]


def oracle_replies(task: Task) -> list[str]:
    """The paper-format replies (reasoning, then one ```command block) that solve `task`."""
    replies = []
    for diff in split_patch(task.patch):
        if diff.old_path is None or diff.new_path is None:
            raise ValueError(f"{task.instance_id}: the oracle edits existing files only ({diff.paths})")
        path, changes = diff.new_path, _changes(diff.text)
        replies.append(f"The issue points at {path}. Let me look at the code.\n"
                       f"```command\nopen {path} {changes[0][0]}\n```")
        for start, n, new in sorted(changes, reverse=True):
            body = "\n".join(new)
            replies.append(f"This is the faulty code; I will fix it.\n```command\n"
                           f"edit --file {path} {start}:{start + n - 1} << 'EOF'\n{body}\nEOF\n```")
    replies += _test_and_submit()
    return replies


def hasty_replies(task: Task) -> list[str]:
    """The oracle's first reply, then its last two: it looks at the faulty code and submits it unfixed."""
    return oracle_replies(task)[:1] + _test_and_submit()


def _test_and_submit() -> list[str]:
    return ["Let me run the tests.\n```command\npython -m pytest -q 2>&1 | tail -3\n```",
            "The fix is done.\n```command\nsubmit\n```"]


class OraclePolicy:
    """An LLMClient for one task: returns the tokens of `plan(task)`, one reply per turn."""

    def __init__(self, tokenizer, end_of_turn_id: int, task: Task, plan: Callable[[Task], list[str]] = oracle_replies):
        self.replies = [tokenizer.encode(r, add_special_tokens=False) + [end_of_turn_id]
                        for r in plan(task)]

    async def generate(self, prompt_ids: list[int], sampling: Sampling, request_id: str) -> Generation:
        turn = int(request_id.rsplit("-", 1)[1])  # run_episode names requests "<episode>-<turn>"
        ids = self.replies[min(turn, len(self.replies) - 1)][: sampling.max_tokens]
        return Generation(ids, [0.0] * len(ids), "stop" if len(ids) and ids[-1] == self.replies[0][-1] else "length")


class OracleForTasks:
    """The oracle as one LLMClient for many tasks (a rollout over a task list): each request goes to the
    policy of its task, read from the request id `<instance_id>.<i>-<turn>` that rollout() and
    run_episode() give it."""

    def __init__(self, tokenizer, end_of_turn_id: int, tasks: list[Task],
                 plan: Callable[[Task], list[str]] = oracle_replies):
        self.policies = {t.instance_id: OraclePolicy(tokenizer, end_of_turn_id, t, plan) for t in tasks}

    async def generate(self, prompt_ids: list[int], sampling: Sampling, request_id: str) -> Generation:
        instance_id = request_id.rsplit("-", 1)[0].rsplit(".", 1)[0]
        return await self.policies[instance_id].generate(prompt_ids, sampling, request_id)

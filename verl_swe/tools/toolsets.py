"""Tool sets: how the agent writes actions (paper format or native tool calls), by registered name.

A tool set documents its commands for the system prompt, gives tool schemas to the chat template
when it uses native tool calling, and parses a response into one action. Register your own with
`@register_tool_set("name")` and select it with `tool_set: name` in the agent loop's YAML.
"""

from __future__ import annotations

import importlib
from typing import Callable, Literal

from verl_swe.tools.parsing import SPECIAL, parse_fenced, parse_tool_call
from verl_swe.types import Action, FormatError

_TOOL_SETS: dict[str, Callable[[], "ToolSet"]] = {}


def register_tool_set(name: str):
    def wrap(cls):
        _TOOL_SETS[name] = cls
        return cls
    return wrap


def get_tool_set(name: str) -> "ToolSet":
    """A registered name, or `package.module:Class` for a tool set that is not registered."""
    if name in _TOOL_SETS:
        return _TOOL_SETS[name]()
    if ":" in name:
        module, _, attr = name.partition(":")
        return getattr(importlib.import_module(module), attr)()
    raise KeyError(f"unknown tool set {name!r}; registered: {', '.join(sorted(_TOOL_SETS))}")


class ToolSet:
    name = "base"
    observation_role: Literal["user", "tool"] = "user"

    def instructions(self) -> str:
        raise NotImplementedError

    def schemas(self) -> list[dict] | None:
        return None

    def parse(self, text: str) -> Action | FormatError:
        raise NotImplementedError


COMMAND_DOCS = """\
- Any non-interactive shell command (ls, cat, grep, find, python, pip, git, ...). Commands time out, and interactive programs (editors, REPLs) see no input.
- open FILE [LINE]: show FILE in a window of 100 lines, starting around LINE.
- goto LINE: move the window of the open file to LINE.
- scroll_down / scroll_up: move the window by 100 lines.
- create FILENAME: create an empty file and open it.
- edit [--file PATH] START:END << 'EOF'
  <replacement lines>
  EOF
  replaces lines START..END (inclusive) of the open file (or PATH) with the replacement lines; END = START - 1 inserts before START. Indentation must be exact.
- replace [--replace-all] SEARCH REPLACE: replace SEARCH by REPLACE in the open file (quote arguments with spaces).
- search_file TERM [FILE]: list the lines of the open file (or FILE) that contain TERM.
- submit: finish; your changes (git diff of the repository) are submitted for grading."""


@register_tool_set("paper")
class PaperToolSet(ToolSet):
    """The paper's scaffold: reasoning, then exactly one ```command block per turn (App. F)."""

    name = "paper"

    def instructions(self) -> str:
        return ("Each response: first think about what to do, then give exactly ONE command in a fenced block:\n"
                "```command\n<the command>\n```\n\nCommands:\n" + COMMAND_DOCS)

    def parse(self, text: str) -> Action | FormatError:
        return parse_fenced(text)


def _fn(name: str, description: str, props: dict | None = None, required: list[str] | None = None) -> dict:
    return {"type": "function", "function": {"name": name, "description": description, "parameters": {
        "type": "object", "properties": props or {}, "required": required or []}}}


_INT = {"type": "integer"}
_STR = {"type": "string"}
NATIVE_SCHEMAS = [
    _fn("bash", "Run a non-interactive shell command in the repository.", {"command": _STR}, ["command"]),
    _fn("open", "Show a file in a 100-line window, around a line.", {"path": _STR, "line": _INT}, ["path"]),
    _fn("goto", "Move the window of the open file to a line.", {"line": _INT}, ["line"]),
    _fn("scroll_down", "Move the window down by 100 lines."),
    _fn("scroll_up", "Move the window up by 100 lines."),
    _fn("create", "Create an empty file and open it.", {"path": _STR}, ["path"]),
    _fn("edit", "Replace lines start..end (inclusive) of the open file, or of path, with replacement; "
                "end = start - 1 inserts.", {"start": _INT, "end": _INT, "replacement": _STR, "path": _STR},
        ["start", "end", "replacement"]),
    _fn("replace", "Replace text in the open file.", {"search": _STR, "replace": _STR, "replace_all": {"type": "boolean"}},
        ["search", "replace"]),
    _fn("search_file", "List the lines of the open file (or path) that contain term.", {"term": _STR, "path": _STR},
        ["term"]),
    _fn("submit", "Finish and submit your changes (the git diff of the repository) for grading."),
]
assert {s["function"]["name"] for s in NATIVE_SCHEMAS} == {"bash", *SPECIAL}


@register_tool_set("native")
class NativeToolSet(ToolSet):
    """The same operations as tool schemas, called Hermes-style (`<tool_call>` JSON)."""

    name = "native"
    observation_role = "tool"

    def instructions(self) -> str:
        return "Use the tools to explore, edit and test the repository. Call exactly one tool per turn."

    def schemas(self) -> list[dict]:
        return NATIVE_SCHEMAS

    def parse(self, text: str) -> Action | FormatError:
        return parse_tool_call(text, {s["function"]["name"] for s in NATIVE_SCHEMAS}, NATIVE_SCHEMAS)

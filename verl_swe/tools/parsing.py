"""Turn the model's text into one `Action`, or a `FormatError` that says how to fix the format.

Two formats: the paper's (free reasoning, then exactly one ```command block; App. F) and native
tool calls (Hermes-style `<tool_call>{"name": ..., "arguments": {...}}</tool_call>`, as Qwen's chat
template renders them). Both produce the same actions, so the agent-computer interface runs either.
"""

from __future__ import annotations

import json
import re
import shlex

from verl_swe.types import Action, FormatError

MAX_ACTION_CHARS = 100_000  # a longer command is almost surely a degenerate generation
SPECIAL = ("open", "goto", "scroll_up", "scroll_down", "create", "edit", "replace", "search_file", "submit")

_FENCE = re.compile(r"```command[ \t]*\n(.*?)```", re.S)
_ANY_FENCE_OPEN = re.compile(r"```command\b")
_EDIT = re.compile(r"^edit(?:\s+--file\s+(?P<path>\S+))?\s+(?P<start>\d+):(?P<end>\d+)\s*(?P<rest>.*)$", re.S)
_HEREDOC = re.compile(r"^<<\s*(?P<q>['\"]?)(?P<tag>\w+)(?P=q)[ \t]*\n(?P<body>.*?)\n?(?P=tag)[ \t]*$", re.S)

FORMAT_HELP = ("Your response must contain exactly one command, in a fenced block that starts with ```command "
               "on its own line and ends with ```. Think first, then give the single command.")


def parse_fenced(text: str) -> Action | FormatError:
    """The single ```command block of a paper-format response."""
    blocks = _FENCE.findall(text)
    if not blocks:
        if _ANY_FENCE_OPEN.search(text):
            return FormatError(f"Your command block is not closed. {FORMAT_HELP}")
        return FormatError(f"No command found. {FORMAT_HELP}")
    if len(blocks) > 1:
        return FormatError(f"Found {len(blocks)} command blocks; only one command per turn is allowed. {FORMAT_HELP}")
    return parse_command(blocks[0].strip("\n"))


def parse_command(command: str) -> Action | FormatError:
    """A command line: one of the special commands, or anything else for the shell."""
    if not command.strip():
        return FormatError(f"The command block is empty. {FORMAT_HELP}")
    if len(command) > MAX_ACTION_CHARS:
        return FormatError(f"The command is {len(command)} characters long; the limit is {MAX_ACTION_CHARS}.")
    name = command.split(None, 1)[0]
    if name not in SPECIAL:
        return Action("bash", {"command": command}, command)
    try:
        return Action(name, _special_args(name, command), command)
    except ValueError as e:
        return FormatError(str(e))


def _ints(args: list[str], n_max: int, usage: str) -> list[int]:
    if len(args) > n_max or not all(a.lstrip("-").isdigit() for a in args):
        raise ValueError(f"Usage: {usage}")
    return [int(a) for a in args]


def _special_args(name: str, command: str) -> dict:
    if name == "edit":
        return _edit_args(command)
    try:
        words = shlex.split(command)[1:]
    except ValueError as e:
        raise ValueError(f"Could not parse the arguments of {name}: {e}") from None
    if name == "open":
        if not 1 <= len(words) <= 2:
            raise ValueError("Usage: open FILE [LINE]")
        return {"path": words[0], "line": _ints(words[1:], 1, "open FILE [LINE]")[0] if len(words) == 2 else None}
    if name == "goto":
        if len(words) != 1:
            raise ValueError("Usage: goto LINE")
        return {"line": _ints(words, 1, "goto LINE")[0]}
    if name in ("scroll_up", "scroll_down", "submit"):
        if words:
            raise ValueError(f"{name} takes no arguments")
        return {}
    if name == "create":
        if len(words) != 1:
            raise ValueError("Usage: create FILENAME")
        return {"path": words[0]}
    if name == "search_file":
        if not 1 <= len(words) <= 2:
            raise ValueError("Usage: search_file TERM [FILE]")
        return {"term": words[0], "path": words[1] if len(words) == 2 else None}
    # replace [--replace-all] SEARCH REPLACE
    replace_all = bool(words) and words[0] == "--replace-all"
    words = words[1:] if replace_all else words
    if len(words) != 2:
        raise ValueError("Usage: replace [--replace-all] SEARCH REPLACE (quote arguments that contain spaces)")
    return {"search": words[0], "replace": words[1], "replace_all": replace_all}


def _edit_args(command: str) -> dict:
    m = _EDIT.match(command.strip())
    if not m:
        raise ValueError("Usage: edit [--file PATH] START:END << 'EOF'\\n<replacement lines>\\nEOF")
    start, end, rest = int(m["start"]), int(m["end"]), m["rest"]
    if start < 1 or end < start - 1:
        raise ValueError(f"edit {start}:{end}: lines start at 1 and END must be >= START - 1 (START - 1 inserts)")
    heredoc = _HEREDOC.match(rest)
    if heredoc:
        replacement = heredoc["body"]
    elif rest.startswith("<<"):
        raise ValueError("The heredoc of edit is not terminated: end it with its tag (e.g. EOF) on its own line")
    else:
        replacement = rest
    return {"path": m["path"], "start": start, "end": end, "replacement": replacement}


_TOOL_CALL = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.S)
TOOL_HELP = 'Call exactly one tool per turn as <tool_call>{"name": ..., "arguments": {...}}</tool_call>.'


def parse_tool_call(text: str, tool_names: set[str], schemas: list[dict] | None = None) -> Action | FormatError:
    """The single Hermes-style tool call of a native-tool response; with `schemas`, its arguments are checked
    against the called tool's (so the tools only ever see the types they declare)."""
    calls = _TOOL_CALL.findall(text)
    if not calls:
        return FormatError(f"No tool call found. {TOOL_HELP}")
    if len(calls) > 1:
        return FormatError(f"Found {len(calls)} tool calls; only one per turn is allowed. {TOOL_HELP}")
    if len(calls[0]) > MAX_ACTION_CHARS:
        return FormatError(f"The tool call is {len(calls[0])} characters long; the limit is {MAX_ACTION_CHARS}.")
    try:
        call = json.loads(calls[0])
    except json.JSONDecodeError as e:
        return FormatError(f"The tool call is not valid JSON ({e}). {TOOL_HELP}")
    if not isinstance(call, dict) or not isinstance(call.get("name"), str):
        return FormatError(f"The tool call needs a string 'name'. {TOOL_HELP}")
    name, args = call["name"], call.get("arguments", {})
    if isinstance(args, str):  # some models emit the arguments as a JSON string
        try:
            args = json.loads(args)
        except json.JSONDecodeError:
            return FormatError(f"The arguments of {name} are not a JSON object. {TOOL_HELP}")
    if name not in tool_names:
        return FormatError(f"Unknown tool {name!r}; the tools are: {', '.join(sorted(tool_names))}.")
    if not isinstance(args, dict):
        return FormatError(f"The arguments of {name} must be a JSON object.")
    params = next((t["function"].get("parameters", {}) for t in schemas or () if t["function"]["name"] == name), None)
    problem = check_arguments(name, args, params) if params is not None else None
    if problem:
        return FormatError(f"{problem} {TOOL_HELP}")
    return Action(name, args, json.dumps(call, ensure_ascii=False))


_JSON_TYPES = {"integer": int, "number": (int, float), "string": str, "boolean": bool, "object": dict, "array": list}


def check_arguments(name: str, args: dict, parameters: dict) -> str | None:
    """Why `args` do not fit a tool's JSON-schema parameters (required keys, no unknown keys, the declared
    types; null for an optional one), or None. A list where a string belongs would otherwise reach the tool."""
    props, required = parameters.get("properties", {}), parameters.get("required", [])
    missing = [k for k in required if k not in args]
    if missing:
        return f"{name} needs the argument(s) {', '.join(missing)}."
    for key, value in args.items():
        if key not in props:
            return f"{name} has no argument {key!r}; its arguments are: {', '.join(props) or 'none'}."
        want = props[key].get("type")
        if (value is None and key not in required) or want not in _JSON_TYPES:
            continue
        if not isinstance(value, _JSON_TYPES[want]) or (isinstance(value, bool) and want != "boolean"):
            return f"The argument {key!r} of {name} must be a JSON {want}, not {json.dumps(value)[:40]}."
    return None

"""Action parsing: the paper's ```command blocks and Hermes tool calls map to the same actions."""

import pytest

from verl_swe.tools.parsing import parse_command, parse_fenced, parse_tool_call
from verl_swe.tools.toolsets import NATIVE_SCHEMAS
from verl_swe.types import Action, FormatError

NAMES = {s["function"]["name"] for s in NATIVE_SCHEMAS}


def block(cmd: str) -> str:
    return f"I will look around first.\n```command\n{cmd}\n```\n"


@pytest.mark.parametrize("cmd,expected", [
    ("ls -la | head", Action("bash", {"command": "ls -la | head"}, "ls -la | head")),
    ("open src/a.py 30", Action("open", {"path": "src/a.py", "line": 30}, "open src/a.py 30")),
    ("open 'my file.py'", Action("open", {"path": "my file.py", "line": None}, "open 'my file.py'")),
    ("goto 12", Action("goto", {"line": 12}, "goto 12")),
    ("scroll_down", Action("scroll_down", {}, "scroll_down")),
    ("create new.py", Action("create", {"path": "new.py"}, "create new.py")),
    ("search_file 'def f' a.py", Action("search_file", {"term": "def f", "path": "a.py"}, "search_file 'def f' a.py")),
    ("replace --replace-all 'a b' c", Action("replace", {"search": "a b", "replace": "c", "replace_all": True},
                                             "replace --replace-all 'a b' c")),
    ("submit", Action("submit", {}, "submit")),
])
def test_commands(cmd, expected):
    assert parse_fenced(block(cmd)) == expected


def test_edit_heredoc_keeps_indentation_and_blank_lines():
    cmd = "edit --file pkg/m.py 3:4 << 'EOF'\n    if x:\n\n        return 1\nEOF"
    action = parse_fenced(block(cmd))
    assert action.tool == "edit"
    assert action.args == {"path": "pkg/m.py", "start": 3, "end": 4, "replacement": "    if x:\n\n        return 1"}
    assert parse_command("edit 5:4 << EOF\nnew line\nEOF").args["end"] == 4  # END = START - 1 inserts
    assert parse_command("edit 1:2").args["replacement"] == ""  # no replacement deletes the lines


@pytest.mark.parametrize("text,message", [
    ("no block at all", "No command found"),
    ("```command\nls\n```\n```command\npwd\n```", "2 command blocks"),
    ("```command\nls\n", "not closed"),
    ("```command\n\n```", "empty"),
    (block("goto ten"), "Usage: goto LINE"),
    (block("open"), "Usage: open FILE [LINE]"),
    (block("edit one:2 << EOF\nx\nEOF"), "Usage: edit"),
    (block("edit 3:1 << EOF\nx\nEOF"), "END must be >= START - 1"),
    (block("edit 1:1 << EOF\nx"), "not terminated"),
    (block("submit now"), "submit takes no arguments"),
    (block("replace onlyone"), "Usage: replace"),
    (block("open 'unclosed"), "Could not parse"),
])
def test_format_errors_explain_themselves(text, message):
    result = parse_fenced(text)
    assert isinstance(result, FormatError) and message in result.message, result


def test_tool_calls():
    ok = '<tool_call>\n{"name": "edit", "arguments": {"start": 1, "end": 1, "replacement": "x"}}\n</tool_call>'
    assert parse_tool_call(ok, NAMES) == Action("edit", {"start": 1, "end": 1, "replacement": "x"},
                                                '{"name": "edit", "arguments": {"start": 1, "end": 1, "replacement": "x"}}')
    as_string = '<tool_call>{"name": "bash", "arguments": "{\\"command\\": \\"ls\\"}"}</tool_call>'
    assert parse_tool_call(as_string, NAMES).args == {"command": "ls"}
    for text, message in [("none", "No tool call"), ("<tool_call>{bad</tool_call>", "not valid JSON"),
                          ('<tool_call>{"name": "rm"}</tool_call>', "Unknown tool 'rm'"),
                          ('<tool_call>{"name": "bash"}</tool_call>' * 2, "2 tool calls"),
                          ('<tool_call>{"arguments": {}}</tool_call>', "string 'name'")]:
        result = parse_tool_call(text, NAMES)
        assert isinstance(result, FormatError) and message in result.message, (text, result)


def test_tool_call_arguments_are_checked_against_the_schema():
    # Wrong types reach no tool: a list as edit's replacement would otherwise crash the viewer code.
    def parse(args):
        return parse_tool_call(f'<tool_call>{{"name": "edit", "arguments": {args}}}</tool_call>', NAMES, NATIVE_SCHEMAS)

    assert parse('{"start": 1, "end": 1, "replacement": "x", "path": null}').args["path"] is None  # optional: null ok
    for args, message in [('{"start": 1, "end": 1, "replacement": ["a"]}', "'replacement' of edit must be a JSON string"),
                          ('{"start": "1", "end": 1, "replacement": "x"}', "'start' of edit must be a JSON integer"),
                          ('{"start": true, "end": 1, "replacement": "x"}', "must be a JSON integer"),
                          ('{"start": 1, "replacement": "x"}', "needs the argument(s) end"),
                          ('{"start": 1, "end": 1, "replacement": "x", "mode": 2}', "no argument 'mode'")]:
        result = parse(args)
        assert isinstance(result, FormatError) and message in result.message, (args, result)

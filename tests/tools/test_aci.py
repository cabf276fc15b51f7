"""The paper's commands on a real sandbox (docker and local): what the agent sees and what changes."""

import pytest

from verl_swe.sandbox import open_sandbox
from verl_swe.tools.aci import ACI
from verl_swe.tools.parsing import parse_command

CODE = "".join(f"line {i}\n" for i in range(1, 251))


@pytest.fixture
async def aci(backend, make_config, tmp_path):
    src = tmp_path / "repo"
    (src / "pkg").mkdir(parents=True)
    (src / "pkg" / "m.py").write_text(CODE)
    cfg = make_config(source_dir=src) if backend == "local" else make_config()
    async with open_sandbox(cfg) as box:
        if cfg.backend == "docker":
            await box.exec("mkdir -p /testbed/pkg")
            await box.write_file("/testbed/pkg/m.py", CODE)
        await box.exec("cd /testbed && git init -q && git add -A && git -c user.email=a@b -c user.name=a commit -qm base")
        yield ACI(box, command_timeout_s=5)


async def run(aci, command: str) -> str:
    return await aci.run(parse_command(command))


async def test_viewer_window_and_prompt_line(aci):
    out = await run(aci, "open pkg/m.py 120")
    assert out.startswith("[File: /testbed/pkg/m.py (250 lines total)]\n(69 more lines above)\n70:line 70\n")
    assert out.endswith("169:line 169\n(81 more lines below)")
    assert aci.prompt_line() == "(Current directory: /testbed, current file: /testbed/pkg/m.py) bash-$"
    assert (await run(aci, "scroll_down")).splitlines()[2] == "151:line 151"
    assert (await run(aci, "scroll_up")).splitlines()[2] == "51:line 51"  # from the clamped 151
    assert (await run(aci, "goto 1")).splitlines()[1] == "1:line 1"
    assert "out of range" in await run(aci, "goto 999")
    assert "not found" in await run(aci, "open nope.py")


async def test_edit_replace_create_search_and_the_patch(aci):
    assert "No file open" in await run(aci, "edit 1:1 << 'EOF'\nx\nEOF")
    await run(aci, "open pkg/m.py")
    out = await run(aci, "edit 2:3 << 'EOF'\n    two\n    three\n    extra\nEOF")
    assert "File updated" in out and "2:    two\n3:    three\n4:    extra\n5:line 4" in out
    assert "Replaced 1" in await run(aci, "replace 'line 10\n' 'line ten\n'")
    assert "occurs" in await run(aci, "replace 'line 2' X")  # line 2, 20..29, 200..: ambiguous
    assert (await run(aci, "search_file ten")).startswith('Found 1 matches for "ten" in /testbed/pkg/m.py:\nLine 11:')
    assert "[File: /testbed/new.py (0 lines total)]" == await run(aci, "create new.py")
    assert "already exists" in await run(aci, "create new.py")
    await run(aci, "edit 1:0 << 'EOF'\nprint('hi')\nEOF")
    patch = await aci.patch()
    assert "+    extra" in patch and "-line 10" in patch and "+++ b/new.py" in patch and "+print('hi')" in patch


async def test_shell_state_errors_and_bad_output(aci):
    assert await run(aci, "cd pkg && export A=1") == "[no output]"
    assert aci.prompt_line().startswith("(Current directory: /testbed/pkg,")
    assert (await run(aci, "echo $A")).strip() == "1"
    assert "not found" in await run(aci, "frobnicate --now")  # an unknown command is the shell's business
    assert "\ufffd" in await run(aci, "printf 'bad \\377\\376 bytes'")  # non-UTF-8 output is replaced, not fatal
    assert "timed out after 5 s" in await run(aci, "sleep 30")
    assert (await run(aci, "echo still here")).strip() == "still here"


async def test_paths_the_viewer_cannot_use_are_observations(aci):
    # Common model mistakes, not sandbox faults: each is said to the agent and the episode goes on.
    assert "/testbed/pkg is a directory; use ls" in await run(aci, "open pkg")
    assert "is a directory" in await run(aci, "search_file x pkg")
    assert "not a regular file (character special file)" in await run(aci, "open /dev/zero")  # never read to the end
    await run(aci, "truncate -s 9M big.log")
    assert "more than the file commands read" in await run(aci, "open big.log")
    assert "Could not write /testbed/pkg/m.py/x" in await run(aci, "create pkg/m.py/x")
    assert (await run(aci, "open pkg/m.py 2")).startswith("[File: /testbed/pkg/m.py (250 lines total)]")

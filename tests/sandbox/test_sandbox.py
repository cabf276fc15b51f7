"""Behaviour of a sandbox that every backend must show: the shell, the limits, the faults."""

from __future__ import annotations

import asyncio

import pytest

from verl_swe.sandbox import SandboxError, open_sandbox


async def test_shell_state_persists_between_commands(make_config):
    async with open_sandbox(make_config()) as sb:
        r = await sb.exec("mkdir -p sub && cd sub && export GREETING=hello && pwd")
        assert r.exit_code == 0 and r.output.strip() == "/testbed/sub"
        r = await sb.exec('pwd; echo "$GREETING"')
        assert r.output.split() == ["/testbed/sub", "hello"]


async def test_exit_code_and_stderr_are_reported(make_config):
    async with open_sandbox(make_config()) as sb:
        r = await sb.exec("echo out; echo err >&2; exit 7")
        assert r.exit_code == 7
        assert "out" in r.output and "err" in r.output
        # `exit` ends the shell: a fresh one takes over and says state was reset.
        assert "restarted" in r.output
        r = await sb.exec("echo alive; false")
        assert (r.exit_code, r.output.strip()) == (1, "alive")


async def test_output_without_newline_and_multiline_commands(make_config):
    async with open_sandbox(make_config()) as sb:
        r = await sb.exec("printf 'no newline'")
        assert r.output == "no newline"
        script = "cat > f.py <<'EOF'\nprint('it''s \"quoted\"')\nEOF\npython3 f.py"
        r = await sb.exec(script)
        assert r.exit_code == 0 and r.output.strip() == 'its "quoted"'


async def test_timeout_kills_the_command_and_everything_it_started(make_config):
    async with open_sandbox(make_config()) as sb:
        await sb.exec("sleep 1000 & echo $! > /tmp/earlier.pid")  # started before: must survive
        await asyncio.sleep(0.1)  # process start times have a resolution of 10 ms
        r = await sb.exec("sleep 300 & echo $! > /tmp/bg.pid; (sleep 400; touch /tmp/ran); touch /tmp/after",
                          timeout=1)
        assert r.timed_out and r.exit_code == 137
        assert "timed out after 1 s" in r.output
        # The rest of the command line was abandoned, its background child is dead, the earlier job
        # lives, and the shell kept its state.
        r = await sb.exec("ls /tmp/ran /tmp/after 2>/dev/null; kill -0 $(cat /tmp/bg.pid) 2>/dev/null && echo bg-alive; "
                          "kill -0 $(cat /tmp/earlier.pid) && echo earlier-alive; pwd")
        # bash may report the killed background job here, as a terminal would ("line 1: 11 Killed sleep 300")
        lines = [line for line in r.output.splitlines() if "Killed" not in line]
        assert lines == ["earlier-alive", "/testbed"]


async def test_a_busy_shell_builtin_is_interrupted_and_the_shell_keeps_its_state(make_config):
    async with open_sandbox(make_config()) as sb:
        await sb.exec("cd /tmp")
        r = await sb.exec("while :; do :; done", timeout=1)
        assert r.timed_out and r.exit_code == 137 and "restarted" not in r.output
        assert (await sb.exec("pwd")).output == "/tmp\n"


async def test_a_shell_that_cannot_be_interrupted_is_restarted(make_config):
    async with open_sandbox(make_config()) as sb:
        await sb.exec("cd /tmp")
        r = await sb.exec("trap '' USR1; while :; do :; done", timeout=1)
        assert r.timed_out and "restarted" in r.output
        r = await sb.exec("echo ok; pwd")
        assert r.output.split() == ["ok", "/testbed"]


async def test_huge_output_keeps_head_and_tail_and_says_what_was_cut(make_config):
    cfg = make_config(output_head_bytes=1000, output_tail_bytes=500)
    async with open_sandbox(cfg) as sb:
        r = await sb.exec("echo FIRST; seq 1 200000; echo LAST")
        assert r.truncated and r.exit_code == 0
        assert r.output.startswith("FIRST\n1\n2\n") and r.output.rstrip().endswith("199999\n200000\nLAST")
        assert "output truncated" in r.output and "bytes cut" in r.output
        assert len(r.output) < 1000 + 500 + 300


async def test_output_flood_is_killed_not_read_forever(make_config):
    cfg = make_config(output_head_bytes=100, output_tail_bytes=100, kill_after_output_bytes=2_000_000)
    async with open_sandbox(cfg) as sb:
        r = await sb.exec("yes", timeout=120)
        assert r.truncated and not r.timed_out and r.exit_code != 0
        assert (await sb.exec("echo fine")).output == "fine\n"


async def test_binary_output_is_decoded_with_replacement(make_config):
    async with open_sandbox(make_config()) as sb:
        r = await sb.exec(r"printf 'ok \377\376 end'")
        assert r.output == "ok \ufffd\ufffd end"


async def test_interactive_programs_do_not_hang(make_config):
    async with open_sandbox(make_config()) as sb:
        r = await sb.exec("python3; cat; read line; echo done", timeout=20)
        assert not r.timed_out and r.output.strip().endswith("done")


async def test_no_network(make_config):
    async with open_sandbox(make_config()) as sb:
        r = await sb.exec(
            "python3 -c \"import socket; s = socket.socket(); s.settimeout(3); s.connect(('1.1.1.1', 80))\"",
            timeout=20,
        )
        assert r.exit_code != 0 and "unreachable" in r.output.lower()
        r = await sb.exec("python3 -c 'import socket; print(*[n for _, n in socket.if_nameindex()])'")
        assert r.output.split() == ["lo"]


async def test_host_files_and_env_are_invisible(make_config, monkeypatch, tmp_path):
    monkeypatch.setenv("VERL_SWE_SECRET_TOKEN", "hunter2")
    secret = tmp_path / "secret.txt"
    secret.write_text("host secret")
    async with open_sandbox(make_config()) as sb:
        r = await sb.exec("env")
        assert r.exit_code == 0 and "PATH=" in r.output and "hunter2" not in r.output
        r = await sb.exec(f"cat {secret}")
        assert r.exit_code != 0 and "host secret" not in r.output
        assert (await sb.exec("ls /work/main /root/.pyenv")).exit_code != 0


async def test_read_and_write_files_binary_safe(make_config):
    payload = bytes(range(256)) * 64
    async with open_sandbox(make_config()) as sb:
        await sb.write_file("/tmp/deep/dir/blob.bin", payload)
        assert await sb.read_bytes("/tmp/deep/dir/blob.bin") == payload
        await sb.write_file("notes.txt", "héllo\n")  # relative to the shell's cwd
        assert await sb.read_file("/testbed/notes.txt") == "héllo\n"
        assert (await sb.exec("cat notes.txt")).output == "héllo\n"
        with pytest.raises(FileNotFoundError, match="/nope"):
            await sb.read_file("/nope")
        with pytest.raises(SandboxError, match="directory"):
            await sb.read_file("/tmp")


async def test_memory_hog_is_contained(make_config):
    from verl_swe.sandbox import Limits

    async with open_sandbox(make_config(limits=Limits(memory_mb=128))) as sb:
        r = await sb.exec("python3 -c 'x = bytearray(1 << 30); print(len(x))'", timeout=60)
        assert r.exit_code != 0 and "1073741824" not in r.output
        assert (await sb.exec("echo still here")).output == "still here\n"


async def test_commands_run_concurrently_in_separate_sandboxes(make_config):
    async def one(i: int) -> str:
        async with open_sandbox(make_config()) as sb:
            await sb.exec(f"echo {i} > mine")
            return (await sb.exec("cat mine")).output.strip()

    assert await asyncio.gather(*(one(i) for i in range(8))) == [str(i) for i in range(8)]


async def test_quick_edits_are_never_hidden_by_stale_bytecode(make_config):
    # Same size, same second: Python's .pyc check (mtime + size) cannot tell these two files apart.
    async with open_sandbox(make_config()) as sb:
        await sb.write_file("mod.py", "X = 1\n")
        assert (await sb.exec("python3 -c 'import mod; print(mod.X)'")).output == "1\n"
        await sb.write_file("mod.py", "X = 2\n")
        assert (await sb.exec("python3 -c 'import mod; print(mod.X)'")).output == "2\n"


async def test_a_sandbox_killed_from_outside_reports_itself_dead(make_config, backend, tmp_path):
    from verl_swe.sandbox import SandboxDied
    from verl_swe.sandbox.gc import gc

    async with open_sandbox(make_config()) as sb:
        running = asyncio.ensure_future(sb.exec("sleep 1000", timeout=600))
        await asyncio.sleep(0.3)
        # What an operator does: `docker rm -f` the container, or `gc --all` the (test's own) local sandboxes.
        if backend == "docker":
            from verl_swe.sandbox.docker import docker_client, remove_container

            remove_container(docker_client(), sb.id)
        else:
            gc(everything=True, docker=False, state_dir=tmp_path / "sandboxes")
        with pytest.raises(SandboxDied):
            await asyncio.wait_for(running, 30)
        assert not sb.alive
        with pytest.raises(SandboxDied):
            await sb.exec("echo hello")

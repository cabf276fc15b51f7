"""The docker backend: one container per sandbox, the persistent shell attached to its main process.

The container's command is the shell supervisor (under docker's tini as PID 1), and the host attaches
to its stdin/stdout before starting it: one HTTP upgrade instead of a `docker exec` per call, and
no exec at all on the start path. Removal is `rm -f` (SIGKILL), never a 10 s `docker stop`.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import struct

from verl_swe.sandbox import reaper
from verl_swe.sandbox.base import Sandbox
from verl_swe.sandbox.config import LABEL, DockerSandboxConfig, owner_id
from verl_swe.sandbox.shell import KILLTREE, PersistentShell, SandboxError, supervisor_script

logger = logging.getLogger(__name__)


@functools.lru_cache(maxsize=8)
def docker_client(docker_host: str | None = None):
    import docker  # the SDK is light, but only docker users need it

    if docker_host:
        return docker.DockerClient(base_url=docker_host)
    return docker.from_env()


class _DockerStream:
    """Reads docker's multiplexed attach stream (8-byte frame headers) as one byte stream."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        self._reader, self._writer = reader, writer

    async def read(self) -> bytes:
        try:
            header = await self._reader.readexactly(8)
            _, size = struct.unpack(">BxxxL", header)
            return await self._reader.readexactly(size)
        except (asyncio.IncompleteReadError, ConnectionError):
            return b""

    async def write(self, data: bytes) -> None:
        # A dead container shows up as end of stream on the next read; no error from here.
        if self._writer.is_closing():
            return
        try:
            self._writer.write(data)
            if self._writer.transport.get_write_buffer_size() > 1 << 20:
                await self._writer.drain()
        except (ConnectionError, RuntimeError):
            pass

    def close(self) -> None:
        self._writer.close()


async def _in_thread(fn, *args, **kwargs):
    """Run blocking SDK calls off the event loop. If the caller is cancelled, still wait for the call to
    finish (a container created after we stopped waiting would leak), then re-raise the cancellation."""
    fut = asyncio.get_running_loop().run_in_executor(None, functools.partial(fn, *args, **kwargs))
    try:
        return await asyncio.shield(fut)
    except asyncio.CancelledError:
        try:
            await fut
        except Exception:
            pass
        raise


class DockerSandbox(Sandbox):
    def __init__(self, config: DockerSandboxConfig):
        super().__init__(config)
        self._client = docker_client(config.docker_host)
        self._stream: _DockerStream | None = None
        self._container_id: str | None = None
        self._freezer: reaper.Freezer | None = None  # the container's cgroup, when the host can reach it

    async def _start(self) -> None:
        import docker.errors

        c = self.config
        nonce = PersistentShell.new_nonce()
        try:
            container = await _in_thread(
                self._client.api.create_container,
                image=c.image,
                name=self._id,
                command=["sh", "-c", supervisor_script(nonce, c.workdir)],
                stdin_open=True,
                environment={"LANG": "C.UTF-8", **c.env},
                labels={LABEL: "1", f"{LABEL}.owner": owner_id(), **({f"{LABEL}.run": c.run} if c.run else {}),
                        **c.labels},
                host_config=self._client.api.create_host_config(
                    init=True,
                    network_mode="bridge" if c.network else "none",
                    mem_limit=f"{c.limits.memory_mb}m",
                    memswap_limit=f"{c.limits.memory_mb}m",
                    nano_cpus=int(c.limits.cpus * 1e9),
                    pids_limit=c.limits.pids,
                ),
            )
        except docker.errors.ImageNotFound as e:
            raise SandboxError(
                f"docker image {c.image!r} not found; build it (envs/base/build.sh for the base image, "
                f"`verl-swe envs build` for task images)"
            ) from e
        self._container_id = container["Id"]
        sock = await _in_thread(
            self._client.api.attach_socket,
            self._container_id,
            params={"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1},
        )
        raw = getattr(sock, "_sock", sock)
        reader, writer = await asyncio.open_connection(sock=raw)
        self._stream = _DockerStream(reader, writer)
        await _in_thread(self._client.api.start, self._container_id)
        self._shell = PersistentShell(self._stream, nonce, c.workdir, self._kill)
        await self._shell.start()
        self._freezer = await _in_thread(self._find_freezer)

    def _find_freezer(self) -> reaper.Freezer | None:
        pid = self._client.api.inspect_container(self._container_id)["State"].get("Pid") or 0
        freezer = reaper.Freezer.of_process(pid, self._container_id) if pid else None
        if freezer is None:
            _warn_fallback_once(self._client.api.base_url)
        return freezer

    async def _kill(self, shell_pid: int, since_cs: int, kill_shell: bool) -> None:
        if self._freezer is not None:
            await _in_thread(reaper.kill_command, self._freezer, shell_pid, since_cs, kill_shell)
            return

        # Fallback: runs inside the container, so pids and /proc are the container's own.
        def run() -> None:
            api = self._client.api
            exec_id = api.exec_create(
                self._container_id,
                ["sh", "-c", KILLTREE, "killtree", str(shell_pid), str(since_cs), "kill-shell" if kill_shell else ""],
            )
            api.exec_start(exec_id)

        try:
            await _in_thread(run)
        except Exception as e:  # the container may be gone already; the shell read will tell
            logger.warning("killing processes in %s failed: %s", self._id, e)

    async def _death_cause(self) -> str:
        import docker.errors

        try:
            state = (await _in_thread(self._client.api.inspect_container, self._id))["State"]
        except docker.errors.NotFound:
            return "removed"  # by someone else: `sandbox gc`, an operator
        except docker.errors.DockerException:
            return "engine"  # the engine does not answer
        if state.get("OOMKilled"):
            return "oom"  # the sandbox's memory limit: what its commands did
        if state.get("Running"):
            return "engine"  # the container runs but our attach stream broke: the engine's side
        # Its main process ended: e.g. a command killed the shell's supervisor. (A `docker kill` from outside looks
        # the same from here; without evidence of an outside cause, it stays the agent's: see shell.AGENT_CAUSES.)
        return "exited"

    async def _cpu_seconds(self) -> float | None:
        if self._container_id is None:
            return None
        stats = await _in_thread(self._client.api.stats, self._container_id, stream=False, one_shot=True)
        total = ((stats or {}).get("cpu_stats") or {}).get("cpu_usage", {}).get("total_usage")
        return round(total / 1e9, 3) if total else None  # a stopped container reports no counter

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._shell is not None:
            self._shell.dead = True
        await self._record_usage()
        if self._stream is not None:
            self._stream.close()
        await _in_thread(remove_container, self._client, self._id)


@functools.lru_cache(maxsize=None)
def _warn_fallback_once(engine: str) -> None:
    logger.warning("docker engine %s: this host cannot freeze its containers' cgroups (a remote engine, or a "
                   "driver in another pid namespace); a timed-out command is killed from inside the container "
                   "instead, which a fast fork bomb can outrun", engine)


def remove_container(client, name_or_id: str) -> bool:
    """Remove it (SIGKILL); False when it was already gone or another caller is removing it."""
    import docker.errors

    try:
        client.api.remove_container(name_or_id, force=True, v=True)
        return True
    except docker.errors.NotFound:
        return False
    except docker.errors.APIError as e:
        if "already in progress" not in str(e):
            raise
        return False

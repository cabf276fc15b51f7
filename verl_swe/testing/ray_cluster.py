"""A real multi-node Ray cluster on one machine, made with `ray start` (a head and worker nodes, each its own
raylet with its own resources and temp dir), for the cluster tests and the load-and-faults benchmark.

`kill_node` SIGKILLs a worker node's raylet and every process of the node, as a crashed machine would go (a
worker whose raylet alone died can live on for tens of seconds and finish its calls); the head then marks the
node dead. Processes are found by the
node's own temp dir in their command line (and their children), so only this cluster's are ever signalled.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

RAY = str(Path(sys.executable).with_name("ray"))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def _children(pid: int) -> list[int]:
    try:
        out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout
    except OSError:
        return []
    return [int(p) for p in out.split()]


@dataclass
class Node:
    name: str
    temp_dir: Path
    resources: dict
    node_id: str = ""

    def processes(self) -> list[int]:
        """This node's processes: those naming its temp dir, and their descendants."""
        mark = str(self.temp_dir).encode()
        roots = [int(p) for p in os.listdir("/proc") if p.isdigit() and mark in _cmdline(int(p))]
        seen, todo = set(), list(roots)
        while todo:
            pid = todo.pop()
            if pid not in seen and pid != os.getpid():
                seen.add(pid)
                todo += _children(pid)
        return sorted(seen)

    def raylet(self) -> int | None:
        mark = str(self.temp_dir).encode()
        for pid in self.processes():
            cmd = _cmdline(pid)
            if b"raylet" in cmd.split(b"\0")[0] and mark in cmd:
                return pid
        return None


@dataclass
class LocalRayCluster:
    """`with LocalRayCluster(workers=2, sandbox_slots=64) as c: ray.init(address=c.address)`."""

    workers: int = 2
    sandbox_slots: int = 64  # the verl_swe_sandbox resource of every node (the head's too, unless 0)
    head_slots: int | None = None
    num_cpus: int = 1
    object_store_mb: int = 80
    env: dict = field(default_factory=dict)
    nodes: list[Node] = field(default_factory=list)
    address: str = ""

    def __post_init__(self):
        self.root = Path(tempfile.mkdtemp(prefix="vsray-"))  # short: Ray's socket paths must stay < 108 bytes

    def _env(self) -> dict:
        # No memory monitor: on a shared machine it kills this cluster's workers for other jobs' memory use.
        return {**os.environ, "RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0",
                "RAY_memory_monitor_refresh_ms": "0", **self.env}

    def _start(self, node: Node, head: bool) -> None:
        args = [RAY, "start", "--num-cpus", str(self.num_cpus), "--resources", json.dumps(node.resources),
                "--object-store-memory", str(self.object_store_mb << 20), "--temp-dir", str(node.temp_dir),
                "--disable-usage-stats"]
        if head:
            args += ["--head", "--port", str(self._port), "--include-dashboard=false", "--node-ip-address", "127.0.0.1"]
        else:
            args += ["--address", self.address, "--node-ip-address", "127.0.0.1"]
        out = subprocess.run(args, capture_output=True, text=True, env=self._env(), timeout=180)
        if out.returncode != 0:
            raise RuntimeError(f"ray start ({node.name}) failed:\n{out.stdout[-2000:]}\n{out.stderr[-2000:]}")
        self.nodes.append(node)

    def start(self) -> "LocalRayCluster":
        self._port = _free_port()
        self.address = f"127.0.0.1:{self._port}"
        slots = self.sandbox_slots if self.head_slots is None else self.head_slots
        head_res = {"bench_head": 1, **({"verl_swe_sandbox": slots} if slots else {})}
        self._start(Node("head", self.root / "head", head_res), head=True)
        for i in range(1, self.workers + 1):
            self._start(Node(f"w{i}", self.root / f"w{i}", {"verl_swe_sandbox": self.sandbox_slots,
                                                           f"bench_w{i}": 1}), head=False)
        return self

    def identify(self) -> None:
        """Each node's Ray node id (by its own resource), once a driver is connected."""
        import ray

        for n in ray.nodes():
            for node in self.nodes:
                if n.get("Alive") and f"bench_{node.name}" in n.get("Resources", {}):
                    node.node_id = n["NodeID"]

    def node(self, name: str) -> Node:
        return next(n for n in self.nodes if n.name == name)

    def kill_node(self, name: str, raylet_only: bool = False) -> float:
        """SIGKILL the node's raylet and every process of the node (its workers and actors with it: a machine
        lost); returns the time.time() it happened. With `raylet_only`, the raylet alone: its workers then
        live on for a while (seconds to tens of seconds, measured) and finish the calls they hold."""
        node = self.node(name)
        pid = node.raylet()
        if pid is None:
            raise RuntimeError(f"no raylet found for node {name}")
        victims = [pid] + ([] if raylet_only else [p for p in node.processes() if p != pid])
        at = time.time()
        for p in victims:
            try:
                os.kill(p, signal.SIGKILL)
            except ProcessLookupError:
                pass
        return at

    def wait_dead(self, name: str, timeout: float = 60.0) -> bool:
        import ray

        node_id = self.node(name).node_id
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not any(n["NodeID"] == node_id and n.get("Alive") for n in ray.nodes()):
                return True
            time.sleep(0.5)
        return False

    def stop(self) -> None:
        """Kill every process of every node (workers first, then the head), then remove the temp dirs."""
        for node in reversed(self.nodes):
            for pid in node.processes():
                try:
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
        time.sleep(0.5)
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> "LocalRayCluster":
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc) -> None:
        self.stop()

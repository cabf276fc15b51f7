"""The `verl-swe sandbox` commands as a user runs them."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest


def cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "verl_swe.cli", *args], capture_output=True, text=True,
                          timeout=timeout)


def test_exec_prints_output_and_returns_the_exit_code(backend):
    r = cli("sandbox", "exec", "--backend", backend, "--", "echo hello; echo oops >&2; exit 3")
    assert r.returncode == 3
    assert "hello" in r.stdout and "oops" in r.stdout


def test_exec_quotes_a_command_and_its_arguments(backend):
    r = cli("sandbox", "exec", "--backend", backend, "--", "python3", "-c", "print(1 + 1); import sys; sys.exit(4)")
    assert r.returncode == 4 and r.stdout.strip() == "2", r.stdout + r.stderr
    r = cli("sandbox", "exec", "--backend", backend, "--", "printf", "%s|", "a b", "$HOME", "it's")
    assert r.returncode == 0 and r.stdout == "a b|$HOME|it's|", r.stdout


def test_exec_without_a_command_says_how(backend):
    r = cli("sandbox", "exec", "--backend", backend)
    assert r.returncode == 2 and "--" in r.stderr


def test_exec_with_an_unknown_backend_names_it():
    r = cli("sandbox", "exec", "--backend", "podman", "--", "true")
    assert r.returncode == 2 and "podman" in r.stderr


@pytest.mark.docker
def test_exec_with_a_missing_image_says_how_to_build_it():
    r = cli("sandbox", "exec", "--image", "verl-swe/does-not-exist:1", "--", "true")
    assert r.returncode == 2 and "not found" in r.stdout and "build" in r.stdout


@pytest.mark.docker
@pytest.mark.local
def test_bench_runs_both_backends_beside_their_baselines(tmp_path):
    out = tmp_path / "bench.json"
    r = cli("sandbox", "bench", "--calls", "50", "--rounds", "2", "--sandboxes", "4", "--commands", "3",
            "--out", str(out))
    assert r.returncode == 0, r.stdout + r.stderr
    data = json.loads(out.read_text())
    by = {res["backend"]: res for res in data["results"]}
    assert set(by) == {"docker", "local"}
    for res in by.values():
        assert res["concurrent_failures"] == 0 and res["exec_ms_p50"] > 0 and res["baseline_exec_ms_p50"] > 0
    assert "exec round trip" in r.stdout


@pytest.mark.local
def test_gc_reports_what_it_did():
    r = cli("sandbox", "gc", "--no-docker")
    assert r.returncode == 0 and "removed 0 containers" in r.stdout

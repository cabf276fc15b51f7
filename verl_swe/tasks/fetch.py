"""Fetch on the host every distribution an offline build needs, for the sandbox's Python and platform.

pip resolves each step's requirements the way the sandbox's pip will (`pip download` with the target's
--python-version/--platform/--abi, wheels only). A requirement with no wheel for the target is fetched
as an sdist, resolved by a host interpreter of the same Python version, when there is one. Every sdist
fetched (and the repository itself) brings its own PEP 517 build requirements, recursively, since pip
in the sandbox builds it in an isolated environment from the same find-links directory.
"""

from __future__ import annotations

import logging
import os
import re
import subprocess
import sys
from pathlib import Path

from packaging.utils import InvalidWheelFilename, parse_wheel_filename

from verl_swe.tasks.project import ProjectError, read_sdist
from verl_swe.tasks.target import Target

logger = logging.getLogger(__name__)
FETCH_TIMEOUT_S = 1800
SDIST_SUFFIXES = (".tar.gz", ".zip", ".tar.bz2", ".tgz")
_NETWORK_ERRORS = ("NewConnectionError", "Temporary failure in name resolution", "Network is unreachable",
                   "Name or service not known", "ConnectTimeoutError", "Connection refused", "No route to host")


class FetchError(RuntimeError):
    """Something the build needs could not be fetched on the host; the message names it."""


def _pip(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "pip", "download", "--disable-pip-version-check", "--retries", "2", *args]
    logger.debug("fetching: %s (in %s)", " ".join(cmd), cwd)
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=FETCH_TIMEOUT_S,
                          env={**os.environ, "PIP_NO_INPUT": "1"})


def _errors(stderr: str) -> str:
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip().startswith("ERROR:")]
    return "; ".join(lines[-3:]) or "\n".join(stderr.strip().splitlines()[-5:])


def _unavailable(stderr: str) -> bool:
    return "No matching distribution found" in stderr or "Could not find a version that satisfies" in stderr


class Fetcher:
    """Downloads into one find-links directory `dest`; a file already there is not fetched again."""

    def __init__(self, target: Target, dest: Path):
        self.target = target
        self.dest = Path(dest)
        self.dest.mkdir(parents=True, exist_ok=True)
        self._sdists_done: set[str] = set()
        host = "%d.%d" % sys.version_info[:2]
        # Resolving sdists needs their metadata, built by a host interpreter: only one of the same version
        # evaluates their markers and version checks as the sandbox's will.
        self.host_matches = host == target.python

    def fetch(self, args: list[str], what: str, cwd: Path) -> None:
        """Fetch `args` (pip requirement arguments, relative to `cwd`) and their dependencies."""
        if not args:
            return
        proc = _pip(["-d", str(self.dest), "--only-binary=:all:", *self.target.pip_args(), *args], cwd)
        if proc.returncode and _unavailable(proc.stderr) and self.host_matches and not self._offline(proc.stderr):
            # Some requirement has no wheel for the sandbox: let pip take sdists too (built there, offline).
            logger.info("%s: no wheel for every requirement; fetching sdists too", what)
            proc = _pip(["-d", str(self.dest), "--prefer-binary", *args], cwd)
            if proc.returncode == 0:
                self._check_wheels(what)
        if proc.returncode:
            raise FetchError(self._explain(proc.stderr, args, what))
        self.fetch_sdist_build_requirements()

    def _offline(self, stderr: str) -> bool:
        return any(m in stderr for m in _NETWORK_ERRORS)

    def _explain(self, stderr: str, args: list[str], what: str) -> str:
        wanted = " ".join(args)
        if self._offline(stderr):
            return (f"could not fetch {wanted} ({what}): the host cannot reach the package index either "
                    f"({_errors(stderr)}); fetch on a machine that can, or point pip at a mirror "
                    "(PIP_INDEX_URL / pip.conf)")
        if "metadata-generation-failed" in stderr or "subprocess-exited-with-error" in stderr:
            # the backend's own exception, from the output pip quotes, says more than pip's summary
            raised = re.findall(r"^\s*(\w*(?:Error|Exception)\b.*)$", stderr, re.M)
            cause = f"{raised[-1].strip()[:300]}; " if raised else ""
            return (f"could not read the metadata of {wanted} ({what}), its build failed on the host: "
                    f"{cause}{_errors(stderr)}")
        if _unavailable(stderr):
            extra = "" if self.host_matches else (f" (sdists are not considered: the host has Python "
                                                  f"{sys.version_info[0]}.{sys.version_info[1]}, not "
                                                  f"{self.target.python}, to read their metadata)")
            return (f"could not fetch {wanted} ({what}) for the sandbox's Python {self.target.python} on "
                    f"{self.target.machine}: {_errors(stderr)}{extra}")
        return f"fetching {wanted} ({what}) failed: {_errors(stderr)}"

    def _check_wheels(self, what: str) -> None:
        supported = self.target.supported_tags()
        for whl in self.dest.glob("*.whl"):
            try:
                wheel_tags = parse_wheel_filename(whl.name)[3]
            except InvalidWheelFilename:
                continue
            if not wheel_tags & supported:
                raise FetchError(f"{whl.name} ({what}) was resolved on the host but does not install in the "
                                 f"sandbox (Python {self.target.python_full}, {self.target.machine}, glibc "
                                 f"{self.target.glibc})")

    def fetch_sdist_build_requirements(self) -> None:
        """Every sdist in `dest` is built in the sandbox: fetch its build requirements (recursively)."""
        while True:
            todo = [p for p in sorted(self.dest.iterdir())
                    if p.name.endswith(SDIST_SUFFIXES) and p.name not in self._sdists_done]
            if not todo:
                return
            for sdist in todo:
                self._sdists_done.add(sdist.name)
                try:
                    reqs = read_sdist(sdist).all_build_requires()
                except ProjectError as e:
                    raise FetchError(str(e)) from None
                self.fetch(reqs, f"build requirements of {sdist.name}", self.dest)

    def missing_from(self, output: str) -> list[str]:
        """Requirements an offline pip run said it could not find (to fetch them and build again)."""
        found = re.findall(r"No matching distribution found for ([^\s;]+)", output)
        return list(dict.fromkeys(r.strip("'\"") for r in found))

"""The integrity checks' part of a graded run in the sandbox: a random grader directory with the probe plugin,
the environment that loads it, the sentinel step after test_patch is applied (`pre.sh`), and the step right
after the test command (`post.sh`): stray processes killed, test files hashed again, files changed during
the run listed. For swebench>=5 `eval_script` rows both steps are spliced into the script, around its test
command, with xtrace off so nothing of theirs reaches the log.
"""

from __future__ import annotations

import base64
import json
import re
import secrets
import shlex
from dataclasses import dataclass, field
from importlib import resources

from verl_swe.reward.integrity.command import RunShape
from verl_swe.reward.integrity.sentinels import CANARY_WORDS, Sentinel, injection_plan, make_sentinels

MAX_RECORD_BYTES = 64 << 20
# What grading.py stages in the sandbox before the tests run. They are removed before the tests start: the
# test patch names exactly the task's tests, which would tell them from the sentinels (a running eval script
# keeps reading itself through its open file).
STAGED = ("/tmp/verl_swe_model.patch", "/tmp/verl_swe_test.patch", "/tmp/verl_swe_eval.sh")
_START = ">>>>> Start Test Output"


def _source(name: str) -> str:
    return resources.files("verl_swe.reward.integrity").joinpath(name).read_text(encoding="utf-8")


@dataclass
class Collected:
    """What the sandbox holds after the run, for the verdict."""

    record: bytes = b""
    before: dict[str, str] = field(default_factory=dict)  # test file -> sha256 after the sentinels went in
    after: dict[str, str] = field(default_factory=dict)  # test file -> sha256 right after the test command
    changed: list[str] = field(default_factory=list)  # repository files whose inode changed during the run
    injected: dict[str, str] = field(default_factory=dict)  # sentinel name -> the test file it went into
    canaries: dict[str, str] = field(default_factory=dict)  # canary name -> the test file it went into
    problems: list[str] = field(default_factory=list)  # what could not be read back
    pre_ran: bool = False  # pre.sh ran (it writes `since`)
    post_ran: bool = False  # post.sh ran to its end (it writes `post_ok`)


@dataclass
class IntegrityRun:
    """One graded run's random names and scripts."""

    shape: RunShape
    repo: str  # the repository's path in the sandbox (the workdir)
    patched: list[str]  # repository files the (guarded) model patch touches
    test_files: list[str] = field(default_factory=list)  # the task's test files: hashed before and after the run
    runner_is_code: bool = False  # pytest's or pluggy's own repository
    grader_dir: str = field(default_factory=lambda: f"/tmp/verl_swe_{secrets.token_hex(8)}")
    module: str = field(default_factory=lambda: f"_vs{secrets.token_hex(6)}")
    key_var: str = field(default_factory=lambda: f"VS{secrets.token_hex(6).upper()}")
    key: str = field(default_factory=lambda: secrets.token_hex(32))
    sentinels: list[Sentinel] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # set by the grader (e.g. a script it could not splice)
    graded: list[str] = field(default_factory=list)  # FAIL_TO_PASS + PASS_TO_PASS: the tests canaries copy first
    pads: dict[str, str] = field(default_factory=dict)  # file -> the one-time pad its canary names are listed under

    def __post_init__(self):
        if self.shape.pytest and not self.sentinels:
            self.sentinels = make_sentinels(self.shape.files, self.shape.exitfirst, self.shape.dirs)
        self.pads = {s.file: secrets.token_hex(128) for s in self.sentinels}

    def plan(self) -> dict:
        """inject.py's plan: the sentinels, and per file two canaries (none under -x / --maxfail: a must-fail
        test there ends the run)."""
        plan = injection_plan(self.sentinels, self.shape.exitfirst, self.shape.dirs)
        plan["words"] = list(CANARY_WORDS)
        plan["prefer"] = sorted({t.split("::")[-1].split("[")[0] for t in self.graded})
        for entry in plan["files"]:
            entry["canaries"] = 0 if self.shape.exitfirst else 2
            entry["pad"] = self.pads.get(entry["file"], "")
        return plan

    def canary_name(self, entry: str, listed: str) -> str | None:
        """A canary's name from inject.py's list (XOR-ed with the pad of the plan's entry it names)."""
        files = list(dict.fromkeys(s.file for s in self.sentinels))  # injection_plan's order of entries
        if not entry.isdigit() or int(entry) >= len(files):
            return None
        pad = bytes.fromhex(self.pads.get(files[int(entry)], ""))
        try:
            data = bytes.fromhex(listed)
        except ValueError:
            return None
        return bytes(a ^ b for a, b in zip(data, pad)).decode("utf-8", "replace") if len(data) <= len(pad) else None

    def _hash_to(self, name: str) -> str:
        """Shell: SHA-256 of the task's test files and of the modules the sentinels went into, to $G/<name>."""
        files = " ".join(shlex.quote(f) for f in dict.fromkeys([*self.test_files, *self.shape.files]))
        static = f"sha256sum -- {files} 2>/dev/null; " if files else ""
        return (f'{{ {static}cut -f2 "$G/injected" 2>/dev/null | while IFS= read -r f; do sha256sum -- "$f"; done; }} '
                f'2>/dev/null | sort -u -k2 > "$G/{name}"')

    @property
    def record_path(self) -> str:
        return f"{self.grader_dir}/record"

    def env_assignments(self) -> str:
        """Shell words for `env`: PYTHONPATH keeps what the environment had after the probe's directory."""
        if not self.shape.pytest:
            return ""
        return (f"PYTHONPATH={self.grader_dir}/lib${{PYTHONPATH:+:$PYTHONPATH}} "
                f"PYTEST_ADDOPTS={shlex.quote('-p ' + self.module)} {self.key_var}={self.key}")

    def files(self) -> dict[str, str]:
        """Path in the sandbox -> content, written before the model patch's tests run."""
        g = self.grader_dir
        out = {f"{g}/pre.sh": self._pre(), f"{g}/post.sh": self._post()}
        if self.shape.pytest:
            config = {"key_var": self.key_var, "record": self.record_path, "grader_dir": g, "repo": self.repo,
                      "patched": sorted(self.patched), "runner_is_code": self.runner_is_code,
                      "tests": sorted({*self.test_files, *self.shape.files})}
            probe = _source("probe.py").replace("CONFIG = {}", f"CONFIG = json.loads({json.dumps(config)!r})", 1)
            out[f"{g}/lib/{self.module}.py"] = probe
        if self.sentinels:
            out[f"{g}/inject.py"] = _source("inject.py")
        return out

    def _pre(self) -> str:
        g, repo = shlex.quote(self.grader_dir), shlex.quote(self.repo)
        lines = ["#!/bin/bash", f"cd {repo} || exit 0", f"G={g}",
                 # Field 22 of /proc/self/stat: this script's start (clock ticks since boot). post.sh kills
                 # whatever started after it that is still running.
                 'stat=$(cat /proc/self/stat 2>/dev/null); set -- ${stat##*) }; echo "${20:-0}" > "$G/since"']
        if self.sentinels:
            # The task's Python places them among the file's tests; without one (or if it fails), none go in.
            plan = base64.b64encode(json.dumps(self.plan()).encode()).decode()
            # -I -S: the standard library only (no site, no .pth files, no PYTHONPATH): a quicker start.
            lines += ['PY=$(command -v python || command -v python3)',
                      f'"$PY" -I -S "$G/inject.py" "$G" {plan} >/dev/null 2>&1 || : > "$G/injected"']
        lines.append(self._hash_to("before"))
        lines += [f'rm -f -- "$G/inject.py" "$0" {" ".join(STAGED)}', 'touch "$G/stamp"']
        return "\n".join(lines) + "\n"

    def _post(self) -> str:
        g, repo = shlex.quote(self.grader_dir), shlex.quote(self.repo)
        return "\n".join([
            "#!/bin/bash", f"G={g}", 'since=$(cat "$G/since" 2>/dev/null || echo 0)',
            # Stray processes first (a daemon the tests left could rewrite files while we read them).
            'protect=","; p=$$',
            'while [ "${p:-0}" -gt 0 ] 2>/dev/null && [ -r "/proc/$p/stat" ]; do',
            '  protect="$protect$p,"; { read -r stat < "/proc/$p/stat"; } 2>/dev/null || break',
            '  set -- ${stat##*) }; p=$2',
            'done',
            'for round in 1 2 3; do',  # builtins only (no process per /proc entry); again while kills happen
            '  found=',
            '  for d in /proc/[0-9]*; do',
            '    p=${d#/proc/}; case $protect in *",$p,"*) continue ;; esac',
            '    { read -r stat < "$d/stat"; } 2>/dev/null || continue; set -- ${stat##*) }',
            '    [ "$1" = Z ] && continue',
            '    [ "${20:-0}" -ge "$since" ] 2>/dev/null && kill -9 "$p" 2>/dev/null && found=1',
            '  done',
            '  [ -z "$found" ] && break',
            'done',
            f'cd {repo} || exit 0',
            self._hash_to("after"),
            # Inode change times cannot be set back from user space (unlike mtimes): what the run touched.
            # Only names the verdict looks at (test and runner files, .pth, packaging metadata): a suite that
            # writes thousands of data files keeps this list short.
            f'find . -path ./.git -prune -o \\( -type f -o -type l \\) -cnewer "$G/stamp" -print 2>/dev/null '
            f'| grep -E "(\\.py|\\.pth|\\.ini|\\.cfg|\\.toml)$|\\.(dist|egg)-info/" > "$G/changed"',
            'echo ok > "$G/post_ok"',
        ]) + "\n"

    def _call(self, script: str) -> str:
        """A line calling one of our scripts from an eval script, traced by nothing (the script runs under -x)."""
        return (f"{{ __vs_x=$-; set +x; }} 2>/dev/null; bash {self.grader_dir}/{script} >/dev/null 2>&1; "
                f"{{ case $__vs_x in *x*) set -x ;; esac; }} 2>/dev/null")

    def splice(self, eval_script: str) -> str | None:
        """The eval script with pre.sh before its start marker (after its own test-file restore and test_patch
        apply) and post.sh right after its test command's exit code is captured; None when it has no markers."""
        from swebench.harness.constants import END_TEST_OUTPUT, TEST_EXIT_CODE_VAR

        lines = eval_script.split("\n")
        start = next((i for i, line in enumerate(lines) if _START in line), None)
        end = next((i for i, line in enumerate(lines) if END_TEST_OUTPUT in line), None)
        if start is None or end is None or end < start:
            return None
        captured = end - 1 if lines[end - 1].startswith(f"{TEST_EXIT_CODE_VAR}=") else None
        if captured is None:
            return None
        return "\n".join([*lines[:start], self._call("pre.sh"), *lines[start:captured + 1], self._call("post.sh"),
                          *lines[captured + 1:]])

    async def read_back(self, box) -> Collected:
        out = Collected()
        g = self.grader_dir
        if self.shape.pytest:
            await box.exec(f"truncate -s \"<{MAX_RECORD_BYTES}\" {g}/record 2>/dev/null")
            try:
                out.record = await box.read_bytes(f"{g}/record", timeout=300)
            except FileNotFoundError:
                out.record = b""
        r = await box.exec(f"cd {g} 2>/dev/null && for f in since post_ok before after changed injected; do "
                           f"echo \"=== $f\"; [ -f \"$f\" ] && printf '%s\\n' \"$(<\"$f\")\"; done")
        section = None
        for line in r.output.splitlines():
            m = re.fullmatch(r"=== (\w+)", line)
            if m:
                section = m.group(1)
            elif section == "since" and line.strip():
                out.pre_ran = True
            elif section == "post_ok" and line.strip() == "ok":
                out.post_ran = True
            elif section in ("before", "after") and line.strip():
                digest, _, path = line.strip().partition(" ")
                getattr(out, section)[path.strip().lstrip("*")] = digest
            elif section == "changed" and line.strip():
                out.changed.append(line.strip()[2:] if line.startswith("./") else line.strip())
            elif section == "injected" and line.startswith("c"):
                entry, path, listed = (line.strip().split("\t") + ["", ""])[:3]
                name = self.canary_name(entry[1:], listed)
                if name and name.isidentifier():
                    out.canaries[name] = path
            elif section == "injected" and "\t" in line:
                index, _, path = line.strip().partition("\t")
                if index.isdigit() and int(index) < len(self.sentinels):  # inject.py lists plan indexes
                    out.injected[self.sentinels[int(index)].name] = path
        if r.truncated:
            out.problems.append("the list of files changed during the run was cut (too many files)")
        return out

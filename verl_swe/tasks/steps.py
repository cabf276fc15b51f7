"""An `install_config` as build steps: what each step runs in the sandbox (offline) and what it needs
fetched on the host first. Steps that cannot run offline are refused here, with the reason.

SWE-rebench / SWE-bench semantics: `pre_install` (often apt-get), then `packages` (a requirements file,
the row's pinned `requirements`, conda's environment.yml, or a list of packages), `pip_packages`, and
the `install` line (`pip install -e ".[test]"` ...), all run in the repository.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field

from verl_swe.tasks.schema import InstallConfig, Task

# A row's own pinned requirements (SWE-rebench's freeze) go beside the fetched wheels ($WHEELS), so the
# repository stays exactly as the task has it; "{wheels}" is that directory on the host.
ROW_REQUIREMENTS = "row-requirements.txt"
NETWORK_TOOLS = {"curl", "wget", "git clone", "git fetch", "git pull", "git submodule", "npm", "yarn", "cargo"}
_PIP_VALUE_FLAGS = {"-r", "--requirement", "-c", "--constraint", "-e", "--editable", "-i", "--index-url",
                    "--extra-index-url", "-f", "--find-links"}
_PIP_DROPPED_VALUE_FLAGS = {"-t", "--target", "--prefix", "--root", "--src", "-C", "--config-settings",
                            "--global-option", "--build-option", "--upgrade-strategy", "--progress-bar", "--log"}
_PIP_KEPT_FLAGS = {"--no-deps", "--pre"}


class StepError(ValueError):
    """An install_config that cannot be built here; the message names the field and the reason."""


@dataclass(frozen=True)
class Step:
    command: str  # bash, run in the repository
    fetch: tuple[str, ...] = ()  # pip requirement arguments to fetch on the host first (cwd: the repository)
    source: str = ""  # which install_config field it came from, for error messages
    local_projects: tuple[str, ...] = ()  # repository paths this step builds (".", "sub/pkg")


@dataclass
class StepPlan:
    steps: list[Step] = field(default_factory=list)
    deb_packages: list[tuple[str, str]] = field(default_factory=list)  # (package, field) that must be installed
    notes: list[str] = field(default_factory=list)  # steps dropped as no-ops offline (apt-get update ...)
    row_requirements: str | None = None  # text of ROW_REQUIREMENTS, when used


def _segments(command: str) -> list[str]:
    """`a && b; c` -> [a, b, c] (top-level separators only; quoted text stays whole)."""
    lex = shlex.shlex(command, posix=True, punctuation_chars=";&|")
    lex.whitespace_split = True
    out, cur = [], []
    try:
        tokens = list(lex)
    except ValueError:  # unbalanced quotes: leave the command whole, bash will say what is wrong
        return [command]
    for tok in tokens:
        if tok in ("&&", ";", "||", "&", "|"):
            if cur:
                out.append(cur)
            cur = []
            if tok in ("||", "|", "&"):  # pipelines and alternatives: not a plain sequence, keep it whole
                return [command]
        else:
            cur.append(tok)
    if cur:
        out.append(cur)
    return [shlex.join(s) for s in out]


def _words(segment: str) -> list[str]:
    words = shlex.split(segment)
    while words and (words[0] in ("sudo", "env") or re.fullmatch(r"\w+=.*", words[0])):
        words = words[1:]
    return words


def pip_install_args(words: list[str]) -> list[str] | None:
    """The requirement arguments of a `pip install ...` command (None when it is not one)."""
    if len(words) >= 3 and re.fullmatch(r"python[\d.]*", words[0]) and words[1:3] == ["-m", "pip"]:
        words = ["pip", *words[3:]]
    if not words or not re.fullmatch(r"pip[\d.]*", words[0]) or "install" not in words[1:2]:
        return None
    args, it = [], iter(words[2:])
    for w in it:
        flag, eq, value = w.partition("=")
        if flag in _PIP_VALUE_FLAGS:
            value = value if eq else next(it, "")
            if flag not in ("-e", "--editable"):
                args += [flag, value]
            else:
                args.append(value)
        elif flag in _PIP_DROPPED_VALUE_FLAGS:
            if not eq:
                next(it, None)
        elif w in _PIP_KEPT_FLAGS:
            args.append(w)
        elif not w.startswith("-"):
            args.append(w)
    return args


def local_paths(args: list[str]) -> list[str]:
    """Requirement arguments that are paths in the repository (`.`, `.[test]`, `./sub`), as paths."""
    out, skip = [], False
    for a in args:
        if skip:
            skip = False
            continue
        if a in _PIP_VALUE_FLAGS:
            skip = a not in ("-e", "--editable")
            continue
        if a == "." or a.startswith(("./", ".[", "../")) or (a.startswith("/") and not a.startswith("//")):
            out.append(re.sub(r"\[.*\]$", "", a) or ".")
    return out


def _classify(segment: str, where: str, plan: StepPlan) -> str | None:
    """The segment to run, or None when it is satisfied some other way; raises StepError to refuse."""
    words = _words(segment)
    if not words:
        return segment
    head = words[0]
    if head in ("apt-get", "apt", "aptitude"):
        sub = next((w for w in words[1:] if not w.startswith("-")), "")
        if sub in ("update", "clean", "autoremove", "autoclean"):
            plan.notes.append(f"{where}: `{segment}` skipped (nothing to do without a network)")
            return None
        if sub == "install":
            pkgs = [w.split("=")[0] for w in words[2:] if not w.startswith("-") and w != "install"]
            plan.deb_packages += [(p, where) for p in pkgs]
            return None
        raise StepError(f"{where}: `{segment}` needs the package manager, which the offline build cannot run")
    if head in ("conda", "mamba", "micromamba"):
        raise StepError(f"{where}: `{segment}` needs conda, which the sandbox does not have (use the task's "
                        "published image on the docker backend)")
    joined = " ".join(words[:2])
    if head in NETWORK_TOOLS or joined in NETWORK_TOOLS:
        raise StepError(f"{where}: `{segment}` needs the network, which builds do not have")
    return segment


def _command_steps(command: str, where: str, plan: StepPlan) -> None:
    """Split a shell line into steps: pip installs fetch their requirements; apt-get lines are checked."""
    for seg in _segments(command):
        run = _classify(seg, where, plan)
        if run is None:
            continue
        args = pip_install_args(_words(run))
        if args is not None:
            plan.steps.append(Step(run, tuple(args), where, tuple(local_paths(args))))
        elif re.search(r"\bsetup\.py\s+(develop|install)\b", run):
            # setup.py would fetch the dependencies itself with easy_install, which has no index offline:
            # pip installs the project (dependencies included) from what the host fetched, then it runs.
            plan.steps.append(Step("pip install .", (".",), f"{where} (its dependencies)", (".",)))
            plan.steps.append(Step(run, (), where))
        else:
            plan.steps.append(Step(run, (), where))


def _freeze(text: str, project: str | None) -> str:
    """A row's pip freeze without the project itself (editable or local lines)."""
    keep = []
    for line in text.splitlines():
        s = line.strip()
        if not s or s.startswith("#") or s.startswith(("-e ", "--editable")) or " @ file:" in s:
            continue
        name = re.split(r"[\s<>=!~;@\[]", s, maxsplit=1)[0].lower().replace("_", "-")
        if project and name == project.lower().replace("_", "-"):
            continue
        keep.append(s)
    return "\n".join(keep) + "\n"


def plan_steps(task: Task, project_name: str | None = None) -> StepPlan:
    cfg = task.install_config or InstallConfig()
    plan = StepPlan()
    for i, cmd in enumerate(cfg.pre_install):
        _command_steps(cmd, f"install_config.pre_install[{i}]", plan)
    spec = (cfg.packages or "").strip()
    if spec.endswith((".yml", ".yaml")) or cfg.env_yml_path:
        raise StepError(f"install_config.packages={spec or 'environment.yml'}: a conda environment needs conda, which "
                        "the sandbox does not have (use the task's published image on the docker backend)")
    reqs = list(cfg.reqs_path)
    if spec == "requirements.txt":
        if task.requirements and task.requirements.strip():
            plan.row_requirements = _freeze(task.requirements, project_name)
            plan.steps.append(Step(f'pip install -r "$WHEELS/{ROW_REQUIREMENTS}"', ("-r", f"{{wheels}}/{ROW_REQUIREMENTS}"),
                                   "the row's requirements"))
            reqs = []
        else:
            reqs = reqs or ["requirements.txt"]
    elif spec:
        plan.steps.append(Step("pip install " + " ".join(map(shlex.quote, spec.split())), tuple(spec.split()),
                               "install_config.packages"))
    for r in reqs:
        plan.steps.append(Step(f"pip install -r {shlex.quote(r)}", ("-r", r), "install_config.reqs_path"))
    if cfg.pip_packages:
        plan.steps.append(Step("pip install " + " ".join(map(shlex.quote, cfg.pip_packages)), tuple(cfg.pip_packages),
                               "install_config.pip_packages"))
    if cfg.install.strip():
        _command_steps(cfg.install, "install_config.install", plan)
    return plan

"""What a Python project's files say about building it, read statically (no code of the project runs):
its PEP 517 build requirements, its name and the Pythons it supports. Works on a checkout or an sdist."""

from __future__ import annotations

import configparser
import re
import tarfile
import tomllib
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

# PEP 517's fallback for a project without [build-system] (what pip uses), plus wheel: setuptools before
# 70.1 asks for it from get_requires_for_build_wheel, and the sandbox cannot fetch it then.
LEGACY_BUILD_REQUIRES = ["setuptools>=40.8.0", "wheel"]
SETUPTOOLS_BACKENDS = ("setuptools.build_meta", "setuptools.build_meta:__legacy__")
SCM_PLUGINS = ("setuptools_scm", "setuptools-scm", "hatch-vcs", "hatch_vcs", "pdm-backend", "poetry-dynamic-versioning")


class ProjectError(ValueError):
    pass


@dataclass(frozen=True)
class ProjectFacts:
    build_requires: list[str] = field(default_factory=lambda: list(LEGACY_BUILD_REQUIRES))
    backend: str = "setuptools.build_meta:__legacy__"
    name: str | None = None
    requires_python: str | None = None
    requires_python_from: str | None = None  # the file that said it
    setup_requires: list[str] = field(default_factory=list)  # setup.cfg [options] setup_requires

    @property
    def uses_scm_version(self) -> bool:
        reqs = " ".join(self.build_requires + self.setup_requires).lower()
        return any(p.replace("_", "-") in reqs.replace("_", "-") for p in SCM_PLUGINS[:4])

    def all_build_requires(self) -> list[str]:
        reqs = list(self.build_requires) + list(self.setup_requires)
        if self.backend in SETUPTOOLS_BACKENDS and not any(_name(r) == "wheel" for r in reqs):
            reqs.append("wheel")
        return reqs


def _name(req: str) -> str:
    return re.split(r"[\s\[<>=!~;@(]", req.strip(), maxsplit=1)[0].lower().replace("_", "-")


def scm_pretend_var(name: str) -> str:
    """setuptools_scm's per-distribution override (hatch-vcs reads it too)."""
    return "SETUPTOOLS_SCM_PRETEND_VERSION_FOR_" + re.sub(r"[-_.]+", "_", name).upper()


def _facts(pyproject: str | None, setup_cfg: str | None, setup_py: str | None, where: str) -> ProjectFacts:
    kw: dict = {}
    if pyproject is not None:
        try:
            doc = tomllib.loads(pyproject)
        except tomllib.TOMLDecodeError as e:
            raise ProjectError(f"{where}/pyproject.toml is not valid TOML: {e}") from None
        bs = doc.get("build-system") or {}
        if "requires" in bs:  # PEP 517: a [build-system] without requires falls back to the legacy defaults
            if not isinstance(bs["requires"], list) or not all(isinstance(r, str) for r in bs["requires"]):
                raise ProjectError(f"{where}/pyproject.toml: [build-system] requires must be a list of strings")
            kw["build_requires"] = list(bs["requires"])
            kw["backend"] = bs.get("build-backend") or "setuptools.build_meta:__legacy__"
        project = doc.get("project") or {}
        poetry = (doc.get("tool") or {}).get("poetry") or {}
        kw["name"] = project.get("name") or poetry.get("name")
        if project.get("requires-python"):
            kw["requires_python"], kw["requires_python_from"] = str(project["requires-python"]), "pyproject.toml"
        elif isinstance(poetry.get("dependencies"), dict) and isinstance(poetry["dependencies"].get("python"), str):
            kw["requires_python"] = _poetry_python(poetry["dependencies"]["python"])
            kw["requires_python_from"] = "pyproject.toml [tool.poetry.dependencies]"
    if setup_cfg is not None:
        cfg = configparser.ConfigParser(interpolation=None)
        try:
            cfg.read_string(setup_cfg)
        except configparser.Error:
            cfg = None
        if cfg is not None:
            kw.setdefault("name", None)
            kw["name"] = kw["name"] or cfg.get("metadata", "name", fallback=None)
            if not kw.get("requires_python") and cfg.get("options", "python_requires", fallback=None):
                kw["requires_python"] = cfg.get("options", "python_requires").strip()
                kw["requires_python_from"] = "setup.cfg"
            setup_requires = cfg.get("options", "setup_requires", fallback="")
            kw["setup_requires"] = [r.strip() for r in re.split(r"[\n;]", setup_requires) if r.strip()]
    if setup_py is not None and not kw.get("requires_python"):
        m = re.search(r"python_requires\s*=\s*['\"]([^'\"]+)['\"]", setup_py)
        if m:
            kw["requires_python"], kw["requires_python_from"] = m.group(1), "setup.py"
    return ProjectFacts(**{k: v for k, v in kw.items() if v is not None})


def _poetry_python(constraint: str) -> str | None:
    """Poetry's `^3.8` / `~3.9` / `>=3.8,<4.0` as a PEP 440 specifier (None when it is not one of those)."""
    c = constraint.strip()
    m = re.fullmatch(r"\^(\d+)\.(\d+)(?:\.\d+)?", c)
    if m:
        return f">={m.group(1)}.{m.group(2)},<{int(m.group(1)) + 1}"
    m = re.fullmatch(r"~(\d+)\.(\d+)(?:\.\d+)?", c)
    if m:
        return f">={m.group(1)}.{m.group(2)},<{m.group(1)}.{int(m.group(2)) + 1}"
    return c if re.fullmatch(r"[<>=!~\d., *]+", c) and c != "*" else None


def read_project(repo: Path, subdir: str = ".") -> ProjectFacts | None:
    """Facts of the project at `repo/subdir`; None when it is not a Python project (nothing to build)."""
    root = Path(repo) / subdir
    texts = {n: (root / n).read_text(errors="replace") if (root / n).is_file() else None
             for n in ("pyproject.toml", "setup.cfg", "setup.py")}
    if all(t is None for t in texts.values()):
        return None
    return _facts(texts["pyproject.toml"], texts["setup.cfg"], texts["setup.py"], str(root))


def read_sdist(archive: Path) -> ProjectFacts:
    """Facts of an sdist (.tar.gz or .zip), from the files at the top of its one root directory."""
    wanted = ("pyproject.toml", "setup.cfg", "setup.py")
    texts: dict[str, str | None] = dict.fromkeys(wanted)
    name = archive.name
    try:
        if name.endswith(".zip"):
            with zipfile.ZipFile(archive) as z:
                for member in z.namelist():
                    parts = member.split("/")
                    if len(parts) == 2 and parts[1] in wanted:
                        texts[parts[1]] = z.read(member).decode(errors="replace")
        else:
            with tarfile.open(archive) as t:
                for member in t:
                    parts = member.name.lstrip("./").split("/")
                    if len(parts) == 2 and parts[1] in wanted and member.isfile():
                        texts[parts[1]] = t.extractfile(member).read().decode(errors="replace")
    except (OSError, tarfile.TarError, zipfile.BadZipFile) as e:
        raise ProjectError(f"{archive.name} is not a readable sdist: {e}") from None
    return _facts(texts["pyproject.toml"], texts["setup.cfg"], texts["setup.py"], archive.name)

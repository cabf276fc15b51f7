"""The interpreter and platform a sandbox installs into, probed once per base image (or host), so that
distributions fetched on the host fit it: its Python, glibc, machine and the Debian packages it has."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from packaging import tags
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import Version

# Run by the sandbox's own python3 (in the image, or the host's /usr/bin/python3 for local sandboxes).
PROBE = r"""
import json, os, platform, subprocess, sys
try:
    glibc = os.confstr("CS_GNU_LIBC_VERSION").split()[-1]
except (ValueError, OSError, AttributeError):
    glibc = None
try:
    out = subprocess.run(["dpkg-query", "-W", "-f=${Package}\n"], capture_output=True, text=True).stdout
except OSError:
    out = ""
print(json.dumps({"python": "%d.%d.%d" % sys.version_info[:3], "machine": platform.machine(), "glibc": glibc,
                  "deb_packages": sorted(set(out.split()))}))
"""


@dataclass(frozen=True)
class Target:
    python_full: str  # "3.11.2"
    machine: str  # "x86_64"
    glibc: str | None  # "2.36"; None on a non-glibc system
    deb_packages: frozenset[str] = field(default_factory=frozenset)

    @classmethod
    def from_probe(cls, text: str) -> Target:
        d = json.loads(text.strip().splitlines()[-1])
        return cls(d["python"], d["machine"], d.get("glibc"), frozenset(d.get("deb_packages") or ()))

    @property
    def python(self) -> str:
        """ "3.11": what install_config.python and pip's --python-version speak."""
        return ".".join(self.python_full.split(".")[:2])

    @property
    def identity(self) -> str:
        return f"cp{self.python_full}-{self.machine}-glibc{self.glibc}"

    def platforms(self) -> list[str]:
        """manylinux platform tags this glibc accepts, newest first (PEP 600 and the legacy aliases)."""
        if not self.glibc:
            return []
        major, minor = (int(x) for x in self.glibc.split(".")[:2])
        plats = [f"manylinux_{major}_{m}_{self.machine}" for m in range(minor, 4, -1)]
        legacy = {17: "manylinux2014", 12: "manylinux2010", 5: "manylinux1"}
        return plats + [f"{name}_{self.machine}" for m, name in legacy.items() if minor >= m]

    def pip_args(self) -> list[str]:
        """pip's flags that resolve for this interpreter instead of the host's (wheels only)."""
        abi = "cp" + self.python.replace(".", "")
        args = ["--python-version", self.python, "--implementation", "cp", "--abi", abi]
        for p in self.platforms()[:1]:  # pip expands a manylinux_2_X platform to every older one
            args += ["--platform", p]
        return args

    def supported_tags(self) -> set[tags.Tag]:
        version = tuple(int(x) for x in self.python.split("."))
        plats = self.platforms() + [f"linux_{self.machine}"]
        return set(tags.cpython_tags(version, platforms=plats)) | set(tags.compatible_tags(version, platforms=plats))

    def python_problem(self, required: str | None, where: str) -> str | None:
        """Why `required` (a version like "3.9" or a specifier like ">=3.12") rules this interpreter out."""
        if not required or not str(required).strip():
            return None
        required = str(required).strip()
        if required[0].isdigit():  # a version: install_config.python names the minor version it was made for
            if ".".join(required.split(".")[:2]) != self.python:
                return f"needs Python {required} ({where}); the sandbox has Python {self.python_full}"
            return None
        try:
            spec = SpecifierSet(required)
        except InvalidSpecifier:
            return None  # a malformed requirement is the build backend's to report
        if not spec.contains(Version(self.python_full), prereleases=True):
            return f"needs Python {required} ({where}); the sandbox has Python {self.python_full}"
        return None

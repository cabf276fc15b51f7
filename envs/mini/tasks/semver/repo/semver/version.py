"""Parse and compare semantic versions (MAJOR.MINOR.PATCH[-PRERELEASE])."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import total_ordering

_VERSION_RE = re.compile(r"^v?(\d+)\.(\d+)\.(\d+)(?:-([0-9A-Za-z.-]+))?$")


@total_ordering
@dataclass(frozen=True)
class Version:
    major: int
    minor: int
    patch: int
    prerelease: str = ""

    @classmethod
    def parse(cls, text: str) -> "Version":
        match = _VERSION_RE.match(text.strip())
        if not match:
            raise ValueError(f"invalid version: {text!r}")
        major, minor, patch, pre = match.groups()
        return cls(int(major), int(minor), int(patch), pre or "")

    def _key(self) -> tuple:
        # A release sorts after its pre-releases (1.0.0-rc.1 < 1.0.0); numeric
        # pre-release fields compare as numbers and sort before alphanumeric ones.
        if not self.prerelease:
            return (self.major, self.minor, self.patch, 1, ())
        fields = tuple((0, int(f), "") if f.isdigit() else (1, 0, f) for f in self.prerelease.split("."))
        return (self.major, self.minor, self.patch, 0, fields)

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, Version):
            return NotImplemented
        return self._key() < other._key()

    def bump(self, part: str) -> "Version":
        if part == "major":
            return Version(self.major + 1, 0, 0)
        if part == "minor":
            return Version(self.major, self.minor + 1, 0)
        if part == "patch":
            return Version(self.major, self.minor, self.patch + 1)
        raise ValueError(f"unknown part {part!r}")

    def __str__(self) -> str:
        base = f"{self.major}.{self.minor}.{self.patch}"
        return f"{base}-{self.prerelease}" if self.prerelease else base

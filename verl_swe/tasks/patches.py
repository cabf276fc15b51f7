"""Split unified diffs (git or plain) into per-file diffs, with their paths and modes."""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class FileDiff:
    old_path: str | None  # None for a new file
    new_path: str | None  # None for a deleted file
    text: str
    symlink: bool = False

    @property
    def paths(self) -> list[str]:
        return [p for p in dict.fromkeys((self.old_path, self.new_path)) if p is not None]


_DIFF_GIT = re.compile(r"^diff --git ", re.M)


def _strip(path: str) -> str | None:
    path = path.split("\t")[0].strip()
    if path.startswith('"') and path.endswith('"'):
        path = path[1:-1]
    if path == "/dev/null":
        return None
    return path[2:] if path[:2] in ("a/", "b/") else path


def split_patch(patch: str) -> list[FileDiff]:
    """Split a git or plain unified diff into per-file diffs."""
    if _DIFF_GIT.search(patch):
        starts = [m.start() for m in _DIFF_GIT.finditer(patch)]
    else:  # plain `diff -u`: a file starts at a `---` line followed by a `+++` line
        lines = patch.splitlines(keepends=True)
        offsets = [0]
        for line in lines:
            offsets.append(offsets[-1] + len(line))
        starts = [offsets[i] for i in range(len(lines) - 1)
                  if lines[i].startswith("--- ") and lines[i + 1].startswith("+++ ")]
    chunks = [patch[a:b] for a, b in zip(starts, starts[1:] + [len(patch)])]
    return [_parse_file_diff(c) for c in chunks if c.strip()]


def _parse_file_diff(text: str) -> FileDiff:
    header_old = header_new = old = new = None
    symlink = new_file = deleted = False
    for line in text.splitlines():
        if line.startswith("@@"):
            break
        m = re.match(r"diff --git (\S+) (\S+)$", line)
        if m:
            header_old, header_new = _strip(m.group(1)), _strip(m.group(2))
        elif line.startswith(("--- ", "+++ ")):
            path = _strip(line[4:])
            if line.startswith("--- "):
                new_file, old = new_file or path is None, path or old
            else:
                deleted, new = deleted or path is None, path or new
        elif line.startswith(("rename from ", "copy from ")):
            old = _strip(line.split(" ", 2)[2])
        elif line.startswith(("rename to ", "copy to ")):
            new = _strip(line.split(" ", 2)[2])
        elif line.startswith(("new file mode", "deleted file mode", "new mode", "old mode")):
            symlink = symlink or line.rstrip().endswith("120000")
            new_file = new_file or line.startswith("new file mode")
            deleted = deleted or line.startswith("deleted file mode")
    old, new = old or header_old, new or header_new
    return FileDiff(None if new_file else old, None if deleted else new, text, symlink)


def touched_files(patch: str) -> list[str]:
    """Paths a patch touches (new names), e.g. the test files a task's test_patch changes."""
    return [d.new_path or d.old_path for d in split_patch(patch) if (d.new_path or d.old_path)]

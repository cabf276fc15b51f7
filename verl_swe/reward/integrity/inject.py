"""Runs inside the grading sandbox (the task's own Python, 3.6 syntax): inserts the sentinel tests into the
task's test files (or a random test module of a test directory the command runs), each before a random
top-level test of the file or at its end, and lists the sentinels that went in by their index in the plan,
with their files (tab-separated): the list stays readable during the run, so it must not name them. A file
that already defines a sentinel's name is left alone.

    python inject.py GRADER_DIR PLAN_BASE64
"""

import ast
import base64
import json
import os
import random
import sys


def _test_starts(src):
    """0-based line indexes where a top-level test function or class starts (its first decorator)."""
    try:
        tree = ast.parse(src)
    except (SyntaxError, ValueError):
        return []
    starts = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)) or type(node).__name__ == "AsyncFunctionDef":
            if node.name.lower().startswith("test"):
                starts.append(min([node.lineno] + [d.lineno for d in node.decorator_list]) - 1)
    return starts


def insert(src, blocks, rng):
    lines = src.splitlines(True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    starts = _test_starts(src)
    placed = [(rng.choice(starts + [len(lines)]) if starts else len(lines), b["code"])
              for b in blocks if not b["at_end"]]
    # Later positions first, so earlier indexes stay valid.
    for pos, code in sorted(placed, key=lambda p: -p[0]):
        lines[pos:pos] = [code, "\n\n"]  # before a definition, after the blank lines that precede it
    for b in blocks:  # must be the last tests of the file
        if b["at_end"]:
            lines += ["\n\n", b["code"]]
    return "".join(lines)


def _module_in(directory, rng):
    """A random test module under `directory` (test_*.py or *_test.py), or None."""
    found = []
    for root, dirs, files in os.walk(directory):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d != "__pycache__")
        found += [os.path.join(root, f) for f in sorted(files)
                  if f.endswith(".py") and (f.startswith("test_") or f.endswith("_test.py"))]
    return rng.choice(found) if found else None


def main():
    grader_dir, plan = sys.argv[1], json.loads(base64.b64decode(sys.argv[2]).decode("utf-8"))
    rng = random.SystemRandom()
    injected = []
    for entry in plan["files"]:
        path = _module_in(entry["file"], rng) if entry.get("dir") else entry["file"]
        if path is None:
            continue
        try:
            with open(path, "rb") as f:
                src = f.read().decode("utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        if any(("def " + name + "(") in src for name in entry["names"]):
            continue
        out = insert(src, entry["blocks"], rng).encode("utf-8")
        with open(path, "wb") as f:
            f.write(out)
        injected.extend((str(i), os.path.normpath(path)) for i in entry["ids"])
    with open(os.path.join(grader_dir, "injected"), "w") as f:
        f.write("".join("%s\t%s\n" % item for item in injected))


if __name__ == "__main__":
    main()

"""Small task variants of the bundled pager task, each with one property a curation rule must catch.

They share pager's environment (same install_config), so a test builds it once per backend.
"""

from __future__ import annotations

import json

from verl_swe.tasks import Task

PAGER = "verl-swe-mini__pager-1"


def new_file(path: str, text: str) -> str:
    lines = text.splitlines()
    body = "".join(f"+{line}\n" for line in lines)
    return (f"diff --git a/{path} b/{path}\nnew file mode 100644\n--- /dev/null\n+++ b/{path}\n"
            f"@@ -0,0 +1,{len(lines)} @@\n{body}")


def variant(base: Task, name: str, *, patch: str = "", test_patch: str = "", f2p=(), p2p=(), **fields) -> Task:
    row = base.model_dump()
    row.update(instance_id=f"{base.instance_id}-{name}")
    row.update(patch=base.patch + patch,
               test_patch=base.test_patch + test_patch, FAIL_TO_PASS=[*base.FAIL_TO_PASS, *f2p],
               PASS_TO_PASS=[*base.PASS_TO_PASS, *p2p], **fields)
    return Task.model_validate(row)


# Writes into the repository (tracked dir, and an ignored file) and /tmp under fixed names, and fails
# if an earlier run's files are still there: it passes every run only if the reset between runs works.
STATE_TEST = '''from pathlib import Path


def test_leaves_no_trace():
    for p in (Path("run-output.txt"), Path("run.log"), Path("/tmp/verl-swe-fixed-name")):
        assert not p.exists(), p
        p.write_text("x")
'''

# Stands in for an external service whose answer changes: it keeps a call count in $HOME, which
# nothing resets (a fresh sandbox starts at zero, so the grader sees it pass).
SERVICE_TEST = '''from pathlib import Path


def test_service_answers_once():
    calls = Path.home() / ".verl-swe-service-calls"
    n = int(calls.read_text()) if calls.exists() else 0
    calls.write_text(str(n + 1))
    assert n == 0
'''

EXTRA_MODULE = "def last_page(count, per_page):\n    return max(1, -(-count // per_page))\n"
EXTRA_TEST = "from pager.extra import last_page\n\n\ndef test_last_page():\n    assert last_page(10, 5) == 2\n"
HANG_TEST = "import time\n\n\ndef test_hangs():\n    time.sleep(600)\n"


def writes_state(base: Task) -> Task:
    return variant(base, "writes-state", patch=new_file(".gitignore", "*.log"),
                   test_patch=new_file("tests/test_state.py", STATE_TEST),
                   p2p=["tests/test_state.py::test_leaves_no_trace"])


def external_state(base: Task) -> Task:
    return variant(base, "external-state", test_patch=new_file("tests/test_service.py", SERVICE_TEST),
                   p2p=["tests/test_service.py::test_service_answers_once"])


def import_error(base: Task) -> Task:
    """Its FAIL_TO_PASS test imports a module only the gold patch adds: ModuleNotFoundError before the fix."""
    return variant(base, "import-error", patch=new_file("pager/extra.py", EXTRA_MODULE),
                   test_patch=new_file("tests/test_extra.py", EXTRA_TEST), f2p=["tests/test_extra.py::test_last_page"])


def hangs(base: Task) -> Task:
    return variant(base, "hangs", test_patch=new_file("tests/test_hang.py", HANG_TEST),
                   p2p=["tests/test_hang.py::test_hangs"])


def broken_env(base: Task) -> Task:
    cfg = base.install_config.model_dump()
    cfg["install"] = "echo 'setup.py: no such file' >&2; exit 3"
    return variant(base, "broken-env", install_config=cfg)


def too_large(base: Task, files: int = 8) -> Task:
    return variant(base, "too-large", patch="".join(new_file(f"pager/gen{i}.py", "X = 1") for i in range(files)))


def low_quality(base: Task, **scores) -> Task:
    score = {"difficulty_score": 1, "issue_text_score": 0, "test_score": 1, **scores}
    return variant(base, "low-quality", meta={"llm_score": score})


def write_rows(path, rows) -> None:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r if isinstance(r, dict) else r.model_dump()))
                            + "\n" for r in rows))

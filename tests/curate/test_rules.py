"""The row rules, decontamination lists and the pre-fix log check, without sandboxes."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import date

import pytest

from tests.curate.variants import PAGER, low_quality, new_file, too_large, variant
from verl_swe.curate.config import CurateConfigError, DecontaminationConfig, QualityConfig, load_config
from verl_swe.curate.decontam import DecontaminationError, Exclusions, read_ids, repo_of, verified_ids
from verl_swe.curate.rules import (check_complexity, check_correctness_metadata, check_decontamination,
                                   check_metadata, check_quality, patch_stats, reference_errors)


@pytest.fixture
def pager(mini_tasks):
    return mini_tasks[PAGER]


def test_patch_stats_counts_files_and_changed_lines_not_headers(pager):
    assert patch_stats(pager.patch) == (1, 2)  # one file, one line out, one line in
    # a removed line that itself starts with "--" is a change, not a header
    diff = "diff --git a/x.py b/x.py\n--- a/x.py\n+++ b/x.py\n@@ -1,2 +1,1 @@\n---x = 1\n keep\n"
    assert patch_stats(diff + new_file("y.py", "a\nb")) == (2, 3)


def test_complexity_thresholds_are_the_papers_and_configurable(pager):
    cfg = load_config(None).complexity
    assert (cfg.max_files, cfg.max_lines) == (7, 499)  # "<= 7 files and < 500 lines" (P1 Sec. 4.1)
    drop = check_complexity(too_large(pager, files=7), cfg)  # 8 files with pager's own
    assert drop and drop.reason == "gold patch touches 8 files (max 7)"
    assert check_complexity(too_large(pager, files=6), cfg) is None
    big = variant(pager, "big", patch=new_file("pager/big.py", "\n".join(f"X{i} = {i}" for i in range(498))))
    assert check_complexity(big, cfg).reason == "gold patch changes 500 lines (max 499)"
    assert check_complexity(big, cfg.model_copy(update={"max_lines": 500})) is None


def test_quality_drops_a_score_of_three_in_the_configured_fields(pager):
    cfg = QualityConfig()
    assert check_quality(pager, cfg) is None  # no llm_score: not a SWE-rebench row, kept
    assert check_quality(pager, cfg.model_copy(update={"drop_missing": True})).rule == "quality"
    assert check_quality(low_quality(pager, difficulty_score=2), cfg) is None
    drop = check_quality(low_quality(pager, test_score=3), cfg)
    assert drop.reason == "meta.llm_score test_score=3 (flawed test patch)"
    assert check_quality(low_quality(pager, test_score=3), QualityConfig(fields=["issue_text_score"])) is None
    # SWE-rebench exports that store meta as JSON text, and values that are not scores
    as_text = variant(pager, "text", meta='{"llm_score": "{\\"issue_text_score\\": 3.0}"}')
    assert "issue_text_score=3 (unclear issue)" in check_quality(as_text, cfg).reason
    odd = low_quality(pager, test_score="high")
    assert check_quality(odd, cfg).reason == "meta.llm_score.test_score is not a number: 'high'"


def test_metadata_validators_drop_only_the_configured_names(pager):
    row = variant(pager, "v", meta={"failed_lite_validators": ["has_hyperlinks", "has_invalid_references"]})
    cfg = load_config(None).correctness
    assert check_correctness_metadata(row, cfg) is None  # none by default: SWE-rebench's are Lite criteria
    cfg = cfg.model_copy(update={"meta_validators": ["has_invalid_references"]})
    assert check_correctness_metadata(row, cfg).reason == "meta.failed_lite_validators has has_invalid_references"


def test_bundled_verified_ids_and_their_repositories():
    ids = verified_ids()
    assert len(ids) == len(set(ids)) == 500
    assert "django__django-11099" in ids and "sympy__sympy-24661" in ids
    repos = {repo_of(i) for i in ids}
    assert len(repos) == 12 and {"scikit-learn/scikit-learn", "pylint-dev/pylint", "psf/requests"} <= repos


def test_decontamination_by_id_repository_list_file_and_date(pager, tmp_path):
    leaked = variant(pager, "x", instance_id="django__django-11099")
    ex = Exclusions.from_config(DecontaminationConfig())
    assert check_decontamination(leaked, ex).reason == "instance id is in SWE-bench Verified"
    assert check_decontamination(pager, ex) is None
    assert check_decontamination(leaked, Exclusions.from_config(DecontaminationConfig(verified_ids=False))) is None

    same_repo = variant(pager, "y", repo="django/django")
    ex = Exclusions.from_config(DecontaminationConfig(verified_repos=True))
    reason = check_decontamination(same_repo, ex).reason
    assert reason == "repository django/django is in SWE-bench Verified repositories"

    may = tmp_path / "rebench-may.jsonl"  # a held-out split passed as the split itself
    may.write_text('{"instance_id": "%s", "repo": "x/y"}\n' % pager.instance_id)
    ids = tmp_path / "ids.txt"
    ids.write_text("# held out\nowner__repo-7\n")
    ex = Exclusions.from_config(DecontaminationConfig(instance_files=[may, ids]))
    assert check_decontamination(pager, ex).reason == f"instance id is in {may}"
    assert "owner__repo-7" in ex.instances

    ex = Exclusions.from_config(DecontaminationConfig(created_from=date(2025, 1, 1)))
    assert "on or after the held-out cut-off 2025-01-01" in check_decontamination(pager, ex).reason
    assert check_decontamination(variant(pager, "old", created_at="2024-12-31 23:00:00+00:00"), ex) is None
    assert "is not a date" in check_decontamination(variant(pager, "n", created_at=None), ex).reason


def test_bad_exclusion_lists_are_named(tmp_path):
    with pytest.raises(DecontaminationError, match="does not exist"):
        read_ids(tmp_path / "missing.txt")
    bad = tmp_path / "split.jsonl"
    bad.write_text('{"repo": "x/y"}\n')
    with pytest.raises(DecontaminationError, match=f"exclusion list {bad}: every row needs an instance_id"):
        read_ids(bad)


def test_rules_apply_cheapest_first_and_name_the_first_that_drops(pager):
    cfg = load_config(None)
    both = variant(too_large(pager), "z", meta={"llm_score": {"test_score": 3}})
    assert check_metadata(both, cfg, Exclusions()).rule == "complexity"
    assert check_metadata(variant(pager, "nogold", patch="", f2p=()).model_copy(update={"patch": ""}), cfg,
                          Exclusions()).rule == "malformed"


def test_config_errors_name_the_key(tmp_path):
    path = tmp_path / "curate.yaml"
    path.write_text("complexity:\n  max_file: 3\nchecks:\n  runs: -1\n")
    with pytest.raises(CurateConfigError) as e:
        load_config(path)
    assert f"curation config {path}" in str(e.value)
    assert "complexity.max_file: Extra inputs are not permitted" in str(e.value) and "checks.runs" in str(e.value)
    path.write_text("checks:\n  runs: 5\n")
    assert load_config(path, {"checks": {"test_timeout_s": 9}}).checks.model_dump(include={"runs", "test_timeout_s"}) \
        == {"runs": 5, "test_timeout_s": 9}


PREFIX_TESTS = '''
import pytest

def test_attr():
    import json
    json.no_such_function()

def test_assert():
    assert 1 == 2
'''


def _pytest_log(cwd, *files) -> str:
    env = {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "PYTEST_ADDOPTS": ""}  # the venv's plugins cost seconds
    return subprocess.run([sys.executable, "-m", "pytest", "-rA", "--tb=short", "-p", "no:cacheprovider", *files],
                          cwd=cwd, capture_output=True, text=True, env=env).stdout


def test_reference_errors_read_real_pytest_output(tmp_path):
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_a.py").write_text(PREFIX_TESTS)
    (tmp_path / "tests" / "test_b.py").write_text("from json import not_there\n\ndef test_b():\n    pass\n")
    kinds = ["AttributeError", "ImportError", "NameError"]
    f2p = ["tests/test_a.py::test_attr", "tests/test_a.py::test_assert"]

    log = _pytest_log(tmp_path, "tests/test_a.py")
    hits = reference_errors(log, f2p, kinds)
    assert list(hits) == ["tests/test_a.py::test_attr"]  # an assertion failure is what a task should have
    assert hits["tests/test_a.py::test_attr"].startswith("FAILED tests/test_a.py::test_attr - AttributeError")
    assert reference_errors(log, f2p, ["NameError"]) == {}

    # A test module that does not import stops collection, and pytest interrupts the whole run.
    hits = reference_errors(_pytest_log(tmp_path, "tests/test_a.py", "tests/test_b.py"),
                            [*f2p, "tests/test_b.py::test_b"], kinds)
    assert hits["tests/test_b.py::test_b"].startswith("ERROR collecting tests/test_b.py: ImportError: cannot import")
    assert sorted(hits) == sorted([*f2p, "tests/test_b.py::test_b"])  # none of them ran

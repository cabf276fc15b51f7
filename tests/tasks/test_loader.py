"""Task rows from every supported format and dataset style; malformed rows are named, not fatal."""

import json
import os
import subprocess
import sys

import pytest

from verl_swe.tasks import Task, TaskLoadError, load_tasks, read_tasks
from verl_swe.testing.hub import local_hub

SWEBENCH_ROW = {  # SWE-bench / Verified style: the test lists are JSON strings
    "instance_id": "astropy__astropy-12907", "repo": "astropy/astropy", "base_commit": "d16bfe05a744909de4b27f5875fe0d4ed41ce607",
    "problem_statement": "Modeling's separability_matrix does not compute separability correctly",
    "patch": "diff --git a/x b/x\n", "test_patch": "diff --git a/astropy/tests/t.py b/astropy/tests/t.py\n",
    "FAIL_TO_PASS": '["astropy/modeling/tests/test_separable.py::test_separable[compound_model6-result6]"]',
    "PASS_TO_PASS": '["astropy/modeling/tests/test_separable.py::test_coord_matrix"]',
    "version": 4.3, "environment_setup_commit": "298ccb478e6bf092953bca67a3d29dc6c35f6752", "hints_text": None,
}
REBENCH_ROW = {  # SWE-rebench style: real lists, install_config, docker_image, meta.llm_score
    "instance_id": "owner__proj-17", "repo": "owner/proj", "base_commit": "abc1234",
    "problem_statement": "crash", "patch": "", "test_patch": "diff --git a/tests/test_a.py b/tests/test_a.py\n",
    "FAIL_TO_PASS": ["tests/test_a.py::test_x"], "PASS_TO_PASS": [],
    "install_config": {"python": "3.10", "install": "pip install -e .", "pip_packages": ["pytest", "pytest-cov"],
                       "pre_install": None, "test_cmd": ["pytest -rA"], "log_parser": "parse_log_pytest",
                       "env_vars": {"A": 1}, "reqs_path": "requirements/test.txt", "no_use_env": None,
                       "env_yml_path": None, "packages": "requirements.txt", "future_key": 7},
    "requirements": "attrs==23.1.0\npytest==8.3.5\n-e git+https://github.com/owner/proj@abc1234#egg=proj\n",
    "environment": "name: testbed\ndependencies:\n  - python=3.10\n",
    "docker_image": "swerebench/sweb.eval.x86_64.owner_1776_proj-17",
    "meta": {"llm_score": {"difficulty_score": 1, "issue_text_score": 0, "test_score": 1}},
}


def test_swebench_row_json_string_lists_and_numeric_version():
    t = Task.model_validate(SWEBENCH_ROW)
    assert t.FAIL_TO_PASS == ["astropy/modeling/tests/test_separable.py::test_separable[compound_model6-result6]"]
    assert t.version == "4.3" and t.hints_text == "" and t.setup_commit == SWEBENCH_ROW["environment_setup_commit"]
    assert t.repo_dirname == "astropy__astropy" and t.install_config is None and t.image is None


def test_rebench_row_install_config_image_and_scores():
    t = Task.model_validate(REBENCH_ROW)
    cfg = t.install_config
    assert cfg.pip_packages == ["pytest", "pytest-cov"] and cfg.pre_install == [] and cfg.reqs_path == ["requirements/test.txt"]
    assert cfg.test_cmd == "pytest -rA" and cfg.env_vars == {"A": "1"}
    assert cfg.no_use_env is None and cfg.env_yml_path == [] and cfg.packages == "requirements.txt"
    assert cfg.model_extra == {"future_key": 7}  # unknown keys kept
    assert t.requirements.startswith("attrs==23.1.0") and t.environment.startswith("name: testbed")
    assert t.image == REBENCH_ROW["docker_image"] and t.llm_score["test_score"] == 1
    assert t.setup_commit == "abc1234"
    # SWE-Gym / SWE-smith name the image `image_name`
    assert Task.model_validate({**SWEBENCH_ROW, "image_name": "img:1"}).image == "img:1"


def test_formats_agree(tmp_path):
    rows = [SWEBENCH_ROW, REBENCH_ROW]
    (tmp_path / "t.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "t.json").write_text(json.dumps(rows))
    import pyarrow.parquet as pq  # a dependency of verl
    import pyarrow as pa

    flat = [{**r, "install_config": json.dumps(r.get("install_config")), "meta": json.dumps(r.get("meta", {})),
             "FAIL_TO_PASS": json.dumps(Task.model_validate(r).FAIL_TO_PASS),
             "PASS_TO_PASS": json.dumps(Task.model_validate(r).PASS_TO_PASS), "version": str(r.get("version", ""))}
            for r in rows]
    pq.write_table(pa.Table.from_pylist(flat), tmp_path / "t.parquet")
    loaded = [load_tasks(tmp_path / f"t.{ext}") for ext in ("jsonl", "json", "parquet")]
    ids = [[t.instance_id for t in ts] for ts in loaded]
    assert ids[0] == ids[1] == ids[2] == ["astropy__astropy-12907", "owner__proj-17"]
    assert loaded[0][1].install_config == loaded[2][1].install_config


def test_malformed_rows_are_named_and_the_rest_is_kept(tmp_path):
    bad_list = {**REBENCH_ROW, "instance_id": "bad-list", "FAIL_TO_PASS": "[not json"}
    missing = {k: v for k, v in REBENCH_ROW.items() if k != "base_commit"} | {"instance_id": "no-commit"}
    lines = [json.dumps(SWEBENCH_ROW), "{broken json", json.dumps(bad_list), json.dumps(missing),
             json.dumps(REBENCH_ROW), json.dumps(REBENCH_ROW)]
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join(lines) + "\n")
    tasks, errors = read_tasks(path)
    assert [t.instance_id for t in tasks] == ["astropy__astropy-12907", "owner__proj-17"]
    msgs = [str(e) for e in errors]
    assert msgs[0].startswith(f"{path}:2: invalid JSON")
    assert msgs[1].startswith(f"{path}:3 (bad-list): field 'FAIL_TO_PASS'")
    assert msgs[2].startswith(f"{path}:4 (no-commit): field 'base_commit': Field required")
    assert msgs[3].startswith(f"{path}:6 (owner__proj-17): duplicate instance_id (first at {path}:5)")
    with pytest.raises(TaskLoadError, match="4 malformed task row"):
        load_tasks(path)


def test_missing_file_and_unknown_format(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_tasks(tmp_path / "nope.jsonl")
    (tmp_path / "t.csv").write_text("x")
    with pytest.raises(ValueError, match="unknown format '.csv'"):
        load_tasks(tmp_path / "t.csv")


def test_a_broken_json_file_is_named(tmp_path):
    # A .json file is one document: nothing in it can be kept, but the error says which file.
    (tmp_path / "t.json").write_text('[{"instance_id": "a",')
    with pytest.raises(ValueError, match=f"task file {tmp_path / 't.json'}: invalid JSON"):
        load_tasks(tmp_path / "t.json")
    (tmp_path / "t.json").write_text("42")
    with pytest.raises(ValueError, match="expected a list of rows .* got int"):
        load_tasks(tmp_path / "t.json")


def test_hub_dataset_names():
    rebench = [REBENCH_ROW, {**REBENCH_ROW, "instance_id": "owner__proj-18", "FAIL_TO_PASS": []}]
    with local_hub({"nebius/SWE-rebench": {"train": rebench},
                    "princeton-nlp/SWE-bench_Verified": {"test": [SWEBENCH_ROW]}}):
        tasks, errors = read_tasks("nebius/SWE-rebench:train")
        [verified] = load_tasks("princeton-nlp/SWE-bench_Verified")  # SWE-bench's split, test, by default
    assert [t.instance_id for t in tasks] == [REBENCH_ROW["instance_id"]] and verified.FAIL_TO_PASS
    assert str(errors[0]).startswith("nebius/SWE-rebench:train[row 1] (owner__proj-18): field 'FAIL_TO_PASS'")


def test_an_unreachable_hub_is_a_clear_error(tmp_path):
    # The real datasets library, offline (as on this machine): the error says what was tried and what to do.
    r = subprocess.run([sys.executable, "-m", "verl_swe.cli", "envs", "build", "--instances", "SWE-bench/SWE-bench_Lite",
                        "--backend", "local"], capture_output=True, text=True, timeout=300, cwd=tmp_path,
                       env={**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
                            "HF_HOME": str(tmp_path / "hf"), "VERL_SWE_CACHE": str(tmp_path / "cache")})
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert "SWE-bench/SWE-bench_Lite: no such task file, and loading it as a Hugging Face dataset" in r.stderr
    assert "export the rows" in r.stderr

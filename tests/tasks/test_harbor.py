"""Harbor task directories load as tasks and grade by their own test script (harbor's verifier convention)."""

import pytest

from verl_swe.reward.grading import grade
from verl_swe.sandbox import open_sandbox
from verl_swe.tasks import Environments, read_tasks
from verl_swe.tasks.harbor import REWARD_TEST

DOCKERFILE = "FROM verl-swe/base:bookworm\nWORKDIR /app\nCOPY calc.py /app/calc.py\n"
BUGGY = "def add(a, b):\n    return a - b\n"
FIX = ("diff --git a/calc.py b/calc.py\n--- a/calc.py\n+++ b/calc.py\n@@ -1,2 +1,2 @@\n def add(a, b):\n"
       "-    return a - b\n+    return a + b\n")
TEST_OUTPUTS = "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
# harbor's usual verifier: pytest, then the reward file
TEST_SH_TXT = ("#!/bin/bash\ncd /app\npython3 -m pytest -rA /tests/test_outputs.py\n"
               "if [ $? -eq 0 ]; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi\n")
# a partial-credit verifier writing reward.json, and one that only exits
TEST_SH_JSON = "#!/bin/bash\necho '{\"reward\": 0.5, \"tests\": 2}' > /logs/verifier/reward.json\n"
TEST_SH_EXIT = "#!/bin/bash\ncd /app && python3 -m pytest -q /tests/test_outputs.py\n"


def make_task(root, name, test_sh, dockerfile=DOCKERFILE):
    d = root / name
    (d / "environment").mkdir(parents=True)
    (d / "tests").mkdir()
    (d / "task.toml").write_text(f'version = "1.0"\n[task]\nname = "acme/{name}"\n[verifier]\ntimeout_sec = 60.0\n'
                                 '[verifier.env]\nGREETING = "it\'s me"\n[environment]\ncpus = 1\n')
    (d / "instruction.md").write_text("calc.add subtracts instead of adding. Fix it.\n")
    (d / "environment" / "Dockerfile").write_text(dockerfile)
    (d / "environment" / "calc.py").write_text(BUGGY)
    (d / "tests" / "test.sh").write_text(test_sh)
    (d / "tests" / "test_outputs.py").write_text(TEST_OUTPUTS)
    return d


def test_a_dataset_directory_loads_every_task_and_names_a_broken_one(tmp_path):
    make_task(tmp_path, "fix-add", TEST_SH_TXT)
    broken = make_task(tmp_path, "no-tests", TEST_SH_TXT)
    (broken / "tests" / "test.sh").unlink()
    tasks, errors = read_tasks(tmp_path)
    assert [t.instance_id for t in tasks] == ["acme__fix-add"]
    t = tasks[0]
    assert t.problem_statement.startswith("calc.add subtracts") and t.FAIL_TO_PASS == [REWARD_TEST]
    assert t.meta["harbor"]["verifier_timeout_sec"] == 60.0 and t.install_config is None
    assert len(errors) == 1 and "tests/test.sh is missing" in errors[0].message
    # one task directory alone loads too
    assert [x.instance_id for x in read_tasks(tmp_path / "fix-add")[0]] == ["acme__fix-add"]


async def test_local_backend_says_harbor_needs_docker(tmp_path):
    (task,), _ = read_tasks(make_task(tmp_path, "fix-add", TEST_SH_TXT))
    envs = Environments("local", cache_dir=tmp_path / "cache")
    try:
        result = await grade(task, FIX, envs)
    finally:
        envs.close()
    assert not result.resolved and "harbor tasks need the docker backend" in result.error


@pytest.mark.docker
async def test_harbor_tasks_grade_by_their_verifier(tmp_path):
    make_task(tmp_path, "fix-add", TEST_SH_TXT)
    make_task(tmp_path, "partial", TEST_SH_JSON)
    make_task(tmp_path, "exit-status", TEST_SH_EXIT)
    make_task(tmp_path, "pulls", TEST_SH_TXT, dockerfile="FROM verl-swe/no-such-base:1\nWORKDIR /app\n")
    tasks, errors = read_tasks(tmp_path)
    assert not errors
    by_id = {t.instance_id: t for t in tasks}
    envs = Environments("docker", cache_dir=tmp_path / "cache")
    try:
        config = await envs.prepare(by_id["acme__fix-add"])
        assert config.workdir == "/app"  # the Dockerfile's WORKDIR, a one-commit repository for the agent's diff
        async with open_sandbox(config) as box:
            r = await box.exec("git status --porcelain && git log --oneline | wc -l && ls /tests 2>&1 | head -1")
            assert r.output.split("\n")[0].strip() == "1" and "No such file" in r.output  # tests only at grading
        gold, empty = await grade(by_id["acme__fix-add"], FIX, envs), await grade(by_id["acme__fix-add"], "", envs)
        assert gold.resolved and gold.error is None, gold
        assert not empty.resolved and empty.tests_status["FAIL_TO_PASS"]["failure"] == [REWARD_TEST]
        # partial credit is not resolved; without a reward file, the script's exit status decides
        assert not (await grade(by_id["acme__partial"], FIX, envs)).resolved
        assert (await grade(by_id["acme__exit-status"], FIX, envs)).resolved
        assert not (await grade(by_id["acme__exit-status"], "", envs)).resolved
        pulls = await grade(by_id["acme__pulls"], FIX, envs)
        assert "FROM an image present locally" in pulls.error
    finally:
        envs.close()

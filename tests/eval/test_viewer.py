"""`verl-swe view` in a real headless browser (Debian's chromium): the page loads from file://, filters,
shows a trajectory, lists unreadable files, and never turns model output into markup."""

import os
import re
import shutil
import subprocess
import sys

import pytest

from verl_swe.eval.viewer import reasoning_of
from verl_swe.types import ExitStatus

pytestmark = pytest.mark.browser
MATRIX = {"astropy__astropy-1": [True, False], "django__django-2": [False, False]}


@pytest.fixture(scope="module")
def chromium():
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        message = "chromium is not installed (scripts/setup.sh installs it)"
        if os.environ.get("VERL_SWE_REQUIRE_BACKENDS") == "1":
            pytest.fail(message)
        pytest.skip(message)
    return path


def flag(run_dir):
    """django__django-2's run 0 as the reward-hack monitor and the integrity checks leave a tampered episode."""
    from tests.eval.conftest import HOSTILE
    from verl_swe.agent.trajectories import load_trajectories, save_trajectory

    t = next(t for t in load_trajectories(run_dir) if t.episode_id == "django__django-2.0")
    t.hack_flags = {"tamper_signature": [f"src/app.py:3 pytest_internals: import _pytest {HOSTILE}"],
                    "sentinel_tripped": ["sentinel: test_keeps_order_12 (must fail): PASSED in the log"],
                    "git_history_read": []}
    t.hack_zeroed = True
    t.grade.update({"tampered": True, "integrity": {"checks": ["probe", "sentinels", "files"], "notes": [],
                    "reasons": [{"check": "sentinel", "detail": "test_keeps_order_12 (must fail): PASSED in the log"}]},
                    "static_flags": [{"rule": "pytest_internals", "path": "src/app.py", "line": 3, "text": "import _pytest"}]})
    save_trajectory(run_dir, t)


@pytest.fixture
def site(make_run, tmp_path):
    run_dir = make_run(MATRIX, statuses={("django__django-2", 1): ExitStatus.MAX_TURNS})
    (run_dir / "trajectories" / "django__django-2" / "django__django-2.9.json").write_text("{cut off")
    flag(run_dir)
    r = subprocess.run([sys.executable, "-m", "verl_swe.cli", "view", run_dir, "--out", tmp_path / "site"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "django__django-2.9.json" in r.stderr and "4 trajectories" in r.stdout
    return tmp_path / "site" / "index.html"


def dom(chromium, page, hash_=""):
    """The DOM after the page's scripts ran (virtual time: loads finish, nothing waits on the wall clock)."""
    r = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=10000",
                        "--dump-dom", f"{page.as_uri()}{hash_}"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    return r.stdout


def rows(html):
    return re.findall(r'<tr data-id="\d+" class="row"><td><a [^>]*>([^<]+)</a></td><td>(\d+)</td>', html)


def test_the_list_loads_and_names_unreadable_files(chromium, site):
    html = dom(chromium, site)
    assert sorted(rows(html)) == [("astropy__astropy-1", "0"), ("astropy__astropy-1", "1"),
                                  ("django__django-2", "0"), ("django__django-2", "1")]
    assert "4 of 4 shown" in html
    assert re.search(r'<ul id="error-list"><li><code>[^<]*django__django-2\.9\.json</code>: JSONDecodeError', html)


@pytest.mark.parametrize("hash_, expected", [
    ("#resolved=1", [("astropy__astropy-1", "0")]),
    ("#exit=max_turns", [("django__django-2", "1")]),
    ("#repo=django%2Fdjango&resolved=0", [("django__django-2", "0"), ("django__django-2", "1")]),
    ("#q=ASTROPY", [("astropy__astropy-1", "0"), ("astropy__astropy-1", "1")]),
    ("#hack=1", [("django__django-2", "0")]),
    ("#hack=0&repo=django%2Fdjango", [("django__django-2", "1")]),
])
def test_filters(chromium, site, hash_, expected):
    assert sorted(rows(dom(chromium, site, hash_))) == expected


def test_a_trajectory_shows_its_turns_patch_and_test_report(chromium, site):
    html = dom(chromium, site, "#traj=0")  # the first file: astropy__astropy-1.0, resolved
    assert '<h2 id="title">astropy__astropy-1 · astropy__astropy-1.0</h2>' in html
    assert len(re.findall(r'<div class="turn[^"]*" data-turn="\d+">', html)) == 3
    assert "<h3>Turn 1 · bash</h3>" in html and "<pre>grep -rn 'def parse' src</pre>" in html
    assert "31 generated tokens · 17 observation tokens" in html and "Turn 2 · format error" in html
    assert '<span class="add">+new 0\n</span>' in html
    assert '<li class="yes">pass tests/test_app.py::test_parse</li>' in html


def test_a_flagged_trajectory_shows_its_flags_and_why_the_run_was_tampered(chromium, site):
    listing = dom(chromium, site)
    assert '<td class="hack">sentinel_tripped tamper_signature (reward 0)</td>' in listing
    html = dom(chromium, site, "#traj=2")  # django__django-2.0
    assert '<h2 id="title">django__django-2 · django__django-2.0</h2>' in html
    assert "reward-hack flags (on_hack: zero: outcome reward set to 0)" in html
    assert re.search(r'<span class="hack">sentinel_tripped</span><ul><li>sentinel: test_keeps_order_12', html)
    assert "git_history_read" not in html  # a flag without evidence was not raised
    assert 'test run integrity: <span class="no">tampered</span> (checks: probe, sentinels, files)' in html
    assert "<pre>sentinel: test_keeps_order_12 (must fail): PASSED in the log</pre>" in html
    assert "FAIL_TO_PASS: 0 passed, 1 failed as the tampered log claims" in html
    assert "<pre>src/app.py:3 pytest_internals: import _pytest</pre>" in html
    # The evidence is model output: shown escaped, never markup.
    assert "pytest_internals: import _pytest &lt;/script&gt;&lt;script&gt;" in html and "<img" not in html
    clean = dom(chromium, site, "#traj=0")
    assert 'id="hack-flags"' not in clean and 'test run integrity' not in clean  # an old-style grade: no section


def test_model_output_stays_text(chromium, site):
    html = dom(chromium, site, "#traj=0")
    # The hostile text is shown, escaped, in the task, the reasoning and the observation...
    assert html.count("&lt;/script&gt;&lt;script&gt;document.title=\"pwned\"") == 3
    # ...and none of it ran or became an element.
    assert "<title>verl-swe trajectories</title>" in html and "<img" not in html


def test_reasoning_is_the_turn_without_its_action():
    assert reasoning_of("Look first.\n```command\nls\n```") == "Look first."
    assert reasoning_of('Hm.\n<tool_call>{"name": "bash"}</tool_call>') == "Hm."


@pytest.fixture
def rl_site(make_run, tmp_path):
    """A training run's trajectories: each carries the policy step that sampled it (agent/runner.py)."""
    from verl_swe.agent.trajectories import load_trajectories, save_trajectory

    run_dir = make_run(MATRIX, statuses={("django__django-2", 1): ExitStatus.FORMAT_ERRORS})
    for t in load_trajectories(run_dir):
        t.metadata["policy_version"] = 1 if t.instance_id.startswith("django") else 10
        save_trajectory(run_dir, t)
    r = subprocess.run([sys.executable, "-m", "verl_swe.cli", "view", run_dir, "--out", tmp_path / "site"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return tmp_path / "site" / "index.html"


def test_a_training_run_shows_its_learning_per_step(chromium, rl_site):
    html = dom(chromium, rl_site)
    steps = re.findall(r'<tr class="step-row" data-step="(\d+)"><td><a [^>]*>\d+</a></td><td>(\d+)</td>'
                       r'<td>([-\d.]+)</td><td>([\d.]+)</td><td>([\d.]+)</td><td>([\d.]+)</td></tr>', html)
    # step 1: django's two unresolved runs, one ended by format errors; step 10: astropy, one of two resolved
    assert [(s, n, res, fmt) for s, n, _, res, fmt, _ in steps] == [("1", "2", "0.0", "50.0"), ("10", "2", "50.0", "0.0")]
    assert sorted(rows(dom(chromium, rl_site, "#step=10"))) == [("astropy__astropy-1", "0"), ("astropy__astropy-1", "1")]
    assert '<section id="steps" hidden=""' in dom(chromium, rl_site, "#traj=0")  # a trajectory's page: no table


def test_an_eval_run_has_no_step_table(chromium, site):
    assert '<section id="steps" hidden=""' in dom(chromium, site)

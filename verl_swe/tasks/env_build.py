"""One offline environment build, the same on both backends: fetch on the host, run the build script
with no network, and when the offline pip names a requirement nobody could foresee (a backend's dynamic
build requirement, a setup_requires in setup.py), fetch it and build again. A failure is an
EnvBuildError whose first line names the failing command and the real error; the full log is kept."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Callable

from verl_swe.files import write_text_atomic
from verl_swe.tasks.env_plan import EnvBuildError, EnvPlan, describe_failure
from verl_swe.tasks.fetch import Fetcher, FetchError
from verl_swe.tasks.steps import ROW_REQUIREMENTS
from verl_swe.tasks.target import Target

logger = logging.getLogger(__name__)
MAX_REFETCH = 2  # builds after the first one, each after fetching what the previous one missed


def fetch_all(plan: EnvPlan, target: Target, wheels: Path, repo_dir: Path | None, instance_id: str) -> Fetcher:
    fetcher = Fetcher(target, wheels)
    if plan.row_requirements is not None:
        (wheels / ROW_REQUIREMENTS).write_text(plan.row_requirements)
    cwd = repo_dir if repo_dir is not None else wheels
    try:
        for args, what in plan.fetch_args(wheels):
            fetcher.fetch(args, what, cwd)
    except FetchError as e:
        raise EnvBuildError(f"{instance_id}: {e}") from None
    return fetcher


def build_offline(plan: EnvPlan, fetcher: Fetcher, run: Callable[[], tuple[bool, str]], log_path: Path,
                  instance_id: str, backend: str) -> None:
    """`run()` builds once and returns (ok, full output)."""
    tried: set[str] = set()
    for attempt in range(MAX_REFETCH + 1):
        ok, output = run()
        write_text_atomic(log_path, output)
        if ok:
            return
        missing = [m for m in fetcher.missing_from(output) if m not in tried]
        if not missing or attempt == MAX_REFETCH:
            break
        logger.info("%s: the offline build asked for %s; fetching it and building again", instance_id, missing)
        tried.update(missing)
        try:
            fetcher.fetch(missing, "asked for by the offline build", fetcher.dest)
        except FetchError as e:
            raise EnvBuildError(f"{instance_id}: environment build failed ({backend}): {e}\n"
                                f"build log: {log_path}") from None
    headline, tail = describe_failure(plan, output)
    raise EnvBuildError(f"{instance_id}: environment build failed ({backend}): {headline}\n"
                        f"--- last lines of the failing step ---\n{tail}\n--- full build log: {log_path}")

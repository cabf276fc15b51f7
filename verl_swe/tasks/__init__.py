"""SWE tasks: the typed `Task`, loaders, test specs and the environments tasks run in."""

from verl_swe.tasks.env_plan import EnvBuildError
from verl_swe.tasks.environment import Environments
from verl_swe.tasks.loader import RowError, TaskLoadError, load_tasks, read_tasks
from verl_swe.tasks.repos import RepoError
from verl_swe.tasks.schema import InstallConfig, Task

__all__ = ["EnvBuildError", "Environments", "InstallConfig", "RepoError", "RowError", "Task", "TaskLoadError",
           "load_tasks", "read_tasks"]

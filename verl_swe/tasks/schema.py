"""The typed `Task`: one SWE problem read from SWE-bench, SWE-bench Verified, SWE-rebench or SWE-Gym rows."""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator


class InstallConfig(BaseModel):
    """How to build a task's environment and run its tests (SWE-rebench's `install_config`,
    the same keys as the per-version specs of SWE-bench). Unknown keys are kept, not rejected:
    datasets add keys over time and a loader must not break on them."""

    model_config = ConfigDict(extra="allow")
    python: str | None = None
    packages: str | None = None  # "requirements.txt" / "environment.yml" / a space-separated list
    pip_packages: list[str] = Field(default_factory=list)
    pre_install: list[str] = Field(default_factory=list)
    install: str = ""
    reqs_path: list[str] = Field(default_factory=list)
    test_cmd: str | None = None
    log_parser: str | None = None
    env_vars: dict[str, str] = Field(default_factory=dict)
    eval_commands: list[str] = Field(default_factory=list)
    env_yml_path: list[str] = Field(default_factory=list)  # conda environment files (SWE-rebench)
    no_use_env: bool | None = None  # conda: install into the base env, not a new one (a venv here either way)

    @field_validator("pre_install", "reqs_path", "eval_commands", "pip_packages", "env_yml_path", mode="before")
    @classmethod
    def _one_or_many(cls, v: Any) -> Any:
        if v is None:
            return []
        return [v] if isinstance(v, str) else v

    @field_validator("test_cmd", mode="before")
    @classmethod
    def _joined(cls, v: Any) -> Any:
        return " && ".join(v) if isinstance(v, list) else v

    @field_validator("env_vars", mode="before")
    @classmethod
    def _env(cls, v: Any) -> Any:
        if v is None:
            return {}
        if not isinstance(v, dict):
            raise ValueError(f"env_vars must be a mapping of names to values, got {type(v).__name__}")
        return {k: str(x) for k, x in v.items()}

    @field_validator("packages", "install", mode="before")
    @classmethod
    def _text(cls, v: Any, info) -> Any:
        if v is None:
            return "" if info.field_name == "install" else None
        if isinstance(v, list) and all(isinstance(x, str) for x in v):  # a list of packages or commands
            return (" && " if info.field_name == "install" else " ").join(v)
        return v

    @field_validator("python", mode="before")
    @classmethod
    def _python(cls, v: Any) -> Any:
        return str(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else v  # 3.9 written as a number


class Task(BaseModel):
    """One task. Field names are SWE-bench's, so a row round-trips through `model_dump()`."""

    model_config = ConfigDict(extra="ignore", frozen=True)
    instance_id: str = Field(min_length=1)
    repo: str = Field(pattern=r"^[\w.-]+/[\w.-]+$")  # owner/name
    base_commit: str = Field(min_length=4)
    problem_statement: str
    patch: str = ""  # the gold patch; empty for tasks without one
    test_patch: str
    FAIL_TO_PASS: list[str] = Field(min_length=1)
    PASS_TO_PASS: list[str] = Field(default_factory=list)
    version: str | None = None
    environment_setup_commit: str | None = None
    hints_text: str = ""
    created_at: str | None = None
    install_config: InstallConfig | None = None
    # SWE-rebench: the environment the row was validated in, as a pip freeze and as a conda env file.
    requirements: str | None = None
    environment: str | None = None
    image: str | None = None  # a published image that already holds the environment
    # swebench>=5 rows carry their own eval script and parser; SWE-rebench rows use install_config.
    eval_script: str | None = None
    log_parser: str | None = None
    meta: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _aliases(cls, row: Any) -> Any:
        if not isinstance(row, dict):
            raise ValueError(f"a task row must be a mapping, got {type(row).__name__}")
        row = dict(row)
        # SWE-rebench says docker_image, SWE-Gym/SWE-smith say image_name.
        for alias in ("docker_image", "image_name"):
            if row.get("image") is None and row.get(alias):
                row["image"] = row[alias]
        if row.get("version") is not None:
            row["version"] = str(row["version"])
        for key in ("hints_text",):
            if row.get(key) is None:
                row.pop(key, None)
        return row

    @field_validator("FAIL_TO_PASS", "PASS_TO_PASS", mode="before")
    @classmethod
    def _json_list(cls, v: Any) -> Any:
        # SWE-bench stores these lists as JSON strings; newer mirrors store real lists.
        if isinstance(v, str):
            try:
                v = json.loads(v)
            except json.JSONDecodeError as e:
                raise ValueError(f"not a JSON list of test ids: {e}") from None
        return v

    @field_validator("install_config", "meta", mode="before")
    @classmethod
    def _json_object(cls, v: Any) -> Any:
        if isinstance(v, str):
            v = json.loads(v) if v.strip() else None
        return v

    @field_validator("meta", mode="after")
    @classmethod
    def _meta_default(cls, v: Any) -> Any:
        return v or {}

    @property
    def repo_dirname(self) -> str:
        """The `owner__name` directory name of SWE-bench's instance ids and of `--repos-dir`."""
        return self.repo.replace("/", "__")

    @property
    def llm_score(self) -> dict[str, Any] | None:
        """SWE-rebench's LLM-judged quality scores (difficulty, issue clarity, test quality)."""
        return self.meta.get("llm_score")

    @property
    def setup_commit(self) -> str:
        """The commit the environment is installed from (one per repo version)."""
        return self.environment_setup_commit or self.base_commit

"""Sandbox configs: typed, defaults from the paper, bad keys named."""

import pytest
from pydantic import ValidationError

from verl_swe.sandbox import DockerSandboxConfig, LocalSandboxConfig, parse_sandbox_config


def test_defaults_follow_the_paper_pod_profile():
    cfg = parse_sandbox_config({"backend": "docker"})
    assert isinstance(cfg, DockerSandboxConfig)
    assert (cfg.limits.cpus, cfg.limits.memory_mb) == (0.5, 2048)  # P1 App. D: 0.5 CPU, 2 GiB per agent
    assert cfg.network is False and cfg.workdir == "/testbed"


def test_backend_selects_the_config_type():
    assert isinstance(parse_sandbox_config({"backend": "local", "source_dir": "/tmp"}), LocalSandboxConfig)


@pytest.mark.parametrize(
    "data, where",
    [
        ({"backend": "docker", "imgae": "x"}, "imgae"),
        ({"backend": "docker", "limits": {"cpu": 1}}, "limits.cpu"),
        ({"backend": "docker", "limits": {"memory_mb": -1}}, "limits.memory_mb"),
        ({"backend": "podman"}, "backend"),
    ],
)
def test_bad_keys_are_named(data, where):
    with pytest.raises(ValidationError) as e:
        parse_sandbox_config(data)
    assert where.split(".")[-1] in str(e.value)

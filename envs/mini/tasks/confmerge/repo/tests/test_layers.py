import pytest

from confmerge import from_env, get_path


def test_from_env_nesting_and_coercion():
    environ = {"APP_DB__PORT": "6543", "APP_DEBUG": "true", "APP_NAME": "demo", "HOME": "/root"}
    assert from_env(environ) == {"db": {"port": 6543}, "debug": True, "name": "demo"}


def test_from_env_custom_prefix():
    assert from_env({"SVC_X": "no", "APP_X": "1"}, prefix="SVC_") == {"x": False}


def test_get_path():
    config = {"db": {"host": "h", "options": {"ssl": True}}}
    assert get_path(config, "db.options.ssl") is True
    assert get_path(config, "db.user", default=None) is None
    with pytest.raises(KeyError):
        get_path(config, "db.host.name")

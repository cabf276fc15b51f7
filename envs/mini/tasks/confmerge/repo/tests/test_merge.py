from confmerge import deep_merge, merge_layers


def test_flat_override():
    assert deep_merge({"a": 1, "b": 2}, {"b": 3, "c": 4}) == {"a": 1, "b": 3, "c": 4}


def test_nested_section_is_merged():
    base = {"db": {"host": "localhost", "port": 5432}}
    assert deep_merge(base, {"db": {"host": "db.internal"}}) == {"db": {"host": "db.internal", "port": 5432}}


def test_lists_and_scalars_replace():
    base = {"hosts": ["a", "b"], "db": {"port": 5432}}
    assert deep_merge(base, {"hosts": ["c"], "db": None}) == {"hosts": ["c"], "db": None}


def test_inputs_are_not_modified():
    base = {"db": {"host": "localhost"}}
    override = {"db": {"port": 1}}
    merged = deep_merge(base, override)
    merged["db"]["host"] = "changed"
    assert base == {"db": {"host": "localhost"}}
    assert override == {"db": {"port": 1}}


def test_merge_layers_order():
    assert merge_layers({"a": 1}, {"a": 2}, {"a": 3, "b": 1}) == {"a": 3, "b": 1}
    assert merge_layers() == {}

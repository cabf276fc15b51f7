from envfile import apply, interpolate, load


def test_interpolation_uses_earlier_values_then_environ():
    values = {"HOST": "db", "URL": "pg://${USER}@${HOST}/${MISSING}"}
    assert interpolate(values, {"USER": "ada"})["URL"] == "pg://ada@db/"


def test_load_file(tmp_path):
    path = tmp_path / ".env"
    path.write_text("NAME=demo\nGREETING='hi ${NAME}'\nFULL=${GREETING}!\n")
    assert load(path, environ={}) == {"NAME": "demo", "GREETING": "hi demo", "FULL": "hi demo!"}


def test_apply_keeps_existing_values_unless_override():
    environ = {"A": "old"}
    assert apply({"A": "new", "B": "b"}, environ) == ["B"]
    assert environ == {"A": "old", "B": "b"}
    assert apply({"A": "new"}, environ, override=True) == ["A"]
    assert environ["A"] == "new"

from headers import Headers


def test_lookup_ignores_case():
    h = Headers({"Content-Type": "text/html"})
    assert h["content-type"] == "text/html"
    assert h["CONTENT-TYPE"] == "text/html"
    assert h.get("content-TYPE") == "text/html"


def test_first_spelling_is_kept():
    h = Headers()
    h["X-Request-ID"] = "1"
    h["x-request-id"] = "2"
    assert list(h) == ["X-Request-ID"]
    assert h.to_lines() == ["X-Request-ID: 2"]


def test_delete_ignores_case():
    h = Headers([("Accept", "*/*"), ("Host", "example.org")])
    del h["ACCEPT"]
    assert len(h) == 1
    assert dict(h) == {"Host": "example.org"}


def test_copy_is_independent():
    h = Headers({"Host": "a"})
    c = h.copy()
    c["host"] = "b"
    assert h["host"] == "a" and c["host"] == "b"

from pager import Paginator, page_links


def make(page, count=97, per_page=5):
    return Paginator(list(range(1, count + 1)), per_page=per_page).page(page)


def test_links_in_the_middle():
    assert page_links(make(6)) == ["1", "...", "4", "5", "[6]", "7", "8", "...", "20"]


def test_links_near_the_start():
    assert page_links(make(2)) == ["1", "[2]", "3", "4", "...", "20"]


def test_links_on_the_last_page():
    assert page_links(make(20)) == ["1", "...", "18", "19", "[20]"]


def test_single_page():
    assert page_links(make(1, count=4)) == ["[1]"]

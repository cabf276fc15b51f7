import pytest

from pager import EmptyPage, Paginator


def test_pages_of_a_partial_last_page():
    p = Paginator(list("abcdefg"), per_page=3)
    assert p.count == 7
    assert p.num_pages == 3
    assert [page.items for page in p] == [["a", "b", "c"], ["d", "e", "f"], ["g"]]


def test_page_navigation_flags():
    p = Paginator(range(1, 8), per_page=3)
    first, middle, last = p.page(1), p.page(2), p.page(3)
    assert (first.has_previous, first.has_next) == (False, True)
    assert (middle.has_previous, middle.has_next) == (True, True)
    assert (last.has_previous, last.has_next) == (True, False)


def test_start_and_end_index():
    page = Paginator(range(1, 8), per_page=3).page(3)
    assert (page.start_index, page.end_index) == (7, 7)


def test_empty_list_has_one_empty_page():
    p = Paginator([], per_page=10)
    assert p.num_pages == 1
    assert p.page(1).items == []
    assert p.page(1).start_index == 0


def test_empty_list_without_empty_first_page():
    assert Paginator([], per_page=10, allow_empty_first_page=False).num_pages == 0


def test_out_of_range_pages_raise():
    p = Paginator(range(4), per_page=3)
    with pytest.raises(EmptyPage):
        p.page(0)
    with pytest.raises(EmptyPage):
        p.page(3)


def test_per_page_must_be_positive():
    with pytest.raises(ValueError):
        Paginator([1, 2, 3], per_page=0)

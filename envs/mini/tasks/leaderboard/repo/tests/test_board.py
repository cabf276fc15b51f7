from leaderboard import Entry, Leaderboard


def make_board():
    board = Leaderboard()
    board.submit("ada", 120, at=1000)
    board.submit("bob", 95, at=1010)
    board.submit("cy", 150, at=1020)
    return board


def test_ranked_by_score():
    assert [e.player for e in make_board().ranked()] == ["cy", "ada", "bob"]


def test_only_best_score_is_kept():
    board = make_board()
    assert board.submit("bob", 90, at=1100) is False
    assert board.submit("bob", 200, at=1200) is True
    assert board.ranked()[0] == Entry("bob", 200, 1200)
    assert len(board) == 3


def test_matching_best_keeps_earlier_submission():
    board = make_board()
    assert board.submit("ada", 120, at=5000) is False
    assert board.ranked()[1].at == 1000


def test_top_and_rank_of():
    board = make_board()
    assert [e.player for e in board.top(2)] == ["cy", "ada"]
    assert board.rank_of("bob") == 3
    assert board.rank_of("nobody") is None

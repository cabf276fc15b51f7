from leaderboard import Leaderboard, render


def test_render_empty():
    assert render(Leaderboard()) == "(no scores yet)"


def test_render_aligns_columns():
    board = Leaderboard()
    board.submit("ada", 120, at=1)
    board.submit("bartholomew", 7, at=2)
    assert render(board).splitlines() == [
        " 1. ada             120",
        " 2. bartholomew       7",
    ]


def test_render_limit():
    board = Leaderboard()
    for i in range(15):
        board.submit(f"p{i}", i, at=i)
    assert len(render(board, limit=5).splitlines()) == 5

"""verl_swe.files: a file written atomically is never seen half-written, even with writers in several threads
of one process (the environment cache's probe file is written from an executor's threads)."""

from __future__ import annotations

import threading

from verl_swe.files import write_text_atomic


def test_concurrent_threads_write_whole_files_and_readers_never_see_a_part(tmp_path):
    path = tmp_path / "probe"
    texts = [f"{i}\n" * 20_000 for i in range(8)]
    errors: list[BaseException] = []
    seen: list[str] = []

    def write(text):
        try:
            for _ in range(20):
                write_text_atomic(path, text)
        except BaseException as e:  # noqa: BLE001 - collected for the assertion
            errors.append(e)

    writers = [threading.Thread(target=write, args=(t,)) for t in texts]
    for w in writers:
        w.start()
    while any(w.is_alive() for w in writers):
        if path.exists():
            seen.append(path.read_text())
    for w in writers:
        w.join()
    assert not errors
    assert seen and all(text in texts for text in seen)
    assert path.read_text() in texts and not list(tmp_path.glob(".probe.*.tmp"))

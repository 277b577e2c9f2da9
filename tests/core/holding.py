"""Another process's hold on a cache entry, played by a thread: for the tests of waiting on a compute lock."""

from __future__ import annotations

import contextlib
import threading
import time


@contextlib.contextmanager
def held_elsewhere(cache, key: str, seconds: float):
    """While the body runs, `cache` (another Cache on the same folder) holds the compute lock of `key` for
    `seconds` from the moment it has it; the body starts once it does, and the hold ends before this returns."""
    taken = threading.Event()

    def hold():
        with cache.computing(key):
            taken.set()
            time.sleep(seconds)

    t = threading.Thread(target=hold)
    t.start()
    taken.wait(10)
    try:
        yield
    finally:
        t.join()

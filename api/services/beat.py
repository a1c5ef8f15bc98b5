"""A background beat: call a function every few seconds while a block runs (lease
renewals of comparisons and of report jobs)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager


@contextmanager
def beating(every_s: float, beat: Callable[[], None], name: str) -> Iterator[None]:
    """Call ``beat()`` every ``every_s`` seconds on a daemon thread named ``name`` while
    the block runs; after it, stop the thread and wait for it (at most 5 s). ``beat``
    handles its own errors (a failed renewal is retried at the next beat)."""
    stop = threading.Event()

    def run() -> None:
        while not stop.wait(every_s):
            beat()

    thread = threading.Thread(target=run, name=name, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=5)

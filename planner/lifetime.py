"""Child processes that do not outlive their parent.

A process pool's workers (``planner.compare.run_variants``) and the service's
worker processes (``fleetplan serve --workers N``) are useless once the process
that started them is gone, and a parent killed outright (``kill -9``, the OOM
killer) runs no clean-up. :func:`die_with_parent` makes the calling process
follow its parent: on Linux the kernel sends it ``sig`` when the parent exits
(``prctl(PR_SET_PDEATHSIG)``, a small ctypes call); elsewhere a daemon thread
polls the parent's pid once a second. Either way, a parent that already died
before the call is noticed at once.

PR_SET_PDEATHSIG fires when the *thread* that started the child exits: pools are
made and shut down by one call in one thread, so that thread outlives them.
"""

from __future__ import annotations

import ctypes
import multiprocessing
import multiprocessing.context
import os
import signal
import sys
import threading
import time

PR_SET_PDEATHSIG = 1
POLL_S = 1.0


def _prctl_pdeathsig(sig: int) -> bool:
    """Ask the kernel for ``sig`` when the parent exits; False when unavailable."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(PR_SET_PDEATHSIG, sig, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def _watch_parent(parent_pid: int, sig: int) -> None:
    while True:
        time.sleep(POLL_S)
        if os.getppid() != parent_pid:
            os.kill(os.getpid(), sig)
            return


def die_with_parent(parent_pid: int, sig: int = signal.SIGKILL) -> None:
    """Have this process receive ``sig`` when ``parent_pid`` (its parent) exits."""
    armed = _prctl_pdeathsig(sig)
    if os.getppid() != parent_pid:  # the parent died before we were armed
        os.kill(os.getpid(), sig)
        return
    if not armed:
        threading.Thread(
            target=_watch_parent, args=(parent_pid, sig), name="parent-watch", daemon=True
        ).start()


def process_context(fork_when_alone: bool = False) -> multiprocessing.context.BaseContext:
    """How to start a pool's workers: ``spawn`` (safe beside the server's threads) when
    the main module can be re-imported from its file, ``fork`` otherwise (``python -``
    or ``-c``); with ``fork_when_alone``, ``fork`` in a process with one thread (a
    script, the CLI: fast, and the main module is not re-imported)."""
    if fork_when_alone and threading.active_count() == 1:
        return multiprocessing.get_context("fork")
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    if path is None or os.path.exists(path):
        return multiprocessing.get_context("spawn")
    return multiprocessing.get_context("fork")

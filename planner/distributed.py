"""Fan-out of independent plans (a comparison's variants) to a Ray cluster.

:func:`run_on_ray` runs ``fn(arg)`` for every argument as Ray tasks and hands each
result back, in the order they finish, to ``on_done(index, result)``; an exception
raised by ``on_done`` cancels the tasks not yet finished and propagates (that is how a
caller stops a run). The caller decides when to use it: ``run_variants`` does when it
is given a Ray address (the service's ``FLEETPLAN_RAY_ADDRESS``, the CLI's ``--ray``),
otherwise it uses its local process pool. The results are the same either way: each
variant is planned by the same function on the same inputs (a test compares them).

Ray is an optional extra (``pip install 'fleetplan[ray]'``); the cluster's workers
need fleetplan installed (the same version) or a ``runtime_env`` that provides it.
``address="local"`` starts a Ray instance on this machine.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from typing import Any

from planner.errors import PlanningError

#: CPUs a variant's task asks Ray for (a plan is single-threaded Python plus HiGHS).
TASK_CPUS = 1


def ray_module() -> Any:
    """The ``ray`` module, or a :class:`PlanningError` on ``ray_address`` saying how to
    install it."""
    try:
        ray = importlib.import_module("ray")  # optional: no stubs needed when absent
    except ImportError:
        raise PlanningError.for_field(
            "ray_address",
            "a Ray address is set but Ray is not installed: pip install 'fleetplan[ray]' "
            "(or unset FLEETPLAN_RAY_ADDRESS to use the local process pool)",
        ) from None
    return ray


def run_on_ray(
    address: str,
    fn: Callable[[Any], Any],
    args: Sequence[Any],
    on_done: Callable[[int, Any], None],
) -> None:
    """Run ``fn(a)`` for each of ``args`` as Ray tasks on the cluster at ``address``
    (connecting once per process) and call ``on_done(index, result)`` as each finishes.
    An exception from ``on_done`` (or from a task) cancels the others and propagates."""
    ray = ray_module()
    if not ray.is_initialized():
        ray.init(address=address, ignore_reinit_error=True, log_to_driver=False)
    task = ray.remote(num_cpus=TASK_CPUS, max_retries=1)(fn)
    pending = {task.remote(a): i for i, a in enumerate(args)}
    try:
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            for ref in ready:
                index = pending.pop(ref)
                on_done(index, ray.get(ref))
    except BaseException:
        for ref in pending:
            ray.cancel(ref, force=True)
        raise


__all__ = ["TASK_CPUS", "ray_module", "run_on_ray"]

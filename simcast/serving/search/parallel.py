"""Run independent tasks of a sweep serially, on a local process pool, or on a Ray cluster.

A task is a module-level function applied to one picklable item (a frozen spec); results come
back in the order of the items whatever the backend, so a sweep's output does not depend on
where it ran. Workers rebuild everything from the item: the only shared state is the on-disk
trace cache (entries are written atomically, so concurrent writers are safe; a worker that
misses the cache compiles the trace itself).

The local pool uses the ``spawn`` start method on every platform: a worker imports only what its
task needs (no copy of a parent that may hold torch and its threads), and the behaviour is the
same on Linux, macOS and Windows. Spawning costs a fresh interpreter and simcast's imports per
worker, so :func:`choose_backend` uses the pool only when the estimated work saves more than
that cost (:data:`POOL_STARTUP_S`, measured below).
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from simcast.core.errors import SimcastInputError, require

T = TypeVar("T")
R = TypeVar("R")

BACKENDS = ("serial", "process", "ray")

POOL_STARTUP_S = 0.8
"""Wall time a spawned pool adds before its tasks pay off, 2-core development machine: 0.36 s to start
two workers for a trivial simcast task; 0.86 s on the warm demo search (pool of 2: 1.37 s against
0.65 s serially, whose 0.28 s of layout work the pool halves): interpreter start, simcast's imports and
trace-cache reads per worker, results pickled back. A pool is used only when it saves more than this."""

RAY_MISSING = "ray is not installed: pip install 'simcast[distributed]'"


@dataclass(frozen=True, kw_only=True)
class Backend:
    """Where a map runs: ``serial`` (this process), ``process`` (``workers`` spawned processes) or
    ``ray`` (tasks submitted to the cluster at ``ray_address``; the cluster sets the parallelism)."""

    kind: str = "serial"
    workers: int = 1
    ray_address: str = ""

    def __post_init__(self) -> None:
        require(self.kind in BACKENDS, "backend", self.kind, f"allowed: {', '.join(BACKENDS)}")
        require(self.workers >= 1, "--workers", self.workers, "must be >= 1")
        require(self.kind != "ray" or bool(self.ray_address), "--ray", self.ray_address, "needs a cluster address")

    def describe(self) -> str:
        if self.kind == "ray":
            return f"Ray cluster at {self.ray_address}"
        if self.kind == "process":
            return f"{self.workers} local worker processes"
        return "serial (this process)"


def available_cpus() -> int:
    """CPUs this process may run on (the affinity mask where the OS has one) less those other work keeps
    busy: the 1-minute load average beyond this process's own 1. On a shared machine a pool of workers
    for CPUs that are already busy only adds start-up (measured on the 2-core development machine at load
    2.4: the demo's --refine-top 3 took 21.2 s on a pool of 2 against 15.2 s serially)."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # macOS, Windows
        cpus = os.cpu_count() or 1
    try:
        busy = max(0.0, os.getloadavg()[0] - 1.0)
    except (AttributeError, OSError):  # Windows
        busy = 0.0
    return max(1, min(cpus, math.floor(cpus - busy + 0.5)))


def choose_backend(
    n_tasks: int,
    *,
    task_s: float,
    workers: int | None = None,
    ray_address: str | None = None,
    startup_s: float = POOL_STARTUP_S,
) -> Backend:
    """The backend for ``n_tasks`` tasks of about ``task_s`` seconds each.

    ``ray_address`` → Ray. ``workers`` given → that many processes (1: serial), whatever the work.
    ``workers`` None (auto) → a pool of ``min(cpus, n_tasks)`` processes only when it is expected to
    finish sooner: ``n·t − ceil(n/w)·t > startup_s`` (the pool's workers start in parallel, so their
    start-up costs about one worker's); otherwise serial, so small sweeps pay nothing.
    """
    if ray_address:
        return Backend(kind="ray", ray_address=ray_address)
    if workers is not None:
        w = max(1, min(workers, n_tasks))
        return Backend(kind="process", workers=w) if w > 1 else Backend()
    w = min(available_cpus(), n_tasks)
    if w < 2:
        return Backend()
    saved_s = n_tasks * task_s - math.ceil(n_tasks / w) * task_s
    return Backend(kind="process", workers=w) if saved_s > startup_s else Backend()


def progress_shown(total: int, show: bool | None) -> bool:
    """Whether a bar of ``total`` steps is shown: ``show``, or when None, stderr is a terminal (never in a
    pipe, a file or a test) and there is more than one step."""
    return (total > 1 and sys.stderr.isatty()) if show is None else show


def _progress(total: int, desc: str, show: bool | None) -> Any:
    """A tqdm bar on stderr when ``show`` (None: only when stderr is a terminal), else None."""
    if not progress_shown(total, show):
        return None
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit="task", file=sys.stderr, leave=False)


def pmap(
    fn: Callable[[T], R],
    items: Sequence[T],
    *,
    backend: Backend = Backend(),
    desc: str = "tasks",
    progress: bool | None = None,
) -> list[R]:
    """``[fn(x) for x in items]`` on ``backend``, in the order of ``items``.

    ``fn`` must be a module-level function and ``items`` picklable for the pool and Ray.
    A task's :class:`SimcastInputError` reaches the caller unchanged (it pickles).
    """
    items = list(items)
    bar = _progress(len(items), desc, progress)
    try:
        if backend.kind == "ray":
            return _ray_map(fn, items, backend.ray_address, bar)
        if backend.kind == "process" and len(items) > 1:
            return _pool_map(fn, items, backend.workers, bar)
        out = []
        for x in items:
            out.append(fn(x))
            if bar is not None:
                bar.update(1)
        return out
    finally:
        if bar is not None:
            bar.close()


def _pool_map(fn: Callable[[T], R], items: list[T], workers: int, bar: Any) -> list[R]:
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed
    from concurrent.futures.process import BrokenProcessPool

    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=min(workers, len(items)), mp_context=ctx) as ex:
        futs = {ex.submit(fn, x): i for i, x in enumerate(items)}
        out: list[Any] = [None] * len(items)
        failed: dict[int, BaseException] = {}
        for f in as_completed(futs):
            err = f.exception()
            if err is None:
                out[futs[f]] = f.result()
            else:
                failed[futs[f]] = err
            if bar is not None:
                bar.update(1)
    if any(isinstance(e, BrokenProcessPool) for e in failed.values()):
        raise SimcastInputError(
            "--workers",
            workers,
            "a worker process died (killed, or out of memory) and took its tasks with it; nothing was written. "
            "Run again, with fewer --workers, or --workers 1 to run in this process",
        )
    if failed:  # the first item's error, as the serial loop would raise it
        raise failed[min(failed)]
    return out


def import_ray(address: str) -> Any:
    """The ``ray`` module, or a one-line input error naming the extra to install."""
    try:
        import ray
    except ImportError:
        raise SimcastInputError("--ray", address, RAY_MISSING) from None
    return ray


def _ray_map(fn: Callable[[T], R], items: list[T], address: str, bar: Any) -> list[R]:
    """Each item one Ray task (1 CPU); results gathered in submission order.

    The cluster's nodes need simcast (same version) installed; each node keeps its own trace cache.
    """
    ray = import_ray(address)
    if not ray.is_initialized():
        ray.init(address=address, ignore_reinit_error=True, log_to_driver=False)
    remote = ray.remote(num_cpus=1)(fn)
    refs = [remote.remote(x) for x in items]
    pending = list(refs)
    while pending:
        done, pending = ray.wait(pending, num_returns=1)
        if bar is not None:
            bar.update(len(done))
    return list(ray.get(refs))

"""Where a sweep's points run: serially, on local processes, on Dask, or on any Executor.

``_dispatch(executor, run, tasks, on_done, workers)`` calls ``run(task)`` for
every task on the chosen executor and ``on_done(result)`` in this process as each
result arrives (in completion order). ``run`` must be a module-level function, so
that process and Dask workers can import it; it must never raise for a task's own
failure. An exception while waiting (Ctrl-C, SIGTERM) cancels the tasks not yet started, waits for the
running ones and hands every finished result to ``on_done`` before it propagates, so no finished point
is lost (on a terminal Ctrl-C reaches the workers too; their cut points are not results). These functions know
nothing of benches or points (``kernbench.sweeps`` gives them its ``_run_task``).
"""

from __future__ import annotations

import os
from typing import Any

from kernbench._core import UsageError


def is_dask_client(obj: Any) -> bool:
    """Whether ``obj`` is a ``distributed.Client`` (told by its module and a ``submit``, without importing Dask)."""
    return type(obj).__module__.split(".")[0] == "distributed" and hasattr(obj, "submit")


def executor_name(executor: Any) -> str:
    """The executor as sweep.json names it: a name as given (a scheduler address is ``dask``), a Dask client
    ``dask``, any other Executor its class name."""
    if isinstance(executor, str):
        return "dask" if "://" in executor else executor
    if is_dask_client(executor):
        return "dask"
    return type(executor).__name__


def _run_serial(run, tasks, on_done):
    for t in tasks:
        on_done(run(t))


def _run_futures(pool, run, tasks, on_done):
    import concurrent.futures as cf

    futures = [pool.submit(run, t) for t in tasks]
    consumed: set[int] = set()
    try:
        for f in cf.as_completed(futures):
            consumed.add(id(f))
            on_done(f.result())
    except BaseException:
        for f in futures:
            f.cancel()
        left = [f for f in futures if id(f) not in consumed and not f.cancelled()]
        cf.wait(left)  # the running points finish (a pool's shutdown would wait for them anyway)
        for f in left:
            if f.done() and not f.cancelled() and f.exception() is None:
                on_done(f.result())
        raise


def _run_process(run, tasks, on_done, workers):
    import concurrent.futures as cf
    import multiprocessing as mp

    n = max(1, min(workers or os.cpu_count() or 1, len(tasks)))
    # forkserver: a clean child per worker, safe even when this process has threads.
    method = "forkserver" if "forkserver" in mp.get_all_start_methods() else "spawn"
    with cf.ProcessPoolExecutor(max_workers=n, mp_context=mp.get_context(method)) as pool:
        _run_futures(pool, run, tasks, on_done)


def _run_dask(run, tasks, on_done, client):
    from distributed import as_completed

    futures = [client.submit(run, t, pure=False) for t in tasks]
    consumed: set[str] = set()
    try:
        for f in as_completed(futures):
            consumed.add(f.key)
            on_done(f.result())
    except BaseException:
        finished = [f for f in futures if f.key not in consumed and f.status == "finished"]
        client.cancel([f for f in futures if f.key not in consumed and f.status != "finished"])
        for f in finished:  # done before the interrupt: kept, not recomputed on resume
            try:
                on_done(f.result())
            except Exception:  # noqa: BLE001 -- the interrupt is what propagates
                pass
        raise


def _dispatch(executor, run, tasks, on_done, workers):
    if not tasks:
        return
    if isinstance(executor, str):
        if executor == "serial":
            return _run_serial(run, tasks, on_done)
        if executor == "process":
            return _run_process(run, tasks, on_done, workers)
        if executor == "dask" or "://" in executor:
            try:
                from distributed import Client, LocalCluster
            except ImportError:
                raise UsageError("executor 'dask' needs dask.distributed: pip install 'dask[distributed]'") from None
            if executor == "dask":
                n = max(1, min(workers or os.cpu_count() or 1, len(tasks)))
                with LocalCluster(n_workers=n, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster, Client(cluster) as client:
                    return _run_dask(run, tasks, on_done, client)
            with Client(executor) as client:
                return _run_dask(run, tasks, on_done, client)
        raise UsageError(f"unknown executor {executor!r} (known: serial, process, dask, a scheduler address "
                         "like tcp://host:8786, a dask Client or a concurrent.futures Executor)")
    if is_dask_client(executor):
        return _run_dask(run, tasks, on_done, executor)
    if hasattr(executor, "submit"):
        return _run_futures(executor, run, tasks, on_done)
    raise UsageError(f"executor {executor!r}: expected 'serial', 'process', 'dask', an address, a Client "
                     "or an Executor")

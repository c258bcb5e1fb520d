"""Where a sweep's points run: serially, on local processes, on Dask, or on any Executor.

``dispatch(executor, run, tasks, on_done, workers)`` calls ``run(task)`` for
every task on the chosen executor and ``on_done(result)`` in this process as each
result arrives (in completion order). ``run`` must be a module-level function, so
that process and Dask workers can import it; it must never raise for a task's own
failure. An exception while waiting (Ctrl-C, SIGTERM) cancels the tasks not yet started, waits for the
running ones and hands every finished result to ``on_done`` before it propagates, so no finished point
is lost (on a terminal Ctrl-C reaches the workers too; their cut points are not results). These functions know
nothing of benches or points (``kernbench.sweeps.core`` gives them its ``_run_task``).

Workers never outlive their owner (the process that called ``dispatch``): each process worker watches
the owner (``os.pidfd_open``, else polling its pid) from a thread and ends itself at once when the owner
is gone, and a write guard (``atomic_output.set_write_guard``) refuses every file write after that, so a
SIGKILLed sweep leaves no worker (nor, once they are gone, its forkserver and resource tracker) and no
file changes under its output. A Dask scheduler address is tried first with a plain TCP connect
(``SCHEDULER_TIMEOUT_S``, default 5 s; ``KERNBENCH_SCHEDULER_TIMEOUT`` overrides it): no scheduler there
is one UsageError naming the address, at once, not a traceback after Dask's 30 s.
"""

from __future__ import annotations

import os
import select
import signal
import threading
import time
from typing import Any

from kernbench import atomic_output as kio
from kernbench._core import UsageError

SCHEDULER_TIMEOUT_S = 5.0  # connecting to a Dask scheduler (the TCP probe and the Client)
WATCH_POLL_S = 0.2  # how often a worker polls its owner's pid where pidfd_open is missing


def scheduler_timeout() -> float:
    """The connect timeout in seconds: $KERNBENCH_SCHEDULER_TIMEOUT, else ``SCHEDULER_TIMEOUT_S``."""
    text = os.environ.get("KERNBENCH_SCHEDULER_TIMEOUT", "").strip()
    if not text:
        return SCHEDULER_TIMEOUT_S
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value <= 3600:
        raise UsageError(f"KERNBENCH_SCHEDULER_TIMEOUT={text!r}: expected seconds, a number above 0 and at most 3600")
    return value


def check_scheduler(address: str) -> None:
    """Refuse (UsageError, naming ``address``) a scheduler address that is malformed or where nothing answers a
    TCP connect within ``scheduler_timeout()`` s (other schemes than tcp:// are left to Dask)."""
    import socket
    from urllib.parse import urlsplit

    scheme, sep, rest = address.partition("://")
    if not sep or not scheme or not rest:
        raise UsageError(f"scheduler {address!r}: expected an address like tcp://host:8786")
    if scheme != "tcp":
        return
    try:
        parts = urlsplit(address)
        host, port = parts.hostname, parts.port
    except ValueError as e:
        raise UsageError(f"scheduler {address}: {e} (expected tcp://host:port)") from None
    if not host or port is None:
        raise UsageError(f"scheduler {address}: expected tcp://host:port, e.g. tcp://127.0.0.1:8786")
    timeout = scheduler_timeout()
    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except OSError as e:
        why = "no answer" if isinstance(e, TimeoutError) else (e.strerror or str(e) or type(e).__name__).lower()
        raise UsageError(f"scheduler {address}: cannot connect ({why}, timeout {timeout:g} s): is a Dask scheduler "
                         "running there? (start one with `dask scheduler`)") from None


def _owner_watch(owner_pid: int) -> None:
    """Process-pool initializer: end this worker as soon as ``owner_pid`` (the sweep) is gone; no write after."""
    try:
        pidfd: int | None = os.pidfd_open(owner_pid)
    except ProcessLookupError:
        os._exit(1)
    except (AttributeError, OSError):  # no pidfd_open (not Linux >= 5.3): poll the pid
        pidfd = None

    def gone() -> bool:
        if pidfd is not None:
            return bool(select.select([pidfd], [], [], 0)[0])
        try:
            os.kill(owner_pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            pass
        return False

    def watch() -> None:
        if pidfd is not None:
            select.select([pidfd], [], [])
        else:
            while not gone():
                time.sleep(WATCH_POLL_S)
        os._exit(1)

    def guard() -> None:
        if gone():
            os._exit(1)

    if os.getppid() == owner_pid:  # spawn: the owner is the parent, the kernel can kill us with it too
        try:
            import ctypes

            ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL))  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass
    if gone():
        os._exit(1)
    kio.set_write_guard(guard)
    threading.Thread(target=watch, name="kernbench-owner-watch", daemon=True).start()


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
    with cf.ProcessPoolExecutor(max_workers=n, mp_context=mp.get_context(method), initializer=_owner_watch,
                                initargs=(os.getpid(),)) as pool:
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


def dispatch(executor, run, tasks, on_done, workers):
    """``run(task)`` for every task on ``executor``, ``on_done(result)`` here as each arrives (see the module doc)."""
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
            check_scheduler(executor)
            timeout = scheduler_timeout()
            try:
                client = Client(executor, timeout=f"{timeout}s")
            except (OSError, TimeoutError) as e:
                raise UsageError(f"scheduler {executor}: cannot connect within {timeout:g} s "
                                 f"({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})") from None
            with client:
                return _run_dask(run, tasks, on_done, client)
        raise UsageError(f"unknown executor {executor!r} (known: serial, process, dask, a scheduler address "
                         "like tcp://host:8786, a dask Client or a concurrent.futures Executor)")
    if is_dask_client(executor):
        return _run_dask(run, tasks, on_done, executor)
    if hasattr(executor, "submit"):
        return _run_futures(executor, run, tasks, on_done)
    raise UsageError(f"executor {executor!r}: expected 'serial', 'process', 'dask', an address, a Client "
                     "or an Executor")

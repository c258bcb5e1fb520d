"""Parameter sweeps: a grid of config and bench values, on one core, all cores or a Dask cluster.

    import kernbench
    df = kernbench.sweep("noc-load-latency",
                         grid={"system.routers.w": [2, 4], "bench.packet_flits": [1, 4]},
                         executor="process", checkpoint="out/noc-sweep/checkpoint.jsonl")

or with a function of one point::

    def latency(point):
        system = point.load_system()          # the config with this point's overrides
        system.dma("read", "sip0.cube0.pe0", "sip0.cube1.hbm_ctrl.pe3", point.bench["bytes"])
        system.run()
        return {"latency_ns": float(system.dma_df()["latency_ps"][0]) / 1e3}

    df = kernbench.sweep(latency, grid={"fabric.model": ["packet", "flow"], "bench.bytes": [4096, 65536]})

Grid keys are config YAML paths (``system.sips.w``) or ``bench.<param>``;
every value is checked before anything runs, with the config loader's own
messages (a bad value names its path). The result is a pandas DataFrame,
one row per result row of each point (a function returning one dict gives
one row per point): ``point``, the grid values, the metrics, ``status``
("ok", "partial": the bench reported failures beside results, "failed"),
``error`` and ``wall_s``. A failing point is recorded and never stops the
others. Points are independent runs with the same seed, so every executor
gives the same numbers.

Executors: ``"serial"``; ``"process"`` (default; ``workers`` processes,
default all cores); ``"dask"`` (a LocalCluster of ``workers`` processes);
a ``dask.distributed.Client`` or a scheduler address (``"tcp://host:8786"``);
or any ``concurrent.futures.Executor``.

Checkpoints: with ``checkpoint=PATH`` (or ``out=DIR``: DIR/checkpoint.jsonl)
each finished point is appended to a JSON-lines file as it arrives (one
write of one line, flushed and synced); ``resume=True`` reads it back and
runs only the points it lacks (``retry_failed=True`` also re-runs failed
ones). A line cut short by a crash is dropped.

Grid columns are numbers: an axis whose values are quantities with a unit
(``"32 GB/s"``, ``"2 ns"``) becomes the column ``"KEY [UNIT]"`` holding
the numbers (``links.pe.bandwidth [GB/s]``: 32), in the unit written
when every value uses one, else in the dimension's base unit (B, B/s, ps,
Hz); sweep.json's ``grid_columns`` maps each renamed key to its column.
``plot=(X, Y)`` draws Y against X (a grid key or column, and a metric) into
``out`` as a PNG, one line per combination of the other grid columns.

This package is the public API; its modules: ``sweep``, ``Point`` and what one
point runs (``_run_task``) in ``kernbench.sweeps.core``, the grid and its
``KEY [UNIT]`` columns in ``kernbench.sweeps.grid``, the executors in
``kernbench.sweeps.executors``, the checkpoint file in
``kernbench.sweeps.checkpoint`` and the ``--plot`` figure in
``kernbench.sweeps.plot``; their public names are importable from here. The
format of sweep.json is ``kernbench.sweepjson`` (bench runs write it too).
"""

from kernbench.progress import progress_bar
from kernbench.sweeps.core import Point, sweep
# the parts' public names, importable from here as they were from the module kernbench.sweeps (not in ``*``)
from kernbench.sweeps.checkpoint import CHECKPOINT_FORMAT, CHECKPOINT_VERSION, Checkpoint  # noqa: F401
from kernbench.sweeps.executors import executor_name  # noqa: F401
from kernbench.sweeps.grid import (STATUS_COLUMNS, expand_grid, grid_columns, parse_grid, plain,  # noqa: F401
                                   point_key, value_text)
from kernbench.sweeps.plot import plot_name, plot_sweep  # noqa: F401

__all__ = ["Point", "sweep", "parse_grid", "progress_bar", "expand_grid"]  # progress_bar: kernbench.progress

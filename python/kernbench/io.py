"""Deprecated alias of :mod:`kernbench.atomic_output` (the module's old name).

Kept only so code that still imports ``kernbench.io`` works; import
``kernbench.atomic_output`` instead.
"""

from kernbench.atomic_output import (atomic_write_bytes, check_figure_file, check_output_dir,  # noqa: F401
                                     check_output_file, lock_output_dir, save_figure, to_jsonable, write_csv,
                                     write_json)

_atomic_write_bytes = atomic_write_bytes  # the old private name, for code that still uses it

__all__ = ["save_figure", "to_jsonable", "write_csv", "write_json"]

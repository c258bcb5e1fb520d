"""kernbench's benches: one module per bench, each registered with ``@bench``.

Installed as ``kernbench.benches``. Modules whose names start with ``_`` are
helpers, not benches.
"""

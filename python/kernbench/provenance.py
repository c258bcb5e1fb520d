"""What each config value rests on: a datasheet, a fit on named measured rows, or an assumption.

A value's provenance is declared beside it, in the file that sets it, and checked by the C++ loader
(src/config/provenance.hpp)::

    sustained_clock_ratio: {value: 0.82449, fitted: {data: h100.measured.yaml, rows: [gemm-torch, gemm-cublas],
                            by: scripts/calibrate_gpu.sh}}
    clock: {value: 1830 MHz, datasheet: "NVIDIA H100 datasheet: 989.4 TFLOPS at 1830 MHz"}
    attention_efficiency: {value: 0.5, assumed: "FlashAttention-2 reaches about half the tensor peak"}

A file that includes another inherits its values with their provenance (the A100 preset inherits the
H100-fitted mechanism parameters, marked as fitted on the H100 rows); a file or a ``--set`` that sets a value
again replaces both.

    from kernbench import provenance
    recs = provenance.read("machines/a100-8x-nvswitch.yaml")
    recs["gpu.sustained_clock_ratio"].kind          # 'fitted'
    provenance.fitted_on(recs, dataset)             # {row id: [parameters fitted on it]}

``kernbench schema --config F`` prints the table; ``kernbench calibrate --check`` judges the rows a config's
values were fitted on as fitted (docs/calibrate.md, "Provenance").
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from kernbench._core import ConfigError

__all__ = ["KINDS", "Record", "read", "plain", "fitted_on", "check_rows", "table"]

KINDS = ("datasheet", "fitted", "assumed")


@dataclass(frozen=True)
class Record:
    """One value's provenance. ``source`` is the citation (datasheet), the reason (assumed) or the command
    that made the fit (fitted); ``data`` and ``rows`` name what a fitted value was fitted on."""

    path: str
    value: str
    kind: str
    source: str
    data: str = ""
    rows: tuple[str, ...] = ()
    note: str = ""
    file: str = ""
    line: int = 0

    def where(self) -> str:
        """``file (line n): path``, for messages."""
        if not self.file:
            return self.path
        return f"{self.file} (line {self.line}): {self.path}" if self.line else f"{self.file}: {self.path}"

    def data_path(self) -> Path | None:
        """The fitted record's data file, resolved as an include is: relative to the declaring file's folder."""
        if self.kind != "fitted" or not self.data:
            return None
        p = Path(self.data)
        return p if p.is_absolute() or not self.file else Path(self.file).parent / p


def read(config: Any, sets: Mapping[str, Any] | Iterable[str] | None = None, *,
         include_dirs=None) -> dict[str, Record]:
    """The provenance of every value of ``config`` (a path or a packaged config name) that declares one,
    with its includes and ``sets`` applied, by dotted path. Raises ConfigError on a malformed record."""
    from kernbench._core import load_config_summary
    from kernbench.system import config_path, include_dirs as _include_dirs, override_pairs

    summary = load_config_summary(os.fspath(config_path(config)), override_pairs(sets or {}),
                                  _include_dirs(include_dirs))
    return {path: Record(path=path, value=r["value"], kind=r["kind"], source=r["source"], data=r["data"],
                         rows=tuple(r["rows"]), note=r["note"], file=r["file"], line=int(r["line"]))
            for path, r in summary["provenance"].items()}


def plain(node: Any) -> Any:
    """A YAML tree (as PyYAML reads a config) with each ``{value: V, datasheet|fitted|assumed: ...}`` replaced by
    V: the values as the loader types them, for code that reads a config file itself."""
    if isinstance(node, dict):
        if "value" in node and any(k in node for k in KINDS):
            return plain(node["value"])
        return {k: plain(v) for k, v in node.items()}
    if isinstance(node, list):
        return [plain(v) for v in node]
    return node


def _same_file(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve()
    except OSError:
        return False


def fitted_on(records: Mapping[str, Record], dataset: Any) -> dict[str, list[str]]:
    """{row id: the parameters fitted on it} for the fitted records whose data file is ``dataset``'s (a
    kernbench.calibrate Dataset: ``path`` and ``rows`` with ``id`` and ``group``). A record's ``rows`` name
    row ids or whole groups. A name the data file does not hold is a ConfigError naming the record."""
    out: dict[str, list[str]] = {}
    ids = [r.id for r in dataset.rows]
    groups: dict[str, list[str]] = {}
    for r in dataset.rows:
        groups.setdefault(r.group, []).append(r.id)
    for rec in records.values():
        dp = rec.data_path()
        if dp is None or not _same_file(dp, Path(dataset.path)):
            continue
        for name in rec.rows:
            if name in groups:
                members = groups[name]
            elif name in ids:
                members = [name]
            else:
                raise ConfigError(f"{rec.where()}: fitted on {name!r}, which is neither a row id nor a group of "
                                  f"{rec.data} (groups: {', '.join(groups)})")
            for rid in members:
                if rec.path not in out.setdefault(rid, []):
                    out[rid].append(rec.path)
    return {rid: out[rid] for rid in ids if rid in out}


def check_rows(records: Mapping[str, Record], load: Callable[[Path], Any]) -> list[str]:
    """Every fitted record's data file exists and holds the rows it names: the problems, one line each
    (empty when all hold). ``load`` reads a data file (kernbench.calibrate.load_data: this module sits below
    calibrate, which reads provenance)."""
    problems: list[str] = []
    cache: dict[str, Any] = {}
    for rec in records.values():
        dp = rec.data_path()
        if dp is None:
            continue
        if not dp.is_file():
            problems.append(f"{rec.where()}: fitted on rows of {rec.data}, which is not a file ({dp})")
            continue
        key = str(dp.resolve())
        if key not in cache:
            cache[key] = load(dp)
        try:
            fitted_on({rec.path: rec}, cache[key])
        except ConfigError as e:
            problems.append(str(e))
    return problems


def table(records: Mapping[str, Record]) -> str:
    """The records as a plain-text table: path, value, kind, and what it rests on."""
    if not records:
        return "(no value of this config declares its provenance)"
    width = max(len(p) for p in records)
    vwidth = min(24, max(len(r.value) for r in records.values()))
    lines = []
    for path, r in records.items():
        what = r.source
        if r.kind == "fitted":
            what = f"rows {', '.join(r.rows)} of {r.data}, by {r.source}"
        origin = f"  [{Path(r.file).name}:{r.line}]" if r.file else ""
        lines.append(f"{path:<{width}}  {r.value:<{vwidth}}  {r.kind:<9}  {what}{origin}")
        if r.note:
            lines.append(f"{'':<{width}}  {'':<{vwidth}}  {'':<9}  note: {r.note}")
    counts = {k: sum(1 for r in records.values() if r.kind == k) for k in KINDS}
    lines.append(f"{len(records)} values: " + ", ".join(f"{n} {k}" for k, n in counts.items()))
    return "\n".join(lines)

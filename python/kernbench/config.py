"""Machine configs from Python: strict loading, summaries and the schema.

The C++ loader does all the checking (one schema, one set of messages, each
naming the file and the YAML path); this module adapts ``--set PATH=VALUE``
strings to it and writes the one-paragraph summary ``kernbench validate``
prints::

    from kernbench.config import validate, describe
    print(describe(validate("configs/topology.yaml", ["system.sips.w=4"])))
"""

from __future__ import annotations

import json
import os
from typing import Any, Iterable

from kernbench._core import ConfigError, config_schema, load_config_summary
from kernbench.overrides import BENCH_PREFIX, split_assignment
from kernbench.units import size as _size

__all__ = ["config_overrides", "describe", "reference_markdown", "schema", "validate"]


def config_overrides(sets: Iterable[str]) -> list[tuple[str, str]]:
    """``["system.sips.w=4"]`` -> ``[("system.sips.w", "4")]``.

    ``bench.`` parameters are refused here: they belong to ``kernbench run``,
    and a machine config would only report them as an unknown ``bench`` key.
    """
    pairs = []
    for text in sets:
        key, value = split_assignment(text)
        if key.startswith(BENCH_PREFIX):
            raise ConfigError(
                f"--set {key}={value}: bench parameters belong to `kernbench run`, not to a machine config"
            )
        pairs.append((key, value))
    return pairs


def validate(path: str | os.PathLike[str], sets: Iterable[str] = (), *, include_dirs=None) -> dict[str, Any]:
    """Load the config at ``path`` (a file, or a packaged config's name) strictly, with ``--set`` strings applied; return its summary.

    Its includes may read its own folder tree and the folders of ``include_dirs``
    (one or a list), ``$KERNBENCH_INCLUDE_PATH`` and the packaged configs
    (kernbench.system.include_dirs()).

    The summary holds ``source``, ``kind`` ("system" or "graph"), the SIP,
    cube and router grids, PEs per cube and ``total_pes`` (system) or the
    node and edge counts (graph), and ``fabric``. Raises ConfigError.
    """
    from kernbench.system import config_path, include_dirs as _include_dirs

    name = os.fspath(path)
    if not os.path.lexists(name):  # a packaged name (machines/h100-8x-nvswitch.yaml), as show, run and serve take
        try:
            name = os.fspath(config_path(name))
        except ConfigError:
            pass  # the loader names the missing file
    return load_config_summary(name, config_overrides(sets), _include_dirs(include_dirs))


def schema() -> dict[str, Any]:
    """The config schema (sections, keys, types, units, defaults, docs) as a dict."""
    return json.loads(config_schema())


def describe(summary: dict[str, Any]) -> str:
    """The one-paragraph, human summary of a ``validate`` result."""
    f = summary["fabric"]
    if f["model"] == "packet":
        fabric = f"packet model, {_size(f['chunk'])} chunks of {_size(f['flit'])} flits"
    else:
        fabric = f"{f['model']} model"
    if summary["kind"] == "system":
        sips, cubes, routers = summary["sips"], summary["cubes"], summary["routers"]
        body = (
            f"system {summary['name']!r}: {sips['w']}x{sips['h']} SIPs ({sips['topology']}), "
            f"{cubes['w']}x{cubes['h']} cubes per SIP, {routers['w']}x{routers['h']} routers and "
            f"{summary['pes_per_cube']} PEs per cube, {summary['total_pes']} PEs in all"
        )
    else:
        body = f"explicit graph: {summary['nodes']} nodes, {summary['edges']} edges"
    return f"{summary['source']}: valid. {body}; fabric: {fabric}."


def reference_markdown() -> str:
    """The config reference (docs/config-reference.md), generated from the C++ schema."""
    s = schema()
    lines = [
        "# Machine config reference",
        "",
        "Generated from the schema the C++ loader checks against "
        "(`kernbench schema --markdown`); do not edit by hand.",
        "",
        s.get("doc", ""),
        "",
    ]
    units = s.get("units", {})
    if units:
        lines += ["Quantities carry units:", ""]
        for kind, us in units.items():
            lines.append(f"- {kind}: {', '.join(us) if isinstance(us, list) else us}")
        lines.append("")
    for rule in s.get("rules", []):
        lines.append(f"- {rule}")
    if s.get("rules"):
        lines.append("")

    def walk(keys: dict[str, Any], prefix: str) -> None:
        rows = []
        nested = []
        for name, k in keys.items():
            path = f"{prefix}{name}"
            typ = k.get("type", "")
            if k.get("values"):
                typ += " (" + " \\| ".join(str(v) for v in k["values"]) + ")"
            if k.get("units"):
                u = k["units"]
                typ += " [" + (", ".join(u) if isinstance(u, list) else str(u)) + "]"
            req = "required" if k.get("required") else (f"default `{k['default']}`" if "default" in k else "optional")
            extra = f" ({k['constraint']})" if k.get("constraint") else ""
            rows.append(f"| `{path}` | {typ} | {req} | {k.get('doc', '')}{extra} |")
            if "keys" in k:
                nested.append((k, path + "."))
            elif isinstance(k.get("items"), dict) and "keys" in k["items"]:
                nested.append((k["items"], path + "[i]."))
        lines.extend(["| key | type | | meaning |", "|---|---|---|---|", *rows, ""])
        for k, p in nested:
            lines.append(f"### `{p[:-1]}`")
            lines.append("")
            if k.get("doc"):
                lines.extend([k["doc"], ""])
            for rule in k.get("rules", []):
                lines.append(f"- {rule}")
            if k.get("rules"):
                lines.append("")
            walk(k["keys"], p)

    lines += ["## Top level", ""]
    walk(s.get("keys", {}), "")
    return "\n".join(lines).rstrip() + "\n"

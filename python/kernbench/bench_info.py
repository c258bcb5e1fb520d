"""What a bench is, for ``kernbench describe BENCH``: description, parameters, smoke and full-check sizes,
outputs, config.

    from kernbench import bench_info, get_bench
    info = bench_info.info(get_bench("pe-dma-perf"))   # a dict (``--json``)
    print(bench_info.text(info))

Outputs are the files the bench declares (``@bench(outputs=...)``), else
those its source writes through ``ctx.write_csv`` / ``ctx.save_figure``
with a literal name (read from the source with ``ast``; a name built at run
time shows its variable parts as ``*``); every run also writes
``sweep.json`` and ``sweep.csv``, and ``critical_path.csv`` when its runs
offer critical paths.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

from kernbench.registry import Bench, list_benches

ALWAYS = {"sweep.json": "parameters, seed, results, failures, wall time (docs/sweep-json.md)",
          "sweep.csv": "the result rows"}
_WRITERS = {"write_csv": 0, "save_figure": 1}


def type_name(value: Any) -> str:
    """The type a ``--set bench.KEY=VALUE`` text is coerced to: int, float, bool, str, list[int], ..."""
    if isinstance(value, (list, tuple)):
        inner = sorted({type_name(v) for v in value})
        return f"list[{' | '.join(inner) if inner else 'str'}]"
    if value is None:
        return "none"
    return type(value).__name__


def _literal(node: ast.AST) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else "*" for v in node.values)
    return None


def source_outputs(path: str | Path) -> list[str]:
    """File names a bench module writes with ``*.write_csv(NAME, ...)`` / ``*.save_figure(fig, NAME)``."""
    try:
        tree = ast.parse(Path(path).read_text(), filename=str(path))
    except (OSError, SyntaxError):
        return []
    found: list[tuple[int, int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _WRITERS:
            i = _WRITERS[node.func.attr]
            arg = node.args[i] if len(node.args) > i else None
            name = _literal(arg) if arg is not None else None
            if name:
                found.append((node.lineno, node.col_offset, name))
    names: list[str] = []
    for _, _, name in sorted(found):  # in source order
        if name not in names:
            names.append(name)
    return names


def index_of(b: Bench) -> int | None:
    for i, x in enumerate(list_benches()):
        if x.name == b.name:
            return i
    return None


def info(b: Bench) -> dict[str, Any]:
    """Everything ``kernbench describe`` prints, as plain data."""
    from kernbench.system import config_path

    if b.outputs is not None:
        outputs = dict(b.outputs)
    else:
        outputs = {name: "" for name in source_outputs(b.source)} if b.source else {}
    config = None
    if b.uses_config:
        config = {"name": b.config or "topology.yaml", "path": str(config_path(b.config))}
    return {
        "name": b.name,
        "index": index_of(b),
        "description": b.description,
        "module": b.module,
        "source": b.source,
        "plugin": b.plugin,
        "params": [{"name": f"bench.{k}", "type": type_name(v), "default": v,
                    **({"allowed": b.param_specs[k].describe_allowed()}
                       if k in getattr(b, "param_specs", {}) and b.param_specs[k].describe_allowed() else {})}
                   for k, v in b.params.items()],
        "smoke": dict(b.smoke) if b.smoke is not None else None,
        "full_check": dict(b.full_check) if getattr(b, "full_check", None) is not None else None,
        "golden": dict(b.golden) if b.golden is not None else None,
        "primary": list(b.primary),
        "outputs": {**ALWAYS, **outputs, "critical_path.csv": "critical paths of the runs (when they offer any)"},
        "config": config,
    }


def _value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (list, tuple)):
        return ",".join(_value(x) for x in v)
    return str(v)


def text(d: dict[str, Any]) -> str:
    """The describe page: one section per kind of fact."""
    lines = [f"{d['name']} (index {d['index']}{', plugin' if d['plugin'] else ''}): {d['description']}",
             f"  defined in {d['source'] or d['module']}", ""]
    lines.append("parameters (--set bench.KEY=VALUE):")
    if d["params"]:
        w = max(len(p["name"]) for p in d["params"])
        tw = max(len(p["type"]) for p in d["params"])
        lines += [f"  {p['name']:<{w}}  {p['type']:<{tw}}  default {_value(p['default'])}"
                  + (f"  (allowed: {p['allowed']})" if p.get("allowed") else "") for p in d["params"]]
    else:
        lines.append("  none")
    lines.append("")
    if d["smoke"] is not None:
        lines.append("smoke settings (--smoke; the golden-regression size):")
        lines += [f"  {k}={_value(v)}" for k, v in d["smoke"].items()]
    else:
        lines.append("smoke settings: none (no --smoke size, no golden)")
    if d.get("full_check") is not None:
        lines.append("full-check settings (--full-check; what CI's check of every bench runs):")
        lines += [f"  {k}={_value(v)}" for k, v in d["full_check"].items()]
    else:
        lines.append("full-check settings: none (CI's check of every bench runs the default size)")
    if d["primary"]:
        lines.append("headline metrics (kernbench diff lists them first): " + ", ".join(d["primary"]))
    lines.append("")
    lines.append("outputs (in --out DIR, default out/" + d["name"] + "):")
    w = max(len(k) for k in d["outputs"])
    lines += [f"  {k:<{w}}  {v}".rstrip() for k, v in d["outputs"].items()]
    lines.append("")
    if d["config"] is None:
        lines.append("default config: none (models no machine config; --config and config --set are refused)")
    else:
        lines.append(f"default config: {d['config']['name']} ({d['config']['path']}); --config FILE replaces it")
    return "\n".join(lines)

"""What a calibration writes: the config overlay, report.md, the figures and result.json (all atomic).

The overlay is a config file: ``include:`` of the base config (when the rows run on one config) and the
fitted values as nested keys, each with a comment naming the rows it was fitted on. So it is used as

    kernbench run --bench validation --config out/cal/overlay.yaml    # the base config + the fitted values
    include: [k200.yaml, overlay.yaml]                                # or from a config of one's own

and ``kernbench calibrate --check overlay.yaml --data FILE`` applies its values as ``--set`` overrides.
A comment line ``# calibration: {...}`` carries the metadata (date, data file, command, rows fitted on)
as JSON.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Mapping

from kernbench.calibrate.registry import CalibrationError

OVERLAY = "overlay.yaml"
META_PREFIX = "# calibration: "


def _pct(v: float | None) -> str:
    return "--" if v is None else f"{100 * v:+.2f} %"


def _num(v: float | None) -> str:
    if v is None:
        return "--"
    a = abs(v)
    return f"{v:.4g}" if (a >= 1e7 or (a < 1e-2 and a != 0)) else (f"{v:.0f}" if a >= 1000 else f"{v:.4g}")


def _nest(values: Mapping[str, str], base: Any = None) -> tuple[dict[str, Any], dict[str, list[str]]]:
    """Dotted paths -> nested maps. A path through a list (``graph.edges.2.bandwidth``) writes the whole list,
    taken from the base config with the items changed (an included file's list is replaced whole); returns the
    tree and, per list, the changed item paths."""
    import copy

    from kernbench.calibrate.fit import config_lookup

    tree: dict[str, Any] = {}
    lists: dict[str, list[str]] = {}
    for path, v in values.items():
        parts = path.split(".")
        idx = next((i for i, p in enumerate(parts) if p.isdigit()), None)
        if idx is None:
            node = tree
            for p in parts[:-1]:
                node = node.setdefault(p, {})
            node[parts[-1]] = v
            continue
        prefix = ".".join(parts[:idx])
        node = tree
        for p in parts[:idx - 1]:
            node = node.setdefault(p, {})
        if not isinstance(node.get(parts[idx - 1]), list):
            try:
                node[parts[idx - 1]] = copy.deepcopy(config_lookup(base, prefix))
            except Exception:
                raise CalibrationError(f"overlay: {path}: the base config has no list {prefix} to copy") from None
        item: Any = node[parts[idx - 1]]
        for p in parts[idx:-1]:
            item = item[int(p)] if isinstance(item, list) else item.setdefault(p, {})
        item[parts[-1]] = v
        lists.setdefault(prefix, []).append(".".join(parts[idx:]))
    return tree, lists


def _scalar_text(v: str) -> str:
    """A value as a plain YAML scalar where that reads back as the same text (numbers, quantities)."""
    import re

    if re.fullmatch(r"[-+]?[0-9.eE+-]+( ?[A-Za-z/%]+)?", v) and v.strip() == v:
        return v
    return json.dumps(v)


def overlay_text(result: Mapping[str, Any], out_dir: Path) -> str:
    """The overlay YAML of a calibration result (values as the fit evaluated them)."""
    from kernbench.system import config_path

    free = {f["path"]: f for f in result.get("free", [])}
    meta = {"date": result["date"], "data": result["data"], "config": result.get("config"),
            "seed": result.get("seed", 1), "command": result.get("command", ""),
            "fit_on": result.get("fit_on", []), "fitted_rows": result.get("fitted_rows", []),
            "fitted_on": {p: f["fitted_on"] for p, f in free.items()},
            "unidentifiable": result.get("unidentifiable", {})}
    lines = [f"# kernbench calibration overlay, {result['date']}",
             f"# data: {result['data']}",
             f"# command: {result.get('command', '')}",
             "# Use it as a config (`kernbench run --config THIS`), include it from a config of your own,",
             "# or check it: `kernbench calibrate --check THIS --data DATA` (docs/calibrate.md).",
             META_PREFIX + json.dumps(meta, sort_keys=True)]
    base = result.get("base_config")
    if base:
        try:
            target = Path(os.path.abspath(config_path(base)))
            here = os.path.abspath(out_dir)
            common = os.path.commonpath([str(target), here])
            rel = os.path.relpath(target, here) if common != os.path.sep else str(target)
        except Exception:
            rel = str(base)
        lines.append(f"include: [{json.dumps(rel)}]")
    values = result.get("overlay_values", {})
    tree, lists = _nest(values, base)

    def emit(node: Mapping[str, Any], prefix: str, indent: int) -> None:
        for k, v in node.items():
            path = f"{prefix}{k}"
            if isinstance(v, dict):
                lines.append(" " * indent + f"{k}:")
                emit(v, path + ".", indent + 2)
                continue
            if isinstance(v, list):
                changed = ", ".join(f"{path}.{c}" for c in lists.get(path, []))
                lines.append(" " * indent + f"# {path}: the base config's list, with {changed} changed")
                lines.append(" " * indent + f"{k}: {json.dumps(v)}")
                continue
            if path in free:
                f = free[path]
                ids = f["fitted_on"]
                note = (f"fitted on {len(ids)} row{'s' if len(ids) != 1 else ''}: {', '.join(ids[:8])}"
                        + (" ..." if len(ids) > 8 else "") + f"; start {f['start'] or '?'}, "
                        f"bounds {f['bounds'][0]}..{f['bounds'][1]}"
                        + ("" if f["identifiable"] else "; NOT IDENTIFIABLE: " + f["why"]))
            else:
                note = "given with --set"
            lines.append(" " * indent + f"{k}: {_scalar_text(str(v))}  # {note}")

    emit(tree, "", 0)
    return "\n".join(lines) + "\n"


def read_overlay(path: str | Path) -> dict[str, Any]:
    """An overlay (or any config fragment): its values as flat ``--set`` texts (``include`` left out) and its
    metadata; CalibrationError naming the file otherwise."""
    import yaml

    p = Path(path)
    try:
        text = p.read_text()
    except OSError as e:
        raise CalibrationError(f"--check {p}: cannot read: {e.strerror or e}") from None
    try:
        data = yaml.load(text, Loader=yaml.BaseLoader)  # every scalar as its text, as --set passes it
    except yaml.YAMLError as e:
        raise CalibrationError(f"--check {p}: not valid YAML: {e}".replace("\n", " ")) from None
    if not isinstance(data, dict):
        raise CalibrationError(f"--check {p}: an overlay is a map of config keys")
    data.pop("include", None)
    values: dict[str, str] = {}

    def walk(node: Any, prefix: str) -> None:
        for k, v in node.items():
            if isinstance(v, dict):
                walk(v, f"{prefix}{k}.")
            elif isinstance(v, list):
                walk(dict((str(i), item) for i, item in enumerate(v)), f"{prefix}{k}.")
            else:
                values[f"{prefix}{k}"] = str(v)

    walk(data, "")
    meta: dict[str, Any] = {}
    for line in text.splitlines():
        if line.startswith(META_PREFIX):
            try:
                meta = json.loads(line[len(META_PREFIX):])
            except ValueError:
                raise CalibrationError(f"--check {p}: the calibration comment is not valid JSON") from None
    return {"values": values, "meta": meta}


def report_markdown(result: Mapping[str, Any], figures: list[str]) -> str:
    """report.md: the free parameters, what cannot be pinned down, every row, the folds, the figures."""
    check = result.get("kind") == "check"
    lines = ["# Calibration check" if check else "# Calibration report", "",
             f"- date: {result['date']}", f"- data: `{result['data']}`",
             f"- config: `{result.get('config') or '(each function its own default)'}`",
             f"- command: `{result.get('command', '')}`"]
    if check:
        lines += [f"- overlay: `{result['overlay']}`",
                  f"- result: {'every row within its tolerance' if result['ok'] else 'OUTSIDE: ' + ', '.join(result['outside'])}"]
    else:
        lines += [f"- fitted on groups: {', '.join(result['fit_on']) or '(nothing fitted)'}",
                  f"- cross-validation: {result['cv_by']}", f"- model calls: {result['model_calls']}, "
                  f"{result['seconds']:.1f} s"]
    lines.append("")
    if not check and result.get("free"):
        lines += ["## Free parameters", "",
                  "| parameter | start | fitted | bounds | scale | rel. std. error (1 % noise) | fitted on | identifiable |",
                  "|---|---|---|---|---|---|---|---|"]
        for f in result["free"]:
            se = "--" if f["stderr_rel"] is None else f"{100 * f['stderr_rel']:.2g} %"
            ident = "yes" if f["identifiable"] else f"**no**: {f['why']}"
            if f["at_bound"]:
                ident += " (at a bound)"
            lines.append(f"| `{f['path']}` | {f['start'] or '--'} | {f['value']} | {f['bounds'][0]} .. "
                         f"{f['bounds'][1]} | {f['scale']} | {se} | {', '.join(f['fitted_on']) or '--'} | {ident} |")
        lines.append("")
        if result["unidentifiable"]:
            lines += ["## Parameters the data cannot pin down", ""]
            for p, why in result["unidentifiable"].items():
                lines.append(f"- `{p}`: {why}")
            lines.append("")
    lines += ["## Rows", "",
              "Error = model / measured - 1. A fitted row was in the fit; a predicted row never was. "
              "Cross-validated error: a fitted row's error when refitted without its held-out set "
              "(a prediction's is its error).", "",
              "| id | group | fitted on / predicted | measured | model | unit | error | cross-validated error | "
              "tolerance | within |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in result["rows"]:
        within = "yes" if r["within"] else ("**no**: raised" if r.get("failure") else "**no**")
        lines.append(f"| {r['id']} | {r['group']} | {r['role']} | {_num(r['measured'])} | {_num(r['model'])} | "
                     f"{r['unit']} | {_pct(r['error'])} | {_pct(r.get('cv_error'))} | {100 * r['tolerance']:g} % | "
                     f"{within} |")
    lines.append("")
    failed = [r for r in result["rows"] if r.get("failure")]
    if failed:
        lines += ["## Rows whose function raised", "",
                  "Not within their tolerance: the model gave no figure.", ""]
        for r in failed:
            lines.append(f"- {r['id']}: `{r['failure']}`")
        lines.append("")
    if result.get("folds"):
        lines += ["## Cross-validation folds", "", "| held out | fitted on | values |", "|---|---|---|"]
        for f in result["folds"]:
            vals = ", ".join(f"`{k}={v}`" for k, v in (f.get("values") or {}).items()) or f.get("note", "")
            lines.append(f"| {f['left_out']}: {', '.join(f['predicted_rows'])} | {len(f['fit_rows'])} rows | {vals} |")
        lines.append("")
    for fig in figures:
        lines += [f"![{fig}]({fig})", ""]
    return "\n".join(lines)


def _figures(result: Mapping[str, Any], out: Path) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    from kernbench.atomic_output import save_figure

    names = []
    rows = [r for r in result["rows"] if r.get("model") is not None]  # a row that raised has no figure
    if not rows:
        return names
    fig, ax = plt.subplots(figsize=(5.5, 5))
    for role, marker, color in (("fitted", "o", "tab:blue"), ("predicted", "^", "tab:orange")):
        sub = [r for r in rows if r["role"] == role]
        if sub:
            ax.scatter([r["measured"] for r in sub], [r["model"] for r in sub], marker=marker, color=color,
                       label=f"{role} ({len(sub)})")
    vals = [v for r in rows for v in (r["measured"], r["model"])]
    lo, hi = min(vals) / 1.5, max(vals) * 1.5
    ax.plot([lo, hi], [lo, hi], color="grey", lw=0.8)
    for k in (0.8, 1.2):
        ax.plot([lo, hi], [lo * k, hi * k], color="grey", lw=0.5, ls=":")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("measured (each row in its function's unit)")
    ax.set_ylabel("model")
    ax.set_title("model vs measured (dotted: +-20 %)")
    ax.legend()
    save_figure(fig, out / "fitted_vs_measured.png")
    plt.close(fig)
    names.append("fitted_vs_measured.png")

    fig, ax = plt.subplots(figsize=(max(5.0, 0.3 * len(rows) + 2), 4))
    cv = [100 * (r["cv_error"] if r.get("cv_error") is not None else np.nan) for r in rows]
    err = [100 * r["error"] for r in rows]
    x = np.arange(len(rows))
    from matplotlib.patches import Patch

    ax.bar(x - 0.2, err, 0.4, color=["tab:blue" if r["role"] == "fitted" else "tab:orange" for r in rows])
    ax.bar(x + 0.2, cv, 0.4, color="tab:green")
    ax.axhline(0, color="grey", lw=0.8)
    ax.set_xticks(x)
    ax.set_xticklabels([r["id"] for r in rows], rotation=90, fontsize=7)
    ax.set_ylabel("%")
    ax.set_title("error per row (blue fitted, orange predicted; green cross-validated)")
    ax.legend(handles=[Patch(color="tab:blue", label="error, fitted row"),
                       Patch(color="tab:orange", label="error, predicted row"),
                       Patch(color="tab:green", label="cross-validated error")], fontsize=7)
    save_figure(fig, out / "cv_error.png")
    plt.close(fig)
    names.append("cv_error.png")

    free = result.get("free") or []
    if free:
        c = np.asarray(result["correlation"], dtype=float)
        fig, ax = plt.subplots(figsize=(2 + 0.8 * len(free), 1.5 + 0.8 * len(free)))
        im = ax.imshow(c, vmin=-1, vmax=1, cmap="coolwarm")
        labels = [f["path"] + ("" if f["identifiable"] else " (!)") for f in free]
        ax.set_xticks(range(len(free)))
        ax.set_yticks(range(len(free)))
        ax.set_xticklabels(labels, rotation=90, fontsize=7)
        ax.set_yticklabels(labels, fontsize=7)
        for i in range(len(free)):
            for j in range(len(free)):
                ax.text(j, i, f"{c[i, j]:.2f}", ha="center", va="center", fontsize=7)
        fig.colorbar(im, ax=ax)
        ax.set_title("parameter correlation (J^T J)^-1; (!) = not identifiable")
        save_figure(fig, out / "correlation.png")
        plt.close(fig)
        names.append("correlation.png")
    return names


def row_line(r: Mapping[str, Any]) -> str:
    """One result row as the line ``kernbench calibrate`` prints (a row that raised: its error text)."""
    if r.get("model") is None:
        return (f"  {r['id']:<28} {r['role']:<9} measured {r['measured']:<10.5g} FAILED: "
                f"{r.get('failure') or 'no model figure'}")
    cv = "" if r.get("cv_error") is None or r["role"] == "predicted" else f"  cv {100 * r['cv_error']:+.2f} %"
    return (f"  {r['id']:<28} {r['role']:<9} measured {r['measured']:<10.5g} model {r['model']:<10.5g} "
            f"{r['unit']:<9} error {100 * r['error']:+7.2f} %{cv}{'' if r['within'] else '  OUTSIDE'}")


def write_outputs(result: Mapping[str, Any], out: str | Path, *, plots: bool = True) -> dict[str, str]:
    """Write overlay.yaml (calibrations), report.md, the PNGs and result.json into ``out``; returns the paths."""
    from kernbench.atomic_output import atomic_write_bytes, check_output_dir, lock_output_dir, write_json

    folder = Path(out)
    check_output_dir(folder, "--out")
    written: dict[str, str] = {}
    with lock_output_dir(folder):
        if result.get("kind") == "calibration":
            text = overlay_text(result, folder)
            atomic_write_bytes(folder / OVERLAY, text.encode())
            written["overlay"] = str(folder / OVERLAY)
        figs = _figures(result, folder) if plots and result.get("rows") else []
        atomic_write_bytes(folder / "report.md", report_markdown(result, figs).encode())
        written["report"] = str(folder / "report.md")
        write_json(folder / "result.json", result)
        written["result"] = str(folder / "result.json")
        for f in figs:
            written[f] = str(folder / f)
    return written

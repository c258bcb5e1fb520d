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

    # a digit required: "-" or "- us" plain would be a YAML list item, the overlay unreadable
    if re.fullmatch(r"[-+]?[0-9.eE+-]+( ?[A-Za-z/%]+)?", v) and v.strip() == v and any(c.isdigit() for c in v):
        return v
    return _quoted(v)


def _quoted(v: str) -> str:
    """A YAML double-quoted scalar of ``v`` in ASCII: printable ASCII as is, every other character escaped
    (\\xXX, \\uXXXX, or \\UXXXXXXXX past U+FFFF: JSON's surrogate pairs read back as two lone surrogates)."""
    out = ['"']
    for ch in v:
        o = ord(ch)
        if ch in '"\\':
            out.append("\\" + ch)
        elif 0x20 <= o < 0x7F:
            out.append(ch)
        elif o <= 0xFF:
            out.append(f"\\x{o:02x}")
        elif o <= 0xFFFF:
            out.append(f"\\u{o:04x}")
        else:
            out.append(f"\\U{o:08x}")
    return "".join(out) + '"'


def _comment(v: Any) -> str:
    """Text for a # comment line: itself when printable, else JSON-escaped (a newline would end the comment and
    the rest be read as YAML; a control character is not allowed in YAML at all)."""
    text = str(v)
    return text if text.isprintable() else json.dumps(text)[1:-1]


def overlay_text(result: Mapping[str, Any], out_dir: Path) -> str:
    """The overlay YAML of a calibration result (values as the fit evaluated them)."""
    from kernbench.system import config_path

    free = {f["path"]: f for f in result.get("free", [])}
    meta = {"date": result["date"], "data": result["data"], "config": result.get("config"),
            "seed": result.get("seed", 1), "command": result.get("command", ""),
            "fit_on": result.get("fit_on", []), "fitted_rows": result.get("fitted_rows", []),
            "fitted_on": {p: f["fitted_on"] for p, f in free.items()},
            "unidentifiable": result.get("unidentifiable", {})}
    lines = [f"# kernbench calibration overlay, {_comment(result['date'])}",
             f"# data: {_comment(result['data'])}",
             f"# command: {_comment(result.get('command', ''))}",
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
        lines.append(f"include: [{_quoted(rel)}]")
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
            lines.append(" " * indent + f"{k}: {_scalar_text(str(v))}  # {_comment(note)}")  # row ids: any text

    emit(tree, "", 0)
    return "\n".join(lines) + "\n"


#: The metadata keys of the ``# calibration:`` line and the JSON type each must have.
META_KEYS: dict[str, str] = {"date": "a text", "data": "a text", "config": "a text or null", "seed": "an integer",
                             "command": "a text", "fit_on": "a list of texts", "fitted_rows": "a list of texts",
                             "fitted_on": "a map of lists of texts", "unidentifiable": "a map of texts"}


def _texts(v: Any) -> bool:
    return isinstance(v, list) and all(isinstance(x, str) for x in v)


def _meta_ok(key: str, v: Any) -> bool:
    if key == "seed":
        return isinstance(v, int) and not isinstance(v, bool)
    if key == "config":
        return v is None or isinstance(v, str)
    if key in ("fit_on", "fitted_rows"):
        return _texts(v)
    if key == "fitted_on":
        return isinstance(v, dict) and all(_texts(x) for x in v.values())
    if key == "unidentifiable":
        return isinstance(v, dict) and all(isinstance(x, str) for x in v.values())
    return isinstance(v, str)


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise ValueError(f"key {k!r} given twice")
        out[k] = v
    return out


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number JSON allows")


def parse_meta(text: str, where: str) -> dict[str, Any]:
    """The metadata of a ``# calibration:`` line (``text``: what follows the prefix), checked key by key;
    CalibrationError naming ``where`` (FILE:LINE) otherwise."""
    from kernbench.runner import check_seed

    try:
        meta = json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_no_constant)
    except RecursionError:
        raise CalibrationError(f"{where}: the calibration comment is nested too deeply") from None
    except ValueError as e:
        raise CalibrationError(f"{where}: the calibration comment is not valid JSON: {e}") from None
    if not isinstance(meta, dict):
        raise CalibrationError(f"{where}: the calibration comment is a JSON {type(meta).__name__}, not an object "
                               f"(keys: {', '.join(META_KEYS)})")
    for k, v in meta.items():
        if k not in META_KEYS:
            raise CalibrationError(f"{where}: the calibration comment: {k}: unknown key (known: "
                                   f"{', '.join(META_KEYS)})")
        if not _meta_ok(k, v):
            shown = json.dumps(v)
            shown = shown if len(shown) <= 60 else shown[:50] + "..."
            raise CalibrationError(f"{where}: the calibration comment: {k} {shown}: expected {META_KEYS[k]}")
    if "seed" in meta:
        check_seed(meta["seed"], f"{where}: the calibration comment: seed")
    return meta


def read_overlay(path: str | Path) -> dict[str, Any]:
    """An overlay (or any config fragment): its values as flat ``--set`` texts (``include`` left out) and its
    metadata (the ``# calibration:`` line's JSON, checked by ``parse_meta``); CalibrationError naming the file
    otherwise. The YAML is read by kernbench.calibrate.safe_read: a duplicate key, deep nesting or a hostile
    alias is refused."""
    from kernbench.calibrate.safe_read import load_yaml, read_text

    p = Path(path)
    text = read_text(p, "--check", CalibrationError)
    data, _ = load_yaml(text, p, texts=True, error=CalibrationError)  # every scalar as its text, as --set passes
    meta: dict[str, Any] = {}
    meta_line = 0
    for n, line in enumerate(text.splitlines(), 1):
        if line.startswith(META_PREFIX):
            if meta_line:
                raise CalibrationError(f"{p}:{n}: a second calibration comment (the first is on line {meta_line})")
            meta, meta_line = parse_meta(line[len(META_PREFIX):], f"{p}:{n}"), n
    if data is None and meta_line:
        data = {}  # an overlay of comments only: nothing fitted, nothing set
    if not isinstance(data, dict):
        raise CalibrationError(f"--check {p}: an overlay is a map of config keys")
    data.pop("include", None)
    values: dict[str, str] = {}
    records: dict[str, Any] = {}

    def walk(node: Any, prefix: str) -> None:
        for k, v in node.items():
            if isinstance(v, dict) and "value" in v and any(p in v for p in ("datasheet", "fitted", "assumed")):
                records[f"{prefix}{k}"] = _record(p, f"{prefix}{k}", v)
                v = v["value"]  # a value with its provenance beside it (kernbench.provenance): the value is set
            if isinstance(v, dict):
                walk(v, f"{prefix}{k}.")
            elif isinstance(v, list):
                walk(dict((str(i), item) for i, item in enumerate(v)), f"{prefix}{k}.")
            else:
                values[f"{prefix}{k}"] = str(v)

    walk(data, "")
    return {"values": values, "meta": meta, "records": records}


def _record(p: Path, path: str, node: dict) -> Any:
    """One ``{value: V, datasheet|fitted|assumed: ...}`` record of an overlay read in Python (a fragment the
    loader cannot load as a machine): its shape checked -- one kind, a plain value, a fitted record's data file
    and rows -- so that ``calibrate --check`` judges its rows (kernbench.calibrate.roles.provenance_fits) and a
    record is never dropped without a word."""
    from kernbench.provenance import KINDS, Record

    where = f"--check {p}: {path}"
    kinds = [k for k in KINDS if k in node]
    if len(kinds) != 1 or set(node) - {"value", "note", *KINDS}:
        raise CalibrationError(f"{where}: a provenance record is {{value: V}}, one of {', '.join(KINDS)} and a note, got "
                               f"the keys {', '.join(map(str, node))}")
    if isinstance(node["value"], (dict, list)):
        raise CalibrationError(f"{where}.value: a record's value is a plain value, got a "
                               f"{'map' if isinstance(node['value'], dict) else 'list'} (a record nested in a "
                               "value is never read: give one record, {value: V, fitted: {...}})")
    kind, body = kinds[0], node[kinds[0]]
    if kind != "fitted":
        return Record(path, str(node["value"]), kind, str(body), file=str(p))
    rows = body.get("rows") if isinstance(body, dict) else None
    if not (isinstance(body, dict) and isinstance(body.get("data"), str) and isinstance(rows, list)
            and rows and all(isinstance(r, str) for r in rows)):
        raise CalibrationError(f"{where}.fitted: a fitted record is {{data: FILE, rows: [ROW or GROUP, ...], by: "
                               "COMMAND}")
    return Record(path, str(node["value"]), kind, str(body.get("by", "")), body["data"], tuple(rows), file=str(p))


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
    if not check and result.get("misfit"):
        lines += ["## Misfit: errors that follow a call parameter", "",
                  "The fit pins its parameters down, but its errors are not noise: they line up with a call "
                  "parameter, so the model's structure cannot fit the data.", ""]
        for m in result["misfit"]:
            lines.append(f"- {m['text']}.")
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


def _png(fig: Any) -> bytes:
    import io

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=120, bbox_inches="tight")
    return buf.getvalue()


def _figures(result: Mapping[str, Any]) -> dict[str, bytes]:
    """The PNGs of a result, rendered in memory: name -> bytes (nothing written)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    names: dict[str, bytes] = {}
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
    names["fitted_vs_measured.png"] = _png(fig)
    plt.close(fig)

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
    names["cv_error.png"] = _png(fig)
    plt.close(fig)

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
        names["correlation.png"] = _png(fig)
        plt.close(fig)
    return names


def row_line(r: Mapping[str, Any]) -> str:
    """One result row as the line ``kernbench calibrate`` prints (a row that raised: its error text)."""
    if r.get("model") is None:
        return (f"  {r['id']:<28} {r['role']:<9} measured {r['measured']:<10.5g} FAILED: "
                f"{r.get('failure') or 'no model figure'}")
    cv = "" if r.get("cv_error") is None or r["role"] == "predicted" else f"  cv {100 * r['cv_error']:+.2f} %"
    return (f"  {r['id']:<28} {r['role']:<9} measured {r['measured']:<10.5g} model {r['model']:<10.5g} "
            f"{r['unit']:<9} error {100 * r['error']:+7.2f} %{cv}{'' if r['within'] else '  OUTSIDE'}")


def _non_finite_at(obj: Any, path: str = "result") -> str | None:
    """The path of the first non-finite float in ``obj`` (None: there is none)."""
    import math

    if isinstance(obj, float):
        return None if math.isfinite(obj) else path
    if isinstance(obj, Mapping):
        items = ((f"{path}.{k}", v) for k, v in obj.items())
    elif isinstance(obj, (list, tuple)):
        items = ((f"{path}[{i}]", v) for i, v in enumerate(obj))
    else:
        return None
    for p, v in items:
        hit = _non_finite_at(v, p)
        if hit is not None:
            return hit
    return None


def output_files(result: Mapping[str, Any], out: str | Path, *, plots: bool = True) -> dict[str, bytes]:
    """Every file a result writes into ``out``, rendered in memory: file name -> bytes (nothing written).

    A non-finite number in the result is a CalibrationError naming its place (the readers refuse such input,
    so this is a last guard: nothing is written)."""
    from kernbench.atomic_output import to_jsonable

    bad = _non_finite_at(result)
    if bad is not None:
        raise CalibrationError(f"{bad}: not a finite number; nothing written to {out}")
    files: dict[str, bytes] = {}
    if result.get("kind") == "calibration":
        files[OVERLAY] = overlay_text(result, Path(out)).encode()
    figs = _figures(result) if plots and result.get("rows") else {}
    files["report.md"] = report_markdown(result, list(figs)).encode()
    files["result.json"] = (json.dumps(to_jsonable(result), indent=2, allow_nan=False) + "\n").encode()
    files.update(figs)
    return files


def write_outputs(result: Mapping[str, Any], out: str | Path, *, plots: bool = True) -> dict[str, str]:
    """Write overlay.yaml (calibrations), report.md, the PNGs and result.json into ``out``; returns the paths.

    Everything is rendered first, then written together (``atomic_output.write_together``): a run's files land
    all together or not at all."""
    from kernbench.atomic_output import check_output_dir, check_output_file, lock_output_dir, write_together

    folder = Path(out)
    check_output_dir(folder, "--out")
    files = output_files(result, folder, plots=plots)
    with lock_output_dir(folder):
        for name in files:
            check_output_file(folder / name, "output")
        write_together({folder / name: data for name, data in files.items()})
    keys = {OVERLAY: "overlay", "report.md": "report", "result.json": "result"}
    order = [OVERLAY, "report.md", "result.json"]
    names = [n for n in order if n in files] + [n for n in files if n not in order]
    return {keys.get(n, n): str(folder / n) for n in names}
